#!/usr/bin/env bash
# The Grafana dashboard (deploy/grafana/idpool.json) and the alert rules
# (deploy/prometheus/*.yml) name only metrics idpoold exports (issue 23):
#
#   * the dashboard is valid JSON with unique panel ids and panels that do
#     not overlap on its grid;
#   * every idpool_* name in the dashboard's expressions and variables and
#     in the rules and their promtool tests is a series of a live /metrics
#     (a refilling daemon with the ID API on, after requests of several
#     answers, and daemons on a Sentinel set and on a Cluster for their
#     nodes' metrics), histograms by their family or series names;
#   * that /metrics passes `promtool check metrics` (skipped only when
#     promtool is missing).
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

WHY="the dashboard or the rules name what /metrics lacks (above)"
python3 - "$IDPOOL_SOURCE_ROOT" "$DIR"/metrics*.txt <<'EOF' || fail "$WHY"
import glob, json, re, sys
root, live = sys.argv[1], ''.join(open(p).read() for p in sys.argv[2:])
series = set(re.findall(r'^(idpool_[a-z0-9_]+)', live, re.M))
bad = []
with open(root + '/deploy/grafana/idpool.json') as f:
    dash = json.load(f)
ids, cells = set(), {}
for p in dash['panels']:
    if p['id'] in ids:
        bad.append('dashboard: panel id %d twice' % p['id'])
    ids.add(p['id'])
    g = p['gridPos']
    if g['x'] < 0 or g['x'] + g['w'] > 24:
        bad.append('dashboard: panel %r is off the 24-column grid' % p['title'])
    for y in range(g['y'], g['y'] + g['h']):
        for x in range(g['x'], g['x'] + g['w']):
            if (x, y) in cells:
                bad.append('dashboard: panels %r and %r overlap' % (cells[(x, y)], p['title']))
                break
            cells[(x, y)] = p['title']


def queries(o):
    """The dashboard's PromQL: every target's expr, every variable's query."""
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ('expr', 'definition') and isinstance(v, str):
                yield v
            else:
                yield from queries(v)
    elif isinstance(o, list):
        for v in o:
            yield from queries(v)


def yaml_exprs(text):
    """A rules or rule-test file's expr: and series: values, block scalars
    (| or >) with their more-indented lines; prose (runbooks) is not PromQL."""
    out, lines, i = [], text.split('\n'), 0
    while i < len(lines):
        m = re.match(r'^(\s*)(?:- )?(expr|series):\s*(.*)$', lines[i])
        i += 1
        if not m:
            continue
        out.append(m.group(3))
        if m.group(3)[:1] in ('|', '>'):
            ind = len(m.group(1))
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > ind):
                out.append(lines[i])
                i += 1
    return '\n'.join(out)


texts = {'deploy/grafana/idpool.json': '\n'.join(queries(dash))}
for path in sorted(glob.glob(root + '/deploy/prometheus/*.yml')):
    texts[path[len(root) + 1:]] = yaml_exprs(open(path).read())
for path, text in texts.items():
    names = set(re.findall(r'\bidpool_[a-z0-9_]+', text))
    if not names:
        bad.append('%s: names no idpool metric' % path)
    for n in sorted(names):
        # a histogram by its family name or its series
        if n not in series and n + '_bucket' not in series:
            bad.append('%s: %s is not in a live /metrics' % (path, n))
for b in dict.fromkeys(bad):
    print('FAIL:', b)
print('checked %d names against %d series' % (len(set().union(*(re.findall(r'\bidpool_[a-z0-9_]+', t) for t in texts.values()))), len(series)))
sys.exit(1 if bad else 0)
EOF
if command -v promtool >/dev/null; then
    for f in "$DIR"/metrics*.txt; do
        promtool check metrics <"$f" >"$DIR/promtool.out" 2>&1 ||
            fail "promtool check metrics ($(basename "$f")): $(cat "$DIR/promtool.out")"
    done
elif [[ ${CI:-} == true ]]; then
    fail "promtool is missing (package prometheus)"
fi
pass "deploy/grafana/idpool.json and deploy/prometheus name only metrics of a live /metrics; the dashboard's grid holds"
