#!/usr/bin/env bash
# The HTTP status server (issue 3), --http 127.0.0.1:PORT:
#
#   /healthz   200 JSON status ok; 503 naming redis while redis-server is
#              killed and back to 200 after it restarts; 503 naming mysql
#              while MySQL is down, 200 again after it returns
#   /metrics   text format 0.0.4 that passes `promtool check metrics`
#              (skipped only if promtool is missing) with the per-app series
#   /v1/apps   JSON array sorted by key: config as in the rows, pool length
#              as in Redis, 64-bit lease values as exact strings, counters
#              that follow takes, invalid and soft-deleted rows flagged
#   /v1/apps/KEY  one object; unknown key, /nope -> 404 JSON
#   POST /metrics -> 405 with Allow; HEAD answers the headers of GET; any
#   other method, also one libevent does not know (FOO), or CONNECT -> 405
#   JSON; //metrics -> 404 naming "//metrics"
#   Host: an IP address or localhost -> answered; another name -> 403 JSON
#   naming http-allowed-hosts, unless listed there (any case; SIGHUP reads it)
#   --http on a port in use -> the daemon exits non-zero at start naming it
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT

# get [curl options] PATH: body in $DIR/body, headers in $DIR/headers,
# status code in $CODE.
get() {
    local path=${*: -1}
    CODE=$(curl -sS -o "$DIR/body" -D "$DIR/headers" -w '%{http_code}' "${@:1:$#-1}" "$BASE$path") ||
        fail "curl $*: no answer"
}
header() { tr -d '\r' <"$DIR/headers" | sed -n "s/^$1: //Ip" | tail -n 1; }
# json PYTHON-EXPRESSIONS...: each must be true of d = the body as JSON.
json() {
    python3 - "$DIR/body" "$@" <<'EOF' || fail "JSON check failed on: $(head -c 3000 "$DIR/body")"
import json, re, sys
d = json.load(open(sys.argv[1]))
for expr in sys.argv[2:]:
    if not eval(expr):
        sys.exit("false: %s" % expr)
EOF
}
healthz_is() {
    get /healthz
    [[ $CODE == "$1" ]]
}

# The big application's offsets are above 2^53: only strings keep them exact.
BIG_START=9007199254740993
add_app h1 entity_name='Users of the app' step=500 max_pool_size=5000 max_size_per_times=50 \
    max_size_per_second=100 min_size_percent=50 start_offset=1000
add_app h2 increasing_type=2 step=100 max_pool_size=1000
add_app big start_offset=$BIG_START step=100 max_pool_size=1000
add_app hdel step=100 max_pool_size=1000 deleted_at=1
add_app hbad step=-1
# lib.sh passes --http '' before these flags: the last one wins.
start_daemon a --tick-ms 50 --reload-ms 300 --http "127.0.0.1:$HTTP_PORT"
wait_until 5 log_has a "http: listening on 127.0.0.1:$HTTP_PORT" || fail "no 'listening on 127.0.0.1:$HTTP_PORT' in the log"
for k in h1:5000 h2:1000 big:1000; do
    wait_until 10 pool_ge "${k%:*}" "${k#*:}" || fail "${k%:*} never filled"
done
# Not `--help | grep -q`: grep quits at the match, and with pipefail the
# help's last write then fails the pipeline (SIGPIPE) once --help is > 4 KiB.
help=$("$IDPOOLD" --help) || fail "--help exited with status $?"
[[ $help == *'default: 127.0.0.1:9471'* ]] || fail "--help: the default HTTP address is not loopback"

# --- /healthz ----------------------------------------------------------------------------
wait_until 5 healthz_is 200 || fail "/healthz: $CODE $(cat "$DIR/body")"
[[ $(header Content-Type) == application/json* ]] || fail "/healthz Content-Type: $(header Content-Type)"
json 'd["status"] == "ok"' 'd["redis_up"] is True and d["mysql_up"] is True and d["rows_loaded"] is True' \
    'd["apps"] == {"served": 3, "invalid": 1, "deleted": 1}' '"reasons" not in d'
pass "/healthz: 200, JSON, status ok, 3 served / 1 invalid / 1 deleted"

