#!/usr/bin/env bash
# Shared ID spaces (application.id_space, issue 24): applications whose IDs
# go into one table name one id_space, and idpoold refuses to serve one
# whose IDs could meet another's of the space ("two workers with one id").
#  1. delta 2, remainders 0 and 1, one space: both served, their IDs never
#     meet. Applications without a space lease overlapping ranges: unaffected.
#  2. one's remainder set to the other's: both hold leases whose IDs now
#     meet (the check at load): neither is served (health reason, alert
#     id_space_conflict, a log line naming both), nothing new is pushed;
#     set back: served again, the alert resolves.
#  3. a new application of a space whose first lease would fall into another's
#     lease (the check of each reservation): the reservation is refused (no
#     lease recorded), said so, nothing served; moved above: served, resolved.
#     3c: a lease is judged by the lattice it recorded, not its row's now.
#  4. a schema without the column: every application in its own space, said
#     once, still served.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

HTTP_PORT=$(free_port)
small=(max_pool_size=2000 step=500 min_size_percent=50 max_size_per_times=500 max_size_per_second=5000)
add_app even "${small[@]}" delta=2 remainder=0 id_space=orders
add_app odd "${small[@]}" delta=2 remainder=1 id_space=orders
add_app own1 "${small[@]}"
add_app own2 "${small[@]}"
pushed() { rcli HGET "$(meta_key "$1")" pushed; }
alert_state() { rcli HGET "$(meta_key "$1")" "alert:id_space_conflict"; }
# pop KEY FILE: everything in the pool, appended to FILE.
pop() { rcli LPOP "$(pool_key "$1")" 2000 | sed '/^$/d' >>"$2"; }

start_daemon a --tick-ms 20 --reload-ms 150 --alert-resolve-ms 300 --http "127.0.0.1:$HTTP_PORT"
for k in even odd own1 own2; do
    wait_until 10 pool_ge "$k" 1600 || fail "$k was not served"
done
: >"$DIR/even.txt"
: >"$DIR/odd.txt"
for _ in $(seq 5); do
    pop even "$DIR/even.txt"
    pop odd "$DIR/odd.txt"
    wait_until 5 pool_ge even 1600 || fail "even was not refilled"
    wait_until 5 pool_ge odd 1600 || fail "odd was not refilled"
done
# check_apart: the IDs of even are even, of odd odd, none taken twice, none in both.
check_apart() {
    "$PYTHON" - "$DIR/even.txt" "$DIR/odd.txt" <<'PY'
import sys
e = [int(x) for x in open(sys.argv[1]).read().split()]
o = [int(x) for x in open(sys.argv[2]).read().split()]
if len(e) < 8000 or len(o) < 8000:
    sys.exit("too few IDs taken: %d, %d" % (len(e), len(o)))
if any(x % 2 for x in e) or any(x % 2 == 0 for x in o):
    sys.exit("an ID outside its lattice")
if len(set(e)) != len(e) or len(set(o)) != len(o):
    sys.exit("an ID taken twice from one application")
both = set(e) & set(o)
if both:
    sys.exit("IDs in both applications: %s" % sorted(both)[:5])
PY
}
check_apart || fail "the IDs of two applications of one space met"
# Their ranges overlap (one space split by remainder); so do own1's and own2's.
[[ $(sql "SELECT COUNT(*) FROM application_lease WHERE entity_key = 'odd' AND lo < 1001") -ge 1 ]] ||
    fail "odd did not lease from the start of the space"
[[ $(sql "SELECT COUNT(*) FROM application_lease WHERE entity_key = 'own2' AND lo < 1001") -ge 1 ]] ||
    fail "own2 did not lease from 1 like own1"
curl -fsS "http://127.0.0.1:$HTTP_PORT/v1/apps/even" >"$DIR/even.json" || fail "GET /v1/apps/even failed"
"$PYTHON" -c 'import json, sys
a = json.load(open(sys.argv[1]))
a = a.get("app", a)
sys.exit(a["config"]["id_space"] != "orders")' "$DIR/even.json" || fail "/v1/apps/even: no id_space: $(cat "$DIR/even.json")"
log_has a "id_space_conflict" && fail "a conflict was reported: $(grep -m1 id_space_conflict "$DIR/a.log")"
pass "one space, delta 2, remainders 0 and 1: both served, $(wc -l <"$DIR/even.txt") + $(wc -l <"$DIR/odd.txt") IDs, none in both; applications without a space overlap freely"

