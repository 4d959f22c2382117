#!/usr/bin/env python3
"""Defeats the refill locks of the chaos suite (scenario 03, nolock).

    lockflip.py --port P --keys K1,K2 --stop-file F [--duration S]
                [--interval-ms MS] [--ttl-ms MS] [--seed N]

Every interval, for each lock key: reads the token that holds it and
remembers the last few distinct ones; then at random deletes the lock (a
second refiller may take it while the first is still pushing), hands it
back to an earlier holder for ttl-ms (two refillers may now both pass the
lock check at different moments of their refills: only meta's expected-next
check keeps their pushes apart), or leaves it alone. Stops at the stop
file, after --duration seconds, or on SIGTERM; prints one line:

    lockflip: secs=S dels=N flips=N tokens=N errors=N

Talks RESP over one loopback connection (reconnects, bounded).
"""
import argparse
import collections
import os
import random
import signal
import socket
import sys
import time


class Redis:
    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = b""

    def connect(self):
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=1.0)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def cmd(self, *args):
        if self.sock is None:
            self.connect()
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._reply()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--keys", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--interval-ms", type=float, default=5)
    ap.add_argument("--ttl-ms", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None)
    o = ap.parse_args()
    rng = random.Random(o.seed)
    keys = [k for k in o.keys.split(",") if k]
    recent = {k: collections.deque(maxlen=4) for k in keys}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    r = Redis(o.port)
    dels = flips = errors = 0
    seen = set()
    t0 = time.monotonic()
    deadline = t0 + o.duration
    while not stop and time.monotonic() < deadline and not os.path.exists(o.stop_file):
        try:
            for k in keys:
                tok = r.cmd("GET", k)
                if tok is not None:
                    seen.add(tok)
                    if tok not in recent[k]:
                        recent[k].append(tok)
                x = rng.random()
                if x < 0.35:
                    if tok is not None and r.cmd("DEL", k) == "1":
                        dels += 1
                elif x < 0.7:
                    old = [t for t in recent[k] if t != tok]
                    if old:
                        r.cmd("SET", k, rng.choice(old), "PX", o.ttl_ms)
                        flips += 1
        except (OSError, ConnectionError, RuntimeError):
            errors += 1
            r.close()
            time.sleep(0.05)
        time.sleep(o.interval_ms / 1000.0)
    r.close()
    print("lockflip: secs=%.1f dels=%d flips=%d tokens=%d errors=%d"
          % (time.monotonic() - t0, dels, flips, len(seen), errors))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