# --- /metrics ------------------------------------------------------------------------------
get /metrics
assert_eq 200 "$CODE" "/metrics status"
[[ $(header Content-Type) == 'text/plain; version=0.0.4'* ]] || fail "/metrics Content-Type: $(header Content-Type)"
cp "$DIR/body" "$DIR/metrics.txt"
if command -v promtool >/dev/null 2>&1; then
    promtool check metrics <"$DIR/metrics.txt" >"$DIR/promtool.out" 2>&1 ||
        fail "promtool check metrics: $(cat "$DIR/promtool.out")"
    pass "/metrics passes promtool check metrics"
else
    skip_part "promtool not installed: 'promtool check metrics' skipped (CI installs the prometheus package)"
fi
m_has() { grep -qE -- "^$1\$" "$DIR/metrics.txt" || fail "/metrics lacks a line matching '$1'"; }
for k in h1 h2 big; do
    for m in idpool_pool_length idpool_pool_capacity idpool_pool_low_water idpool_pool_fill_ratio \
        idpool_consumption_ids_per_second idpool_lease_remaining idpool_ids_pushed_total \
        idpool_refills_total idpool_lock_contention_total idpool_fenced_pushes_total \
        idpool_underflows_total idpool_ids_taken_total idpool_last_refill_timestamp_seconds; do
        m_has "$m\\{app=\"$k\"\\} [0-9.e+]+"
    done
    m_has "idpool_takes_refused_total\\{app=\"$k\",reason=\"limit\"\\} [0-9]+"
    m_has "idpool_takes_refused_total\\{app=\"$k\",reason=\"rate\"\\} [0-9]+"
    m_has "idpool_app_served\\{app=\"$k\"\\} 1"
    for al in underflow low stalled offset_regression invalid_config id_space_exhaustion; do
        m_has "idpool_alert_firing\\{app=\"$k\",alert=\"$al\"\\} 0"
    done
done
m_has 'idpool_pool_length\{app="h1"\} 5000'
m_has 'idpool_pool_capacity\{app="h1"\} 5000'
m_has 'idpool_pool_low_water\{app="h1"\} 2500'
m_has 'idpool_pool_fill_ratio\{app="h1"\} 1'
m_has 'idpool_app_served\{app="hdel"\} 0'
m_has 'idpool_app_served\{app="hbad"\} 0'
m_has 'idpool_alert_firing\{app="hbad",alert="invalid_config"\} 1'
m_has 'idpool_build_info\{version="[^"]+",instance="[^"]+"\} 1'
m_has 'idpool_redis_up 1'
m_has 'idpool_mysql_up 1'
m_has 'idpool_applications\{state="served"\} 3'
m_has 'idpool_refill_duration_seconds_bucket\{le="\+Inf"\} [1-9][0-9]*'
m_has 'idpool_refill_duration_seconds_count [1-9][0-9]*'
pass "/metrics holds the per-application series for h1, h2, big, hdel, hbad and the process-wide ones"

# --- /v1/apps ------------------------------------------------------------------------------
rcli FCALL idpool_take 2 "$(pool_key h1)" "$(meta_key h1)" 10 >/dev/null
assert_eq 4990 "$(llen h1)" "h1 after a take of 10 (above low water: no refill)"
taken_10() {
    get /v1/apps/h1
    python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); sys.exit(not (d["counters"]["taken"] == 10 and d["pool"]["length"] == 4990))' "$DIR/body"
}
# (a pool above its low water has its counters read with idpool_status every 5 s: 12 s of margin)
wait_until 12 taken_10 || fail "/v1/apps/h1 did not show counters.taken 10 and pool length 4990: $(cat "$DIR/body")"
get /v1/apps
assert_eq 200 "$CODE" "/v1/apps status"
[[ $(header Content-Type) == application/json* ]] || fail "/v1/apps Content-Type: $(header Content-Type)"
sql "SELECT entity_key, id, current_offset FROM application ORDER BY entity_key" >"$DIR/rows"
python3 - "$DIR/body" "$DIR/rows" "$(llen h1)" "$BIG_START" <<'EOF' || fail "/v1/apps: $(head -c 4000 "$DIR/body")"
import json, re, sys
from harness import check
apps = json.load(open(sys.argv[1]))
rows = {l.split("\t")[0]: l.rstrip("\n").split("\t") for l in open(sys.argv[2])}
h1_len, big_start = int(sys.argv[3]), int(sys.argv[4])
check(isinstance(apps, list), "not an array")
keys = [a["key"] for a in apps]
check(keys == sorted(keys) == ["big", "h1", "h2", "hbad", "hdel"], "keys %s" % keys)
fields = {"key", "id", "served", "deleted", "invalid", "config", "pool", "rate_ids_per_s",
          "lease", "runway", "counters", "last_refill", "last_error", "alerts"}
