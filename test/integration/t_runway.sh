#!/usr/bin/env bash
# Runway (issue 23), --http 127.0.0.1:PORT:
#
#   pool_s         an application consumed at a known rate (2000 IDs/s) shows
#                  runway.pool_s = pool length / 2000 (within 30 %), and
#                  idpool_pool_runway_seconds the same; one nothing consumes
#                  shows null and +Inf
#   id_space_days  an application whose ledger (application_lease) holds 10
#                  leases over the last 10 days, each a thirtieth of the ID
#                  space left, shows ~30 days (idpool_id_space_runway_seconds
#                  ~30 x 86400); a fresh one (leases of the last seconds) null
#                  and +Inf
#   the alert      id_space_exhaustion fires for it with id-space-warn-days
#                  90, resolves after SIGHUP with 10, fires again with 90;
#                  never for the others
#   idpoolctl      status shows RUNWAY and ID-SPACE in human units, --json
#                  the runway object
#   the query      EXPLAIN of the statement the daemon runs (idpool-sql
#                  ledger): loose index scans of ix_app_hi and
#                  ix_app_created, the window's first lease one lookup
#   UTC            MariaDB runs an hour east of UTC (TZ): the daemon writes
#                  application_lease.created_at in UTC, and a lease planted
#                  2 h ago (UTC) counts as 2 h old, not 3 (its session is in
#                  UTC; in a zone with summer time the wall clock would be
#                  an hour off across the change)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
export TZ=IDP-1 # mariadbd's SYSTEM time zone: UTC+1
setup
require_redis_py

HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
RATE=2000
CEIL=9223372036854775807 # 2^63-1: the ceiling of every application today
CUR=4611686018427387904  # 2^62: below 90 % of the ceiling (no offset warning)
G=$(((CEIL - CUR) / 30)) # one lease a day: 30 days left

add_app flow step=1000 max_pool_size=60000 min_size_percent=50 max_size_per_times=1000 \
    max_size_per_second=20000
add_app idle step=100 max_pool_size=1000
add_app space step=100 max_pool_size=1000 current_offset=$CUR
SPACE_ID=$(app_col space id)
for k in $(seq 10 -1 1); do
    sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, created_at)
         VALUES ($SPACE_ID, 'space', $((CUR - k * G)), $((CUR - (k - 1) * G)), 'planted',
                 UTC_TIMESTAMP(3) - INTERVAL $k DAY)"
done
# one lease of GT IDs 2 hours ago: GT x 12 a day
GT=1000000000000
add_app tz step=100 max_pool_size=1000 current_offset=$CUR
sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, created_at)
     VALUES ($(app_col tz id), 'tz', $((CUR - GT)), $CUR, 'planted', UTC_TIMESTAMP(3) - INTERVAL 2 HOUR)"
[[ $(sql "SELECT TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW())") == 60 ]] ||
    fail "MariaDB's time zone is not UTC+1 (TZ=$TZ): $(sql 'SELECT @@system_time_zone, NOW(), UTC_TIMESTAMP()')"

# The statement the daemon runs (idpool-sql prints the one text of it):
# the window's first lease and the highest hi come from loose index scans,
# a few reads per application, and that lease from one lookup of
# ix_app_created, not from a scan of the ledger.
# (A ledger of a few rows is read whole whatever the indexes: 20000 leases
# of an application without a row, as long as the EXPLAIN lasts.)
require_built idpool-sql "$IDPOOL_SQL"
"$IDPOOL_SQL" ledger >"$DIR/ledger.sql" || fail "idpool-sql ledger failed"
sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, created_at)
     SELECT 999999, 'bulk', seq * 10, seq * 10 + 10, 'planted', UTC_TIMESTAMP(3) - INTERVAL seq MINUTE
     FROM seq_1_to_20000; ANALYZE TABLE application_lease" >/dev/null || fail "the bulk leases"
sql "EXPLAIN $(cat "$DIR/ledger.sql")" >"$DIR/ledger.plan" || fail "EXPLAIN of the ledger read failed"
sql "DELETE FROM application_lease WHERE application_id = 999999" || fail "the bulk leases stay"
"$PYTHON" - "$DIR/ledger.plan" <<'PY' || fail "the ledger read's plan: $(cat "$DIR/ledger.plan")"
import sys
from harness import check
# id select_type table type possible_keys key key_len ref rows Extra
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
derived = [r for r in rows if r[1] == "DERIVED"]
check(len(derived) == 2, "%d derived tables" % len(derived))
for r in derived:
    check("Using index for group-by" in r[9], "not a loose index scan: %r" % r)
