#!/usr/bin/env bash
# The Grafana dashboard (deploy/grafana/idpool.json) and the alert rules
# (deploy/prometheus/*.yml) ask only for what idpoold exports (issue 23):
# metric_refs.py reads every PromQL query of the dashboard (targets,
# variables) and of the rules (expr, the queries of their annotations, the
# rule tests' series and expressions) and fails naming each metric, label,
# label value and legend label that a live /metrics lacks (see its
# docstring), and on a dashboard whose panels overlap or leave the grid or
# whose queries use another data source than its variable. The live
# /metrics: a refilling daemon with the ID API on, after requests of several
# answers and a refused take, and daemons on a Sentinel set and on a Cluster
# for their nodes' metrics; each must pass `promtool check metrics` (skipped
# only when promtool is missing: skip_part, a failure in CI).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

HTTP_PORT=$(free_port)
API_PORT=$(free_port)
add_app g1 step=100 max_pool_size=1000
add_app g2 increasing_type=2 step=100 max_pool_size=1000
start_daemon a --tick-ms 50 --reload-ms 300 --http "127.0.0.1:$HTTP_PORT" --api "127.0.0.1:$API_PORT"
wait_until 10 pool_ge g1 1000 || fail "g1 never filled"
T=$(new_token graf '*') || fail "tokens add graf"
BASE=http://127.0.0.1:$API_PORT
api_take() {
    as "$T" /v1/ids/g1?count=5
    [[ $CODE == 200 ]]
}
# the daemon reads new tokens at its next reload
wait_until 10 api_take || fail "a take through the API: $CODE $(cat "$DIR/body")"
req /v1/ids/g1 # no token: 401
rcli FCALL idpool_take 1 "$(meta_key g2)" 100000 >/dev/null 2>&1 || true # IDPOOL_LIMIT: a refused take
rcli FCALL idpool_take 1 "$(meta_key g2)" 1 >/dev/null

BASE=http://127.0.0.1:$HTTP_PORT
# the refused take and the pool's counters show at the next check
metrics_have() {
    req /metrics
    cp "$DIR/body" "$DIR/metrics.txt"
    grep -q "^idpool_takes_refused_total{.*app=\"g2\"" "$DIR/metrics.txt"
}
wait_until 10 metrics_have || fail "/metrics never showed g2's refused take"

# The metrics of a Sentinel set and of a Cluster (the sentinels' and the
# nodes' health): a daemon on each, servers of their own beside the test's
# MySQL (cleanup stops them).
SERVERS_SENTINEL=1 "$SERVERS" start "$DIR/se" redis >/dev/null || fail "servers.sh: the Sentinel set"
SERVERS_CLUSTER=1 "$SERVERS" start "$DIR/cl" redis >/dev/null || fail "servers.sh: the Cluster"
# shellcheck disable=SC1091 # written by servers.sh
SE_URL=$(source "$DIR/se/env" && echo "$IDPOOL_REDIS_SENTINEL_URL")
# shellcheck disable=SC1091
CL_URL=$(source "$DIR/cl/env" && echo "$IDPOOL_REDIS_CLUSTER_URL")
n=0
for url in "$SE_URL" "$CL_URL"; do
    n=$((n + 1))
    port=$(free_port)
    start_daemon "m$n" --tick-ms 50 --redis "$url" --http "127.0.0.1:$port"
    BASE=http://127.0.0.1:$port
    # (curl, not req: the daemon may not listen yet)
    wait_until 15 eval "curl -sf -o '$DIR/metrics.$n.txt' '$BASE/metrics' &&
        grep -Eq '^idpool_(sentinel_up|redis_node_up)' '$DIR/metrics.$n.txt'" ||
        fail "m$n ($url): no Sentinel or Cluster metrics in /metrics"
done

WHY="the dashboard or the rules ask /metrics for what it lacks (above)"
python3 "$(dirname "$0")/metric_refs.py" "$IDPOOL_SOURCE_ROOT" "$DIR"/metrics*.txt || fail "$WHY"
if command -v promtool >/dev/null; then
    for f in "$DIR"/metrics*.txt; do
        promtool check metrics <"$f" >"$DIR/promtool.out" 2>&1 ||
            fail "promtool check metrics ($(basename "$f")): $(cat "$DIR/promtool.out")"
    done
else
    skip_part "promtool is missing (package prometheus): /metrics not linted"
fi
pass "deploy/grafana/idpool.json and deploy/prometheus ask only for series and labels of a live /metrics; the dashboard's grid holds"
