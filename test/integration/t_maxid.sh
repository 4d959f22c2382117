#!/usr/bin/env bash
# A per-application ceiling, application.max_id (issue 24):
#
#   js-safe      `idpoolctl apps add --js-safe` sets max_id 2^53-1; with
#                current_offset planted 1500 below it the leases end at
#                max_id + 1 (the last one cut short), every ID taken is
#                <= 2^53-1 (all 1500 of them, each once), then the daemon says
#                the ID space is exhausted naming max_id, and
#                id_space_exhaustion fires naming it; /v1/apps shows max_id
#                (null for an application without one)
#   runway       an application whose ledger grew by a thirtieth of the space
#                left below max_id a day shows ~30 id_space_days and
#                id_space_exhaustion fires (id-space-warn-days 90): the runway
#                counts to max_id, not to 2^63-1
#   apps set     refuses to lower max_id below a leased ID, naming the
#                highest lease; accepts it at or above, and 0
#   start-above  `apps add --start-above DB.TABLE.COLUMN` (and --from-url)
#                starts above the table's MAX on the row's lattice, keeps the
#                normal start for an empty table, refuses a text column, a MAX
#                at or above max_id and a malformed name
#   old schema   without the column the daemon serves (no ceiling), says so
#                once, and reads the column again once sql/schema.sql adds it
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
JS=9007199254740991 # 2^53-1
CUR_JS=$((JS + 1 - 1500))
CTL=(--mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL")
ctl_expect 0 "${CTL[@]}" apps add js --js-safe --step 100 --max-pool 1000 \
    --min-percent 50 --per-take 100
grep -q "never gets an ID above max_id $JS (2^53-1" "$DIR/out" || fail "apps add --js-safe: $(cat "$DIR/out")"
assert_eq "$JS" "$(app_col js max_id)" "max_id of --js-safe"
set_app js current_offset=$CUR_JS
add_app plain step=100 max_pool_size=1000

# runway: ledger planted as t_runway does, a thirtieth of the space below max_id a day
CUR=4503599627370496 # 2^52: below 90 % of max_id (no offset warning)
G=$(((JS + 1 - CUR) / 30))
add_app space step=100 max_pool_size=1000 current_offset=$CUR max_id=$JS
SPACE_ID=$(app_col space id)
for k in $(seq 10 -1 1); do
    sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, created_at)
         VALUES ($SPACE_ID, 'space', $((CUR - k * G)), $((CUR - (k - 1) * G)), 'planted',
                 NOW(3) - INTERVAL $k DAY)"
done

printf 'id-space-warn-days = 90\n' >"$DIR/idpoold.conf"
start_daemon a --config "$DIR/idpoold.conf" --tick-ms 50 --reload-ms 200 \
    --alert-resolve-ms 300 --http "127.0.0.1:$HTTP_PORT"
wait_until 10 pool_ge js 900 || fail "js was not served"
wait_until 10 pool_ge plain 900 || fail "plain was not served"

app_true js 'a["config"]["max_id"] == "'$JS'"' || fail "/v1/apps/js: max_id: $(cat "$DIR/app.json")"
app_true plain 'a["config"]["max_id"] is None' || fail "/v1/apps/plain: max_id: $(cat "$DIR/app.json")"
pass "/v1/apps: config.max_id \"$JS\" for js, null for plain"

# --- js: take everything below the ceiling ------------------------------------
take() { rcli FCALL idpool_take 2 "$(pool_key js)" "$(meta_key js)" "$1" 2>&1 | sed '/^$/d'; }
: >"$DIR/ids.txt"
taken_all() {
    local out
    out=$(take 100)
    [[ $out == IDPOOL_NOAPP* || $out == ERR* ]] && fail "idpool_take refused: $out"
    [[ -n $out ]] && printf '%s\n' "$out" >>"$DIR/ids.txt"
    (($(grep -c . "$DIR/ids.txt") >= 1500)) || return 1
    [[ -z $(take 1) ]] # nothing more comes
}
wait_until 20 taken_all || fail "took $(grep -c . "$DIR/ids.txt") IDs of js, expected 1500"
python3 -c 'import sys
lo, top = int(sys.argv[1]), int(sys.argv[2])
ids = [int(x) for x in open(sys.argv[3]).read().split()]
bad = [i for i in ids if not lo <= i <= top]
if bad:
    sys.exit("IDs outside [%d, max_id %d]: %s" % (lo, top, bad[:3]))