check(sorted(r[5] for r in derived) == ["ix_app_created", "ix_app_hi"], "derived keys %r" % [r[5] for r in derived])
f = [r for r in rows if r[2] == "f"]
# both parts of the key (application_id, created_at) from w: one lookup, not a scan of the application's leases
check(len(f) == 1 and f[0][5] == "ix_app_created" and f[0][3] in ("ref", "eq_ref") and
      sorted(f[0][7].split(",")) == ["w.application_id", "w.c"], "the lease lookup: %r" % f)
PY

printf 'id-space-warn-days = 90\n' >"$DIR/idpoold.conf"
start_daemon a --config "$DIR/idpoold.conf" --tick-ms 50 --reload-ms 300 \
    --alert-resolve-ms 300 --http "127.0.0.1:$HTTP_PORT"
for k in flow:60000 idle:1000 space:1000 tz:1000; do
    wait_until 10 pool_ge "${k%:*}" "${k#*:}" || fail "${k%:*} never filled"
done

metric() { curl -sSf "$BASE/metrics" | sed -n "s/^$1{app=\"$2\"} //p"; }

# --- UTC: the daemon writes created_at in UTC and measures ages in UTC ------------
age=$(sql "SELECT TIMESTAMPDIFF(SECOND, MAX(created_at), UTC_TIMESTAMP()) FROM application_lease WHERE instance != 'planted'")
((age >= -5 && age < 60)) || fail "the daemon's newest lease is ${age} s older than UTC now (created_at not in UTC)"
wait_until 10 app_true tz 'a["runway"]["growth_ids_per_day"] > 0' || fail "tz: no growth: $(cat "$DIR/app.json")"
growth=$(app tz 'a["runway"]["growth_ids_per_day"]')
app_true tz 'abs(a["runway"]["growth_ids_per_day"] - 12 * '"$GT"') < 0.02 * 12 * '"$GT" ||
    fail "tz: growth $growth a day, expected ~$((12 * GT)) (the planted lease is 2 h old, in UTC)"
pass "UTC: MariaDB at UTC+1, the daemon's leases are written in UTC, a lease of 2 h ago counts 2 h ($growth IDs a day)"

# --- id_space_days from the ledger; the alert with horizon 90 ------------------
wait_until 10 app_true space 'a["runway"]["id_space_days"] is not None' ||
    fail "space: no id_space_days: $(cat "$DIR/app.json")"
days=$(app space 'a["runway"]["id_space_days"]')
info "space: id_space_days $days, growth $(app space 'a["runway"]["growth_ids_per_day"]') a day (G $G)"
app_true space '29 < a["runway"]["id_space_days"] < 31' || fail "space: id_space_days $days, expected ~30"
app_true space 'int(a["runway"]["id_space_left"]) <= '"$((CEIL - CUR))" ||
    fail "space: id_space_left $(app space 'a["runway"]["id_space_left"]') above the ceiling - current_offset"
s=$(metric idpool_id_space_runway_seconds space)
python3 -c 'import sys; s = float(sys.argv[1]); sys.exit(not 29 * 86400 < s < 31 * 86400)' "$s" ||
    fail "idpool_id_space_runway_seconds{app=space} $s, expected ~30 days"
wait_until 3 log_has a "alert id_space_exhaustion firing app=space: the ID space runs out in about (29|30)\.[0-9] days" ||
    fail "id_space_exhaustion did not fire for space with id-space-warn-days 90"
wait_until 3 app_true space '"id_space_exhaustion" in a["alerts"]' || fail "space: alert not in /v1/apps"
# fresh applications: their leases are seconds old, no growth is measured
for k in flow idle; do
    app_true "$k" 'a["runway"]["id_space_days"] is None and a["runway"]["growth_ids_per_day"] == 0' ||
        fail "$k: id_space_days of a fresh ledger: $(cat "$DIR/app.json")"
    assert_eq +Inf "$(metric idpool_id_space_runway_seconds "$k")" "$k idpool_id_space_runway_seconds"
done
log_has a "alert id_space_exhaustion firing app=(flow|idle)" && fail "id_space_exhaustion fired for a fresh application"
pass "30 days of ID space at the ledger's growth: id_space_days ~30 ($days), the metric, id_space_exhaustion fires at 90 days"

# --- negative control: horizon 10 resolves it, 90 fires it again ---------------
printf 'id-space-warn-days = 10\n' >"$DIR/idpoold.conf"
signal_daemon a HUP
wait_until 5 log_has a "alert id_space_exhaustion resolved app=space: the ID space lasts again" ||
    fail "id_space_exhaustion did not resolve with id-space-warn-days 10"
app_true space '"id_space_exhaustion" not in a["alerts"] and 29 < a["runway"]["id_space_days"] < 31' ||
    fail "space with horizon 10: $(cat "$DIR/app.json")"
