#!/usr/bin/env bash
# A refill cut short by the fence is finished at the next check (brief §4.3,
# §5; t_library section 4 on a loaded CI machine).
#
# The fence keeps what was committed before it: a refill of 10,000 IDs whose
# first chunk (6,000 IDs, --push-chunk 6000) was appended, then paused past
# its lock's TTL (IDPOOL_FAULT=pushing:stop), has its second chunk rejected.
# The pool then holds 6,000 IDs: above its low-water mark (5,000), below its
# capacity. The daemon must say how much of the refill was appended, and try
# again at its next check to finish it: before the fix it logged only "the
# rest of this refill was rejected", counted none of the 6,000 IDs, and left
# the pool short until clients drained it below low water, looking wedged.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

KEY=topup
add_app $KEY step=1000 max_pool_size=10000 min_size_percent=50
IDPOOL_FAULT=pushing:stop start_daemon a --tick-ms 50 --lock-ttl-ms 200 --push-chunk 6000 \
    --instance topup-a
wait_until 10 proc_stopped "$(daemon_pid a)" || fail "the daemon did not stop after its first chunk"
assert_eq 6000 "$(llen $KEY)" "pool after the first chunk"
sleep 0.5 # the 200 ms lock expires: the second chunk's guard fences it off
signal_daemon a CONT
wait_until 5 log_has a "app=$KEY push fenced off" || fail "the second chunk was not fenced off"
log_has a "app=$KEY push fenced off: .*6000 of 10000 IDs appended" ||
    fail "the log does not say how much of the refill was appended: $(grep -m1 'fenced off' "$DIR/a.log")"
wait_until 5 pool_ge $KEY 10000 ||
    fail "the refill cut short by the fence was never finished (pool $(llen $KEY), low water 5000)"
n_pushed=$(grep -oE "app=$KEY pushed [0-9]+ IDs" "$DIR/a.log" | tail -n 1)
pass "a refill fenced off after 6000 of 10000 IDs is finished at the next check ($n_pushed)"

# No ID twice, all in order, all inside the leases MySQL recorded (L) and
# below current_offset.
stop_daemon a
rcli LRANGE "$(pool_key $KEY)" 0 -1 >"$DIR/pool.txt"
assert_eq 10000 "$(count_ids "$DIR/pool.txt")" "IDs in the pool"
leases $KEY >"$DIR/leases.txt"
check_pops "$DIR/c.check" --type monotonic --leases "$DIR/leases.txt" \
    --current-offset "$(app_col $KEY current_offset)" --list "$DIR/pool.txt" ||
    fail "IDs twice, out of order, unleased or above current_offset after the fenced refill: $(tail -n 3 "$DIR/c.check")"
pass "the pool after the fenced refill and its completion: unique, increasing, leased"