# 2. odd's remainder set to even's: refused at load, both (either could hand out an ID of the other).
ctl apps set odd remainder=0 >/dev/null || fail "apps set odd remainder=0 failed"
id_even=$(app_col even id)
id_odd=$(app_col odd id)
re="alert id_space_conflict firing app=odd: id_space_conflict: id_space 'orders': application 'odd' \(id $id_odd, delta 2 remainder 0, leased up to [0-9]+\) and 'even' \(id $id_even, delta 2 remainder 0, leased up to [0-9]+\) can both hand out ID [0-9]+; not served"
wait_until 5 log_has a "$re" || fail "no alert naming odd, even and the space: $(grep -m3 'odd' "$DIR/a.log" | tail -n 1)"
wait_until 3 log_has a "alert id_space_conflict firing app=even: " || fail "even was not refused too"
assert_eq 1 "$(grep -cE "error app=odd id_space_conflict: " "$DIR/a.log")" "the refusal of odd logged once"
[[ $(alert_state odd) == firing ]] || fail "meta of odd: alert:id_space_conflict is '$(alert_state odd)'"
curl -fsS "http://127.0.0.1:$HTTP_PORT/v1/apps/odd" >"$DIR/odd.json" || fail "GET /v1/apps/odd failed"
"$PYTHON" - "$DIR/odd.json" <<'PY' || fail "/v1/apps/odd does not show the conflict: $(cat "$DIR/odd.json")"
import json, sys
a = json.load(open(sys.argv[1]))
a = a.get("app", a)
text = json.dumps(a)
if "id_space_conflict" not in a.get("alerts", []) or "id_space 'orders'" not in text:
    sys.exit(1)
PY
ctl apps show odd --json >"$DIR/show.json" || fail "apps show odd --json failed"
"$PYTHON" -c 'import json, sys
a = json.load(open(sys.argv[1]))
sys.exit(a["columns"]["id_space"] != "orders" or a["resolved"]["id_space"] != "orders")' "$DIR/show.json" ||
    fail "apps show --json: no id_space: $(cat "$DIR/show.json")"
# Nothing new: what the pools hold is drained, and stays empty.
before=$(pushed odd)
pop odd "$DIR/odd.txt"
pop even "$DIR/even.txt"
wait_until 2 pool_ge odd 1 && fail "odd was refilled while refused"
assert_eq "$before" "$(pushed odd)" "IDs pushed to odd while refused"
check_apart || fail "IDs met while refused"
pass "odd's remainder set to even's: both refused at load (alert, log naming both and the space), nothing pushed"

ctl apps set odd remainder=1 >/dev/null || fail "apps set odd remainder=1 failed"
wait_until 5 log_has a "app=odd its IDs no longer meet another application's of its id_space; serving again" ||
    fail "odd not served again"
wait_until 5 log_has a "alert id_space_conflict resolved app=odd" || fail "the alert of odd did not resolve"
wait_until 5 log_has a "alert id_space_conflict resolved app=even" || fail "the alert of even did not resolve"
for _ in 1 2; do
    wait_until 5 pool_ge odd 1600 || fail "odd was not refilled after the fix"
    wait_until 5 pool_ge even 1600 || fail "even was not refilled after the fix"
    pop odd "$DIR/odd.txt"
    pop even "$DIR/even.txt"
done
check_apart || fail "IDs met after the fix"
pass "set back: both served again, the alerts resolve, the IDs stay apart"

# 3. The reservation's check: lead leases first; late starts inside lead's leases.
add_app lead "${small[@]}" id_space=shared
wait_until 10 pool_ge lead 1600 || fail "lead was not served"
add_app late "${small[@]}" id_space=shared start_offset=11
id_lead=$(app_col lead id)
id_late=$(app_col late id)
re="app=late cannot reserve a lease: id_space_conflict: id_space 'shared': the next lease \[11, [0-9]+\) of 'late' \(id $id_late, delta 1 remainder 0\) meets lease \[1, [0-9]+\) of 'lead' \(id $id_lead, delta 1 remainder 0\) at ID 11, in both: refused"
wait_until 5 log_has a "$re" || fail "no refusal naming late, lead, the space, the lease and ID 11: $(grep -m3 'app=late' "$DIR/a.log" | tail -n 1)"
wait_until 3 log_has a "alert id_space_conflict firing app=late: id_space_conflict: id_space 'shared'" ||
    fail "no alert id_space_conflict for late"
wait_until 2 pool_ge late 1 && fail "late was served"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE entity_key = 'late'")" "leases of late"
assert_eq 1 "$(grep -cE "app=late cannot reserve a lease: id_space_conflict" "$DIR/a.log")" \
    "the refused reservation logged once"
log_has a "alert id_space_conflict firing app=lead" && fail "lead was refused"
pass "a lease that would meet another's is refused in its transaction (nothing recorded), logged once, alerted"