assert_eq 1 "$(log_count a "alert id_space_exhaustion firing app=space")" "firings with horizon 10"
printf 'id-space-warn-days = 90\n' >"$DIR/idpoold.conf"
signal_daemon a HUP
wait_until 5 eval '(($(log_count a "alert id_space_exhaustion firing app=space") == 2))' ||
    fail "id_space_exhaustion did not fire again with id-space-warn-days 90"
pass "id-space-warn-days 10: resolved and quiet at 30 days; 90 again: fires again"

# --- pool_s at a known consumption rate ----------------------------------------
"$PYTHON" - "$REDIS_PORT" "$(pool_key flow)" "$RATE" "$DIR/consume.stop" >"$DIR/consume.log" 2>&1 <<'PY' &
import os, sys, time
import redis
r = redis.Redis(port=int(sys.argv[1]))
key, rate, stop = sys.argv[2], int(sys.argv[3]), sys.argv[4]
t0, taken, end = time.monotonic(), 0, time.monotonic() + 90
while not os.path.exists(stop) and time.monotonic() < end:
    due = int((time.monotonic() - t0) * rate) - taken   # paced by the clock: exactly rate a second
    if due >= 100:
        got = r.execute_command("LPOP", key, due) or []
        taken += due
    time.sleep(0.01)
PY
CONSUMER=$! # cleanup stops it if the test fails
stop_consumer() { touch "$DIR/consume.stop" && wait "$CONSUMER" 2>/dev/null || true; }
wait_until 25 app_true flow '(a["rate_ids_per_s"] or 0) > 0.85 * '$RATE' and a["rate_ids_per_s"] < 1.15 * '$RATE ||
    fail "flow: the rate never reached ~$RATE: $(cat "$DIR/app.json")"
app flow 'a["pool"]["length"], a["rate_ids_per_s"], a["runway"]["pool_s"]' >"$DIR/flow.txt"
info "flow: length, rate, pool_s = $(cat "$DIR/flow.txt")"
app_true flow 'abs(a["runway"]["pool_s"] - a["pool"]["length"] / '$RATE') <= 0.3 * a["pool"]["length"] / '$RATE ||
    fail "flow: pool_s is not length / $RATE: $(cat "$DIR/flow.txt")"
app_true flow 'abs(a["runway"]["pool_s"] - a["pool"]["length"] / a["rate_ids_per_s"]) <= 0.02 * a["runway"]["pool_s"] + 0.01' ||
    fail "flow: pool_s is not length / rate_ids_per_s: $(cat "$DIR/flow.txt")"
s=$(metric idpool_pool_runway_seconds flow)
python3 -c 'import sys; s = float(sys.argv[1]); sys.exit(not 30000 / 2000 * 0.6 < s < 60000 / 2000 * 1.4)' "$s" ||
    fail "idpool_pool_runway_seconds{app=flow} $s"
app_true idle 'a["runway"]["pool_s"] is None' || fail "idle: pool_s of a pool nothing consumes"
assert_eq +Inf "$(metric idpool_pool_runway_seconds idle)" "idle idpool_pool_runway_seconds"
if command -v promtool >/dev/null; then
    curl -sSf "$BASE/metrics" | promtool check metrics || fail "promtool check metrics"
else
    skip_part "promtool is not installed: /metrics not checked with it"
fi
pass "consumed at $RATE IDs/s: pool_s = length / rate ($(cat "$DIR/flow.txt")); nothing consumed: null, +Inf"

# --- idpoolctl status ------------------------------------------------------------
ctl_expect 0 --http "127.0.0.1:$HTTP_PORT" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" status
out_has '^KEY +STATE +TYPE +POOL +FILL +RATE/S +RUNWAY +ID-SPACE +ALERTS'
out_has '^space +served +monotonic +[0-9]+ +[0-9.]+% +[0-9.]+ +- +(29|30)\.?[0-9]*d +id_space_exhaustion'
out_has '^flow +served +monotonic( +[^ ]+){3} +[0-9]+s +- +-$'
out_has '^idle +served( +[^ ]+){4} +- +- +-$'
ctl_expect 0 --http "127.0.0.1:$HTTP_PORT" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" status --json
assert_eq True "$(jget '[29 < a["runway"]["id_space_days"] < 31 and a["runway"]["pool_s"] is None for a in d["apps"] if a["key"] == "space"][0]')" "status --json space runway"
assert_eq True "$(jget '[a["runway"]["pool_s"] > 0 for a in d["apps"] if a["key"] == "flow"][0]')" "status --json flow runway"
stop_consumer
pass "idpoolctl status: RUNWAY and ID-SPACE columns, --json runway"

stop_daemon a
pass "runway"