by = {a["key"]: a for a in apps}
for a in apps:
    check(fields <= set(a), "%s lacks %s" % (a["key"], fields - set(a)))
    check(a["id"] == int(rows[a["key"]][1]), "%s id %s, row %s" % (a["key"], a["id"], rows[a["key"]][1]))
    check(isinstance(a["alerts"], list), "alerts not a list")
    check(isinstance(a["counters"], dict), "counters not an object")
    rw = a["runway"]
    check(isinstance(rw, dict) and {"pool_s", "id_space_days"} <= set(rw), "%s runway %r" % (a["key"], rw))
    for f in ("pool_s", "id_space_days"):
        check(rw[f] is None or (isinstance(rw[f], (int, float)) and rw[f] >= 0), "%s runway.%s %r" % (a["key"], f, rw[f]))
rfc3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
for k in ("h1", "h2", "big"):
    a = by[k]
    check(a["served"] is True and a["deleted"] is False and a["invalid"] is None, "%s state" % k)
    check(a["alerts"] == [], "%s alerts %s" % (k, a["alerts"]))
    check(isinstance(a["rate_ids_per_s"], (int, float)) and a["rate_ids_per_s"] >= 0, "%s rate" % k)
    check(isinstance(a["last_refill"], str) and rfc3339.match(a["last_refill"]), "%s last_refill %r" % (k, a["last_refill"]))
    L = a["lease"]
    for f in ("next", "hi", "remaining"):
        check(isinstance(L[f], str) and re.match(r"^\d+$", L[f]), "%s lease.%s %r is not a decimal string" % (k, f, L[f]))
    for f in ("next_lo", "next_hi"):
        check(L[f] is None or (isinstance(L[f], str) and re.match(r"^\d+$", L[f])), "%s lease.%s %r" % (k, f, L[f]))
    nxt, hi = int(L["next"]), int(L["hi"])
    check(nxt <= hi, "%s lease next %d > hi %d" % (k, nxt, hi))
    check(hi <= int(rows[k][2]), "%s lease hi %d above current_offset %s" % (k, hi, rows[k][2]))
    rem = (hi - nxt) + ((int(L["next_hi"]) - int(L["next_lo"])) if L["next_lo"] else 0)
    check(int(L["remaining"]) == rem, "%s lease remaining %s, expected %d" % (k, L["remaining"], rem))
    for name, v in a["counters"].items():
        check(isinstance(v, (int, float)) and v >= 0, "%s counter %s = %r" % (k, name, v))
    for name in ("underflows", "taken", "pushed", "refills"):
        check(name in a["counters"], "%s counters lack %s" % (k, name))
c = by["h1"]["config"]
want = {"name": "Users of the app", "type": "monotonic", "start_offset": "1000", "step": 500,
        "max_pool_size": 5000, "low_water": 2500, "min_size_percent": 50, "max_size_per_times": 50,
        "max_size_per_second": 100, "interval_ms": 50, "delta": 1, "remainder": 0, "increment_max": 1}
for f, v in want.items():
    check(c.get(f) == v, "h1 config.%s = %r, row says %r" % (f, c.get(f), v))