ctl apps set late start_offset=1000000000000000 >/dev/null || fail "apps set late start_offset failed"
wait_until 5 pool_ge late 1600 || fail "late not served once above lead"
wait_until 5 log_has a "alert id_space_conflict resolved app=late" || fail "the alert of late did not resolve"
[[ $(sql "SELECT MIN(lo) FROM application_lease WHERE entity_key = 'late'") -ge 1000000000000000 ]] ||
    fail "late leased below its new start"
pass "moved above lead: late served, the alert resolves"

# 3b. Two reservations of one space at once: a lease another transaction
# inserted and has not committed yet is waited for, not read past (here a
# session stands in for another daemon's reservation of racer1).
add_app racer1 "${small[@]}" id_space=race
wait_until 10 pool_ge racer1 1600 || fail "racer1 was not served"
far=100000000000000
mariadb_at "$MYSQL_PORT" -e "START TRANSACTION;
    INSERT INTO application_lease (application_id, entity_key, lo, hi, instance)
    VALUES ($(app_col racer1 id), 'racer1', $far, $((far + 1000000)), 'other');
    SELECT SLEEP(3); COMMIT;" >/dev/null &
session=$!
wait_until 5 eval '[[ $(sql "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_rows_modified > 0") -ge 1 ]]' ||
    fail "the session's transaction did not start"
add_app racer2 "${small[@]}" id_space=race start_offset=$far
wait "$session" || fail "the session failed"
wait_until 5 log_has a "app=racer2 cannot reserve a lease: id_space_conflict: id_space 'race': the next lease \[$far, [0-9]+\) of 'racer2' .* meets lease \[$far, $((far + 1000000))\) of 'racer1'" ||
    fail "racer2 was not refused: $(grep -m3 'app=racer2' "$DIR/a.log" | tail -n 1)"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE entity_key = 'racer2'")" "leases of racer2"
pass "a reservation waits for another's uncommitted lease of its space, then is refused"

# 3c. A lease recorded on another lattice than its row's now (its remainder
# changed since): judged by the lattice it recorded. hist (delta 2,
# remainder 1 now) has an old lease far up taken with remainder 0; nxt
# (delta 2, remainder 0) starts inside it: their current lattices never
# meet, the recorded one does.
add_app hist "${small[@]}" id_space=hist delta=2 remainder=1
wait_until 10 pool_ge hist 800 || fail "hist was not served"
sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, delta, remainder, start_offset)
     VALUES ($(app_col hist id), 'hist', $far, $((far + 1000000)), 'before', 2, 0, 1)"
add_app nxt "${small[@]}" id_space=hist delta=2 remainder=0 start_offset=$((far + 10))
wait_until 5 log_has a "app=nxt cannot reserve a lease: id_space_conflict: id_space 'hist': the next lease \[$((far + 10)), [0-9]+\) of 'nxt' .* meets lease \[$far, $((far + 1000000))\) of 'hist' \(id [0-9]+, delta 2 remainder 0\) at ID $((far + 10))" ||
    fail "nxt was not refused by hist's lease on its recorded lattice: $(grep -m3 'app=nxt' "$DIR/a.log" | tail -n 1)"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE entity_key = 'nxt'")" "leases of nxt"
pass "a lease is judged by the lattice it recorded, not by its row's now"

# 4. A schema without application.id_space: every application in its own space.
sql "ALTER TABLE application DROP COLUMN id_space"
wait_until 5 log_has a "application has no column id_space \(the schema is older than this idpoold\)" ||
    fail "the missing column was not reported"
pop own1 /dev/null
wait_until 5 pool_ge own1 1600 || fail "own1 not refilled against the older schema"
ctl apps add own3 --max-pool 2000 --step 500 --min-percent 50 --per-take 500 --per-second 5000 >/dev/null 2>"$DIR/ctl.err" ||
    fail "apps add against the older schema: $(cat "$DIR/ctl.err")"
ctl apps list >/dev/null 2>"$DIR/ctl.err" || fail "apps list against the older schema: $(cat "$DIR/ctl.err")"
grep -q "warning: application has no column id_space" "$DIR/ctl.err" || fail "idpoolctl did not warn"
wait_until 5 pool_ge own3 1600 || fail "own3 (added by idpoolctl) not served against the older schema"
sql_file "$IDPOOL_SOURCE_ROOT/sql/schema.sql" || fail "loading sql/schema.sql again failed"
wait_until 5 log_has a "application.id_space is there" || fail "the column's return was not noticed"
assert_eq 1 "$(grep -c "application has no column id_space" "$DIR/a.log")" "the warning said once"
daemon_alive a || fail "daemon died"
stop_daemon a
pass "an older schema: served, each application in its own space, said once"
pass "shared_space"
