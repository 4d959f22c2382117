#!/usr/bin/env bash
# Chaos 18 failback: a failover to a lagging replica and a failback to the
# old primary after it was demoted with a full resync and lagged in turn
# (issue 18 item 3; test/integration/t_epoch.sh (3) shows the failback
# once, without load).
#
# Two redis-servers on loopback, A ($DIR) and B ($DIR/b), and one MariaDB;
# daemon a on A's address, daemon b on B's (each refuses to write while its
# server is a replica). One monotonic application per switch-over (fb1,
# fb2, ...), popped by two LPOP and two idpool_take consumers that retry
# every millisecond. Each round has two switch-overs, A -> B then B -> A;
# from primary X to its replica Y, while the consumers pop from X:
#   1. Y lags: it stops following X (REPLICAOF a dead port) and keeps X's
#      data; its pool and meta are read (the stale copy);
#   2. the consumers pop on from X past a third of the pool: IDs handed out
#      by X are still in Y's pool;
#   3. the consumers move: new ones start on Y (refused READONLY, retrying
#      every millisecond), then X's stop (the old primary is fenced off: a
#      split brain is outside idpool's guarantees);
#   4. the watcher promotes Y (REPLICAOF NO ONE, t_from) and polls Y's meta
#      until the epoch X wrote is gone (t_discard);
#   5. X is demoted: it becomes Y's replica with a full resync (X wrote
#      after Y stopped following it), so its function library is new.
# Y's library has no validated epoch: takes are refused (IDPOOL_EPOCH)
# until daemon y, connected to Y's address all along, sees a primary,
# validates it and its sweep discards the pools X wrote. The failback
# (B -> A) is the case of item 3: A was demoted with a full resync from B,
# lagged, and is promoted again.
# Checked:
#   * U A L over everything with [t_from, t_discard] as each application's
#     exposure window (exposed_lpop measured, exposed_take must be 0), M
#     outside it;
#   * the take consumers were exposed: requests inside each window, some
#     refused with IDPOOL_EPOCH (takes=/refused= per switch-over in the row);
#   * each window within the documented bound of a reconnect
#     (WINDOW_BOUND_MS: daemon y retries its replica with a backoff of at
#     most 1 s, then validates and sweeps);
#   * R: the pool is back above low water on Y.
# Evidence that each switch-over landed: Y's pool held IDs X had handed out
# (stale=N > 0), Y's validated epoch is new and of Y (run_id:master_replid
# after the promotion), and X's resync from Y was a full one (Y's sync_full
# grew).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

ROUNDS=$CHAOS_ROUNDS
SWITCHES=$((2 * ROUNDS))
PER_ROUND=$((CHAOS_IDS / SWITCHES))
WINDOW_LIMIT_MS=${CHAOS_WINDOW_LIMIT_MS:-$WINDOW_BOUND_MS}

A_PORT=$REDIS_PORT
"$SERVERS" start "$DIR/b" redis >/dev/null || fail "Redis B did not start"
B_PORT=$(sed -n 's/^export REDIS_PORT=//p' "$DIR/b/env")
declare -A NAME_OF=([$A_PORT]=A [$B_PORT]=B)

on() { # on PORT CMD...: redis-cli on the server at PORT
    local port=$1
    shift
    redis-cli -p "$port" "$@"
}
repl() { on "$1" INFO replication | tr -d '\r' | sed -n "s/^$2://p"; }
link_up() { [[ $(repl "$1" master_link_status) == up ]]; }
sync_full() { on "$1" INFO stats | tr -d '\r' | sed -n 's/^sync_full://p'; }
meta_epoch() { on "$1" HGET "$(meta_key "$2")" epoch; }
validated_on() { on "$1" FCALL_RO idpool_validated 0; }

round_apps_add fb "$SWITCHES"
on "$B_PORT" REPLICAOF 127.0.0.1 "$A_PORT" >/dev/null
wait_until 20 link_up "$B_PORT" || fail "B did not become A's replica"
chaos_daemon a
chaos_daemon b --redis "redis://127.0.0.1:$B_PORT/0"
round_apps_filled fb "$SWITCHES"

# switch_over X Y APP: one switch-over (see above) from primary X to its
# replica Y, while APP's consumers pop from X; REDIS_PORT becomes Y's port
# (the harness' helpers talk to the primary).
switch_over() {
    local x=$1 y=$2 app=$3 g0 g1 full0 epoch_y fx fy
    fx=${NAME_OF[$x]} fy=${NAME_OF[$y]}
    info "switch-over $s: $fx -> $fy on $app"
    REDIS_PORT=$x
    g0=${CONS_GEN[$app]:-0}
    round_begin "$app"
    wait_until 20 link_up "$y" || fail "$fy is not $fx's replica"
    wait_until 10 eval '[[ $(meta_epoch "$y" "$app") == "$(validated_on "$x")" ]]' ||
        fail "$fy does not hold $fx's meta of $app"
    # 1. Y lags behind X.
    on "$y" REPLICAOF 127.0.0.1 "$(free_port)" >/dev/null
    on "$y" LRANGE "$(pool_key "$app")" 0 -1 >"$DIR/probe.pool"
    PROBE_EPOCH=$(meta_epoch "$y" "$app")
    [[ -n $PROBE_EPOCH ]] || fail "$fy's meta of $app has no epoch"
    info "$app: $fy's copy: meta epoch $PROBE_EPOCH, pool of $(grep -c . "$DIR/probe.pool") IDs"
    # 2. X hands out what Y still holds.
    pop_past "$app"
    # 3. The consumers move to Y.
    g1=${CONS_GEN[$app]}
    REDIS_PORT=$y
    consumers_start "$app" 2 --backoff-ms 1:2
    consumers_start "$app" 2 --mode take --backoff-ms 1:2
    for ((g = g0; g < g1; g++)); do touch "${BG_STOP[cons.$app.$g]}"; done # all at once
    for ((g = g0; g < g1; g++)); do
        bg_stop "cons.$app.$g"
        expect "[[ $BG_STATUS == 0 ]]" "consumers $app.$g exited with status $BG_STATUS"
    done
    # 4. Y promoted (the window begins), 5. X demoted with a full resync.
    full0=$(sync_full "$y")
    run_watched "$y" "$app" "$PROBE_EPOCH" "$WINDOW_LIMIT_MS" REPLICAOF NO ONE
    expect "[[ $W_STATE == discarded || $W_STATE == replaced ]]" \
        "$app: $fx's pool on $fy was not discarded within 20 s (watcher: $W_STATE)"
    on "$x" REPLICAOF 127.0.0.1 "$y" >/dev/null
    wait_until 20 link_up "$x" || fail "$fx did not resync from $fy"
    recovered "$app" "$W_ACCEPT"
    epoch_y=$(validated_on "$y")
    round_end "$s" "$app" "$T_FROM" "$W_TO"
    fault_landed "$fx$fy:stale=$STALE,full_syncs=$(($(sync_full "$y") - full0))" \
        "((STALE > 0 && $(sync_full "$y") > full0)) &&
         [[ '$epoch_y' == '$(redis_server_id "$y")':* && '$epoch_y' != '$PROBE_EPOCH' ]]"
}

for ((s = 1; s <= SWITCHES; s++)); do
    if ((s % 2)); then
        switch_over "$A_PORT" "$B_PORT" "fb$s"
    else
        switch_over "$B_PORT" "$A_PORT" "fb$s"
    fi
done
rollback_finish
