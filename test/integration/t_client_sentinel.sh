#!/usr/bin/env bash
# libidpool and idpoolctl through a Sentinel set (issue 20, C2 C3): the
# environment redis-sentinel://s1,s2,s3/0#idpool, no daemon (t_sentinel
# runs one): the test validates a primary and fills the
# pool of application "sc" itself, even IDs on the first primary, odd IDs
# on the one promoted after a manual SENTINEL FAILOVER.
#
# (1) Two threads of one client want 32,000 IDs while the first primary
# holds 20,000: they drain it, the sentinels move the primary, the test
# fills the new one, the threads finish there. Asserted: all IDs, none
# twice, at least 12,000 odd ones (served by the new primary; a thread may
# finish with even IDs of its last block unused).
# (2) idpoolctl status and take on the Sentinel URL: status names the
# primary it read ("Redis idpool via Sentinel (primary H:P)"), take's IDs
# come from the new primary; apps grant's example names it (not a
# sentinel); idpool-load --sentinel takes there too.
# (3) A sentinel that names a replica (a "master" monitored at the
# address of the replica that was not promoted): ROLE refuses it, in libidpool, idpoolctl and
# idpool-load; no sentinel answering: the error names the sentinels tried,
# not a password; idpool-load counts a replica's READONLY replies. The
# primary refusing writes (min-replicas-to-write 3: NOREPLICAS): libidpool
# and idpoolctl get no ID, idpool-load counts the class and asks the
# sentinels again, the pool is untouched.
# (4) Forked children take through the inherited Sentinel environment:
# no ID in two processes.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
SERVERS_SENTINEL=1 setup
require_built idpool-clientload "$IDPOOL_CLIENTLOAD"
require_built idpool-clientedge "$IDPOOL_CLIENTEDGE"
require_built idpoolctl "$IDPOOLCTL"

SURL=$IDPOOL_REDIS_SENTINEL_URL
HTTP_PORT=$(free_port)
export IDPOOL_HTTP_ADDR=127.0.0.1:$HTTP_PORT # no daemon: status reads Redis and MySQL
pcli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

# top_up PORT FIRST N: appends FIRST, FIRST+2, ... (N IDs) to sc's pool at PORT.
top_up() {
    seq "$2" 2 $(($2 + 2 * ($3 - 1))) | xargs -n 10000 redis-cli -h 127.0.0.1 -p "$1" RPUSH "$(pool_key sc)" >/dev/null
}

# serve PORT FIRST N: validates the Redis at PORT (a primary) and makes
# sc's pool N IDs FIRST, FIRST+2, ... under its epoch.
serve() {
    local port=$1 first=$2 n=$3 base epoch
    base=$(pcli "$port" INFO server replication | tr -d '\r' |
        awk -F: '$1 == "run_id" { r = $2 } $1 == "master_replid" { m = $2 } END { print r ":" m }')
    epoch=$(pcli "$port" FCALL idpool_validate 0 "$base" "$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')")
    [[ $epoch == "$base":* ]] || fail "idpool_validate on $port: $epoch"
    pcli "$port" DEL "$(pool_key sc)" >/dev/null
    top_up "$port" "$first" "$n"
    assert_eq "$n" "$(pcli "$port" LLEN "$(pool_key sc)")" "sc's pool on $port"
    pcli "$port" HSET "$(meta_key sc)" per_take 1000 per_second 100000000 epoch "$epoch" >/dev/null
}

add_app sc step=20000 max_pool_size=400000 max_size_per_times=1000 max_size_per_second=50000000
pcli "$REDIS_PORT" -x FUNCTION LOAD REPLACE <"$IDPOOL_SOURCE_ROOT/src/idpool.lua" >/dev/null ||
    fail "FUNCTION LOAD on the primary"
serve "$REDIS_PORT" 2 20000
# The replicas hold the library (a promoted one must serve): both acknowledged.
assert_eq 2 "$(pcli "$REDIS_PORT" WAIT 2 15000)" "replicas in sync with the first primary"

# --- (1) takes across a SENTINEL FAILOVER -------------------------------------
"$IDPOOL_CLIENTLOAD" --threads 2 --ids 16000 --mod 2 --timeout-ms 20000 \
    --record "$DIR/pops" sc "$SURL" >"$DIR/client.out" 2>&1 &
