#!/usr/bin/env bash
# The Python client on a redis-sentinel:// environment (issue 20, C5): a
# Sentinel set (a primary, two replicas, three sentinels), the application
# "s1" filled by an idpoold on the sentinels' URL. One client takes through
# that URL while SENTINEL FAILOVER promotes a replica; the daemon follows
# and fills the new primary. Asserted: the client
# leaves the demoted primary (READONLY there, or its ROLE), finds the new
# one through the sentinels, and takes keep being served from it; no ID
# twice, no call timed out.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
SERVERS_SENTINEL=1 setup
export PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python:$PYTHONPATH
"$PYTHON" -c 'import redis.sentinel, idpool_client' 2>/dev/null ||
    skip "$PYTHON cannot import redis (python3-redis) and idpool_client"

scli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

add_app s1 step=20000 max_pool_size=100000 max_size_per_times=1000 max_size_per_second=50000000
start_daemon a --instance a --tick-ms 10 --redis "$IDPOOL_REDIS_SENTINEL_URL"
wait_until 15 pool_ge s1 20000 || fail "the primary's pool did not fill"

# The client: takes (paced) until $DIR/done names the new primary's port,
# then until its connection is to that one (the old primary serves until
# the sentinels demote it), then 2,000 more IDs; prints its tally as JSON.
"$PYTHON" - "$IDPOOL_REDIS_SENTINEL_URL" "$DIR" <<'PY' >"$DIR/client.out" 2>&1 &
import json, os, sys, time
import idpool_client as m

url, d = sys.argv[1:]
ids, errors = [], []
with m.Client([url], timeout=20.0) as c:
    a = c.app("s1")

    def take(n):
        try:
            ids.extend(a.next_n(n))
        except m.IdpoolError as e:
            errors.append(f"{type(e).__name__}: {e}")

    while len(ids) < 1000 and not errors:
        take(50)
    open(f"{d}/started", "w").close()
    while not os.path.exists(f"{d}/done") and not errors:
        take(50)
        time.sleep(0.01)
    new = int(open(f"{d}/done").read())

    def primary():  # the port of the server the client's connection is to
        addr = c._envs[0].conn.connection_pool.master_address
        return addr[1] if addr else None

    t0 = time.monotonic()
    while primary() != new and not errors:
        if time.monotonic() - t0 > 20:
            errors.append(f"still on {primary()} 20 s after the failover")
        take(50)
        time.sleep(0.01)
    info = f"on the new primary {time.monotonic() - t0:.2f} s after the promotion"
    before = len(ids)
    while len(ids) < before + 2000 and not errors:
        take(50)
    print(json.dumps({"ids": len(ids), "unique": len(set(ids)), "after": len(ids) - before,
                      "primary": primary(), "errors": errors[:3], "info": info}))
PY
client=$!
wait_until 15 test -e "$DIR/started" || fail "the client took nothing: $(cat "$DIR/client.out")"
pass "IDs through the sentinels' URL from the primary"

# The failover.
old=$REDIS_PORT
t0=$(date +%s%N)
sentinel_failover 15
wait_until 20 sentinel_promoted || fail "the sentinels did not agree on a new primary within 20 s"
new=$(sentinel_named "$SENTINEL1_PORT")
info "replica $new promoted $((($(date +%s%N) - t0) / 1000000)) ms after SENTINEL FAILOVER"

# The sentinels demote the old primary when they next read its INFO (up to
# 10 s later); until then it is still a primary and serves the client, as it
# may. Its demotion is done here at once, as they will do it (REPLICAOF the
# new one), so that the client meets READONLY there within the test's time.
scli "$old" REPLICAOF 127.0.0.1 "$new" >/dev/null || fail "could not demote the old primary"

# The daemon follows: it validates the new primary and fills its pool.
wait_until 15 log_has a "redis: connected to 127\.0\.0\.1:$new " ||
    fail "the daemon did not move to the new primary $new"
echo "$new" >"$DIR/done"
wait_until 25 eval "! proc_alive $client" || fail "the client did not finish: $(cat "$DIR/client.out")"
wait "$client" || fail "the client failed: $(cat "$DIR/client.out")"
res=$(tail -n 1 "$DIR/client.out")
info "client: $res"
"$PYTHON" - "$res" "$new" <<'PY' || fail "after the failover: $res"
import json, sys
r, new = json.loads(sys.argv[1]), int(sys.argv[2])
for bad, why in ((r["errors"], f"errors: {r['errors']}"),
                 (r["ids"] != r["unique"], "an ID twice"),
                 (r["after"] < 2000, "too few IDs after the failover"),
                 (r["primary"] != new, f"the client is on {r['primary']}, not the new primary {new}")):
    if bad:
        sys.exit(why)
PY
pass "SENTINEL FAILOVER: the Python client follows the sentinels to the new primary $new; no ID twice, no timeout"
pass "pyclient_sentinel"
