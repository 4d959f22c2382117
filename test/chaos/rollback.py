#!/usr/bin/env python3
"""Helpers of the Redis-rollback scenarios (chaos 07, 14): Python 3, the
standard library only.

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
import socket
import struct
import sys
import time


def resp(*args):
    out = b'*%d\r\n' % len(args)
    for a in args:
        a = a.encode()
        out += b'$%d\r\n%s\r\n' % (len(a), a)
    return out


def read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError('closed')
    kind, rest = line[:1], line[1:-2]
    if kind == b'$':
        n = int(rest)
        if n < 0:
            return None
        return f.read(n + 2)[:-2].decode()
    if kind == b'-':
        raise RuntimeError(rest.decode())
    return rest.decode()


def watch(port, meta, old, dead, out, timeout):
    deadline = time.monotonic() + float(timeout)
    state, t_accept, t_end, polls = 'timeout', 0, 0, 0
    while time.monotonic() < deadline and state == 'timeout':
        try:
            s = socket.create_connection(('127.0.0.1', int(port)), timeout=1)
        except OSError:
            time.sleep(0.001)
            continue
        t_conn = time.monotonic_ns()
        f = s.makefile('rb')
        try:
            s.sendall(resp('INFO', 'server'))
            info = read_reply(f)
            if 'run_id:' + dead in info:  # the old process, not dead yet
                s.close()
                time.sleep(0.001)
                continue
            while time.monotonic() < deadline:
                s.sendall(resp('HGET', meta, 'run_id'))
                try:
                    v = read_reply(f)
                except RuntimeError:  # -LOADING
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
        except (OSError, ConnectionError, RuntimeError):
            time.sleep(0.001)
        finally:
            s.close()
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
