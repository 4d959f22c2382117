#!/usr/bin/env python3
"""Test helpers for the integration tests (standard library and python3-redis:
run them with Debian's /usr/bin/python3, $PYTHON in lib.sh).

    helper.py hammer PORT POOL META COUNT SECONDS OUT
        One client calling, back to back for SECONDS,
            MULTI / TIME / FCALL idpool_take 2 POOL META COUNT / TIME / EXEC
        and appending one line per call to OUT:
            <sec before> <sec after> granted <n> <ids comma-separated>
            <sec before> <sec after> error <error text>
        The two TIMEs bracket the take inside one transaction, so when they
        name the same second, that is the second the take was counted in.

    helper.py subscribe PORT CHANNEL OUT READY
        SUBSCRIBE CHANNEL; writes each message as one line to OUT (flushed),
        touches READY once subscribed. Runs until killed.

    helper.py webhook PORTFILE OUT ATTEMPTS FAILFILE
        HTTP server on 127.0.0.1:<free port> (written to PORTFILE once it
        listens). Every POST is logged to ATTEMPTS as "<unix time> <code>
        <path> <body>"; if FAILFILE holds a number N > 0 the request is
        answered 500 and N is decremented, otherwise the body is appended as
        one line to OUT and answered 204. Runs until killed.

    helper.py summary FILE
        Prints "app alert state count" for the JSON events in FILE, sorted.

    helper.py events FILE [key=value ...]
        Prints the number of JSON lines in FILE whose fields equal the given
        values; exits 1 if a line is not a JSON object with the fields
        alert, app, state (firing|resolved), message and at (an RFC 3339
        time), all non-empty strings.
"""
import json
import os
import re
import sys
import time
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import redis


def connect(port, timeout=10):
    """A redis-py client of the loopback server (replies decoded to str);
    timeout bounds each reply (None: wait for ever)."""
    return redis.Redis(host="127.0.0.1", port=int(port), socket_timeout=timeout,
                       socket_connect_timeout=10, decode_responses=True)


def hammer(port, pool, meta, count, seconds, out):
    r = connect(port)
    deadline = time.monotonic() + float(seconds)
    lines = []
    while time.monotonic() < deadline:
        p = r.pipeline(transaction=True)
        p.execute_command("TIME")
        p.execute_command("FCALL", "idpool_take", "2", pool, meta, count)
        p.execute_command("TIME")
        try:
            t1, take, t2 = p.execute(raise_on_error=False)
        except redis.RedisError as e:  # MULTI, a queued command or EXEC failed
            raise SystemExit("hammer: %s" % e)
        if isinstance(take, redis.ResponseError):
            lines.append("%s %s error %s" % (t1[0], t2[0], take))
        else:
            lines.append("%s %s granted %d %s" % (t1[0], t2[0], len(take), ",".join(take)))
    with open(out, "a") as f:
        f.write("\n".join(lines) + ("\n" if lines else ""))


def subscribe(port, channel, out, ready):
    r = connect(port, timeout=None)  # messages may be far apart
    ps = r.pubsub()
    ps.subscribe(channel)
    deadline = time.monotonic() + 10
    while True:  # the server's confirmation: from now on messages arrive
        msg = ps.get_message(timeout=1)
        if msg is not None and msg["type"] == "subscribe":
            break
        if time.monotonic() > deadline:
            raise SystemExit("subscribe: no confirmation from the server")
    open(ready, "w").close()
    with open(out, "a") as f:
        for msg in ps.listen():
            if msg["type"] == "message":
                f.write(msg["data"].replace("\n", " ") + "\n")
                f.flush()


def webhook(portfile, out, attempts, failfile):
    lock = threading.Lock()  # one request at a time touches the files

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n).decode("utf-8", "replace").replace("\n", " ")
            with lock:
                code = self.record(body)
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def record(self, body):
            fail = 0
            try:
                with open(failfile) as f:
                    fail = int(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            if fail > 0:
                with open(failfile, "w") as f:
                    f.write("%d\n" % (fail - 1))
                code = 500
            else:
                code = 204
                with open(out, "a") as f:
                    f.write(body + "\n")
            with open(attempts, "a") as f:
                f.write("%.3f %d %s %s\n" % (time.time(), code, self.path, body))
            return code

        def log_message(self, *args):
            pass

    # Threads: every daemon keeps its own keep-alive connection open.
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, portfile)
    srv.serve_forever()


def events(path, *filters):
    want = dict(kv.split("=", 1) for kv in filters)
    n = 0
    try:
        f = open(path)
    except OSError:
        print(0)
        return
    with f:
        for i, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise SystemExit("%s:%d: not JSON (%s): %s" % (path, i, e, line))
            if not isinstance(ev, dict):
                raise SystemExit("%s:%d: not a JSON object: %s" % (path, i, line))
            for k in ("alert", "app", "state", "message", "at"):
                if not isinstance(ev.get(k), str) or not ev[k]:
                    raise SystemExit("%s:%d: field %r missing or not a string: %s" % (path, i, k, line))
            if not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", ev["at"]):
                raise SystemExit("%s:%d: 'at' is not an RFC 3339 time: %s" % (path, i, line))
            if ev["state"] not in ("firing", "resolved"):
                raise SystemExit("%s:%d: bad state: %s" % (path, i, line))
            if all(str(ev.get(k)) == v for k, v in want.items()):
                n += 1
    print(n)


def summary(path):
    """"app alert state count" lines, sorted, for every event in the file."""
    n = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                ev = json.loads(line)
                k = (ev["app"], ev["alert"], ev["state"])
                n[k] = n.get(k, 0) + 1
    for k in sorted(n):
        print("%s %s %s %d" % (k + (n[k],)))


def main():
    cmds = {"hammer": hammer, "subscribe": subscribe, "webhook": webhook, "events": events,
            "summary": summary}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