check(c["current_offset"] == rows["h1"][2], "h1 config.current_offset %r, row %s" % (c["current_offset"], rows["h1"][2]))
p = by["h1"]["pool"]
check(p["length"] == h1_len == 4990, "h1 pool length %r, LLEN %d" % (p["length"], h1_len))
check(p["fill_pct"] == 99.8, "h1 fill_pct %r (4990 of 5000)" % p["fill_pct"])
check(by["h1"]["counters"]["taken"] == 10, "h1 counters.taken %r" % by["h1"]["counters"]["taken"])
check(by["h2"]["config"]["type"] == "trend", "h2 type")
check(0 < by["h2"]["pool"]["length"] <= 1000, "h2 pool length")
# 2^53 + 1 and above: exact only as strings
b = by["big"]
check(b["config"]["start_offset"] == str(big_start), "big start_offset %r" % b["config"]["start_offset"])
check(int(b["lease"]["next"]) >= big_start and int(b["lease"]["hi"]) > big_start, "big lease %r" % b["lease"])
check(int(b["config"]["current_offset"]) > big_start, "big current_offset")
d = by["hdel"]
check(d["served"] is False and d["deleted"] is True, "hdel state")
x = by["hbad"]
check(x["served"] is False and isinstance(x["invalid"], str) and "step" in x["invalid"], "hbad invalid %r" % x["invalid"])
check(x["alerts"] == ["invalid_config"], "hbad alerts %r" % x["alerts"])
check(x["runway"]["pool_s"] is None and x["runway"]["id_space_days"] is None, "hbad runway %r" % x["runway"])
# h1: a fresh ledger (leases of the last seconds): no growth measured yet
check(by["h1"]["runway"]["id_space_days"] is None, "h1 runway %r" % by["h1"]["runway"])
EOF
pass "/v1/apps: sorted array, config as in the rows, pool length = LLEN, lease values exact strings, counters follow takes"

# The leases /v1/apps shows are meta's, the prefetched one too (it showed
# next_lo null while meta held one): a pool filled and not refilled, its
# leases in meta (next hi nlo nhi) and in /v1/apps the same.
lease_is_meta() {
    local meta
    meta=$(rcli HMGET "$(meta_key "$1")" next hi nlo nhi | tr '\n' ' ')
    get "/v1/apps/$1"
    python3 -c 'import json, sys
L = json.load(open(sys.argv[1]))["lease"]
got = " ".join(L[f] or "" for f in ("next", "hi", "next_lo", "next_hi"))
sys.exit(got.split() != sys.argv[2].split() or len(sys.argv[2].split()) != 4)' "$DIR/body" "$meta"
}
wait_until 5 lease_is_meta h2 ||
    fail "/v1/apps/h2 lease $(cat "$DIR/body") is not meta's: $(rcli HMGET "$(meta_key h2)" next hi nlo nhi | tr '\n' ' ')"

get /v1/apps/h1
assert_eq 200 "$CODE" "/v1/apps/h1 status"
json 'isinstance(d, dict)' 'd["key"] == "h1"' 'd["config"]["step"] == 500'
get /v1/apps/big
json 'd["key"] == "big"' "d[\"config\"][\"start_offset\"] == \"$BIG_START\""
get /v1/apps/nosuch
assert_eq 404 "$CODE" "/v1/apps/nosuch status"
[[ $(header Content-Type) == application/json* ]] || fail "404 Content-Type: $(header Content-Type)"
json 'isinstance(d.get("error"), str)' 'd.get("key") == "nosuch"'
for p in /nope /v1/apps/ /v1 /metricsx /healthz/x; do
    get "$p"
    assert_eq 404 "$CODE" "GET $p status"
    json 'isinstance(d.get("error"), str)'
done
pass "/v1/apps/KEY: one object; unknown key and bad paths -> 404 JSON"

# --- consumption rate: follows the clients, decays when they stop -------------------------
# h2 (pool 1000, step 100) drained at about 2000 IDs/s for 3 s by LPOP 100 every 50 ms.
rate_of() {
    get "/v1/apps/$1"
    python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["rate_ids_per_s"]))' "$DIR/body"
}
assert_eq 0 "$(rate_of h2)" "h2 rate before anyone consumed"
# The rate actually consumed is measured (each LPOP is a process start: a
# loaded machine runs the loop slower than 20 a second).
t0=$(now_us)
popped=0
while (($(now_us) - t0 < 3000000)); do
    popped=$((popped + $(rcli LPOP "$(pool_key h2)" 100 | wc -l)))
    sleep 0.05
