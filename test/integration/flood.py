#!/usr/bin/env python3
"""Idle, slow and pipelining clients against one of idpoold's HTTP listeners
(loopback only), and the probe that measures a valid request meanwhile.

  flood.py attack PORT --conns N --sources K --secs S --out FILE
      N connections from K source addresses (127.0.1.1 .. 127.0.1.K, round
      robin): the even ones idle (send nothing), the odd ones slow (one byte
      of a never-ending request head a second, slowloris). Each one the
      server closes is opened again 0.5 to 1.5 s later. Prints "ready" once
      every connection was opened and the attack ran for 2 s; runs S
      seconds, then writes JSON counts to FILE: opened, closed_by_server,
      got_408, and "steady" (connections open at the end).

  flood.py probe PORT --path PATH [--path PATH2 ...] [--token T] [--count C]
                [--limit-ms L]
      C requests (the paths in turn), each on a new connection from
      127.0.0.1, 100 ms apart;
      prints one line per request ("ms status") and then
      "max_ms=.. over=.. failed=..". Exit 1 when a request failed or took
      longer than L ms.

  flood.py pipeline PORT --path PATH --secs S
      One connection that sends GET PATH requests back to back for S
      seconds and reads nothing; prints "blocked sent=N" once its sends
      have been blocked for 0.5 s (the server reads no more), and the bytes
      sent at the end.

Bounded by design: N <= 4000 and S <= 60; every address is on 127.0.0.0/8.
"""
import argparse
import json
import random
import selectors
import socket
import sys
import time

SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 100000


def cap(value, most, what):
    if value > most:
        sys.exit("flood.py: %s %d is over the bound %d" % (what, value, most))
    return value


def attack(a):
    n = cap(a.conns, 4000, "--conns")
    secs = cap(a.secs, 60, "--secs")
    sources = ["127.0.1.%d" % (1 + i % a.sources) for i in range(n)]
    sel = selectors.DefaultSelector()
    socks = [None] * n  # the socket of each slot, or None
    sent = [0] * n  # head bytes sent (slow slots)
    reopen = [0.0] * n  # when a closed slot connects again
    counts = {"opened": 0, "connect_failed": 0, "closed_by_server": 0, "got_408": 0}

    def open_slot(i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((sources[i], 0))
            s.connect_ex(("127.0.0.1", a.port))
        except OSError:
            s.close()
            counts["connect_failed"] += 1
            reopen[i] = time.monotonic() + 1
            return
        socks[i] = s
        sent[i] = 0
        counts["opened"] += 1
        sel.register(s, selectors.EVENT_READ, i)

    def close_slot(i, by_server):
        s = socks[i]
        sel.unregister(s)
        s.close()
        socks[i] = None
        reopen[i] = time.monotonic() + random.uniform(0.5, 1.5)
        if by_server:
            counts["closed_by_server"] += 1

    end = time.monotonic() + secs
    next_byte = time.monotonic()
    for i in range(n):
        open_slot(i)
    ready = time.monotonic() + 2
    while time.monotonic() < end:
        if ready and time.monotonic() >= ready:
            print("ready", flush=True)
            ready = None
        for key, _ in sel.select(timeout=0.05):
            i = key.data
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                data = b""
            if b" 408 " in data[:16]:
                counts["got_408"] += 1
            close_slot(i, True)  # an answer or the end: either way, closed by the server
        now = time.monotonic()
        if now >= next_byte:  # one byte a second on every slow connection
            next_byte = now + 1
            for i in range(1, n, 2):
                s = socks[i]
                if s is None:
                    continue
                try:
                    if s.send(SLOW_HEAD[sent[i] : sent[i] + 1]) == 1:
                        sent[i] += 1
                except BlockingIOError:
                    pass  # still connecting: next second
                except OSError:
                    close_slot(i, True)
        for i in range(n):
            if socks[i] is None and now >= reopen[i]:
                open_slot(i)
    counts["steady"] = sum(1 for s in socks if s is not None)
    for i in range(n):
        if socks[i] is not None:
            close_slot(i, False)
    with open(a.out, "w") as f:
        json.dump(counts, f)


def request(a, path):
    head = "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % path
    if a.token:
        head += "Authorization: Bearer %s\r\n" % a.token
    return (head + "\r\n").encode()


def probe(a):
    worst, over, failed = 0.0, 0, 0
    for k in range(cap(a.count, 1000, "--count")):
        path = a.path[k % len(a.path)]
        t0 = time.monotonic()
        status = "-"
        try:
            s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
            s.sendall(request(a, path))
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/1.1 ") else "-"
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(body) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
            s.close()
            if len(body) < length:
                status = "short"
        except OSError as e:
            status = type(e).__name__
        ms = (time.monotonic() - t0) * 1000
        print("%.1f %s %s" % (ms, status, path))
        worst = max(worst, ms)
        if status != "200":
            failed += 1
        elif ms > a.limit_ms:
            over += 1
        time.sleep(0.1)
    print("max_ms=%.1f over=%d failed=%d" % (worst, over, failed))
    sys.exit(1 if over or failed else 0)


def pipeline(a):
    secs = cap(a.secs, 60, "--secs")
    s = socket.create_connection(("127.0.0.1", a.port), timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    req = request(a, a.path) * 64
    end = time.monotonic() + secs
    sent, blocked_since, said = 0, None, False
    while time.monotonic() < end:
        try:
            sent += s.send(req)
            blocked_since = None
        except BlockingIOError:  # the server stopped reading: so it should
            now = time.monotonic()
            blocked_since = blocked_since or now
            if not said and now - blocked_since >= 0.5:
                print("blocked sent=%d" % sent, flush=True)
                said = True
            time.sleep(0.01)
        except OSError:
            break  # closed by the server
    s.close()
    print("sent=%d" % sent)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    at = sub.add_parser("attack")
    at.add_argument("port", type=int)
    at.add_argument("--conns", type=int, default=2000)
    at.add_argument("--sources", type=int, default=1)
    at.add_argument("--secs", type=float, default=10)
    at.add_argument("--out", required=True)
    pr = sub.add_parser("probe")
    pr.add_argument("port", type=int)
    pr.add_argument("--path", required=True, action="append")
    pr.add_argument("--token")
    pr.add_argument("--count", type=int, default=20)
    pr.add_argument("--limit-ms", type=float, default=100)
    pl = sub.add_parser("pipeline")
    pl.add_argument("port", type=int)
    pl.add_argument("--path", required=True)
    pl.add_argument("--token")
    pl.add_argument("--secs", type=float, default=5)
    a = p.parse_args()
    {"attack": attack, "probe": probe, "pipeline": pipeline}[a.cmd](a)


if __name__ == "__main__":
    main()
