#!/usr/bin/env bash
# Fault test: a refiller paused past its lock TTL is fenced off (brief §4.3).
#
# Part 1 (deterministic): a SQL session holds LOCK TABLES application_lease
# WRITE, so daemon A, having taken the Redis lock, blocks in its lease
# reservation (SELECT MAX(hi) FROM application_lease). A is SIGSTOPped there
# with the lock held; the table lock ends, A's lock expires, daemon B
# reserves and fills the pool; we pop what B pushed; then A is SIGCONTed: its
# reservation's compare-and-set fails (B moved current_offset), it reserves a
# fresh lease and pushes with its stale lock token -> IDPOOL_FENCED. Nothing
# of A's lease may ever reach the pool.
#
# Part 2: the same stall with a consumer draining all the time, A resumed in
# the middle of it, then both daemons paused and resumed at random moments;
# one consumer's IDs must stay unique and strictly increasing throughout.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

TTL=500
LOCK_S=4
COMMON=(--tick-ms 100 --lock-ttl-ms "$TTL" --reload-ms 1000)

# hold_lease_table SECONDS: background SQL session holding the table lock;
# returns once the lock is held. Its pid is in LOCKER.
hold_lease_table() {
    sql "LOCK TABLES application_lease WRITE; DO SLEEP($1); UNLOCK TABLES;" \
        >"$DIR/locker.out" 2>&1 &
    LOCKER=$!
    wait_until 5 locker_sleeping || fail "the LOCK TABLES session never started"
}
locker_sleeping() {
    [[ $(sql "SELECT COUNT(*) FROM information_schema.processlist
              WHERE info LIKE 'DO SLEEP(%'") -ge 1 ]]
}
# A query of some daemon waits for the application_lease table lock.
reserve_blocked() {
    [[ $(sql "SELECT COUNT(*) FROM information_schema.processlist
              WHERE state LIKE 'Waiting for table%lock'
                AND info LIKE '%application_lease%'") -ge 1 ]]
}
lock_exists() { [[ $(rcli EXISTS "$(lock_key "$1")") == 1 ]]; }
lock_gone() { [[ $(rcli EXISTS "$(lock_key "$1")") == 0 ]]; }

# ===================================================================== 1 ===
KEY=fence
add_app $KEY step=100 max_pool_size=1000 min_size_percent=50 increment_max=3
LOW=$(low_water $KEY)

hold_lease_table "$LOCK_S"
t_locked=$(now_us)
start_daemon A "${COMMON[@]}" --instance fence-A
wait_until 3 lock_exists $KEY || fail "A never took the Redis lock"
wait_until 2 reserve_blocked || fail "A's reservation is not waiting for the table lock"
info "A holds the Redis lock and waits in its reservation:"
sql "SELECT id, state, info FROM information_schema.processlist
     WHERE info LIKE '%application_lease%' AND info NOT LIKE '%processlist%'" >&2
signal_daemon A STOP
proc_alive "$LOCKER" || fail "the table lock ended before A was stopped (too slow a start?)"
info "A stopped $((($(now_us) - t_locked) / 1000)) ms after the table lock was taken"

# The table lock ends; A's Redis lock expires by its TTL while A sleeps.
wait_until $((LOCK_S + 3)) eval "! proc_alive $LOCKER" || fail "LOCK TABLES session never ended"
wait "$LOCKER" || fail "LOCK TABLES session failed: $(cat "$DIR/locker.out")"
wait_until 1 lock_gone $KEY || fail "A's lock did not expire ($TTL ms TTL)"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease")" "leases while A is stopped"
assert_eq 0 "$(llen $KEY)" "pool while A is stopped"

# B takes over.
start_daemon B "${COMMON[@]}" --instance fence-B
wait_until 5 pool_ge $KEY "$LOW" || fail "B did not fill the pool"
n=$(llen $KEY)
pop $KEY "$n" "$DIR/p1" --type monotonic --dump "$DIR/p1.txt" 2>/dev/null ||
    fail "popping B's first $n IDs"
info "popped the $n IDs B pushed"
# Let B refill, so that a working fence is the only thing that keeps A out.
wait_until 5 pool_ge $KEY "$LOW" || fail "B did not refill the pool"
sleep 0.3
pool_dump $KEY "$DIR/pool_before.txt"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE instance = 'fence-A'")" \
    "A's leases before it resumes"
b_hi=$(sql "SELECT MAX(hi) FROM application_lease WHERE instance = 'fence-B'")

# A resumes: it must be fenced.
signal_daemon A CONT
wait_until 5 log_has A "app=$KEY push fenced off" ||
    fail "A was not fenced off after resuming (no 'push fenced off' in its log)"
info "A: $(grep -m1 'push fenced off' "$DIR/A.log")"
assert_alive A B
lease_dump $KEY "$DIR/leases_A.txt" "l.instance = 'fence-A'"
[[ -s $DIR/leases_A.txt ]] || fail "A never reserved a lease after resuming"
a_lo=$(head -n 1 "$DIR/leases_A.txt" | cut -f 1)
# A's first attempt read current_offset before B's reservation: its
# compare-and-set must have failed, and the retry reserved above B's lease.
assert_ge "$a_lo" "$b_hi" "A's lease starts at or above B's"
info "A's lease(s): $(tr '\t\n' ' ;' <"$DIR/leases_A.txt")"

# Give A time to do anything else it would do, then stop it (exit 0) and
# look: the pool must hold none of A's IDs and still be B's increasing run.
sleep 1
stop_daemon A
pool_dump $KEY "$DIR/pool_after.txt"
bad=$(ids_in_leases "$DIR/pool_after.txt" "$DIR/leases_A.txt" | sed -n 1,5p)
[[ -z $bad ]] || fail "IDs from A's fenced lease reached the pool: $bad"
check_increasing "$DIR/pool_after.txt" "pool after A resumed"
assert_eq "$(cat "$DIR/pool_before.txt")" "$(head -n "$(wc -l <"$DIR/pool_before.txt")" \
    "$DIR/pool_after.txt")" "pool head changed while A resumed (only appends allowed)"
if log_has B 'push fenced off'; then fail "B was fenced although it never stalled"; fi

# Consume more through B; everything stays unique, increasing and leased.
pop $KEY 3000 "$DIR/p2" --type monotonic --dump "$DIR/p2.txt" 2>/dev/null ||
    fail "popping 3000 more"
check_increasing "$DIR/p1.txt" "first pop"
check_increasing "$DIR/p2.txt" "second pop"
check_above "$DIR/p1.txt" -- "$DIR/p2.txt"
bad=$(cat "$DIR/p1.txt" "$DIR/p2.txt" >"$DIR/p12.txt" &&
    ids_in_leases "$DIR/p12.txt" "$DIR/leases_A.txt" | sed -n 1,5p)
[[ -z $bad ]] || fail "popped IDs from A's fenced lease: $bad"
check_ids $KEY "$DIR/p1.txt" "$DIR/p2.txt"
stop_daemon B
pass "a refiller paused past its lock TTL is fenced off; none of its IDs reach the pool"

# ===================================================================== 2 ===
# Same stall, but a consumer drains the whole time and A resumes mid-stream.
set_app $KEY deleted_at=1
KEY=fence2
add_app $KEY step=100 max_pool_size=2000 min_size_percent=50 increment_max=5 \
    delta=2 remainder=1
LOW=$(low_water $KEY)

hold_lease_table 3
start_daemon A2 "${COMMON[@]}" --instance fence-A2
wait_until 3 lock_exists $KEY || fail "A2 never took the Redis lock"
wait_until 2 reserve_blocked || fail "A2's reservation is not waiting for the table lock"
signal_daemon A2 STOP
proc_alive "$LOCKER" || fail "the table lock ended before A2 was stopped"
consumer_start c $KEY 1000
wait_until 6 eval "! proc_alive $LOCKER" || fail "LOCK TABLES session never ended"
wait "$LOCKER" || true
wait_until 1 lock_gone $KEY || fail "A2's lock did not expire"
start_daemon B2 "${COMMON[@]}" --instance fence-B2
wait_until 15 consumer_ge c 5000 || fail "the consumer got no IDs from B2"
signal_daemon A2 CONT # while the consumer drains
wait_until 5 log_has A2 "app=$KEY push fenced off" || fail "A2 was not fenced off"

# Random stalls of either daemon, each longer than the lock TTL.
for round in 1 2 3 4 5 6; do
    victim=A2
    ((RANDOM % 2)) && victim=B2
    sleep "0.$((RANDOM % 5 + 1))"
    signal_daemon $victim STOP
    sleep "0.$((RANDOM % 4 + 6))"
    signal_daemon $victim CONT
    info "round $round: stalled $victim past its lock TTL"
done
sleep 1
consumer_stop c
assert_alive A2 B2
wait_until 3 pool_ge $KEY "$LOW" || fail "R: pool not back above low water $LOW"
pool_dump $KEY "$DIR/pool2.txt"
stop_daemon A2
stop_daemon B2

check_increasing "$DIR/c.txt" "consumer"
check_increasing "$DIR/pool2.txt" "pool after the stalls"
check_above "$DIR/c.txt" -- "$DIR/pool2.txt"
lease_dump $KEY "$DIR/leases_A2.txt" "l.instance = 'fence-A2'"
head -n 1 "$DIR/leases_A2.txt" >"$DIR/lease_A2_fenced.txt"
[[ -s $DIR/lease_A2_fenced.txt ]] || fail "A2 never reserved a lease"
bad=$(cat "$DIR/c.txt" "$DIR/pool2.txt" >"$DIR/all2.txt" &&
    ids_in_leases "$DIR/all2.txt" "$DIR/lease_A2_fenced.txt" | sed -n 1,5p)
[[ -z $bad ]] || fail "IDs from A2's fenced lease were handed out: $bad"
check_ids $KEY "$DIR/c.txt" "$DIR/pool2.txt"
info "fenced pushes: A2 $(log_count A2 'push fenced off'), B2 $(log_count B2 'push fenced off')"
pass "stalls past the lock TTL in any order: unique, increasing, leased ($(count_ids "$DIR/c.txt") IDs)"
