#!/usr/bin/env bash
# The Python client src/python/idpool_client/ across two environments
# (issue 12), like t_client.sh for libidpool: two Redis + MariaDB pairs,
# each with its own idpoold, the application "c1" with delta 2 and
# remainder 0 (A, preferred) or 1 (B). Two processes of three threads each
# take 300,000 IDs (next() and take(n) mixed, paced over ~3 s) while A's
# Redis is killed (the clients fail over to B) and started again.
# Asserted: no ID twice (all IDs in one Python set), every thread got all
# its IDs (no IdpoolTimeout), failovers > 0, IDs of both remainders. Then:
# IdpoolNoApp for an unknown key within the timeout, ValueError for a bad
# key, close() wakes a waiting caller with IdpoolClosed.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
export PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python:$PYTHONPATH
"$PYTHON" -c 'import redis, idpool_client' 2>/dev/null ||
    skip "$PYTHON cannot import redis (python3-redis) and idpool_client"

two_environments c1
b_pool_ge() {
    local n
    n=$(redis-cli -h 127.0.0.1 -p "$B_REDIS_PORT" LLEN "$(pool_key "$1")" 2>/dev/null) &&
        [[ $n =~ ^[0-9]+$ ]] && ((n >= $2))
}
wait_until 15 pool_ge c1 300000 || fail "A's pool did not fill"
wait_until 15 b_pool_ge c1 100000 || fail "B's pool did not fill"

# worker.py PROC THREADS IDS_PER_THREAD SECONDS OUT A B: one client, THREADS
# threads; each takes its IDs paced over SECONDS (so A's outage falls inside
# the run) and writes them to OUT.PROC.THREAD; the last line is the stats.
cat >"$DIR/worker.py" <<'EOF'
import json, sys, threading, time
import idpool_client

proc, nthreads, per, secs, out, envs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6:]
c = idpool_client.Client(envs, timeout=5.0)
app = c.app("c1")
errors = []
started = threading.Barrier(nthreads + 1)

def work(t):
    ids = []
    started.wait()
    t0 = time.monotonic()
    try:
        i = 0
        while len(ids) < per:
            if i % 2:
                ids.append(app.next())
            else:
                ids.extend(app.next_n(min(97, per - len(ids))))
            i += 1
            if i % 50 == 0:  # pace: `per` IDs over `secs`
                ahead = len(ids) / per * secs - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    except idpool_client.IdpoolError as e:
        errors.append(f"thread {t}: {type(e).__name__}: {e}")
    with open(f"{out}.{proc}.{t}", "w") as f:
        f.write("\n".join(map(str, ids)) + "\n")

ts = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
for t in ts:
    t.start()
app.next()  # connected: tell the script
open(f"{out}.{proc}.ready", "w").close()
started.wait()
for t in ts:
    t.join()
st = app.stats()
c.close()
for e in errors:
    print(e)
print("stats " + json.dumps(st))
sys.exit(1 if errors else 0)
EOF

t0=$(now_us)
pids=()
for p in 0 1; do
    "$PYTHON" "$DIR/worker.py" "$p" 3 50000 3 "$DIR/ids" "$A_REDIS" "$B_REDIS" >"$DIR/worker.$p.out" 2>&1 &
    pids+=($!)
done
wait_until 10 test -e "$DIR/ids.0.ready" -a -e "$DIR/ids.1.ready" || fail "workers did not start"
sleep 0.5
redis_kill
t_kill=$(now_us)
info "A's Redis killed $(((t_kill - t0) / 1000)) ms into the run"
sleep 1
redis_start
t_back=$(now_us)
for p in 0 1; do
    wait "${pids[$p]}" || fail "worker $p failed: $(cat "$DIR/worker.$p.out")"
done
info "run took $((($(now_us) - t0) / 1000)) ms; A was down $(((t_back - t_kill) / 1000)) ms"
cat "$DIR"/worker.*.out

