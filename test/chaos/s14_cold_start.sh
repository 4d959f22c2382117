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
#      sweep SCANs Redis, pools and metas) and discard them: a watcher
#      measures the window from Redis accepting to the restored meta gone.
#      LPOP consumers may drain the restored pool before the daemons' first
#      sweep: the sweep then discards the meta alone (a meta of an earlier
#      epoch without a pool). idpool_take consumers must get nothing from
#      the restored pool (exposed_take=0) and must have been exposed to it:
#      requests inside the window, some refused with IDPOOL_EPOCH (the
#      positive control; takes=/refused= per round in the row). LPOP
#      consumers' exposure inside the window is measured. Without a daemon
#      the window lasts until one runs (docs/guarantees.md): from the start
#      of the first daemon (its first log line; the harness may take
#      seconds to get there on a loaded machine) it must stay within the
#      documented bound of a reconnect (WINDOW_LIMIT_MS; the row's
#      window_ms is from Redis serving again, since_start_ms from the
#      daemons' start);
#   4. MySQL stays down a while (nothing can refill: the restored meta's
#      lease went with it), then starts; R: the pool is back above low
#      water.
# Checked: U A L over everything with the window as exposure; M outside it;
# no duplicate outside it (a restored pool still served after the window,
# or refilled from its stale lease, would be one).
# Evidence that the fault landed: the snapshot's pool held IDs popped before
# the restart (stale=N), MySQL was down when the restored meta was
# discarded, and a daemon's epoch sweep logged a discard (of a pool and its
# meta, or of a meta whose pool LPOP drained: "K discarded" counts both).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

ROUNDS=$CHAOS_ROUNDS
PER_ROUND=$((CHAOS_IDS / ROUNDS))
WINDOW_LIMIT_MS=${CHAOS_WINDOW_LIMIT_MS:-$WINDOW_BOUND_MS}
MYSQL_DOWN_S=3

sweeps() { # epoch sweeps that discarded something (pools or metas), logged by the daemons
    logs_count 'epoch sweep \(epoch [^)]*\): [0-9]+ pools and [0-9]+ metas in Redis, [1-9]'
}
mysql_up() { sql "SELECT 1" >/dev/null 2>&1; }

rollback_apps cs "$ROUNDS"

DOWN_AT_DISCARD=0 SINCE_START=()
for ((r = 1; r <= ROUNDS; r++)); do
    APP=cs$r
    round_begin "$APP"
    dead=$(run_id)
    save_old rdb "$APP"
    pop_past "$APP"
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
    wait_until 65 test -s "$DIR/watch" || true
    t_start=$(started_ns a)
    t_b=$(started_ns b)
    [[ -n $t_start && (-z $t_b || $t_b -ge $t_start) ]] || t_start=$t_b
    window_read "$APP" "$WINDOW_LIMIT_MS" "${t_start:-0}"
    mysql_up && failure "$APP: MySQL answered before the restored pool was discarded"
    expect "[[ $W_STATE == discarded ]]" \
        "$APP: the restored pool was not discarded within 60 s while MySQL was down ($W_STATE)"
    [[ $W_STATE == discarded ]] && DOWN_AT_DISCARD=$((DOWN_AT_DISCARD + 1))
    t_to=$W_TO
    SINCE_START+=("$W_BOUNDED")
    wait_until 10 eval '((s0 < $(sweeps)))' || failure "$APP: no epoch sweep logged a discard"
    sleep "$MYSQL_DOWN_S"
    mysql_start
    t_up=$(now_ns)
    recovered "$APP" "$t_up"
    round_end "$r" "$APP" "$t_from" "$t_to"
    expect "((STALE > 0))" "$APP: the snapshot held no ID popped before the restart"
done
# metas_alone: sweeps that found no pool but discarded (the restored pool was drained by LPOP).
metas_alone=$(logs_count 'epoch sweep \(epoch [^)]*\): 0 pools and [0-9]+ metas in Redis, [1-9]')
fault_landed "stale=$STALE_SUM,discarded_with_mysql_down=$DOWN_AT_DISCARD/$ROUNDS" \
    "((STALE_SUM > 0 && DOWN_AT_DISCARD == ROUNDS))"
fault_landed "sweeps=$(sweeps),metas_alone=$metas_alone"
rollback_finish since_start_ms="$(joined / "${SINCE_START[@]}")"
