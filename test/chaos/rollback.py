#!/usr/bin/env python3
"""Helpers of the Redis-rollback scenarios (chaos 07, 14, 17, 18): Python 3
and redis-py (Debian's python3-redis) for the watchers.

watch PORT META OLD_EPOCH DEAD_RUN_ID OUT TIMEOUT_S
    connects to 127.0.0.1:PORT every ms until a Redis other than DEAD_RUN_ID
    serves a command (t_accept: its first HGET that is not refused with
    LOADING; no client can pop before), then polls HGET META epoch until it
    is no longer OLD_EPOCH (t_discard). Writes "state t_accept_ns
    t_discard_ns polls".
run PORT META OLD_EPOCH OUT TIMEOUT_S COMMAND...
    the fault inside one running Redis (DEBUG RELOAD NOSAVE, REPLICAOF NO
    ONE): t_from just before COMMAND is sent, t_accept when its reply came
    (Redis serves again), then polls HGET META epoch as watch does. Writes
    "state t_accept_ns t_discard_ns polls t_from_ns".
takes FROM_NS TO_NS LOG...
    over the idpool_take consumers' logs among LOG (pop logs PREFIX.<i>.bin
    of kind take, and their refusals PREFIX.<i>.refused): "requests
    refused_epoch", the take requests sent inside [FROM, TO] (answered with
    IDs, empty or refused) and how many of them IDPOOL_EPOCH refused.
filter FROM_NS TO_NS IN OUT
    copies a pop log without the records sent inside [FROM, TO]; prints how
    many records it left out.
stale POOL_FILE BEFORE_NS LOG...
    how many IDs of POOL_FILE (one per line) were popped by a request sent
    before BEFORE_NS.
sentinel PORT,PORT,... MASTER OLD_PORT META OLD_EPOCH OUT TIMEOUT_S
    the Sentinel scenarios' watcher, started just before the fault: polls
    every sentinel (SENTINEL get-master-addr-by-name MASTER) every 5 ms
    until a majority names a primary other than OLD_PORT (t_detect), then
    that primary's HGET META epoch until it is no longer OLD_EPOCH
    (t_swept). Writes "state t_detect_ns t_swept_ns polls new_port t_from_ns".
cluster PORT,PORT,... OLD_PORT SLOT META OLD_EPOCH OUT TIMEOUT_S
    the Cluster scenarios' watcher, as sentinel's: polls CLUSTER SLOTS of
    every node given (the survivors) until a majority names a primary of
    SLOT other than OLD_PORT (t_detect), then that primary's meta
    (CLUSTERDOWN and TRYAGAIN answers are waited out). Same output.
first_take FROM_NS LOG...
    when takes were served again after the fault at FROM_NS: over the take
    consumers' logs, the takes answered with IDs from FROM_NS on, and the
    longest pause between two of them (the outage: takes sent before the
    fault may still be answered after it); prints the t_recv ending that
    pause in ns, or 0 when none was answered after FROM_NS.
served FROM_NS TO_NS LOG...
    how many records brought IDs to a request sent at or after FROM_NS and
    answered by TO_NS (chaos 22: takes the partitioned primary served).
"""
import os
import struct
import sys
import time


def poll_meta(redis, r, meta, old, deadline, transient=()):
    """Polls META's epoch until it is no longer OLD: (state, t_first_ns,
    t_ns, polls), t_first_ns the first reply that was not LOADING or an
    error beginning with one of TRANSIENT; state 'timeout' with t_ns 0
    when the deadline passed first."""
    polls, t_first = 0, 0
    while time.monotonic() < deadline:
        try:
            v = r.hget(meta, 'epoch')
        except redis.exceptions.BusyLoadingError:  # -LOADING
            time.sleep(0.001)
            continue
        except redis.exceptions.ResponseError as e:
            if not str(e).startswith(transient):
                raise
            time.sleep(0.001)
            continue
        t = time.monotonic_ns()
        t_first = t_first or t
        polls += 1
        if v != old:
            return ('discarded' if v is None else 'replaced'), t_first, t, polls
        time.sleep(0.001)
    return 'timeout', t_first, 0, polls


def report(out, state, t_accept, t_end, polls, *more):
    if state == 'timeout':
        t_end = time.monotonic_ns()
    with open(out + '.tmp', 'w') as o:
        o.write(' '.join(str(x) for x in (state, t_accept, t_end, polls) + more) + '\n')
    os.rename(out + '.tmp', out)


def watch(port, meta, old, dead, out, timeout):
    import redis  # only the watchers need it

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
        r.connection_pool.release(conn)
        try:
            if r.info('server').get('run_id') == dead:  # the old process, not dead yet
                time.sleep(0.001)
                continue
            state, t_first, t_end, n = poll_meta(redis, r, meta, old, deadline)
            t_accept = t_accept or t_first
            polls += n
        except (OSError, redis.exceptions.RedisError):
            time.sleep(0.001)
        finally:
            r.close()
    report(out, state, t_accept, t_end, polls)


