#!/usr/bin/env bash
# Chaos 17 reload_rollback: a rollback inside the same Redis process. While
# the consumers pop, `DEBUG RELOAD NOSAVE` brings back a dump saved earlier
# (SAVE), whose pools still hold IDs that consumers already popped; run_id
# and master_replid do not change (issue 18 item 2; test/integration/t_epoch.sh
# (2) shows it once, without load).
#
# Two daemons, one monotonic application per round (rl1, rl2, ...), popped
# all along by two LPOP and two idpool_take consumers that retry every
# millisecond. Each round, while the consumers pop:
#   1. SAVE: the dump (dump.rdb stays in place; a copy is probed in a
#      throwaway Redis for its pool and meta epoch); the consumers pop on,
#      past a third of the pool;
#   2. the watcher sends DEBUG RELOAD NOSAVE (t_from), notes when it
#      returned (Redis serves the reloaded data again) and polls meta's
#      epoch until the reloaded one is gone (t_discard).
# The reloaded function library has no validated epoch: takes are refused
# (IDPOOL_EPOCH) until a daemon notices (it reads idpool_validated every
# second, or a push is refused with IDPOOL_UNVALIDATED), validates a new
# epoch ("...; validating again" in its log) and its sweep discards the
# reloaded pools. Plain LPOP consumers can get the reloaded IDs again until
# then: that exposure is measured like scenario 07's.
# Checked:
#   * U A L over everything with [t_from, t_discard] as the exposure window
#     (exposed_lpop measured, exposed_take must be 0), M outside it;
#   * the take consumers were exposed: requests inside the window, some
#     refused with IDPOOL_EPOCH (takes=/refused= per round in the row);
#   * the window stays within its bound (RELOAD_BOUND_MS): the daemons'
#     once-a-second probe of idpool_validated (sent every 1 to 1.25 s: the
#     watchdog ticks every 250 ms), the watchdog's next tick, a reconnect
#     (100 ms) and the handshake and sweep (the 500 ms of WINDOW_BOUND_MS);
#   * R: the pool is back above low water after the reload.
# Evidence that the fault landed: the reloaded pool held IDs already popped
# (stale=N > 0), run_id:master_replid did not change (the same process),
# the validated epoch changed (a new nonce, same run_id:master_replid), a
# daemon logged "validating again" and "redis restart or failover detected".
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

ROUNDS=$((CHAOS_ROUNDS < 2 ? 2 : CHAOS_ROUNDS))
PER_ROUND=$((CHAOS_IDS / ROUNDS))
RELOAD_BOUND_MS=$((1250 + 250 + 100 + 500))
WINDOW_LIMIT_MS=${CHAOS_WINDOW_LIMIT_MS:-$RELOAD_BOUND_MS}

epochs() { logs_count "app=$APP redis restart or failover detected"; } # pools discarded
revalidations() { logs_count 'validating again'; }

rollback_apps rl "$ROUNDS"

for ((r = 1; r <= ROUNDS; r++)); do
    APP=rl$r
    round_begin "$APP"
    server0=$(redis_server_id)
    save_old dump "$APP"
    pop_past "$APP"
    e0=$(epochs) v0=$(revalidations)
    run_watched "$REDIS_PORT" "$APP" "$PROBE_EPOCH" "$WINDOW_LIMIT_MS" DEBUG RELOAD NOSAVE
    expect "[[ $W_STATE == discarded || $W_STATE == replaced ]]" \
        "$APP: the reloaded pool was not discarded within 20 s (watcher: $W_STATE)"
    t_from=$T_FROM t_to=$W_TO
    server1=$(redis_server_id)
    recovered "$APP" "$W_ACCEPT"
    wait_until 10 eval '((e0 < $(epochs)))' || true
    epoch1=$(redis_epoch)
    round_end "$r" "$APP" "$t_from" "$t_to"
    v1=$(($(revalidations) - v0)) e1=$(($(epochs) - e0))
    fault_landed "reload:stale=$STALE,revalidated=$v1,epochs=$e1" \
        "((STALE > 0 && e1 > 0 && v1 > 0)) &&
         [[ '$server0' == '$server1' && '$epoch1' == '$server1':* && '$epoch1' != '$PROBE_EPOCH' ]]"
done
rollback_finish
