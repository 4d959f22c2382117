#!/usr/bin/env bash
# Chaos 06, redis_restart: Redis restarts under load, alternately clean
# (SIGTERM: Redis completes its AOF before it exits) and kill -9 with
# `appendfsync always` (every acknowledged write, pops included, is on disk
# before its reply). Two daemons refill a monotonic and a trend application
# that two consumers each keep popping (they reconnect).
#
# What it proves: a restored pool only holds IDs nobody popped (so not one
# duplicate, nothing "exposed"), each consumer's IDs stay increasing across
# the restart (restored head first, then the fresh lease above everything),
# every daemon notices the new run_id and discards pool and meta before
# refilling from a fresh lease (U, M, A, L), and the pools are back above
# low water within seconds without a daemon restart (R).
#
# Evidence that the fault landed, per restart: the Redis run_id changed,
# the consumers counted connection errors, and the daemons logged the
# run_id change (the restored pool was discarded).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

always() { rcli CONFIG SET appendfsync always >/dev/null; }
run_id() { rcli INFO server | sed -n 's/^run_id:\([0-9a-f]*\).*/\1/p'; }
epochs() { # run_id changes logged by all daemons
    local n t=0
    for n in a b; do t=$((t + $(log_count "$n" 'redis restart or failover detected'))); done
    echo "$t"
}
epochs_gt() { (($(epochs) > $1)); }

always
add_app mono step=200 max_pool_size=$CHAOS_POOL min_size_percent=50 increment_max=4 \
    delta=3 remainder=1 start_offset=1000000
add_app shuf increasing_type=2 step=500 max_pool_size=$((CHAOS_POOL * 5 / 4)) min_size_percent=50
chaos_daemon a
chaos_daemon b
wait_until 10 pool_ge mono $((CHAOS_POOL / 2)) || fail "mono never filled"
wait_until 10 pool_ge shuf $((CHAOS_POOL * 5 / 8)) || fail "shuf never filled"
alerts_start
sampler_start mono
consumers_start mono 2
consumers_start shuf 2
sleep 2

ROUNDS=$((2 * CHAOS_ROUNDS))
clean=0 killed=0
for ((r = 1; r <= ROUNDS; r++)); do
    before=$(run_id)
    e0=$(epochs)
    if ((r % 2)); then
        redis_stop
        clean=$((clean + 1))
        how=clean
    else
        always
        redis_kill
        killed=$((killed + 1))
        how=kill9
    fi
    info "round $r: redis down ($how)"
    sleep 1
    redis_start
    t0=$(now_ns)
    always
    after=$(run_id)
    expect "[[ -n '$after' && '$after' != '$before' ]]" "round $r: run_id did not change"
    wait_until 10 epochs_gt "$e0" || failure "round $r: no daemon logged the run_id change"
    recovered mono "$t0"
    recovered shuf "$t0"
    sleep 2
done
fault_landed "restarts=$clean+${killed}kill9"
fault_landed "epochs=$(epochs)" "(($(epochs) >= 2 * ROUNDS))"

consumers_wait mono,shuf "$CHAOS_IDS"
consumers_stop mono
consumers_stop shuf
errs=$(cat "$DIR"/cons.*.out | sed -n 's/.* errors=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')
fault_landed "consumer_errors=$errs" "((errs > 0))"
daemons_stop
drain mono
drain shuf
check_app mono
check_app shuf
row