def run(port, meta, old, out, timeout, *command):
    import redis

    r = redis.Redis(host='127.0.0.1', port=int(port), socket_timeout=float(timeout),
                    decode_responses=True)
    r.ping()  # connected before t_from
    t_from = time.monotonic_ns()
    r.execute_command(*command)
    t_accept = time.monotonic_ns()
    state, _, t_end, polls = poll_meta(redis, r, meta, old, time.monotonic() + float(timeout))
    r.close()
    report(out, state, t_accept, t_end, polls, t_from)


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


def takes(lo, hi, *logs):
    lo, hi, requests, refused = int(lo), int(hi), 0, 0
    for path in logs:
        if path.endswith('.refused'):
            with open(path) as f:
                for line in f:
                    t_send, _, code = line.split()
                    if lo <= int(t_send) <= hi:
                        requests += 1
                        refused += code == 'IDPOOL_EPOCH'
            continue
        it = records(path)
        if struct.unpack_from('<I', next(it), 16)[0] != 1:  # not a take consumer's
            continue
        requests += sum(1 for t_send, _, _, _ in it if lo <= t_send <= hi)
    print(requests, refused)


def served(lo, hi, *logs):
    """Records that brought IDs, sent at or after lo and answered by hi."""
    lo, hi, n = int(lo), int(hi), 0
    for path in logs:
        it = records(path)
        next(it)
        for t_send, raw, _, count in it:
            t_recv = struct.unpack_from('<Q', raw, 8)[0]
            n += bool(count) and t_send >= lo and t_recv <= hi
    print(n)


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


def switch_watch(ports, named, old_port, meta, old, out, timeout, transient=()):
    """The failover watchers' loop: NAMED(conn), the port of the primary
    the server behind conn (one of PORTS) names (None: none), asked of
    every one every 5 ms until a majority names a port other than
    OLD_PORT; then that primary's meta is polled (poll_meta). Writes
    "state t_detect_ns t_swept_ns polls new_port t_from_ns"."""
    import redis

    t_from = time.monotonic_ns()
    deadline = time.monotonic() + float(timeout)
    conns = [redis.Redis(host='127.0.0.1', port=int(p), socket_connect_timeout=0.2, socket_timeout=0.2,
                         decode_responses=True) for p in ports.split(',')]
    new_port, t_detect = None, 0
    while time.monotonic() < deadline and new_port is None:
        votes = {}
        for c in conns:
            try:
                p = named(c)
            except (OSError, redis.exceptions.RedisError):
                continue
            if p is not None and str(p) != str(old_port):
                votes[p] = votes.get(p, 0) + 1
        for port, n in votes.items():
            if n * 2 > len(conns):
                new_port, t_detect = int(port), time.monotonic_ns()
        if new_port is None:
            time.sleep(0.005)
    if new_port is None:
        report(out, 'timeout', 0, 0, 0, 0, t_from)
        return
    r = redis.Redis(host='127.0.0.1', port=new_port, socket_timeout=1, decode_responses=True)
    state, _, t_end, polls = poll_meta(redis, r, meta, old, deadline, transient)
    r.close()
    report(out, state, t_detect, t_end, polls, new_port, t_from)


def sentinel(ports, master, old_port, meta, old, out, timeout):
    def named(c):
        a = c.execute_command('SENTINEL', 'get-master-addr-by-name', master)
        return a[1] if a else None

    switch_watch(ports, named, old_port, meta, old, out, timeout)


def cluster(ports, old_port, slot, meta, old, out, timeout):
    slot = int(slot)

    def named(c):
        # CLUSTER SLOTS: [first, last, [host, port, id], replicas...] per range
        for r in c.execute_command('CLUSTER', 'SLOTS'):
            if r[0] <= slot <= r[1]:
                return r[2][1]
        return None

    switch_watch(ports, named, old_port, meta, old, out, timeout, ('CLUSTERDOWN', 'TRYAGAIN'))


def first_take(lo, *logs):
    lo, served = int(lo), [int(lo)]
    for path in logs:
        it = records(path)
        if struct.unpack_from('<I', next(it), 16)[0] != 1:  # not a take consumer's
            continue
        for _, raw, _, count in it:
            t_recv = struct.unpack_from('<Q', raw, 8)[0]
            if count and t_recv >= lo:
                served.append(t_recv)
    served.sort()
    if len(served) < 2:
        print(0)
        return
    pause = max(range(1, len(served)), key=lambda i: served[i] - served[i - 1])
    print(served[pause])


if __name__ == '__main__':
    {'watch': watch, 'run': run, 'takes': takes, 'filter': filter_log,
     'stale': stale, 'sentinel': sentinel, 'cluster': cluster, 'first_take': first_take, 'served': served}[sys.argv[1]](*sys.argv[2:])