done
consumed=$((popped * 1000000 / ($(now_us) - t0)))
peak=$(rate_of h2)
info "h2 rate while $consumed IDs/s were consumed: $peak IDs/s"
((consumed >= 100)) || fail "h2 consumed at $consumed IDs/s only (the pool was not refilled?)"
((peak * 100 >= consumed * 15)) || fail "h2 rate $peak IDs/s while $consumed IDs/s were consumed"
wait_until 15 eval '(($(rate_of h2) < peak / 10))' || fail "h2 rate did not decay after consumption stopped: $(rate_of h2)"
pass "consumption rate follows the clients ($peak IDs/s) and decays after they stop"

# --- methods -------------------------------------------------------------------------------
for p in /metrics /healthz /v1/apps /v1/apps/h1; do
    for m in POST PUT DELETE; do
        get -X "$m" "$p"
        assert_eq 405 "$CODE" "$m $p status"
        [[ $(header Allow) == *GET* && $(header Allow) == *HEAD* ]] || fail "$m $p: Allow is '$(header Allow)'"
        json 'isinstance(d.get("error"), str)'
    done
done
# raw_req METHOD TARGET: "STATUS CONTENT-LENGTH BODY-BYTES CONTENT-TYPE ALLOW" of a raw
# HTTP/1.0 request, read to the end (any body bytes after the headers are counted); the
# body in $DIR/body.
raw_req() {
    python3 - "$HTTP_PORT" "$1" "$2" "$DIR/body" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(("%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" % (sys.argv[2], sys.argv[3])).encode())
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
open(sys.argv[4], "wb").write(body)
lines = head.decode().split("\r\n")
hdr = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
print(lines[0].split()[1], hdr.get("content-length", "-"), len(body),
      hdr.get("content-type", "-").replace(" ", ""), hdr.get("allow", "-").replace(" ", ""))
EOF
}
# head_req PATH: "STATUS CONTENT-LENGTH BODY-BYTES CONTENT-TYPE" of a raw HEAD request.
head_req() { raw_req HEAD "$1" | cut -d' ' -f1-4; }
# method_req METHOD TARGET: "STATUS CONTENT-TYPE ALLOW".
method_req() { raw_req "$1" "$2" | cut -d' ' -f1,4,5; }
get /healthz
glen=$(wc -c <"$DIR/body")
assert_eq "200 $glen 0 application/json" "$(head_req /healthz)" "HEAD /healthz: status, Content-Length (= GET's), body bytes, type"
read -r code clen blen ctype <<<"$(head_req /metrics)"
assert_eq "200 0" "$code $blen" "HEAD /metrics: status and body bytes"
[[ $ctype == text/plain* && $clen =~ ^[1-9][0-9]*$ ]] || fail "HEAD /metrics: Content-Type '$ctype', Content-Length '$clen'"
read -r code clen blen ctype <<<"$(head_req /nope)"
assert_eq "404 0" "$code $blen" "HEAD /nope: status and body bytes"
pass "POST/PUT/DELETE -> 405 with Allow: GET, HEAD; HEAD answers headers only, Content-Length as GET"

# Methods libevent does not know, and every other one, on any path: 405 JSON with Allow.
for m in FOO PROPFIND OPTIONS TRACE PATCH CONNECT; do
    for p in /metrics /nope; do
        assert_eq "405 application/json GET,HEAD" "$(method_req "$m" "$p")" "$m $p: status, type, Allow"
        json 'd.get("error") == "method not allowed"' "d.get(\"path\") == \"$p\""
    done
done
assert_eq "405 application/json GET,HEAD" "$(method_req CONNECT 127.0.0.1:80)" "CONNECT host:port"
# The path as sent: //metrics is not /metrics (nor "/").
get //metrics
assert_eq 404 "$CODE" "GET //metrics status"
json 'd.get("path") == "//metrics"'
get '/v1/apps?x=//y'
assert_eq 200 "$CODE" "GET /v1/apps?x=//y status"
pass "unknown methods, CONNECT, OPTIONS... -> 405 JSON with Allow; //metrics -> 404 naming //metrics"

