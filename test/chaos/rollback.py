#!/usr/bin/env python3
"""Helpers of the Redis-rollback scenarios (chaos 07, 14): Python 3 and
redis-py (Debian's python3-redis) for the watcher.

watch PORT META OLD_RUN_ID DEAD_RUN_ID OUT TIMEOUT_S
    connects to 127.0.0.1:PORT every ms until a Redis other than DEAD_RUN_ID
    answers (t_accept), then polls HGET META run_id until it is no longer
    OLD_RUN_ID (t_discard). Writes "state t_accept_ns t_discard_ns polls".
filter FROM_NS TO_NS IN OUT
    copies a pop log without the records sent inside [FROM, TO]; prints how
    many records it left out.
stale POOL_FILE BEFORE_NS LOG...
    how many IDs of POOL_FILE (one per line) were popped by a request sent
    before BEFORE_NS.
"""
import os
import struct
import sys
import time


def watch(port, meta, old, dead, out, timeout):
    import redis  # only the watcher needs it

    deadline = time.monotonic() + float(timeout)
    state, t_accept, t_end, polls = 'timeout', 0, 0, 0
    while time.monotonic() < deadline and state == 'timeout':
        # One connection per attempt, no retries of redis-py's own: the
        # moment the new Redis accepts is what is measured.
        r = redis.Redis(host='127.0.0.1', port=int(port), socket_connect_timeout=1, socket_timeout=1,
                        retry_on_timeout=False, decode_responses=True)
        try:
            conn = r.connection_pool.get_connection('INFO')  # connects
        except (OSError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            r.close()
            time.sleep(0.001)
            continue
        t_conn = time.monotonic_ns()
        r.connection_pool.release(conn)
        try:
            if r.info('server').get('run_id') == dead:  # the old process, not dead yet
                time.sleep(0.001)
                continue
            while time.monotonic() < deadline:
                try:
                    v = r.hget(meta, 'run_id')
                except redis.exceptions.BusyLoadingError:  # -LOADING
                    time.sleep(0.001)
                    continue
                t = time.monotonic_ns()
                if not t_accept:
                    t_accept = t_conn
                polls += 1
                if v != old:
                    state, t_end = ('discarded' if v is None else 'replaced'), t
                    break
                time.sleep(0.001)
        except (OSError, redis.exceptions.RedisError):
            time.sleep(0.001)
        finally:
            r.close()
    if state == 'timeout':
        t_end = time.monotonic_ns()
    with open(out + '.tmp', 'w') as o:
        o.write('%s %d %d %d\n' % (state, t_accept, t_end, polls))
    os.rename(out + '.tmp', out)


def records(path):
    with open(path, 'rb') as f:
        data = f.read()
    yield data[:32]
    off = 32
    while off + 24 <= len(data):
        t_send, t_recv, count, flags = struct.unpack_from('<QQII', data, off)
        end = off + 24 + 8 * count
        if end > len(data):
            break
        yield (t_send, data[off:end], data[off + 24:end], count)
        off = end


def filter_log(lo, hi, src, dst):
    lo, hi, left_out = int(lo), int(hi), 0
    it = records(src)
    with open(dst, 'wb') as o:
        o.write(next(it))
        for t_send, raw, _, _ in it:
            if lo <= t_send <= hi:
                left_out += 1
            else:
                o.write(raw)
    print(left_out)


def stale(pool_file, before, *logs):
    with open(pool_file) as f:
        pool = {int(x) for x in f.read().split()}
    seen, before = set(), int(before)
    for path in logs:
        it = records(path)
        next(it)
        for t_send, _, ids, count in it:
            if t_send < before and count:
                seen.update(struct.unpack('<%dQ' % count, ids))
    print(len(pool & seen))


if __name__ == '__main__':
    {'watch': watch, 'filter': filter_log, 'stale': stale}[sys.argv[1]](*sys.argv[2:])
