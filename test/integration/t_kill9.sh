#!/usr/bin/env bash
# Fault test: kill -9 of refilling daemons (brief §4: U at any crash point).
#
# Part 1: two daemons refill a small pool that two fast consumers keep
# draining (a refill nearly every tick); one daemon at a time is killed -9 at
# a random moment and restarted, five times, then both at once. Each
# consumer's IDs must be strictly increasing, all IDs unique, arithmetic and
# leased; the survivor keeps the pool served; after the last crash the pool is
# back above low water within a few seconds.
#
# Part 2: a daemon is killed -9 while it holds an application's Redis lock
# (deterministically: it waits for its lease reservation behind LOCK TABLES):
# the lock expires by its TTL and a restarted daemon refills the pool.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

TTL=500
COMMON=(--tick-ms 100 --lock-ttl-ms "$TTL" --reload-ms 500)
KEY=kill9
add_app $KEY step=100 max_pool_size=2000 min_size_percent=50 increment_max=4 \
    delta=3 remainder=2 start_offset=1000
LOW=$(low_water $KEY)

declare -A GEN=([a]=0 [b]=0)
# restart NAME: starts NAME again under a new instance name.
restart() {
    GEN[$1]=$((GEN[$1] + 1))
    start_daemon "$1" "${COMMON[@]}" --instance "kill9-$1${GEN[$1]}"
}
# crash NAME: kill -9, and make sure that is how it died.
crash() {
    kill_daemon "$1" KILL
    assert_eq 137 "${DAEMON_STATUS[$1]}" "exit status of $1 after kill -9"
}
# progress WHAT: both consumers get at least another 2000 IDs (bounded: 15 s).
progress() {
    local n1 n2
    n1=$(consumer_count c1)
    n2=$(consumer_count c2)
    wait_until 15 eval "consumer_ge c1 $((n1 + 2000)) && consumer_ge c2 $((n2 + 2000))" ||
        fail "consumers starved $1"
}

restart a
restart b
wait_until 5 pool_ge $KEY "$LOW" || fail "pool never filled"
consumer_start c1 $KEY 1000
consumer_start c2 $KEY 1000
progress "at the start"

# ===================================================================== 1 ===
for round in 1 2 3 4 5; do
    victim=a
    ((RANDOM % 2)) && victim=b
    sleep "0.$((RANDOM % 6 + 1))"
    crash $victim
    progress "with only one daemon left (round $round)"
    restart $victim
    info "round $round: killed -9 and restarted $victim"
done
sleep 0.$((RANDOM % 6 + 1))
crash a
crash b
sleep 0.5
restart a
restart b
progress "after both daemons were killed and restarted"
sleep 1
consumer_stop c1
consumer_stop c2
assert_alive a b
wait_until 3 pool_ge $KEY "$LOW" || fail "R: pool not back above low water $LOW"
pass "kill -9 of one daemon (5x) and of both: consumers kept being served"

# ===================================================================== 2 ===
# Only a refills from now on; it will hold kill9lock's lock while waiting
# for the lease table.
stop_daemon b
# A longer lock TTL for this part: the kill and the look at the lock right
# after it must fit in what is left of the TTL, on a loaded machine too.
TTL=3000
COMMON=(--tick-ms 100 --lock-ttl-ms "$TTL" --reload-ms 500)
stop_daemon a
restart a
wait_until 5 pool_ge $KEY "$LOW" || fail "pool not above low water after a's restart"
KEY2=kill9lock
sql "LOCK TABLES application_lease WRITE; DO SLEEP(8); UNLOCK TABLES;" \
    >"$DIR/locker.out" 2>&1 &
locker=$!
wait_until 5 eval "[[ \$(sql \"SELECT COUNT(*) FROM information_schema.processlist
    WHERE info LIKE 'DO SLEEP(%'\") == 1 ]]" || fail "LOCK TABLES session never started"
add_app $KEY2 step=100 max_pool_size=1000 min_size_percent=50
LOW2=$(low_water $KEY2)
wait_until 3 eval "[[ \$(rcli EXISTS $(lock_key $KEY2)) == 1 ]]" ||
    fail "a never took $KEY2's lock"
ttl=$(rcli PTTL "$(lock_key $KEY2)")
((ttl > 0 && ttl <= TTL)) || fail "lock TTL is $ttl ms, expected 1..$TTL"
proc_alive "$locker" || fail "the table lock ended too early"
crash a
t_kill=$(now_us)
assert_eq 1 "$(rcli EXISTS "$(lock_key $KEY2)")" "lock right after the kill"
wait_until $((TTL / 1000 + 1)) eval "[[ \$(rcli EXISTS $(lock_key $KEY2)) == 0 ]]" ||
    fail "the dead daemon's lock did not expire"
gone_ms=$((($(now_us) - t_kill) / 1000))
assert_le "$gone_ms" $((TTL + 200)) "ms until the dead daemon's lock expired"
info "dead daemon's lock (PTTL $ttl ms at the kill) gone after $gone_ms ms"
wait_until 10 eval "! proc_alive $locker" || fail "LOCK TABLES session never ended"
wait "$locker" || fail "LOCK TABLES session failed: $(cat "$DIR/locker.out")"
restart a
wait_until 3 pool_ge $KEY2 "$LOW2" || fail "R: $KEY2 not refilled after its lock holder died"
wait_until 3 pool_ge $KEY "$LOW" || fail "R: $KEY not above low water"
pass "a daemon killed -9 holding the lock: lock expired by its TTL, pool refilled"

# =============================================================== checks ===
stop_daemon a
pool_dump $KEY "$DIR/pool.txt"
pool_dump $KEY2 "$DIR/pool2.txt"
check_increasing "$DIR/c1.txt" "consumer c1"
check_increasing "$DIR/c2.txt" "consumer c2"
check_increasing "$DIR/pool.txt" "pool of $KEY"
check_increasing "$DIR/pool2.txt" "pool of $KEY2"
check_above "$DIR/c1.txt" "$DIR/c2.txt" -- "$DIR/pool.txt"
check_ids $KEY "$DIR/c1.txt" "$DIR/c2.txt" "$DIR/pool.txt"
check_ids $KEY2 "$DIR/pool2.txt"
pass "U, M, A, L over $(cat "$DIR/c1.txt" "$DIR/c2.txt" | wc -l) popped IDs and the pools"
