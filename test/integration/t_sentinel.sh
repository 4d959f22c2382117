#!/usr/bin/env bash
# idpoold behind Redis Sentinel (redis-sentinel://): the daemon finds the
# primary through the sentinels, follows a failover by itself and never
# writes to, validates or serves from a replica.
#
# (a) Start: the sentinels name the primary; the daemon validates it and
#     fills the pool there; a take is served.
# (b) SENTINEL FAILOVER: the daemon moves to the promoted replica, resets
#     the library there (the reload replicates: a demoted primary forgets
#     the epoch it was validated under, see t_epoch (5)), validates it
#     under that server's own run_id:master_replid, sweeps the pools it
#     inherited and refills them; takes are served there; the old primary,
#     now a replica, refuses writes.
#     An issuer-only daemon (--refill off --api) on the same URL follows:
#     its takes are served before and after the failover.
# (c) Every sentinel stopped: the daemon keeps its connections to the live
#     primary (/healthz 200), says that no sentinel answers, and keeps
#     asking; the sentinels started again, it hears them.
# (d) A wrong master name and no sentinel at all: the daemon says so and
#     keeps asking, never crashes; it reaches the primary once the
#     sentinels answer.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
SERVERS_SENTINEL=1 setup

KEY=sent
add_app $KEY max_pool_size=2000 min_size_percent=50
LOW=$(low_water $KEY)
POOL=$(pool_key $KEY)
META=$(meta_key $KEY)
at() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
take_on() { at "$1" FCALL idpool_take 2 "$POOL" "$META" "$2" 2>&1 | sed '/^$/d'; }
named_primary() { at "$SENTINEL1_PORT" SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" | tail -n 1; }
sentinels_agree_on() {
    local s
    for s in "$SENTINEL1_PORT" "$SENTINEL2_PORT" "$SENTINEL3_PORT"; do
        [[ $(at "$s" SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" | tail -n 1) == "$1" ]] ||
            return 1
    done
}
pool_ge_at() { (($(at "$1" LLEN "$POOL") >= $2)); }

API_PORT=$(free_port)
HTTP_PORT=$(free_port)
TOKEN=$("$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --json tokens add sent \
    --apps "$KEY" | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["token"])') ||
    fail "tokens add"
# api_take: the issuer's answer to a take of 5 (HTTP status, then the body)
api_take() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" -w '\n%{http_code}' \
        "http://127.0.0.1:$API_PORT/v1/ids/$KEY?count=5" 2>&1
}
api_serves() { [[ $(api_take | tail -n 1) == 200 ]]; }
healthz() { curl -sS --max-time 5 -o "$DIR/healthz" -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/healthz"; }

# ======================================================== (a) the start ===
start_daemon a --redis "$IDPOOL_REDIS_SENTINEL_URL" --tick-ms 100 --lock-ttl-ms 500 \
    --redis-timeout-ms 500 --instance sent-a --http "127.0.0.1:$HTTP_PORT"
start_daemon i --redis "$IDPOOL_REDIS_SENTINEL_URL" --refill off --api "127.0.0.1:$API_PORT" \
    --redis-timeout-ms 500 --reload-ms 300 --instance sent-i
wait_until 10 log_has a "the sentinels name 127\.0\.0\.1:$REDIS_PORT as the primary of '$SENTINEL_MASTER'" ||
    fail "(a) the daemon did not learn the primary from the sentinels"
log_has a "starting: redis master '$SENTINEL_MASTER' via sentinels 127\.0\.0\.1:$SENTINEL1_PORT," ||
    fail "(a) the start line does not name the master and the sentinels"
wait_until 10 pool_ge_at "$REDIS_PORT" "$LOW" || fail "(a) the pool on the primary never filled"
epoch_a=$(at "$REDIS_PORT" FCALL_RO idpool_validated 0)
[[ $epoch_a == "$(redis_server_id "$REDIS_PORT"):"* ]] ||
    fail "(a) the primary's epoch '$epoch_a' is not its own server id $(redis_server_id "$REDIS_PORT")"
# a replica has the library (FUNCTION LOAD replicates) but never an epoch
for r in "$REPLICA1_PORT" "$REPLICA2_PORT"; do
    wait_until 5 eval "at $r FCALL_RO idpool_version 0 | grep -qE '^[0-9]+\$'" ||
        fail "(a) replica $r did not get the library: $(at "$r" FCALL_RO idpool_version 0)"
    v=$(at "$r" FCALL_RO idpool_validated 0)
    [[ -z $v ]] || fail "(a) replica $r holds a validated epoch: $v"
done
take_on "$REDIS_PORT" 10 >"$DIR/a.txt"
assert_eq 10 "$(grep -cE '^[0-9]+$' "$DIR/a.txt")" "(a) IDs of a take on the primary"
wait_until 10 api_serves || fail "(a) the issuer does not serve: $(api_take)"
log_has i "redis-api: connected to 127\.0\.0\.1:$REDIS_PORT " || fail "(a) the issuer is not on the primary"
pass "(a) the daemon found the primary through the sentinels, validated it and filled it; the issuer serves"
# idpoolctl verify reads the pool on the primary the sentinels name (issue 24).
ctl_expect 0 verify --env "$IDPOOL_MYSQL_URL,$IDPOOL_REDIS_SENTINEL_URL"
out_has '^verify: ok: 1 environment, [0-9]+ applications?, [0-9,]+ leases, [1-9][0-9,]* pooled IDs checked; 0 conflicts$'
pass "verify through Sentinel: $(cat "$DIR/out")"

# ===================================================== (b) a failover ===
old=$REDIS_PORT
n_lost=$(log_count a 'redis: connection to .* lost')
t0=$(now_us)
sentinel_failover 15
wait_until 20 eval "new=\$(named_primary); [[ \$new != $old ]] && sentinels_agree_on \$new" ||
    fail "(b) the sentinels did not agree on a new primary"
new=$(named_primary)
info "(b) the sentinels name $new after $((($(now_us) - t0) / 1000)) ms"
wait_until 10 log_has a "redis: connected to 127\.0\.0\.1:$new db 0 \(epoch" ||
    fail "(b) the daemon's main connection did not move to the new primary $new"
wait_until 10 eval "[[ \$(at $new HGET $META epoch) == \$(at $new FCALL_RO idpool_validated 0) ]]" ||
    fail "(b) the pool's meta on $new was not rewritten under its epoch"
epoch_b=$(at "$new" FCALL_RO idpool_validated 0)
[[ $epoch_b == "$(redis_server_id "$new"):"* ]] ||
    fail "(b) the new primary's epoch '$epoch_b' is not its own server id $(redis_server_id "$new")"
assert_ne "$epoch_a" "$epoch_b" "(b) the epoch after the failover"
wait_until 10 log_has a "app=$KEY redis restart or failover detected" ||
    fail "(b) the sweep did not discard the inherited pool"
wait_until 10 pool_ge_at "$new" "$LOW" || fail "(b) the pool on the new primary was not refilled"
info "(b) pool above low water on $new $((($(now_us) - t0) / 1000)) ms after the failover began"
take_on "$new" 10 >"$DIR/b.txt"
assert_eq 10 "$(grep -cE '^[0-9]+$' "$DIR/b.txt")" "(b) IDs of a take on the new primary"
dup=$(sort "$DIR/a.txt" "$DIR/b.txt" | uniq -d | head -n 3)
[[ -z $dup ]] || fail "(b) a take on the new primary served IDs taken before: $dup"
wait_until 20 eval "[[ \$(at $old ROLE | head -n 1) == slave ]]" || fail "(b) the old primary is not a replica"
take_on "$old" 10 | grep -q READONLY || fail "(b) the old primary took a write"
# The old primary holds no epoch: the daemon loaded the library again on the
# promoted server, which replicates (t_epoch (5) shows it through a partial
# resync; here the old primary, written by the sentinels' hellos after the
# promotion, resyncs fully). The old primary had epoch_a (checked above).
wait_until 10 eval "at $old INFO replication | grep -q '^master_link_status:up'" ||
    fail "(b) the old primary's link to $new is not up"
info "(b) on $new: $(at "$new" INFO stats | tr -d '\r' | grep -E '^sync_(full|partial)' | tr '\n' ' ')"
log_has a "redis: 127\.0\.0\.1:$new was promoted: loaded the idpool library again" ||
    fail "(b) the daemon did not reset the library on the promoted server"
wait_until 5 eval "[[ -z \$(at $old FCALL_RO idpool_validated 0) ]]" ||
    fail "(b) the old primary still holds epoch $(at "$old" FCALL_RO idpool_validated 0)"
assert_gt "$(log_count a 'redis: connection to .* lost')" "$n_lost" "(b) connections lost at the switch"
wait_until 10 log_has i "redis-api: connected to 127\.0\.0\.1:$new " || fail "(b) the issuer did not move to $new"
wait_until 10 api_serves || fail "(b) the issuer does not serve after the failover: $(api_take)"
# /healthz and /metrics say where the primary is and that one failover was followed
assert_eq 200 "$(healthz)" "(b) /healthz"
grep -q "\"primary\":\"127\.0\.0\.1:$new\"" "$DIR/healthz" || fail "(b) /healthz: $(cat "$DIR/healthz")"
metrics=$(curl -sS --max-time 5 "http://127.0.0.1:$HTTP_PORT/metrics")
grep -qx 'idpool_redis_failovers_total 1' <<<"$metrics" ||
    fail "(b) /metrics: $(grep -E 'failovers|sentinel' <<<"$metrics")"
grep -qx 'idpool_sentinel_up 1' <<<"$metrics" || fail "(b) idpool_sentinel_up is not 1"
assert_alive a
assert_alive i
pass "(b) SENTINEL FAILOVER: the daemon moved to $new, validated it, swept and refilled it; the issuer followed"

# ============================================= (c) no sentinel answers ===
for m in sentinel1 sentinel2 sentinel3; do "$SERVERS" stop "$DIR" "$m" >/dev/null; done
! at "$SENTINEL1_PORT" PING >/dev/null 2>&1 || fail "(c) sentinel 1 still answers"
wait_until 10 log_has a "no sentinel answered where the primary of '$SENTINEL_MASTER' is \(3 asked" ||
    fail "(c) the daemon did not say that no sentinel answers"
assert_eq 200 "$(healthz)" "(c) /healthz with every sentinel down: $(cat "$DIR/healthz")"
grep -q '"up":false' "$DIR/healthz" || fail "(c) /healthz does not say that no sentinel answers: $(cat "$DIR/healthz")"
api_serves || fail "(c) the issuer stopped serving with the sentinels down: $(api_take)"
n_named=$(log_count a "the sentinels name 127\.0\.0\.1:$new as the primary")
for m in sentinel1 sentinel2 sentinel3; do "$SERVERS" start "$DIR" "$m" >/dev/null; done
heard_again() { (($(log_count a "the sentinels name 127\.0\.0\.1:$new as the primary") > n_named)); }
wait_until 15 heard_again ||
    fail "(c) the daemon did not hear the sentinels again"
pass "(c) every sentinel down: the daemon stays on the live primary, says so, and hears them again"
stop_daemon i

# ============================= (d) wrong master name, no sentinel at all ===
stop_daemon a
conns() { at "$SENTINEL1_PORT" INFO stats | tr -d '\r' | sed -n 's/^total_connections_received://p'; }
c0=$(conns)
bad="redis-sentinel://127.0.0.1:$SENTINEL1_PORT,127.0.0.1:$SENTINEL2_PORT/0#nosuchmaster"
start_daemon c --redis "$bad" --redis-timeout-ms 300 --instance sent-c
wait_until 10 log_has c "no sentinel answered where the primary of 'nosuchmaster' is \(2 asked; last: sentinel 127\.0\.0\.1:[0-9]+: does not know the master name 'nosuchmaster'\)" ||
    fail "(d) no clear log line for a master name the sentinels do not know"
nobody=$(free_port)
start_daemon d --redis "redis-sentinel://127.0.0.1:$nobody/0#$SENTINEL_MASTER" --redis-timeout-ms 300 \
    --instance sent-d
wait_until 10 log_has d "no sentinel answered where the primary of '$SENTINEL_MASTER' is \(1 asked; last: sentinel 127\.0\.0\.1:$nobody: .*refused" ||
    fail "(d) no clear log line when no sentinel runs"
# the positive control: c asked sentinel 1 again and again meanwhile
wait_until 10 eval "(( \$(conns) >= c0 + 4 ))" || fail "(d) daemon c stopped asking ($(conns) vs $c0)"
assert_alive c
assert_alive d
(($(log_count d 'no sentinel answered') <= 3)) || fail "(d) the log floods: $(log_count d 'no sentinel answered') lines"
pass "(d) a wrong master name or no sentinel: said once, asked again with backoff"
pass "sentinel"