if len(set(ids)) != len(ids):
    sys.exit("an ID was taken twice")
if len(ids) != 1500 or max(ids) != top:
    sys.exit("%d IDs, the highest %d; expected 1500 up to %d" % (len(ids), max(ids), top))' \
    "$CUR_JS" "$JS" "$DIR/ids.txt" || fail "js: IDs against max_id"
assert_eq $((JS + 1)) "$(sql "SELECT MAX(hi) FROM application_lease WHERE application_id = $(app_col js id)")" \
    "highest lease end of js"
assert_eq $((JS + 1)) "$(app_col js current_offset)" "current_offset of js"
wait_until 5 log_has a "app=js .*ID space exhausted: the next lease would start at $((JS + 1)), above max_id $JS" ||
    fail "no log line saying js is exhausted at max_id"
wait_until 5 log_has a "alert id_space_exhaustion firing app=js:.*max_id $JS" ||
    fail "id_space_exhaustion did not fire for js naming max_id"
log_has a "alert invalid_config firing app=js" && fail "invalid_config fired for js"
log_has a "alert id_space_exhaustion firing app=plain" && fail "id_space_exhaustion fired for plain"
[[ $(take 1) != IDPOOL_NOAPP* ]] || fail "idpool_take answers IDPOOL_NOAPP for an exhausted application"
pass "js-safe: 1500 IDs up to 2^53-1, each once, none above; then exhausted naming max_id"

# --- runway to max_id -------------------------------------------------------------
wait_until 10 app_true space 'a["runway"]["id_space_days"] is not None' ||
    fail "space: no id_space_days: $(cat "$DIR/app.json")"
days=$(app space 'a["runway"]["id_space_days"]')
app_true space '29 < a["runway"]["id_space_days"] < 31' || fail "space: id_space_days $days, expected ~30 (to max_id)"
app_true space 'int(a["runway"]["id_space_left"]) <= '"$((JS + 1 - CUR))" ||
    fail "space: id_space_left $(app space 'a["runway"]["id_space_left"]') above max_id + 1 - current_offset"
wait_until 5 log_has a "alert id_space_exhaustion firing app=space: the ID space runs out in about (29|30)\.[0-9] days.* left up to max_id $JS" ||
    fail "id_space_exhaustion did not fire for space at 30 days to max_id"
pass "runway counts to max_id: id_space_days ~30 ($days), id_space_exhaustion fires at 90 days"

# --- apps set max_id: never below a leased ID ---------------------------------------
top=$(sql "SELECT MAX(hi) FROM application_lease WHERE application_id = $SPACE_ID")
ctl_expect 1 "${CTL[@]}" apps set space max_id=$((top - 2))
[[ $ERR == *"max_id: cannot be lowered to $((top - 2)): lease ["*", $top) taken by '"*"max_id must be >= $((top - 1))"* ]] ||
    fail "apps set lowering max_id below a lease: $ERR"
assert_eq "$JS" "$(app_col space max_id)" "max_id of space after the refusal"
ctl_expect 1 "${CTL[@]}" apps set js max_id=$((JS - 1))
[[ $ERR == *"lease ["*", $((JS + 1)))"* ]] || fail "apps set js max_id below its last lease: $ERR"
ctl_expect 0 "${CTL[@]}" apps set space max_id=$((top - 1))
assert_eq $((top - 1)) "$(app_col space max_id)" "max_id at the highest leased ID"
ctl_expect 0 "${CTL[@]}" apps set space max_id=0
assert_eq 0 "$(app_col space max_id)" "max_id removed"
ctl_expect 0 "${CTL[@]}" --json apps show space
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(d["resolved"]["max_id"] is not None)' \
    "$DIR/out" || fail "apps show --json: resolved.max_id of a row without one: $(cat "$DIR/out")"
ctl_expect 0 "${CTL[@]}" apps list
grep -qE "^js +[0-9]+ +monotonic +100 +1000 +$JS +served" "$DIR/out" || fail "apps list: no MAX_ID of js: $(cat "$DIR/out")"
pass "apps set: max_id below the highest lease refused naming it; at it and 0 accepted; list and show"

