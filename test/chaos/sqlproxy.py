#!/usr/bin/env python3
"""A MySQL-protocol TCP proxy that cuts idpoold's lease reservations
(chaos scenario 04, mysql_ambiguous).

    sqlproxy.py --port LISTEN --to PORT --dir DIR --stop-file FILE

Forwards 127.0.0.1:LISTEN <-> 127.0.0.1:PORT. It reads the client's
packets (plain protocol: the throwaway MariaDB has no TLS) and remembers
the last `INSERT INTO application_lease ... VALUES (app, lo, hi, 'inst'[, 'key'][, delta,
remainder, start_offset])`
of each connection. The file DIR/arm holds one word; the next matching
event consumes it (the file is removed) and cuts that connection:

  commit  the COMMIT of a lease is forwarded, MariaDB's reply is read (so
          the commit is applied) and dropped, and both sides are closed:
          the client cannot know the outcome, the lease exists in MySQL.
  insert  the lease INSERT is not forwarded; both sides are closed (MariaDB
          rolls the transaction back).
  update  the same for the compare-and-set UPDATE of current_offset.

Each cut appends "MODE app lo hi instance" to DIR/cuts.txt (lo hi empty for
update). Stops once FILE exists or on SIGTERM. Loopback only.
"""
import argparse
import os
import re
import signal
import socket
import sys
import threading
import time

INSERT_RE = re.compile(
    rb"INSERT INTO application_lease \(application_id, lo, hi, instance(?:, entity_key)?"
    rb"(?:, delta, remainder, start_offset)?\)\s*"
    rb"VALUES \((\d+), (\d+), (\d+), '((?:[^'\\]|\\.)*)'(?:, '[A-Za-z0-9_.-]*')?(?:, \d+, \d+, \d+)?\)")
UPDATE_RE = re.compile(rb"UPDATE application SET current_offset = (\d+).* WHERE id = (\d+)")

lock = threading.Lock()


def take_arm(d, mode):
    """Consumes the armed mode if it is MODE."""
    path = os.path.join(d, "arm")
    with lock:
        try:
            with open(path) as f:
                armed = f.read().strip()
        except OSError:
            return False
        if armed != mode:
            return False
        os.unlink(path)
        return True


def record(d, line):
    with lock:
        with open(os.path.join(d, "cuts.txt"), "a") as f:
            f.write(line + "\n")
    print("sqlproxy: cut " + line, flush=True)


class Conn:
    def __init__(self, client, d, to):
        self.c = client
        self.d = d
        self.s = socket.create_connection(("127.0.0.1", to), timeout=10)
        self.s.settimeout(None)
        self.closed = False
        self.drop_reply = None  # the lease whose COMMIT reply is dropped
        self.pending = None     # (app, lo, hi, instance) of the last lease INSERT

    def close(self):
        self.closed = True
        for sock in (self.c, self.s):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass

    def up(self):
        """client -> server, packet by packet."""
        buf = b""
        try:
            while not self.closed:
                data = self.c.recv(65536)
                if not data:
                    break
                buf += data
                out = b""
                while len(buf) >= 4:
                    n = int.from_bytes(buf[:3], "little")
                    if len(buf) < 4 + n:
                        break
                    pkt, buf = buf[:4 + n], buf[4 + n:]
                    payload = pkt[4:]
                    if payload[:1] == b"\x03":
                        q = payload[1:]
                        m = INSERT_RE.search(q)
                        if m:
                            self.pending = (m.group(1).decode(), m.group(2).decode(),
                                            m.group(3).decode(), m.group(4).decode())
                            if take_arm(self.d, "insert"):
                                record(self.d, "insert %s %s %s %s" % self.pending)
                                self.close()
                                return
                        elif UPDATE_RE.search(q) and take_arm(self.d, "update"):
                            m = UPDATE_RE.search(q)
                            record(self.d, "update %s - - -" % m.group(2).decode())
                            self.close()
                            return
                        elif q.strip().upper() == b"COMMIT" and self.pending:
                            lease, self.pending = self.pending, None
                            if take_arm(self.d, "commit"):
                                self.drop_reply = lease
                                self.s.sendall(out + pkt)
                                out = b""
                                continue
                        elif q.strip().upper() in (b"ROLLBACK", b"START TRANSACTION"):
                            self.pending = None
                    out += pkt
                if out:
                    self.s.sendall(out)
        except OSError:
            pass
        self.close()

    def down(self):
        """server -> client, raw; after an armed COMMIT, drop its reply and cut."""
        try:
            while not self.closed:
                data = self.s.recv(65536)
                if not data:
                    break
                if self.drop_reply is not None:
                    ok = data[4:5] == b"\x00"
                    record(self.d, "commit %s %s %s %s" % self.drop_reply +
                           ("" if ok else " (reply was not OK: %r)" % data[:16]))
                    break
                self.c.sendall(data)
        except OSError:
            pass
        self.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--to", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--stop-file", required=True)
    o = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", o.port))
    ls.listen(64)
    ls.settimeout(0.2)
    conns = 0
    print("sqlproxy: listening on 127.0.0.1:%d -> %d" % (o.port, o.to), flush=True)
    while not stop and not os.path.exists(o.stop_file):
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        except OSError:
            time.sleep(0.05)
            continue
        try:
            conn = Conn(c, o.dir, o.to)
        except OSError:
            c.close()
            continue
        conns += 1
        threading.Thread(target=conn.up, daemon=True).start()
        threading.Thread(target=conn.down, daemon=True).start()
    ls.close()
    print("sqlproxy: stopped after %d connections" % conns, flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