# --- /healthz follows Redis and MySQL --------------------------------------------------------
redis_kill
t0=$(now_us)
wait_until 5 healthz_is 503 || fail "/healthz still $CODE with redis-server killed: $(cat "$DIR/body")"
json 'd["status"] != "ok"' 'any("redis" in r for r in d["reasons"])' 'd["redis_up"] is False'
info "/healthz 503 $((($(now_us) - t0) / 1000)) ms after redis-server was killed: $(cat "$DIR/body")"
get /metrics
assert_eq 200 "$CODE" "/metrics while Redis is down"
grep -qx 'idpool_redis_up 0' "$DIR/body" || fail "/metrics: idpool_redis_up not 0 while Redis is down"
redis_start
t0=$(now_us)
wait_until 10 healthz_is 200 || fail "/healthz still $CODE after redis-server restarted: $(cat "$DIR/body")"
info "/healthz 200 again $((($(now_us) - t0) / 1000)) ms after redis-server restarted"
pass "/healthz: 503 naming redis while redis-server is killed, 200 again after it restarts"

mysql_stop
t0=$(now_us)
wait_until 5 healthz_is 503 || fail "/healthz still $CODE with MySQL stopped: $(cat "$DIR/body")"
json 'd["status"] != "ok"' 'any("mysql" in r for r in d["reasons"])' 'd["mysql_up"] is False'
info "/healthz 503 $((($(now_us) - t0) / 1000)) ms after MySQL stopped: $(cat "$DIR/body")"
mysql_start
t0=$(now_us)
wait_until 15 healthz_is 200 || fail "/healthz still $CODE after MySQL restarted: $(cat "$DIR/body")"
info "/healthz 200 again $((($(now_us) - t0) / 1000)) ms after MySQL restarted"
pass "/healthz: 503 naming mysql while MySQL is down, 200 again after it returns"

# A schema that is not loaded is not "mysql down": say what to do.
sql "RENAME TABLE application TO application_moved"
wait_until 5 healthz_is 503 || fail "/healthz still $CODE without the application table"
json 'd["reasons"] == ["mysql schema not loaded: load sql/schema.sql"]'
wait_until 3 log_has a "Table 'idpool.application' doesn't exist \(the schema is not loaded: load sql/schema\.sql\)" ||
    fail "the log does not say that the schema is not loaded"
sql "RENAME TABLE application_moved TO application"
wait_until 5 healthz_is 200 || fail "/healthz still $CODE with the table back: $(cat "$DIR/body")"
pass "/healthz and the log: 'mysql schema not loaded: load sql/schema.sql' while a table is missing"

# --- a row no longer served: its pool's length now ------------------------------------------
# h2 (served, filled) is soft-deleted, then popped by a client: /v1/apps and
# idpoolctl status show the length now, not the last one seen while the
# row was served.
sql "UPDATE application SET deleted_at = NOW() WHERE entity_key = 'h2'"
h2_is() {
    get /v1/apps/h2
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("%s %s" % (d["deleted"], d["pool"]["length"]))' \
        "$DIR/body"
}
wait_until 5 eval '[[ $(h2_is) == True* ]]' || fail "h2 not deleted in /v1/apps: $(cat "$DIR/body")"
len0=$(llen h2)
((len0 >= 2)) || fail "h2's pool holds $len0 IDs"
rcli LPOP "$(pool_key h2)" $((len0 / 2)) >/dev/null
want=$((len0 - len0 / 2))
wait_until 5 eval '[[ $(h2_is) == "True $want" ]]' ||
    fail "/v1/apps/h2 after $((len0 / 2)) of its $len0 IDs were popped: $(h2_is), expected True $want"
"$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --http "127.0.0.1:$HTTP_PORT" status \
    >"$DIR/status.out" || fail "idpoolctl status failed"
grep -Eq "^h2 +deleted +trend +$want " "$DIR/status.out" || fail "idpoolctl status: $(cat "$DIR/status.out")"
pass "a soft-deleted row's pool popped: /v1/apps and idpoolctl status show its length now ($want, was $len0)"