# --- --start-above ------------------------------------------------------------------
sql "CREATE DATABASE shop; CREATE TABLE shop.orders (id BIGINT NOT NULL PRIMARY KEY, note VARCHAR(20));
     INSERT INTO shop.orders VALUES (17, 'a'), (123456, 'b');
     CREATE TABLE shop.empty (id INT UNSIGNED NOT NULL PRIMARY KEY)"
ctl_expect 0 "${CTL[@]}" apps add orders --start-above shop.orders.id --step 100 --max-pool 1000
grep -q "^shop.orders.id: MAX = 123456 -> start_offset 123457$" "$DIR/out" || fail "--start-above output: $(cat "$DIR/out")"
assert_eq 123457 "$(app_col orders start_offset)" "start_offset above MAX"
ctl_expect 0 "${CTL[@]}" --json apps add orders3 --start-above shop.orders.id --delta 10 \
    --remainder 3 --from-url "mysql://root@127.0.0.1:$MYSQL_PORT/shop"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["start_above"]
sys.exit(d != {"column": "shop.orders.id", "max": "123456", "start_offset": "123463"})' "$DIR/out" ||
    fail "--start-above with delta 10, remainder 3, --from-url: $(cat "$DIR/out")"
assert_eq 123463 "$(app_col orders3 start_offset)" "start_offset on the lattice above MAX"
ctl_expect 0 "${CTL[@]}" apps add fresh --start-above shop.empty.id
grep -q "^shop.empty.id: MAX = NULL (no rows) -> start_offset 1 (the normal start)$" "$DIR/out" ||
    fail "--start-above of an empty table: $(cat "$DIR/out")"
ctl_expect 1 "${CTL[@]}" apps add bad1 --start-above shop.orders.note
[[ $ERR == *"shop.orders.note: not an integer column"* ]] || fail "--start-above of a text column: $ERR"
ctl_expect 1 "${CTL[@]}" apps add bad2 --start-above shop.orders.id --max-id 123456
[[ $ERR == *"MAX = 123456 is at or above max_id 123456"* ]] || fail "--start-above at max_id: $ERR"
ctl_expect 2 "${CTL[@]}" apps add bad3 --start-above 'shop.orders.id`;'
[[ $ERR == *"expected DB.TABLE.COLUMN"* ]] || fail "--start-above with a bad name: $ERR"
ctl_expect 2 "${CTL[@]}" apps add bad4 --start-above shop.orders.id --start 5
ctl_expect 1 "${CTL[@]}" apps add bad5 --start-above shop.nosuch.id
[[ $ERR == *"doesn't exist"* ]] || fail "--start-above of a missing table: $ERR"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application WHERE entity_key LIKE 'bad%'")" "rows added by refused commands"
wait_until 10 pool_ge orders 900 || fail "orders was not served"
pop orders 500 "$DIR/orders" || fail "popping orders"
lowest=$(ids_text "$DIR/orders.0.bin" | sort -n | head -n 1)
assert_ge "$lowest" 123457 "lowest ID of orders"
pass "--start-above: MAX 123456 -> 123457 (123463 on delta 10 remainder 3, --from-url), empty table, refusals"

# --- a schema without the column ------------------------------------------------------
sql "UPDATE application SET deleted_at = 1 WHERE entity_key = 'js';
     ALTER TABLE application DROP COLUMN max_id"
add_app old step=100 max_pool_size=1000
wait_until 10 pool_ge old 900 || fail "old was not served on a schema without max_id"
log_has a "mysql: application has no column max_id" || fail "the daemon did not say that max_id is missing"
add_app old2 step=100 max_pool_size=1000 # served: loads after the first one
wait_until 10 pool_ge old2 900 || fail "old2 was not served on a schema without max_id"
assert_eq 1 "$(log_count a "application has no column max_id")" "log lines about the missing column"
sql_file "$IDPOOL_SOURCE_ROOT/sql/schema.sql" || fail "loading sql/schema.sql without max_id"
sql_file "$IDPOOL_SOURCE_ROOT/sql/schema.sql" || fail "loading sql/schema.sql a second time"
assert_eq 0 "$(app_col old max_id)" "max_id of a row upgraded"
wait_until 5 log_has a "application.max_id is there" || fail "the daemon did not read max_id again"
daemon_alive a || fail "daemon died"
stop_daemon a
pass "older schema: served without a ceiling, said once; sql/schema.sql adds max_id, read again"
pass "maxid"
