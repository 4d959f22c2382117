#!/usr/bin/env bash
# Invalid rows (brief §3): a row that breaks a rule is not served; the error
# names the row and the field and is logged once, not on every reload; every
# other application keeps working. Fixing a row serves it again; breaking a
# served row stops its refills but leaves its pool alone.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

log_count() { grep -cE -- "$2" "$DIR/$1.log" 2>/dev/null || true; }
meta_pushed() { rcli HGET "$(meta_key "$1")" pushed; }

# The valid application, next to the broken ones.
add_app good max_size_per_second=100 # pool 6000, low water 4800
# KEY FIELD (the field the error must name) and the row's columns.
declare -A FIELD=(
    [b_step]=step
    [b_type]=increasing_type
    [b_pct]=min_size_percent
    [b_small]=max_pool_size
    [b_rem]=remainder
    [b_fit]=max_pool_size
    [b_take]=max_size_per_times
    [b_rate]=max_size_per_times
    [b_start]=start_offset
    [b_inc]=increment_max
    ['bad key']=entity_key
    ['a/b']=entity_key
    ['..']=entity_key
    ['--name']=entity_key
)
add_app b_step step=-5
add_app b_type increasing_type=3
add_app b_pct min_size_percent=100
add_app b_small max_pool_size=500 max_size_per_times=100 # < step 1000
add_app b_rem delta=5 remainder=5
add_app b_fit max_pool_size=1100 # > step, but 1100 * 20% = 220 < step: a refill cannot fit
add_app b_take max_size_per_times=7000 max_pool_size=6000
add_app b_rate max_size_per_times=2000 max_size_per_second=1000 # a take of 2000 is never granted
# Valid, but a full pool takes more Redis memory than --pool-memory-mb 1 (2 MiB).
add_app big step=10000 max_pool_size=200000 max_size_per_second=100000
add_app b_start start_offset=-1
add_app b_inc increment_max=1000001
add_app 'bad key'
add_app 'a/b'
add_app '..'     # a URL path cannot address it
add_app '--name' # a command line reads it as an option
# The rendering of a key in messages: bytes outside the alphabet become '?'.
shown() { local k=${1// /?}; echo "${k//\//?}"; }

HTTP_PORT=$(free_port)
start_daemon a --tick-ms 20 --reload-ms 150 --http "127.0.0.1:$HTTP_PORT" --pool-memory-mb 1 \
    --alert-resolve-ms 300
wait_until 10 pool_ge good 6000 || fail "the valid application was not served"
for key in "${!FIELD[@]}"; do
    id=$(app_col "$key" id)
    re="application '$(shown "$key" | sed 's/[?.]/\\&/g')' \\(id $id\\): ${FIELD[$key]}: must "
    wait_until 3 log_has a "$re" || fail "no error naming row '$key' (id $id) and field ${FIELD[$key]}"
done
# Exact format of one message.
id=$(app_col b_step id)
log_has a "error +application 'b_step' \(id $id\): step: must be 1\.\.1000000 \(0 means 1000\), got -5; application not served until the row is fixed$" ||
    fail "message for b_step not in the documented format"
log_has a "applications: 2 served, [0-9]+ invalid, 16 rows read" || fail "no summary line"

# Over many reloads (150 ms), each error is logged exactly once. (Rows with a
# bad entity_key are checked at the end, so that a failure there does not
# hide the rest.)
sleep 1.5
declare -A TIMES=()
for key in "${!FIELD[@]}"; do
    id=$(app_col "$key" id)
    # The validation error itself (level "error"), not the invalid_config alert that quotes it.
    TIMES[$key]=$(log_count a "Z error +application '$(shown "$key" | sed 's/[?.]/\\&/g')' \\(id $id\\): ")
    [[ ${FIELD[$key]} == entity_key ]] ||
        assert_eq 1 "${TIMES[$key]}" "times the error of row '$key' was logged over ~10 reloads"
done

# None of them got a pool, nor limits (a take answers IDPOOL_NOAPP); their
# meta hash holds only the invalid_config alert, firing.
keys=$(rcli --scan --pattern 'idpool:*:pool' | sort | tr '\n' ' ')
assert_eq "idpool:{big}:pool idpool:{good}:pool " "$keys" "pools in Redis"
for key in "${!FIELD[@]}"; do
    [[ ${FIELD[$key]} == entity_key ]] && continue
    assert_eq "alert:invalid_config alert:invalid_config:notified" \
        "$(rcli HKEYS "$(meta_key "$key")" | sort | tr '\n' ' ' | sed 's/ $//')" \
        "meta fields of invalid row '$key'"
    [[ $(rcli FCALL idpool_take 2 "$(pool_key "$key")" "$(meta_key "$key")" 1 2>&1) == IDPOOL_NOAPP* ]] ||
        fail "take from invalid row '$key' did not answer IDPOOL_NOAPP"
done
assert_eq 1 "$(log_count a "alert invalid_config firing app=b_step: application 'b_step'")" \
    "invalid_config alert announced once for b_step"
pass "${#FIELD[@]} invalid rows: each reported with key and field, none served, field errors logged once"

# Every row is shown with its error, also those whose key cannot name a pool
# (/healthz and idpool_applications{state="invalid"} count them).
curl -fsS "http://127.0.0.1:$HTTP_PORT/v1/apps" >"$DIR/apps.json" || fail "GET /v1/apps failed"
"$PYTHON" - "$DIR/apps.json" "${!FIELD[@]}" <<'EOF' || fail "/v1/apps does not show every row with its error"
import json, sys
apps = {a["key"]: a for a in json.load(open(sys.argv[1]))}
missing = [k for k in sys.argv[2:] + ["good", "big"] if k not in apps]
if missing:
    sys.exit("missing from /v1/apps: %s (has %s)" % (missing, sorted(apps)))
for k in sys.argv[2:]:
    a = apps[k]
    if a["served"] or not (a["invalid"] or "").startswith("application "):
        sys.exit("%r: served %s, invalid %r" % (k, a["served"], a["invalid"]))
    if "invalid_config" not in json.dumps(a["alerts"]):
        sys.exit("%r: invalid_config not among its alerts: %s" % (k, a["alerts"]))
if len(apps) != len(sys.argv[2:]) + 2:
    sys.exit("%d objects for %d rows" % (len(apps), len(sys.argv[2:]) + 2))
EOF
# (not `curl | grep -q`: grep quits at the match, and with pipefail curl's next
# write then fails the pipeline; it did under ASan in CI)
metrics=$(curl -fsS "http://127.0.0.1:$HTTP_PORT/metrics") || fail "GET /metrics failed"
grep -q '^idpool_applications{state="invalid"} '"${#FIELD[@]}"'$' <<<"$metrics" ||
    fail "idpool_applications{state=\"invalid\"} is not ${#FIELD[@]}"
IDPOOL_HTTP_ADDR=127.0.0.1:$HTTP_PORT IDPOOL_REDIS_URL=$IDPOOL_REDIS_URL IDPOOL_MYSQL_URL=$IDPOOL_MYSQL_URL \
    "$IDPOOLCTL" --json status >"$DIR/status.json" || fail "idpoolctl status failed"
"$PYTHON" - "$DIR/status.json" "${!FIELD[@]}" <<'EOF' || fail "idpoolctl status does not show every row"
import json, sys
d = json.load(open(sys.argv[1]))
apps = {a["key"]: a for a in d["apps"]}
for k in sys.argv[2:]:
    if k not in apps or apps[k]["state"] != "invalid" or not apps[k].get("error"):
        sys.exit("%r: %s (source %s)" % (k, apps.get(k), d.get("source")))
EOF
pass "every row is shown with its error in /v1/apps and idpoolctl status, also keys that cannot name a pool"

# The valid application is served normally meanwhile.
rcli LPOP "$(pool_key good)" 2000 >/dev/null
wait_until 3 pool_ge good 6000 || fail "good not refilled"
pass "the valid application is refilled next to invalid rows"

# --- a pool above pool-memory-mb: served, warned about (log, pool_memory) -------
wait_until 10 pool_ge big 160000 || fail "big (valid, above the memory budget) was not served"
log_has a "warn +app=big pool_memory: a full pool of 200000 IDs takes about 2 MiB of Redis \(10 bytes an ID\), above pool-memory-mb 1: lower max_pool_size" ||
    fail "no pool_memory warning naming the bytes for big"
assert_eq 1 "$(log_count a "app=big pool_memory:")" "pool_memory warnings of big over many reloads"
wait_until 5 eval '[[ $(rcli HGET "$(meta_key big)" alert:pool_memory) == firing ]]' ||
    fail "pool_memory not firing in big's meta"
curl -fsS "http://127.0.0.1:$HTTP_PORT/v1/apps/big" >"$DIR/big.json" || fail "GET /v1/apps/big"
grep -q '"pool_memory"' "$DIR/big.json" || fail "pool_memory not among big's alerts: $(cat "$DIR/big.json")"
# 100,000 IDs: 1,000,000 bytes, under 1 MiB
set_app big max_pool_size=100000
wait_until 10 eval '[[ $(rcli HGET "$(meta_key big)" alert:pool_memory) != firing ]]' ||
    fail "pool_memory still firing for big with a pool of 1,000,000 bytes"
wait_until 5 log_has a "alert pool_memory resolved app=big" || fail "no 'resolved' line for big's pool_memory"
pass "a full pool above pool-memory-mb: served, the log names the bytes once, pool_memory fires and resolves once the pool is made smaller"

# --- fixing a row ------------------------------------------------------------
set_app b_step step=500
wait_until 3 log_has a "app=b_step row fixed; serving again" || fail "no 'row fixed' line"
wait_until 3 log_has a "app=b_step serving: monotonic step=500" || fail "no 'serving' line"
wait_until 5 pool_ge b_step 4800 || fail "fixed row did not get a pool"
set_app b_rem remainder=4
wait_until 3 log_has a "app=b_rem row fixed; serving again" || fail "no 'row fixed' line for b_rem"
wait_until 5 pool_ge b_rem 4800 || fail "fixed row b_rem did not get a pool"
sleep 0.5
assert_eq 1 "$(log_count a 'app=b_step row fixed')" "'row fixed' lines for b_step"
# A fixed row's empty pool is filling, not underflowing (underflow pages).
for key in b_step b_rem; do
    assert_eq 0 "$(log_count a "alert (underflow|low) firing app=$key:")" "underflow/low alerts of fixed row $key"
done
pass "fixed rows are served again, without a false underflow"

# --- breaking a served row ----------------------------------------------------
wait_until 3 pool_ge good 6000 || fail "good not full"
set_app good min_size_percent=0 step=-1
id=$(app_col good id)
wait_until 3 log_has a "application 'good' \(id $id\): step: must be 1\.\.1000000 .*, got -1; application not served until the row is fixed" ||
    fail "breaking a served row was not reported"
rcli LPOP "$(pool_key good)" 5000 >/dev/null # 1000 left, far below low water
pushed=$(meta_pushed good)
sleep 1
assert_eq 1000 "$(llen good)" "broken row's pool: kept, not refilled"
assert_eq "$pushed" "$(meta_pushed good)" "broken row's pushes"
assert_eq 1 "$(log_count a "Z error +application 'good' \(id $id\): ")" "times the broken row was logged"
# Fixing it again resumes refills from where it was.
set_app good step=1000
wait_until 3 log_has a "app=good row fixed; serving again" || fail "no 'row fixed' for good"
wait_until 5 pool_ge good 4800 || fail "good not refilled after the fix"
rcli LRANGE "$(pool_key good)" 0 -1 >"$DIR/good.txt"
assert_increasing "$DIR/good.txt"
daemon_alive a || fail "daemon died"
stop_daemon a
pass "a broken served row keeps its pool but is not refilled; fixed again, refilled"

for key in 'bad key' 'a/b'; do
    assert_eq 1 "${TIMES[$key]}" "times the error of row '$key' (bad entity_key) was logged over ~10 reloads"
done
pass "invalid"