"$PYTHON" - "$DIR" <<'EOF' >"$DIR/check.out" || fail "check: $(cat "$DIR/check.out")"
import glob, json, sys
from harness import check
d = sys.argv[1]
ids, n = set(), 0
for f in sorted(glob.glob(d + "/ids.[01].[0-9]")):
    with open(f) as fh:
        v = [int(x) for x in fh.read().split()]
    check(len(v) == 50000, f"{f}: {len(v)} IDs, expected 50000")
    n += len(v)
    ids.update(v)
fo = fb = timeouts = 0
for f in glob.glob(d + "/worker.*.out"):
    for line in open(f):
        if line.startswith("stats "):
            st = json.loads(line[6:])
            fo += st["failovers"]
            fb += st["failbacks"]
            timeouts += st["timeouts"]
r1 = sum(i % 2 for i in ids)
print(f"ids={n} unique={len(ids)} r0={len(ids) - r1} r1={r1} failovers={fo} failbacks={fb} timeouts={timeouts}")
EOF
res=$(cat "$DIR/check.out")
info "$res"
[[ $res == "ids=300000 unique=300000 "* ]] || fail "duplicates or missing IDs: $res"
[[ $res == *" timeouts=0" ]] || fail "a call timed out: $res"
fo=$(sed -n 's/.* failovers=\([0-9]*\).*/\1/p' <<<"$res")
r0=$(sed -n 's/.* r0=\([0-9]*\).*/\1/p' <<<"$res")
r1=$(sed -n 's/.* r1=\([0-9]*\).*/\1/p' <<<"$res")
assert_gt "$fo" 0 "failovers"
assert_gt "$r0" 0 "IDs from environment A (remainder 0)"
assert_gt "$r1" 0 "IDs from environment B (remainder 1)"
pass "300,000 IDs through idpool_client in 2 processes x 3 threads, A's Redis killed and restarted: no duplicate, no timeout, $fo failover(s), $r0 IDs from A, $r1 from B"

# The error paths against the same servers.
dead=$(free_port)
"$PYTHON" - "$A_REDIS" "$B_REDIS" "redis://127.0.0.1:$dead/0" <<'EOF' >"$DIR/errors.out" 2>&1 || fail "error paths: $(cat "$DIR/errors.out")"
import sys, threading, time
import idpool_client as m
from harness import check
a_url, b_url, dead = sys.argv[1:]

with m.Client([a_url, b_url], timeout=3.0) as c:
    t0 = time.monotonic()
    try:
        c.app("no_such_app").next()
        sys.exit("IDs for an unknown key")
    except m.IdpoolNoApp as e:
        dt = time.monotonic() - t0
        check(dt < 3.0, f"IdpoolNoApp after {dt:.2f} s, not within the timeout")
        print(f"IdpoolNoApp in {dt * 1000:.0f} ms: {e}")
    for bad in ("bad key", "", "-x", "..", "k" * 65, "a:b"):
        try:
            c.app(bad)
            sys.exit(f"no ValueError for key {bad!r}")
        except ValueError as e:
            print(f"ValueError: {e}")
    check(c.app("c1").next() % 2 == 0, "c1 after the error paths: no ID from A")  # still fine, from A

c = m.Client([dead], timeout=30.0)
res = {}
def wait():
    t = time.monotonic()
    try:
        res["id"] = c.app("c1").next()
    except m.IdpoolError as e:
        res["e"] = e
    res["dt"] = time.monotonic() - t
th = threading.Thread(target=wait)
th.start()
time.sleep(0.3)
t1 = time.monotonic()
c.close()
th.join(5)
check(not th.is_alive(), "close() did not wake the waiting caller")
check(isinstance(res.get("e"), m.IdpoolClosed), f"expected IdpoolClosed, got {res}")
print(f"close() woke the waiter with IdpoolClosed after {(time.monotonic() - t1) * 1000:.0f} ms")
EOF
cat "$DIR/errors.out"
pass "IdpoolNoApp for an unknown key within the timeout, ValueError for bad keys, close() wakes a waiter"