# --- Redis unreachable: lengths as last seen, rate and pool runway unknown ------------------
# (the rate shown was the last one computed, frozen, for as long as the
# smoothing took to notice nothing, with nothing saying so)
redis_stop
h1_stale() {
    get /v1/apps/h1
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
sys.exit(not (d["pool"]["stale"] is True and d["rate_ids_per_s"] is None and d["pool"]["length"] is not None
              and d["runway"]["pool_s"] is None))' "$DIR/body"
}
wait_until 5 h1_stale || fail "/v1/apps/h1 with Redis stopped: $(cat "$DIR/body")"
"$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --http "127.0.0.1:$HTTP_PORT" status \
    >"$DIR/status.out" || fail "idpoolctl status failed with Redis stopped"
grep -Eq '^h1 +served +monotonic +[0-9]+ +[0-9.]+% +\? +- ' "$DIR/status.out" ||
    fail "idpoolctl status with Redis stopped: $(cat "$DIR/status.out")"
grep -Eq "pools as last seen, rate '\?': idpoold cannot reach their Redis" "$DIR/status.out" ||
    fail "idpoolctl status does not say the pools are as last seen: $(cat "$DIR/status.out")"
redis_start
wait_until 10 eval '! h1_stale && [[ $(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[\"pool\"][\"stale\"])" "$DIR/body") == False ]]' ||
    fail "/v1/apps/h1 still stale after Redis came back: $(cat "$DIR/body")"
pass "Redis stopped: /v1/apps says pool.stale and rate null, idpoolctl status '?' and why; fresh again once Redis is back"

# --- Host: IP addresses and localhost, other names only when allowed (DNS rebinding) ---------------
host_is() { # CODE HOST PATH
    get -H "Host: $2" "$3"
    [[ $CODE == "$1" ]] || fail "Host: $2, GET $3: $CODE, not $1: $(cat "$DIR/body")"
}
host_is 200 "localhost:$HTTP_PORT" /v1/apps
host_is 200 "[::1]:$HTTP_PORT" /metrics
host_is 403 "attacker.example:$HTTP_PORT" /v1/apps
json 'd["host"] == "attacker.example:'"$HTTP_PORT"'"' '"http-allowed-hosts" in d["error"]'
host_is 403 "idpool.test" /
host_is 403 "127.0.0.1.nip.io:$HTTP_PORT" /metrics
printf 'http-allowed-hosts = idpool.test, other.test\n' >"$DIR/hosts.conf"
stop_daemon a
start_daemon a --tick-ms 50 --http "127.0.0.1:$HTTP_PORT" --config "$DIR/hosts.conf"
# (curl fails until the new process listens: get would end the test)
wait_until 10 curl -sf -o /dev/null "$BASE/healthz" || fail "/healthz after the restart with http-allowed-hosts"
host_is 200 "idpool.test:$HTTP_PORT" /v1/apps
host_is 200 "IDPOOL.TEST" /metrics
host_is 403 "attacker.example" /v1/apps
host_is 200 "127.0.0.1:$HTTP_PORT" /v1/apps
# SIGHUP takes a new list
printf 'http-allowed-hosts = *\n' >"$DIR/hosts.conf"
signal_daemon a HUP
host_now() { get -H "Host: $1" /v1/apps; [[ $CODE == 200 ]]; }
wait_until 5 host_now attacker.example || fail "http-allowed-hosts = * after SIGHUP: $CODE"
pass "Host: IP addresses and localhost answered, other names 403 unless in http-allowed-hosts (also after SIGHUP)"

# --- a port in use ------------------------------------------------------------------------------
start_daemon b --http "127.0.0.1:$HTTP_PORT"
wait_until 5 eval '! daemon_alive b' || fail "a second daemon on the same --http port keeps running"
kill_daemon b TERM
st=${DAEMON_STATUS[b]}
[[ $st != 0 && $st != timeout ]] || fail "daemon b exit status '$st' with its HTTP port in use"
log_has b "127\\.0\\.0\\.1:$HTTP_PORT" || fail "b's error does not name the address: $(cat "$DIR/b.log")"
log_has b 'in use' || fail "b's error does not say the address is in use: $(cat "$DIR/b.log")"
info "b: $(grep -E 'error|fatal' "$DIR/b.log" | head -n 3)"
get /healthz
assert_eq 200 "$CODE" "a still answers"
stop_daemon a
pass "http"