client=$!
info "the client runs"
wait_until 20 eval "[[ \$(pcli $REDIS_PORT LLEN $(pool_key sc)) == 0 ]]" ||
    fail "the client did not drain the first primary: $(cat "$DIR/client.out")"
info "the first primary ($REDIS_PORT) is drained; SENTINEL FAILOVER"
sentinel_failover 20
wait_until 20 sentinel_promoted || fail "the sentinels did not agree on a promoted replica within 20 s"
NEW=$(sentinel_named "$SENTINEL1_PORT")
info "the sentinels name $NEW"
serve "$NEW" 1000000001 100000
info "the new primary serves"
wait "$client" || fail "the client did not get all its IDs: $(cat "$DIR/client.out")"
cat "$DIR/client.out"
check_pops "$DIR/check.out" "$DIR"/pops.*.bin || fail "idpool-check: an ID twice (or another violation)"
tail -n 1 "$DIR/check.out"
grep -q '^check: ids=32000 ' "$DIR/check.out" || fail "not 32000 IDs: $(tail -n 1 "$DIR/check.out")"
read -r r0 r1 < <(sed -n 's/.* r0=\([0-9]*\) r1=\([0-9]*\).*/\1 \2/p' "$DIR/client.out")
((${r0:-0} <= 20000 && ${r1:-0} >= 12000)) ||
    fail "not at most 20000 IDs of the first primary and at least 12000 of the new one: $(grep remainder "$DIR/client.out")"
pass "libidpool through Sentinel: $r0 IDs from the first primary, $r1 from the one promoted by SENTINEL FAILOVER, none twice"

# --- (2) idpoolctl on the Sentinel URL ----------------------------------------
ctl_expect 0 --redis "$SURL" status
out_has "Redis idpool via Sentinel \\(primary 127\\.0\\.0\\.1:$NEW\\)"
out_has '^sc '
ctl_expect 0 --redis "$SURL" take sc 3
[[ $(wc -l <"$DIR/out") == 3 ]] || fail "idpoolctl take printed $(cat "$DIR/out")"
while read -r id; do
    ((id >= 1000000001 && id % 2 == 1)) || fail "idpoolctl take: $id is not from the new primary"
done <"$DIR/out"
ctl_expect 0 --redis "$SURL" apps grant sc
out_has "^example:  redis-cli -h 127\\.0\\.0\\.1 -p $NEW "
pass "idpoolctl status names the primary the sentinels chose; take gets its IDs there; grant's example names it"

SENTINELS=127.0.0.1:$SENTINEL1_PORT,127.0.0.1:$SENTINEL2_PORT,127.0.0.1:$SENTINEL3_PORT
"$IDPOOL_LOAD" --sentinel "$SENTINELS" --master "$SENTINEL_MASTER" --mode take --key "$(pool_key sc)" \
    --batch 100 --count 1000 >"$DIR/load.out" 2>&1 || fail "idpool-load --sentinel: $(cat "$DIR/load.out")"
grep -q "conn 0: primary 127\.0\.0\.1:$NEW\$" "$DIR/load.out" || fail "idpool-load did not say its primary: $(cat "$DIR/load.out")"
grep -q ' ids=1000 ' "$DIR/load.out" || fail "idpool-load took not 1000 IDs: $(cat "$DIR/load.out")"
pass "idpool-load --sentinel takes from the primary the sentinels name"

# --- (3) a sentinel that names a replica; no sentinel -------------------------
# The replica that was not promoted (a replica all along).
OLD=$REPLICA1_PORT
[[ $NEW == "$REPLICA1_PORT" ]] && OLD=$REPLICA2_PORT
assert_eq slave "$(pcli "$OLD" ROLE | head -n 1)" "the role of replica $OLD"
pcli "$SENTINEL1_PORT" SENTINEL MONITOR liar 127.0.0.1 "$OLD" 2 >/dev/null || fail "SENTINEL MONITOR liar"
LIAR="redis-sentinel://127.0.0.1:$SENTINEL1_PORT#liar"
ctl_expect 1 --redis "$LIAR" take sc 1 --timeout-ms 1500
err_has "liar@127\\.0\\.0\\.1:$OLD: ROLE says replica, not master"
ctl_expect 1 --redis "$LIAR" status
err_has "Redis liar via Sentinel \\(primary 127\\.0\\.0\\.1:$OLD\\): ROLE says replica, not master"
st=0
"$IDPOOL_LOAD" --sentinel "127.0.0.1:$SENTINEL1_PORT" --master liar --mode take --key "$(pool_key sc)" \
    --count 10 >"$DIR/load.out" 2>&1 || st=$?
