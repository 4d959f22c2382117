#!/usr/bin/env bash
# The Sentinel set of scripts/servers.sh, which the Sentinel tests and chaos
# scenarios stand on: a primary, two replicas and three sentinels on
# loopback; every sentinel names the primary; a write reaches both
# replicas; and the fault the Sentinel scenarios inflict works here: the
# primary killed (-9), the sentinels promote a replica that holds the
# write, and the old primary, started again, comes back as a replica.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"

SERVERS_SENTINEL=1 setup redis
want="redis-sentinel://127.0.0.1:$SENTINEL1_PORT,127.0.0.1:$SENTINEL2_PORT,127.0.0.1:$SENTINEL3_PORT/0#$SENTINEL_MASTER"
assert_eq "$want" "$IDPOOL_REDIS_SENTINEL_URL" "IDPOOL_REDIS_SENTINEL_URL"

scli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
sentinels() { echo "$SENTINEL1_PORT $SENTINEL2_PORT $SENTINEL3_PORT"; }

for s in $(sentinels); do
    assert_eq "$REDIS_PORT" "$(sentinel_named "$s")" "the primary as sentinel $s names it"
done
assert_eq master "$(rcli ROLE | head -n 1)" "the primary's role"
rcli SET sentinel-set-probe 1 >/dev/null
for r in "$REPLICA1_PORT" "$REPLICA2_PORT"; do
    wait_until 10 eval "[[ \$(scli $r GET sentinel-set-probe) == 1 ]]" ||
        fail "replica $r did not get the write: $(scli "$r" INFO replication | tr -d '\r' | grep -E 'role|master_link')"
done
pass "a primary, two replicas and three sentinels that all name it"

# The fault: the primary killed. The positive control is that it is gone
# (no answer on its port) before the sentinels are asked.
old=$REDIS_PORT
"$SERVERS" kill "$DIR" redis >/dev/null || fail "could not kill the primary"
rcli PING >/dev/null 2>&1 && fail "the primary still answers after kill -9"
t0=$(date +%s%N)
wait_until 20 sentinel_promoted || fail "no replica promoted within 20 s of the primary's kill -9"
new=$(sentinel_named "$SENTINEL1_PORT")
info "replica $new promoted $((($(date +%s%N) - t0) / 1000000)) ms after the kill"
assert_eq 1 "$(scli "$new" GET sentinel-set-probe)" "the write on the promoted replica"
pass "the primary killed: the sentinels agree on a promoted replica that holds the write"

"$SERVERS" start "$DIR" redis >/dev/null || fail "could not start the old primary again"
assert_eq "$old" "$REDIS_PORT" "the old primary's port"
wait_until 20 eval "[[ \$(rcli ROLE | head -n 1) == slave ]]" ||
    fail "the old primary did not become a replica: $(rcli ROLE | head -n 1)"
pass "the old primary, started again, is turned into a replica"
pass "sentinel_set"
