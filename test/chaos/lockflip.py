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

Talks to Redis over one loopback connection with python3-redis (Debian's
/usr/bin/python3, $PYTHON in the harness); after an error it reconnects on
the next command.
"""
import argparse
import collections
import os
import random
import signal
import sys
import time

import redis


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
    r = redis.Redis(host="127.0.0.1", port=o.port, socket_timeout=1.0,
                    socket_connect_timeout=1.0, decode_responses=True)
    dels = flips = errors = 0
    seen = set()
    t0 = time.monotonic()
    deadline = t0 + o.duration
    while not stop and time.monotonic() < deadline and not os.path.exists(o.stop_file):
        try:
            for k in keys:
                tok = r.get(k)
                if tok is not None:
                    seen.add(tok)
                    if tok not in recent[k]:
                        recent[k].append(tok)
                x = rng.random()
                if x < 0.35:
                    if tok is not None and r.delete(k) == 1:
                        dels += 1
                elif x < 0.7:
                    old = [t for t in recent[k] if t != tok]
                    if old:
                        r.set(k, rng.choice(old), px=o.ttl_ms)
                        flips += 1
        except (OSError, redis.RedisError):
            errors += 1
            r.connection_pool.disconnect()
            time.sleep(0.05)
        time.sleep(o.interval_ms / 1000.0)
    r.connection_pool.disconnect()
    print("lockflip: secs=%.1f dels=%d flips=%d tokens=%d errors=%d"
          % (time.monotonic() - t0, dels, flips, len(seen), errors))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
