#!/usr/bin/env bash
# One deadline per call (issue 18, item 7): a take that cannot be filled
# returns the timeout error within timeout_ms (plus 300 ms of slack), however
# many times it waited for the background thread. The application "slow"
# grants at most 20 IDs a second (max_size_per_second), so a take of 100
# with a 1.5 s timeout gets a few IDs every second, each wait shorter than
# the timeout, and must give up at 1.5 s: libidpool's idpool_next_n
# (IDPOOL_ETIMEDOUT) and the Python client's App.take (IdpoolTimeout).
# Before the fix each wait restarted the deadline: the take waited for all
# 100 IDs, about 8 s (with a 1 s timeout the last wait may lose the race
# with the next second's budget: 1.2 to 3 s).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
[[ -x ${IDPOOL_CLIENTEDGE:-} ]] || fail "idpool-clientedge not built: ${IDPOOL_CLIENTEDGE:-}"

TIMEOUT_MS=1500
SLACK_MS=300
add_app slow step=100 max_pool_size=1200 max_size_per_times=20 max_size_per_second=20
start_daemon a --tick-ms 50
wait_until 15 pool_ge slow 1000 || fail "slow's pool did not fill"

# --- libidpool ---------------------------------------------------------------
"$IDPOOL_CLIENTEDGE" deadline --timeout-ms "$TIMEOUT_MS" --count 100 slow "$IDPOOL_REDIS_URL" \
    >"$DIR/c.out" 2>&1 || fail "idpool-clientedge deadline: $(cat "$DIR/c.out")"
res=$(grep '^clientedge: rc=' "$DIR/c.out") || fail "no result: $(cat "$DIR/c.out")"
info "$res"
[[ $res == "clientedge: rc=timed out:"* ]] || fail "idpool_next_n of 100 at 20 IDs/s did not time out: $res"
got=$(sed -n 's/.* got=\([0-9]*\).*/\1/p' <<<"$res")
ms=$(sed -n 's/.* ms=\([0-9]*\).*/\1/p' <<<"$res")
assert_gt "$got" 0 "IDs the take got before it gave up (it waited more than once)"
assert_le "$ms" $((TIMEOUT_MS + SLACK_MS)) "idpool_next_n's duration, ms (timeout_ms $TIMEOUT_MS)"
pass "idpool_next_n: IDPOOL_ETIMEDOUT after $ms ms (timeout_ms $TIMEOUT_MS), $got IDs taken before"

# --- the Python client -------------------------------------------------------
export PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python
"$PYTHON" -c 'import redis, idpool_client' 2>/dev/null ||
    skip "$PYTHON cannot import redis (python3-redis) and idpool_client"
"$PYTHON" - "$IDPOOL_REDIS_URL" "$TIMEOUT_MS" <<'PY' >"$DIR/py.out" 2>&1 || fail "App.take: $(cat "$DIR/py.out")"
import sys, time
import idpool_client as m

url, timeout_ms = sys.argv[1], int(sys.argv[2])
with m.Client([url], timeout=timeout_ms / 1000) as c:
    t0 = time.monotonic()
    try:
        ids = c.app("slow").next_n(100)
        sys.exit(f"take of 100 at 20 IDs/s returned {len(ids)} IDs")
    except m.IdpoolTimeout as e:
        print(f"IdpoolTimeout got={len(e.ids)} ms={(time.monotonic() - t0) * 1000:.0f}")
PY
res=$(cat "$DIR/py.out")
info "$res"
[[ $res =~ ^IdpoolTimeout\ got=([0-9]+)\ ms=([0-9]+)$ ]] || fail "App.take: $res"
assert_gt "${BASH_REMATCH[1]}" 0 "IDs App.take got before it gave up (it waited more than once)"
assert_le "${BASH_REMATCH[2]}" $((TIMEOUT_MS + SLACK_MS)) "App.take's duration, ms (timeout $TIMEOUT_MS ms)"
pass "App.take: IdpoolTimeout after ${BASH_REMATCH[2]} ms (timeout $TIMEOUT_MS ms), ${BASH_REMATCH[1]} IDs taken before"
