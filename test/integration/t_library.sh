#!/usr/bin/env bash
# The push is safe whatever the state of the Redis function library, and the
# library is kept (brief §4.3; issue "No duplicate ever", findings 1, 2, 7, 9).
#
# (1) A stale refiller meets an older library without idpool_guard: A is
#     stopped (IDPOOL_FAULT=locked:stop) holding the lock, with IDs drawn from
#     the lease in meta; B takes over after the lock's TTL and pushes from
#     the same next; an older library (no idpool_guard, no idpool_version)
#     replaces ours; A continues. A's push must not apply: no ID twice, meta's
#     next never rewound. (The guard aborted the EXEC only by touching the
#     lock: a guard that did not run let the EXEC apply.)
# (2) A failing guard (a stale token, called in a loop) must not abort the
#     legitimate holder's transactions: a large refill is never fenced off.
#     (It touched the shared lock key, dirtying every watcher.)
# (3) FUNCTION FLUSH and FUNCTION DELETE: the daemon loads the library again
#     and keeps refilling; a newer library (version 99, without our
#     functions) is never replaced, nothing is pushed, and `stalled` fires;
#     once ours is back, it resolves.
# (4) A refill that takes longer than the lock's TTL (a large pool, a 200 ms
#     TTL) is not fenced off part-way: each chunk renews the lock.
# (5) A Redis user that may not run FUNCTION LOAD is told so.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

LUA=$IDPOOL_SOURCE_ROOT/src/idpool.lua
# older_library: our library as a release without idpool_guard and idpool_version.
older_library() { grep -vE "register_function(\('idpool_guard'|\{function_name = 'idpool_version')|^ +flags = \{'no-writes'\}\}$" "$LUA"; }
load_library() { rcli -x FUNCTION LOAD REPLACE >/dev/null; }
functions() { rcli FUNCTION LIST LIBRARYNAME idpool | grep -c '^idpool_' || true; }

# ===================================================================== 1 ===
KEY=lib
add_app $KEY step=100 max_pool_size=1000 min_size_percent=50
COMMON=(--tick-ms 50 --lock-ttl-ms 600 --reload-ms 1000 --stall-ms 1500 --alert-resolve-ms 500)
IDPOOL_FAULT=locked:stop:2 start_daemon a "${COMMON[@]}" --instance lib-a
wait_until 5 pool_ge $KEY 1000 || fail "pool never filled"
rcli LPOP "$(pool_key $KEY)" 600 >"$DIR/popped.txt"
wait_until 5 proc_stopped "$(daemon_pid a)" || fail "A did not stop at its second lock"
next_a=$(rcli HGET "$(meta_key $KEY)" next)
info "A stopped holding the lock; meta next $next_a"
start_daemon b "${COMMON[@]}" --instance lib-b
wait_until 5 pool_ge $KEY 900 || fail "B did not take over"
sleep 0.3
next_b=$(rcli HGET "$(meta_key $KEY)" next)
((next_b > next_a)) || fail "B did not push from the lease in meta ($next_a -> $next_b)"
older_library | load_library
[[ $(rcli FCALL idpool_guard 3 a b c d e f 2>&1) == *'Function not found'* ]] ||
    fail "the older library still has idpool_guard"
signal_daemon a CONT
wait_until 5 log_has a 'the fence did not run: ERR Function not found|push fenced off' ||
    fail "A's push after the library swap was neither refused nor fenced"
wait_until 5 eval '(($(functions) >= 9))' || fail "the library was not loaded again"
sleep 1
((next_b <= $(rcli HGET "$(meta_key $KEY)" next))) || fail "meta's next was rewound"
stop_daemon a
stop_daemon b
rcli LRANGE "$(pool_key $KEY)" 0 -1 >"$DIR/rest.txt"
check_pops "$DIR/c1.check" --type monotonic --list "$DIR/popped.txt" --list "$DIR/rest.txt" ||
    fail "IDs twice or out of order after the stale push: $(tail -n 3 "$DIR/c1.check")"
log_has a 'the fence did not run' && info "A's push was refused: the guard did not run"
pass "an older library without the guard: the stale refiller's push does not apply (no ID twice)"

# ===================================================================== 2 ===
BIG=big
add_app $BIG step=10000 max_pool_size=400000 min_size_percent=90
start_daemon c --tick-ms 50 --lock-ttl-ms 2000 --reload-ms 300 --stall-ms 1500 \
    --alert-resolve-ms 500 --instance lib-c
wait_until 10 pool_ge $BIG 400000 || fail "$BIG never filled"
"$PYTHON" - "$REDIS_PORT" "$(pool_key $BIG)" "$(meta_key $BIG)" "$(lock_key $BIG)" \
    "$(redis_epoch)" "$DIR/stale.stop" >"$DIR/stale.out" 2>&1 <<'EOF' &
import os, sys, redis
port, pool, meta, lock, epoch, stop = sys.argv[1:]
r = redis.Redis(port=int(port))
n = 0
while not os.path.exists(stop) and n < 200000:
    try:
        r.fcall("idpool_guard", 3, pool, meta, lock, "stale-token", epoch, "0")
    except redis.ResponseError:
        n += 1
