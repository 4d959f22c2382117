#!/usr/bin/env bash
# Chaos 19 sentinel_kill9: the Redis primary of a Sentinel set is killed
# (kill -9) under load, and the sentinels promote a replica (issue 20).
#
# A Sentinel set (servers.sh: the primary, two replicas, three sentinels,
# down-after-milliseconds 1000) and one MariaDB; two refilling daemons on
# the Sentinel URL and an issuer-only one (--api). One monotonic
# application per round (sk1, sk2, ...), popped by two LPOP and two
# idpool_take consumers that follow the sentinels themselves (idpool-load
# --sentinel: asked at every reconnect, ROLE checked) and retry every
# millisecond, and by one take client of every other kind: libidpool and
# the Python client on the Sentinel URL, and the issuer (libidpool's HTTP
# transport). Each round, while they pop:
#   1. the primary is killed (-9): T_FROM; a watcher polls the sentinels
#      until a majority names another primary (detect_ms), then the new
#      primary's meta of the application until the daemons' sweep replaced
#      the epoch written on the old one (the window's end);
#   2. the old primary is started again from its AOF: it comes back a
#      master with its old data, and the sentinels turn it into a replica
#      (nothing that follows the sentinels uses it meanwhile);
#   3. the consumers pop on and stop.
# Checked:
#   * U A L over everything, M outside [T_FROM, window end]; exposed_take
#     must be 0, exposed_lpop is measured;
#   * the take consumers sent requests inside the window (positive
#     control; IDPOOL_EPOCH refusals counted, not required: with replicas in
#     sync the promoted one may hold nothing stale);
#   * the failover time as clients feel it: first_take_ms (the kill to the
#     first take answered with IDs, sent after the kill) and low_water_ms
#     (to the pool above low water on the new primary), beside detect_ms;
#     budget_ms = first_take_ms - detect_ms must stay within 1000 ms plus
#     CHAOS_FAILOVER_SLACK_MS (default 0 in the long profile, 1500 in the
#     quick one, which CI runs on a loaded machine);
#   * R: the pool is back above low water on the new primary.
# Evidence that each kill landed: the killed process is gone, a majority
# of sentinels named another primary, the daemons validated it under its
# own server id (run_id:master_replid) and discarded the pool it inherited.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
sentinel_setup

ROUNDS=$CHAOS_ROUNDS
PER_ROUND=$((CHAOS_IDS / ROUNDS))
WINDOW_LIMIT_MS=- # the window includes Sentinel's detection: budget_ms is what is bounded
if [[ $PROFILE == quick ]]; then SLACK_MS=${CHAOS_FAILOVER_SLACK_MS:-1500}; else SLACK_MS=${CHAOS_FAILOVER_SLACK_MS:-0}; fi

on() { redis-cli -p "$1" "${@:2}"; }
server_id_of() {
    on "$1" INFO server replication | tr -d '\r' |
        awk -F: '$1 == "run_id" { r = $2 } $1 == "master_replid" { m = $2 } END { print r ":" m }'
}
redis_pid_of() { on "$1" INFO server | tr -d '\r' | sed -n 's/^process_id://p'; }

for ((r = 1; r <= ROUNDS; r++)); do
    add_app "sk$r" step=1000 max_pool_size=30000 min_size_percent=50 increment_max=3 \
        max_size_per_second=1000000
done
sentinel_daemon a
sentinel_daemon b
API_PORT=$(free_port)
sentinel_daemon i --refill off --api "127.0.0.1:$API_PORT"
TOKEN=$("$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --json tokens add chaos19 \
    --apps '*' | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["token"])') ||
    fail "tokens add"
for ((r = 1; r <= ROUNDS; r++)); do
    app_params "sk$r"
    wait_until 20 pool_ge "sk$r" "$P_LOW" || fail "sk$r never filled"
done

DETECT=() FIRST=() LOW=() BUDGET=()
for ((r = 1; r <= ROUNDS; r++)); do
    app=sk$r
    old=$(sentinel_primary)
    [[ $old == "$REDIS_PORT" ]] || fail "the sentinels name $old, the harness $REDIS_PORT"
    member=${MEMBER_OF[$old]}
    round_begin "$app"
    # every other kind of take client: libidpool, the issuer (through
    # libidpool's HTTP transport) and the Python client, on the Sentinel URL
    client_consumers_start "$app" "$IDPOOL_REDIS_SENTINEL_URL"
    client_consumers_start "$app" "http://$TOKEN@127.0.0.1:$API_PORT"
    py_consumers_start "$app" "$IDPOOL_REDIS_SENTINEL_URL"
    PROBE_EPOCH=$(on "$old" HGET "$(meta_key "$app")" epoch)
    on "$old" LRANGE "$(pool_key "$app")" 0 -1 >"$DIR/probe.pool"
    pid=$(redis_pid_of "$old")
    # 1. The kill.
    sentinel_watch "$old" "$app" "$PROBE_EPOCH"
    T_FROM=$(now_ns)
    "$SERVERS" kill "$DIR" "$member" >/dev/null || fail "could not kill $member"
    proc_gone "$pid" || fail "$member (pid $pid) survived kill -9"
    sentinel_watch_read "$app"
    expect "[[ $W_STATE == discarded || $W_STATE == replaced ]]" \
        "$app: the old pool on the new primary was not discarded (watcher: $W_STATE)"
    [[ -n $W_NEW ]] || fail "$app: no new primary"
    REDIS_PORT=$W_NEW
    LAST_RECOVERY_MS=timeout
    recovered "$app" "$T_FROM" 30
    LOW+=("$LAST_RECOVERY_MS")
    # 2. The old primary comes back; the sentinels demote it.
    "$SERVERS" start "$DIR" "$member" >/dev/null || fail "could not start $member again"
    wait_until 30 eval "[[ \$(on $old ROLE | head -n 1) == slave ]]" ||
        failure "$member ($old) was not turned into a replica"
    # 3. The consumers pop on; the round's numbers.
    WINDOW=$(((W_TO - T_FROM) / 1000000)) # the kill to the sweep (LPOP exposure)
    round_end "$r" "$app" "$T_FROM" "$W_TO" optional
    detect=$(((T_DETECT - T_FROM) / 1000000))
    first=$(first_take_ms "$app" "$T_FROM")
    DETECT+=("$detect") FIRST+=("$first")
    if [[ $first == none ]]; then
        failure "$app: no take was served after the kill"
    else
        BUDGET+=($((first - detect)))
        expect "((first - detect <= 1000 + SLACK_MS))" \
            "$app: the first take came $((first - detect)) ms after the sentinels named the new primary (budget 1000 + $SLACK_MS ms)"
    fi
    epoch=$(on "$W_NEW" FCALL_RO idpool_validated 0)
    fault_landed "kill9:$member,new=${MEMBER_OF[$W_NEW]},detect_ms=$detect" \
        "[[ '$epoch' == '$(server_id_of "$W_NEW")':* && '$epoch' != '$PROBE_EPOCH' ]] &&
         (($(logs_count "app=$app redis restart or failover detected") > 0))"
done
rollback_finish sk "$ROUNDS" detect_ms="$(median "${DETECT[@]}")" \
    first_take_ms="$(median "${FIRST[@]}")" low_water_ms="$(median "${LOW[@]}")" \
    budget_ms="$(median "${BUDGET[@]:-0}")" budget_limit_ms=$((1000 + SLACK_MS))
