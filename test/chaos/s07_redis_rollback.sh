#!/usr/bin/env bash
# Chaos 07 redis_rollback: Redis comes back with an OLDER data set, whose
# pools still hold IDs that consumers already popped (design brief §9,
# README "Guarantees / Not guaranteed").
#
# Two daemons, one monotonic application per round (rb1, rb2, ...), popped
# all along by two kinds of recorded consumers: two with LPOP and two with
# idpool_take. Both retry at once (every millisecond) and catch up on the
# requests they missed, so they pop the moment the restored Redis accepts
# connections. Each round, while the consumers pop:
#   odd rounds  (rdb): BGSAVE, keep the snapshot, let the consumers pop on,
#               kill -9 Redis and restart it from the snapshot (put in place
#               as the base of its AOF, so servers.sh's AOF settings stay);
#   even rounds (aof): copy Redis' AOF directory (the "disk"), let the
#               consumers pop on, kill -9 Redis and restart it from the copy:
#               the AOF lost its tail, as after a machine crash with
#               appendfsync everysec.
# The restored pool holds IDs already handed out. The daemons must detect the
# new Redis (run_id) and discard pool and meta (idpool_epoch) before
# refilling from a fresh lease. Between Redis accepting connections again and
# that discard, LPOP consumers can get those IDs again: the documented
# exposure window. idpool_take consumers cannot: the library refuses a pool
# whose meta was not written under the epoch a daemon validated in this
# Redis process (IDPOOL_EPOCH), so their exposure must be 0. A watcher
# measures the window: it connects every millisecond until the new Redis
# serves commands (t_accept: past LOADING; nobody can pop before), then
# polls meta's epoch until it is gone or changed (t_discard). Then:
#   * duplicates whose later pop was sent in [t_restart, t_discard] are
#     reported as exposed= (idpool-check --exposure), split by client kind:
#     exposed_lpop= is measured, exposed_take= must be 0; any other
#     duplicate is a violation; the row shows window_ms = t_discard -
#     t_accept (the worst round);
#   * M: the stale IDs of the window are lower than IDs seen before it
#     (README: "lower than ones they saw before"), so order is checked over
#     the logs without the records sent inside the window (how many were
#     left out is logged); U, A and L are checked over everything;
#   * the window closes by itself, within the documented bound: the
#     daemon's reconnect backoff (1 s) plus its handshake and sweep
#     (WINDOW_LIMIT_MS);
#   * the take consumers were exposed to the window (a positive control
#     for exposed_take=0): they sent requests inside it and IDPOOL_EPOCH
#     refused some (each refusal is logged with its time: takes=/refused=
#     per round in the row);
#   * R: the pool is back above low water after the restart.
# Evidence that the fault landed: the restored pool held IDs already popped
# (stale=N > 0, counted from a throwaway Redis loaded with the same files),
# its meta's epoch was not of the new process, and a daemon logged "redis
# restart or failover detected".
# One application per round because idpool-check takes one exposure window.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

ROUNDS=$((CHAOS_ROUNDS < 2 ? 2 : CHAOS_ROUNDS))
PER_ROUND=$((CHAOS_IDS / ROUNDS))
WINDOW_LIMIT_MS=${CHAOS_WINDOW_LIMIT_MS:-$WINDOW_BOUND_MS}

epochs() { logs_count "app=$APP redis restart or failover detected"; } # pools discarded

# Automatic AOF rewrites would swap the files under save_aof.
rcli CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
rollback_apps rb "$ROUNDS"

for ((r = 1; r <= ROUNDS; r++)); do
    APP=rb$r
    kind=rdb
    ((r % 2)) || kind=aof
    info "round $r: $kind"
    round_begin "$APP"
    [[ $kind == aof ]] && {
        rcli BGREWRITEAOF >/dev/null
        wait_until 20 eval '[[ $(persistence aof_rewrite_in_progress) == 0 &&
            $(persistence aof_rewrite_scheduled) == 0 ]]' || fail "AOF rewrite did not finish"
        N0=$(popped "$APP")
    }
    dead=$(run_id)
    save_old "$kind" "$APP"
    pop_past "$APP"
    e0=$(epochs)
    redis_kill
    restore_watched "$APP" "$dead"
    t_from=$T_FROM
    redis_start
    window_read "$APP" "$WINDOW_LIMIT_MS"
    expect "[[ $W_STATE == discarded || $W_STATE == replaced ]]" \
        "$APP: the restored pool was not discarded within 20 s (watcher: $W_STATE)"
    recovered "$APP" "$W_ACCEPT"
    wait_until 10 eval '((e0 < $(epochs)))' || true
    round_end "$r" "$APP" "$t_from" "$W_TO"
    fault_landed "$kind:stale=$STALE,epochs=$(($(epochs) - e0))" \
        "((STALE > 0 && $(epochs) > e0)) && [[ '$PROBE_EPOCH' != \$(run_id):* ]]"
done
rollback_finish
