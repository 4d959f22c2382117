#!/usr/bin/env bash
# Chaos 14 cold_start: Redis comes back from an older snapshot while MySQL is
# down, and every daemon restarts (a data-centre power loss: the machines
# come back in any order). Design brief §9, README "Guarantees and failure
# modes": the restored pools hold IDs already handed out, and the daemons
# know their applications only from MySQL rows, which they cannot read.
#
# Two daemons, one monotonic application per round (cs1, cs2, ...), popped
# all along by two LPOP and two idpool_take consumers that retry every
# millisecond (they pop the moment the restored Redis accepts). Each round:
#   1. BGSAVE: the snapshot; the consumers pop on (past what it holds);
#   2. MySQL stops; both daemons are killed (-9); Redis is killed and
#      restarted from the snapshot; both daemons start again, MySQL still
#      down;
#   3. the daemons must find the restored pools without MySQL (the epoch
#      sweep SCANs Redis) and discard them: a watcher measures the window
#      from Redis accepting to the restored meta gone. idpool_take
#      consumers must get nothing from the restored pool (exposed_take=0);
#      LPOP consumers' exposure inside the window is measured;
#   4. MySQL stays down a while (nothing can refill: the restored meta's
#      lease went with it), then starts; R: the pool is back above low
#      water.
# Checked: U A L over everything with the window as exposure; M outside it;
# no duplicate outside it (a restored pool still served after the window,
# or refilled from its stale lease, would be one).
# Evidence that the fault landed: the snapshot's pool held IDs popped before
# the restart (stale=N), MySQL was down when the restored meta was
# discarded, and a daemon's epoch sweep logged a discard.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

ROUNDS=$CHAOS_ROUNDS
PER_ROUND=$((CHAOS_IDS / ROUNDS))
WINDOW_LIMIT_MS=${CHAOS_WINDOW_LIMIT_MS:-7000}
MYSQL_DOWN_S=3

sweeps() { # epoch sweeps that discarded something, logged by both daemons
    local re='epoch sweep \(epoch [^)]*\): [0-9]+ pools and [0-9]+ metas in Redis, [1-9]'
    echo $(($(log_count a "$re") + $(log_count b "$re")))
}
mysql_up() { sql "SELECT 1" >/dev/null 2>&1; }

rollback_apps cs "$ROUNDS"

STALE_SUM=0 WINDOWS=() ROUND_WINDOW=() DOWN_AT_DISCARD=0
for ((r = 1; r <= ROUNDS; r++)); do
    APP=cs$r
    info "round $r on $APP"
    app_params "$APP"
    consumers_start "$APP" 2 --backoff-ms 1:2
    consumers_start "$APP" 2 --mode take --backoff-ms 1:2
    popped_wait "$APP" $((PER_ROUND / 4)) "$APP: consumers starved"
    n0=$(popped "$APP")
    dead=$(run_id)
    save_old rdb "$APP"
    wait_until 20 popped_ge "$APP" $((n0 + P_MAX / 3)) || failure "$APP: consumers starved"
    s0=$(sweeps)
    mysql_stop
    crash_daemon a
    crash_daemon b
    redis_kill
    restore_watched "$APP" "$dead"
    t_from=$T_FROM
    redis_start
    chaos_daemon a
    chaos_daemon b
    window_read "$APP" "$WINDOW_LIMIT_MS"
    mysql_up && failure "$APP: MySQL answered before the restored pool was discarded"
    expect "[[ $W_STATE == discarded ]]" \
        "$APP: the restored pool was not discarded within 20 s while MySQL was down (watcher: $W_STATE)"
    [[ $W_STATE == discarded ]] && DOWN_AT_DISCARD=$((DOWN_AT_DISCARD + 1))
    t_to=$W_TO
    WINDOWS+=("$WINDOW")
    wait_until 10 eval '((s0 < $(sweeps)))' || failure "$APP: no epoch sweep logged a discard"
    sleep "$MYSQL_DOWN_S"
    mysql_start
    t_up=$(now_ns)
    recovered "$APP" "$t_up"
    consumers_wait "$APP" "$((PER_ROUND > n0 + P_MAX ? PER_ROUND : n0 + P_MAX))"
    consumers_stop "$APP"
    stale=$(python3 "$ROLLBACK_PY" stale "$DIR/probe.pool" "$t_from" "$DIR/$APP".c*.bin)
    STALE_SUM=$((STALE_SUM + stale))
    expect "((stale > 0))" "$APP: the snapshot held no ID popped before the restart"
    ROUND_WINDOW[$r]="$t_from:$t_to"
done
fault_landed "stale=$STALE_SUM,discarded_with_mysql_down=$DOWN_AT_DISCARD/$ROUNDS,sweeps=$(sweeps)" \
    "((STALE_SUM > 0 && DOWN_AT_DISCARD == ROUNDS))"

daemons_stop
for ((r = 1; r <= ROUNDS; r++)); do
    drain "cs$r"
    check_rollback "cs$r" "${ROUND_WINDOW[$r]%%:*}" "${ROUND_WINDOW[$r]#*:}"
done
row window_ms="$(
    IFS=/
    echo "${WINDOWS[*]}"
)" stale="$STALE_SUM"