assert_eq 1 "$st" "idpool-load's exit status on a replica"
grep -q "127\.0\.0\.1:$OLD: ROLE says replica, not master" "$DIR/load.out" || fail "idpool-load: $(cat "$DIR/load.out")"
pcli "$SENTINEL1_PORT" SENTINEL REMOVE liar >/dev/null
# A replica given directly: its READONLY refusals are counted by class.
"$IDPOOL_LOAD" --port "$OLD" --mode take --key "$(pool_key sc)" --reconnect --backoff-ms 1:10 \
    --duration 0.5 >"$DIR/load.out" 2>&1 || fail "idpool-load on a replica: $(cat "$DIR/load.out")"
grep -qE ' err_reply=[1-9][0-9]* .*reply_readonly=[1-9]' "$DIR/load.out" ||
    fail "idpool-load did not count READONLY: $(cat "$DIR/load.out")"
# The primary refuses writes (NOREPLICAS): a refused take is down, never an ID.
pcli "$NEW" CONFIG SET min-replicas-to-write 3 >/dev/null
len=$(pcli "$NEW" LLEN "$(pool_key sc)")
ctl_expect 1 --redis "$SURL" take sc 1 --timeout-ms 1000
err_has "idpool@127\\.0\\.0\\.1:$NEW: NOREPLICAS"
"$IDPOOL_LOAD" --sentinel "$SENTINELS" --master "$SENTINEL_MASTER" --mode take --key "$(pool_key sc)" \
    --reconnect --backoff-ms 1:10 --duration 0.5 >"$DIR/load.out" 2>&1 || fail "idpool-load: $(cat "$DIR/load.out")"
grep -qE ' reply_noreplicas=[1-9]' "$DIR/load.out" || fail "idpool-load did not count NOREPLICAS: $(cat "$DIR/load.out")"
(($(grep -c "conn 0: primary 127\\.0\\.0\\.1:$NEW\$" "$DIR/load.out") >= 2)) ||
    fail "idpool-load did not ask the sentinels again after NOREPLICAS: $(cat "$DIR/load.out")"
assert_eq "$len" "$(pcli "$NEW" LLEN "$(pool_key sc)")" "sc's pool after refused takes"
pcli "$NEW" CONFIG SET min-replicas-to-write 0 >/dev/null
DEAD=$(free_port)
ctl_expect 1 --redis "redis-sentinel://127.0.0.1:$DEAD?sentinel_password=s3cret#idpool" status
err_has "no sentinel named the master 'idpool' \\(tried 127\\.0\\.0\\.1:$DEAD\\)"
err_lacks s3cret
pass "a replica the sentinels name is refused (ROLE), by libidpool, idpoolctl and idpool-load; no sentinel: named, no password; READONLY and NOREPLICAS counted, NOREPLICAS re-resolved"

# --- (4) fork -------------------------------------------------------------------
# No daemon refills: the parent's second thread takes as fast as it can while
# it forks (63 takes of 1,000 IDs seen on a loaded machine), so the pool gets
# 300,000 more IDs first.
top_up "$NEW" 2000000001 300000
st=0
"$IDPOOL_CLIENTEDGE" fork --children 3 --ids 2000 "$DIR/fork" sc "$SURL" >"$DIR/fork.out" 2>&1 || st=$?
cat "$DIR/fork.out"
((st == 0)) || fail "a forked process did not get its IDs (status $st)"
check_pops "$DIR/fork.check" --allow-empty "$DIR"/fork.*.bin || fail "fork: an ID in two processes"
tail -n 1 "$DIR/fork.check"
pass "forked children take through the inherited Sentinel environment: no ID in two processes"