print(n)
EOF
STALE=$!
for round in 1 2 3; do
    rcli LTRIM "$(pool_key $BIG)" 0 99 >/dev/null # takes nearly everything
    wait_until 20 pool_ge $BIG 390000 || fail "$BIG not refilled in round $round"
done
touch "$DIR/stale.stop"
wait "$STALE" || fail "the stale guard loop failed: $(cat "$DIR/stale.out")"
stale=$(cat "$DIR/stale.out")
((stale > 100)) || fail "the stale guard ran only $stale times"
n_fenced=$(log_count c "app=$BIG push fenced off")
assert_eq 0 "$n_fenced" "refills of $BIG fenced off while $stale stale guards failed"
pass "$stale failing guards of a stale refiller did not abort the holder's pushes"

# ===================================================================== 3 ===
for how in FLUSH 'DELETE idpool'; do
    rcli FUNCTION $how >/dev/null
    rcli LTRIM "$(pool_key $BIG)" 0 99 >/dev/null
    # (the refill that met the missing library could not release its lock: its TTL is 2 s)
    wait_until 15 pool_ge $BIG 390000 || fail "no refill after FUNCTION $how"
    assert_ge "$(functions)" 9 "functions after FUNCTION $how"
done
log_has c 'a function of the idpool library is missing' || fail "no log line about the missing library"
pass "FUNCTION FLUSH and FUNCTION DELETE: the library is loaded again, refills go on"

# A newer library (version 99) without our functions: kept, never replaced.
sleep 1.5 # no library check in flight (a check that saw no library could load ours over it)
n_fired=$(log_count c "alert stalled firing app=$BIG")
n_resolved=$(log_count c "alert stalled resolved app=$BIG")
printf '#!lua name=idpool\nredis.register_function{function_name = "idpool_version", callback = function() return 99 end, flags = {"no-writes"}}\n' |
    load_library
rcli LTRIM "$(pool_key $BIG)" 0 99 >/dev/null
log_more() { (($(log_count "$1" "$2") > $3)); }
wait_until 8 log_more c "alert stalled firing app=$BIG" "$n_fired" ||
    fail "no stalled alert while the library is unusable"
wait_until 5 log_has c 'a newer idpool function library \(version 99\) is loaded' ||
    fail "the daemon did not say it keeps the newer library"
assert_eq 100 "$(llen $BIG)" "$BIG pool while the library is not ours"
assert_eq 99 "$(rcli FCALL_RO idpool_version 0)" "the loaded library's version"
rcli FUNCTION FLUSH >/dev/null # ours comes back at the next missing function
wait_until 8 log_more c "alert stalled resolved app=$BIG" "$n_resolved" || fail "stalled did not resolve"
wait_until 15 pool_ge $BIG 390000 || fail "no refill after our library came back"
pass "a newer library is kept; nothing is pushed, stalled fires; it resolves once ours is back"
stop_daemon c

# ===================================================================== 4 ===
rcli DEL "$(pool_key $BIG)" "$(meta_key $BIG)" >/dev/null
start_daemon d --tick-ms 50 --lock-ttl-ms 200 --reload-ms 300 --instance lib-d
# (390,000 as in the rounds: a refill fenced off part-way is finished in whole steps, so a
# fence shows below as a count, not as a pool that never reaches exactly 400,000)
wait_until 15 pool_ge $BIG 390000 || fail "$BIG never filled with a 200 ms lock TTL"
for round in 1 2; do
    rcli LTRIM "$(pool_key $BIG)" 0 99 >/dev/null
    wait_until 15 pool_ge $BIG 390000 || fail "$BIG not refilled in round $round"
done
ms=$(grep -oE "app=$BIG pushed [0-9]+ IDs" "$DIR/d.log" | head -n 1)
n_fenced=$(log_count d "app=$BIG push fenced off")
assert_eq 0 "$n_fenced" "refills longer than the 200 ms lock TTL fenced off"
pass "refills of 390,000 IDs with a 200 ms lock TTL are never fenced off ($ms)"
stop_daemon d

# ===================================================================== 5 ===
# A Redis user that may not load functions is told so (not "Redis >= 7.0 needed").
rcli ACL SETUSER nofn on '>pw' '~*' '&*' +@all -function >/dev/null
rcli FUNCTION FLUSH >/dev/null
start_daemon e --redis "redis://nofn:pw@127.0.0.1:$REDIS_PORT/0" --tick-ms 50 --instance lib-e
wait_until 5 log_has e 'FUNCTION LOAD of the idpool library \(version [0-9]+\) failed: NOPERM.*\(this Redis user may not run FUNCTION LOAD: grant it' ||
    fail "no message naming the missing permission: $(grep -m1 'FUNCTION LOAD' "$DIR/e.log")"
kill_daemon e TERM
pass "a Redis user without FUNCTION LOAD is told which permission it lacks"
