#!/usr/bin/env bash
# idpoolctl (issue 3), every command against real servers, error paths
# included: exit codes 0 / 1 (error) / 2 (usage), messages that name the key
# and the field, --json documents that parse, --help for each command. The
# end-to-end parts: a row added with idpoolctl is served by idpoold, an edit
# is applied, disable/enable stop and resume refills, take goes through
# idpool_take (IDs increasing for a monotonic application, IDPOOL_LIMIT above
# max_size_per_times), status reads the daemon's /v1/apps and falls back to
# Redis + MySQL when no daemon answers.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"

# idpoolctl finds the servers the way idpoold does: IDPOOL_REDIS_URL and
# IDPOOL_MYSQL_URL come from setup; nothing listens on the HTTP port until
# the daemon starts.
HTTP_PORT=$(free_port)
export IDPOOL_HTTP_ADDR=127.0.0.1:$HTTP_PORT
DEAD_PORT=$(free_port) # nothing listens here

# one_line_err: the error is a single line (connection problems).
one_line_err() { assert_eq 1 "$(wc -l <"$DIR/err" | tr -d ' ')" "lines on stderr ($ERR)"; }
# json_ok: stdout is one valid JSON document.
json_ok() { python3 -m json.tool "$DIR/out" >/dev/null || fail "stdout is not valid JSON: $(head -c 2000 "$DIR/out")"; }
# usage_err ARGS... ERE: idpoolctl ARGS exits 2 (usage) with a message matching ERE.
usage_err() {
    local re=${*: -1}
    ctl_expect 2 "${@:1:$#-1}"
    err_has "$re"
}

# ----------------------------------------------------------------- help ---
ctl_expect 0 --help
out_has '^Usage: idpoolctl \[global options\] COMMAND'
out_has 'apps add KEY'
out_has '--redis URL'
out_has 'IDPOOL_MYSQL_URL'
out_has '--json'
ctl_expect 0 --version
out_has '^idpoolctl [0-9]+\.[0-9]+'
ctl_expect 0 help
out_has '^Usage: idpoolctl'
ctl_helps "apps" "apps list" "apps show" "apps add" "apps set" "apps disable" "apps enable" \
    "status" "take"
ctl_expect 0 apps add --help
out_has '--per-take N'
out_has '--increment-max N'
ctl_expect 0 apps set --help
out_has 'current_offset'
out_has '--force'
pass "--help for idpoolctl and every command, --version"

# ---------------------------------------------------------- usage errors ---
usage_err "missing command"
usage_err frob "unknown command 'frob'"
usage_err apps "missing command"
usage_err apps frob "unknown command 'apps frob'"
usage_err apps list --bogus "unknown option '--bogus'"
usage_err --bogus apps list "unknown option '--bogus'"
usage_err --tick-ms abc apps list "--tick-ms.*'abc'"
usage_err apps list extra "unexpected argument 'extra'"
usage_err apps show "missing KEY"
usage_err apps add "missing KEY"
usage_err apps add x --step "--step: missing value"
usage_err apps add x --step 12abc "--step.*'12abc'"
usage_err apps add x --per-take 1.5 "--per-take.*'1\\.5'"
usage_err apps add x --max-pool ' 10' "--max-pool.*' 10'"
usage_err apps add x --type sorted "--type.*monotonic.*'sorted'"
usage_err apps set x "nothing to set"
usage_err apps set x step "expected field=value, got 'step'"
usage_err apps set x step=10x "step.*'10x'"
usage_err apps set x nosuch=1 "unknown field 'nosuch'"
usage_err apps set x step=1 step=2 "'step' given twice"
usage_err apps set x current_offset=5 "current_offset.*never needed.*--force"
for f in id entity_key version deleted_at create_time update_time; do
    usage_err apps set x "$f=1" "field '$f' cannot be set"
done
usage_err apps set x deleted_at=1 "apps disable"
usage_err apps disable "missing KEY"
usage_err apps enable "missing KEY"
usage_err take "missing KEY"
usage_err take x 0 "N: must be an integer in 1\\.\\.10000000, got '0'"
usage_err take x abc "N: .*'abc'"
usage_err take x 1 2 "unexpected argument '2'"
usage_err status extra "unexpected argument 'extra'"
# --json: stdout is a JSON document even for a usage error.
ctl_expect 2 --json frob
json_ok
assert_eq 2 "$(jget 'd["exit_code"]')" "exit_code in the --json error"
pass "usage errors exit 2 and name the command, option, field or value"

# ------------------------------------------------------------- apps add ---
ctl_expect 0 apps list
out_has '^KEY +ID +TYPE +STEP +MAX_POOL +MAX_ID +STATE'
ctl_expect 0 --json apps list
json_ok
assert_eq 0 "$(jget 'len(d["apps"])')" "apps in an empty table"

# user: pool 1000 (low water 800), takes of at most 10 IDs.
ctl_expect 0 apps add user --name "Users" --step 100 --max-pool 1000 --per-take 10 --per-second 100000
out_has "added application 'user' \\(id [0-9]+\\)"
assert_eq 100 "$(app_col user step)" "user step"
assert_eq 1000 "$(app_col user max_pool_size)" "user max_pool_size"
assert_eq 10 "$(app_col user max_size_per_times)" "user max_size_per_times"
assert_eq 100000 "$(app_col user max_size_per_second)" "user max_size_per_second"
assert_eq Users "$(app_col user entity_name)" "user entity_name"
assert_eq 1 "$(app_col user increasing_type)" "user increasing_type"

ctl_expect 0 --json apps add order --type trend --start 1000 --step 50 --max-pool 500 \
    --min-percent 50 --per-take 20 --per-second 300 --interval 50 --delta 3 --remainder 1 \
    --increment-max 4 --name "Orders, 'quoted' \"name\" \\ ok"
json_ok
assert_eq added "$(jget 'd["result"]')" "--json add result"
assert_eq order "$(jget 'd["key"]')" "--json add key"
# The JSON rule (as /v1/apps): ID-space values are strings, counts and row ids numbers.
assert_eq int "$(jget 'type(d["id"]).__name__')" "--json add: the row id as a number"
assert_eq "str str int int" "$(jget '" ".join(type(d["app"]["resolved"][k]).__name__ for k in ("start_offset", "current_offset", "step", "low_water"))')" \
    "--json add: offsets as strings, sizes as numbers"
assert_eq 2 "$(jget 'd["app"]["columns"]["increasing_type"]')" "order increasing_type"
assert_eq trend "$(jget 'd["app"]["resolved"]["increasing_type"]')" "order type in force"
assert_eq 250 "$(jget 'd["app"]["resolved"]["low_water"]')" "order low water"
for kv in start_offset=1000 step=50 max_pool_size=500 min_size_percent=50 max_size_per_times=20 \
    max_size_per_second=300 interval=50 delta=3 remainder=1 increment_max=4; do
    assert_eq "${kv#*=}" "$(app_col order "${kv%%=*}")" "order ${kv%%=*}"
done
assert_eq "Orders, 'quoted' \"name\" \\ ok" "$(app_col order entity_name)" "order entity_name (escaping)"

# Duplicates, and rows the daemon would refuse: exit 1, nothing written.
ctl_expect 1 apps add user
err_has "application 'user' already exists \\(id [0-9]+\\)"
ctl_expect 1 apps add USER
err_has "application 'USER'.*'user'"
ctl_expect 1 apps add neg --step -5
err_has "application 'neg'.*step: must be 1\\.\\.1000000"
ctl_expect 1 apps add fit --step 1000 --max-pool 1100
err_has "application 'fit'.*max_pool_size: must be >= 5000"
ctl_expect 1 apps add rem --delta 4 --remainder 4
err_has "application 'rem'.*remainder: must be"
ctl_expect 1 apps add taker --per-take 7000 --max-pool 6000
err_has "application 'taker'.*max_size_per_times: must be <= max_pool_size"
ctl_expect 1 apps add taker --per-take 5000 --per-second 1000
err_has "application 'taker'.*max_size_per_times: must be <= max_size_per_second \\(1000\\), got 5000: a take of more than a second grants can never be served"
# Valid, but its full pool would take ~954 MiB of Redis: added with a
# warning naming the bytes (idpoold raises pool_memory: t_invalid); then
# removed before any daemon runs here.
ctl_expect 0 apps add huge --max-pool 100000000 --per-second 100000000
err_has "apps add: warning: application 'huge': a full pool of 100000000 IDs takes about 954 MiB of Redis \\(10 bytes an ID\\), above pool-memory-mb 64"
ctl_expect 0 --json apps set huge max_pool_size=90000000
assert_eq "a full pool of 90000000 IDs takes about 859 MiB" "$(jget 'd["warnings"][0][:47]')" "apps set --json warnings"
ctl_expect 0 apps set huge max_pool_size=1000000
[[ $ERR != *warning* ]] || fail "apps set under the budget warned: $ERR"
sql "DELETE FROM application WHERE entity_key = 'huge'"
ctl_expect 1 apps add 'a b'
err_has "entity_key: must match"
ctl_expect 1 apps add 'k{x}'
err_has "entity_key: must match"
ctl_expect 1 --json apps add neg --type 3
json_ok
err_has "application 'neg'.*increasing_type: must be 1 \\(monotonic\\) or 2 \\(trend\\), got 3"
assert_eq 1 "$(jget 'd["exit_code"]')" "exit_code in the --json error"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application WHERE entity_key IN ('neg','fit','rem','taker','a b','k{x}')")" \
    "rows written by failed adds"
assert_eq 2 "$(sql "SELECT COUNT(*) FROM application")" "rows after the adds"
pass "apps add: writes valid rows (strings escaped), refuses invalid rows and duplicates"

# ------------------------------------------------------- list and show ---
add_app b_step step=-5 # written behind idpoolctl's back: invalid
ctl_expect 0 apps list
out_has '^user +[0-9]+ +monotonic +100 +1000 +- +served$'
out_has '^order +[0-9]+ +trend +50 +500 +- +served$'
out_has "^b_step +[0-9]+ +monotonic +-5 +default +- +INVALID: step: must be 1\\.\\.1000000" # max_pool_size 0: the default, not a pool of 0
ctl_expect 0 --json apps list
json_ok
assert_eq 3 "$(jget 'len(d["apps"])')" "apps listed"
assert_eq "invalid step" "$(jget '" ".join([a["state"] + " " + a["error"].split(": ")[1] for a in d["apps"] if a["key"] == "b_step"])')" \
    "b_step in --json list"
assert_eq "served" "$(jget '[a["state"] for a in d["apps"] if a["key"] == "user"][0]')" "user state"

ctl_expect 0 apps show user
out_has '^application: +user \(id [0-9]+\)'
out_has '^state: +served'
out_has '^validation: +ok'
out_has '^  max_size_per_times +10 +10$'
out_has '^  max_size_per_second +100000 +100000$'
out_has '^  min_size_percent +0 +80 \(low water 800\)'
out_has '^  pool key +idpool:\{user\}:pool'
out_has '^  pool length +0 '
ctl_expect 0 apps show b_step
out_has '^state: +INVALID'
out_has "^validation: +application 'b_step' \\(id [0-9]+\\): step: must be"
ctl_expect 0 --json apps show order
json_ok
assert_eq "idpool:{order}:pool" "$(jget 'd["redis"]["pool_key"]')" "--json show pool key"
assert_eq 0 "$(jget 'd["redis"]["pool_length"]')" "--json show pool length"
assert_eq int "$(jget 'type(d["redis"]["pool_length"]).__name__')" "--json show: pool length as a number"
ctl_expect 1 apps show nokey
err_has "no application 'nokey'"
ctl_expect 1 --json apps show nokey
json_ok
pass "apps list and apps show: states, reasons, resolved values, Redis"

# ---------------------------------------------- no daemon: status, take ---
ctl_expect 0 status
out_has '^KEY +STATE +TYPE +POOL +FILL +RATE/S +RUNWAY +ID-SPACE +ALERTS'
out_has '^user +served +monotonic +0 +0\.0% +\? +- +- +- *$'
out_has '^b_step +INVALID'
out_has "^-- no idpoold answered at http://127\\.0\\.0\\.1:$HTTP_PORT .*Redis and MySQL directly"
ctl_expect 0 --json status
json_ok
assert_eq direct "$(jget 'd["source"]')" "status source without a daemon"
assert_eq None "$(jget '[a["rate_ids_per_s"] for a in d["apps"] if a["key"] == "user"][0]')" "rate without a daemon"
# No daemon ever ran against this Redis: the function library is not loaded.
ctl_expect 1 take user 1 --timeout-ms 500
err_has "application 'user': got 0 of 1 IDs: timed out.*Function not found.*no idpool_take function"
pass "status and take without a daemon"

# --------------------------------------------------- with the daemon ---
start_daemon a --tick-ms 20 --reload-ms 200 --http "127.0.0.1:$HTTP_PORT"
wait_until 10 pool_ge user 1000 || fail "user pool never filled"
wait_until 10 pool_ge order 500 || fail "order pool never filled"

# A row added with idpoolctl is served without a restart.
ctl_expect 0 apps add late --step 100 --max-pool 500 --per-take 10
wait_until 5 pool_ge late 500 || fail "late (added by idpoolctl) was not served"
pass "apps add: idpoold serves the new application within the reload interval"

# set: the change reaches MySQL and the daemon applies it.
ctl_expect 0 apps set late max_pool_size=1000 entity_name="late one"
out_has '^  max_pool_size +500 -> 1000$'
assert_eq 1000 "$(app_col late max_pool_size)" "late max_pool_size"
assert_eq "late one" "$(app_col late entity_name)" "late entity_name"
wait_until 5 pool_ge late 1000 || fail "late pool did not grow to the new max_pool_size"
ctl_expect 0 --json apps set late increasing_type=trend step=200
json_ok
assert_eq updated "$(jget 'd["result"]')" "--json set result"
assert_eq "increasing_type:1:2 step:100:200" \
    "$(jget '" ".join(c["field"] + ":" + c["old"] + ":" + c["new"] for c in d["changes"])')" "--json set changes"
assert_eq 2 "$(app_col late increasing_type)" "late increasing_type"
wait_until 3 log_has a 'app=late row changed: trend step=200' || fail "daemon did not apply the edit"
ctl_expect 0 apps set late increasing_type=monotonic
assert_eq 1 "$(app_col late increasing_type)" "late increasing_type back"
ctl_expect 0 apps set late step=200
out_has 'no change'
# An edit that breaks a rule is refused, naming the key and the field; nothing changes.
ctl_expect 1 apps set late step=1000
err_has "application 'late' \\(id [0-9]+\\): max_pool_size: must be"
err_has "nothing changed"
assert_eq 200 "$(app_col late step)" "late step after a refused edit"
ctl_expect 1 apps set late min_size_percent=100
err_has "application 'late'.*min_size_percent: must be 1\\.\\.99"
ctl_expect 1 apps set nokey step=10
err_has "no application 'nokey'"
# current_offset only with --force.
off=$(app_col late current_offset)
ctl_expect 0 apps set late --force current_offset=$((off + 1000000))
assert_eq $((off + 1000000)) "$(app_col late current_offset)" "late current_offset with --force"
pass "apps set: applied and served, invalid results refused, current_offset only with --force"

# disable / enable.
ctl_expect 0 apps disable late
out_has "disabled application 'late'"
assert_ne 0 "$(app_col late deleted_at)" "late deleted_at after disable"
ctl_expect 0 apps disable late
out_has 'already disabled'
ctl_expect 0 apps list
out_has '^late +[0-9]+ +monotonic +200 +1000 +- +deleted$'
wait_until 3 log_has a 'app=late soft-deleted' || fail "daemon did not see the soft delete"
rcli LPOP "$(pool_key late)" 500 >/dev/null
sleep 0.5
assert_eq 500 "$(llen late)" "late pool while disabled (no refill)"
ctl_expect 0 --json apps enable late
json_ok
assert_eq enabled "$(jget 'd["result"]')" "--json enable result"
assert_eq 0 "$(app_col late deleted_at)" "late deleted_at after enable"
# 500 left, low water 800: refilled by whole steps of 200 to at least 800.
wait_until 5 pool_ge late 800 || fail "late not refilled after enable"
ctl_expect 0 apps enable late
out_has 'already enabled'
# An invalid row is not enabled.
add_app b_off step=-5 deleted_at=1
ctl_expect 1 apps enable b_off
err_has "application 'b_off' \\(id [0-9]+\\): step: must be"
assert_eq 1 "$(app_col b_off deleted_at)" "b_off stays disabled"
ctl_expect 1 apps disable nokey
err_has "no application 'nokey'"
ctl_expect 1 apps enable nokey
err_has "no application 'nokey'"
pass "apps disable / enable stop and resume refills"

# take: through idpool_take, with the limits idpoold syncs into meta.
wait_until 5 eval "[[ \$(rcli HGET '$(meta_key user)' per_take) == 10 ]]" ||
    fail "idpoold did not sync user's limits into meta"
ctl_expect 0 take user 5
assert_eq 5 "$(wc -l <"$DIR/out" | tr -d ' ')" "IDs printed by take user 5"
grep -qvE '^[0-9]+$' "$DIR/out" && fail "take printed something else than IDs: $(<"$DIR/out")"
assert_increasing "$DIR/out"
cp "$DIR/out" "$DIR/take1.txt"
ctl_expect 0 take user
assert_eq 1 "$(wc -l <"$DIR/out" | tr -d ' ')" "IDs printed by take user"
assert_gt "$(<"$DIR/out")" "$(tail -n 1 "$DIR/take1.txt")" "take user after take user 5"
ctl_expect 0 --json take user 10
json_ok
assert_eq 10 "$(jget 'len(d["ids"])')" "--json take: IDs"
assert_eq True "$(jget 'all(isinstance(i, str) and i.isdigit() for i in d["ids"])')" "--json take: IDs as strings"
assert_eq True "$(jget 'all(int(a) < int(b) for a, b in zip(d["ids"], d["ids"][1:]))')" "--json take: increasing"
# Above max_size_per_times (10) libidpool takes 10 at a time (IDPOOL_LIMIT
# brings its batch down): 25 IDs in at least 3 takes.
ctl_expect 0 --json take user 25
json_ok
assert_eq 25 "$(jget 'len(d["ids"])')" "--json take 25: IDs"
assert_eq True "$(jget 'all(int(a) < int(b) for a, b in zip(d["ids"], d["ids"][1:]))')" "--json take 25: increasing"
assert_ge "$(jget 'd["client"]["takes"]')" 3 "takes of at most 10 for 25 IDs"
ctl_expect 1 take nokey 1 --timeout-ms 500
err_has "application 'nokey': got 0 of 1 IDs: no environment serves this application.*IDPOOL_NOAPP"
err_lacks "idpool_app_last_error" # a shell user is told what happened, not which C call says it
ctl_expect 2 take user 1 --env ftp://x
err_has "environment 0: unsupported scheme 'ftp://'"
ctl_expect 2 take user 1 --timeout-ms 0
err_has "--timeout-ms: must be an integer in 1\.\.3600000, got '0'"
pass "take: increasing IDs from a monotonic app through libidpool, several takes above max_size_per_times, errors"

# A long take shows its progress on stderr when that is a terminal (a pty
# here): one line overwritten (\r), blanked at the end, nothing else; a
# short one shows nothing, and neither does a long one whose stderr is a
# file. slow: 1000 IDs a (Redis) second, so a take of 4000 lasts 2 to 3 s.
ctl_expect 0 apps add slow --step 1000 --max-pool 6000 --per-take 1000 --per-second 1000
wait_until 10 pool_ge slow 4000 || fail "slow pool never filled"
# on_pty OUT ERR ARGS...: idpoolctl ARGS with stderr on a pty (read into ERR),
# stdout to OUT; prints its exit status and how long it took (ms).
on_pty() {
    python3 - "$IDPOOLCTL" "$@" <<'PY'
import os, pty, select, subprocess, sys, time
ctl, out, err, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
master, slave = pty.openpty()
t0 = time.monotonic()
with open(out, "wb") as f:
    p = subprocess.Popen([ctl] + args, stdin=subprocess.DEVNULL, stdout=f, stderr=slave)
os.close(slave)
data = b""
while time.monotonic() - t0 < 60:
    if select.select([master], [], [], 1)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        data += chunk
rc = p.wait(timeout=10)
open(err, "wb").write(data)
print(rc, int((time.monotonic() - t0) * 1000))
PY
}
read -r rc ms < <(on_pty "$DIR/out" "$DIR/pty" take slow 4000 --timeout-ms 20000)
assert_eq 0 "$rc" "take slow 4000 on a pty: exit status ($(cat -v "$DIR/pty"))"
assert_eq 4000 "$(grep -cE '^[0-9]+$' "$DIR/out")" "IDs printed by take slow 4000"
python3 - "$DIR/pty" <<'PY' || fail "take slow 4000: the progress on the pty: $(cat -v "$DIR/pty")"
import re, sys
from harness import check
d = open(sys.argv[1], "rb").read().decode()
# The pty turns \n into \r\n; a progress line is "\rtake slow: N of 4000 IDs (P%), S s".
lines = re.findall(r"\rtake slow: (\d+) of 4000 IDs \((\d+)%\), (\d+) s", d)
check(lines, "no progress line")
check(all(int(n) <= 4000 and int(p) == int(n) * 100 // 4000 for n, p, _ in lines), lines)
check(int(lines[0][2]) >= 1, "progress before a second: %r" % (lines[0],))
m = re.search(r"\r(take slow: [^\r]*)\r( +)\r$", d)
check(m is not None and len(m.group(2)) == len(m.group(1)), "the last line not blanked: %r" % d[-120:])
check(re.sub(r"\rtake slow: \d+ of 4000 IDs \(\d+%\), \d+ s|\r +\r", "", d) == "", "something else: %r" % d)
print("%d progress lines, the last %r" % (len(lines), lines[-1]))
PY
info "take slow 4000 on a pty: $ms ms, $(tr '\r' '\n' <"$DIR/pty" | grep -c 'take slow') progress lines"
read -r rc ms < <(on_pty "$DIR/out" "$DIR/pty" take user 5)
assert_eq 0 "$rc" "take user 5 on a pty"
assert_eq "" "$(cat "$DIR/pty")" "a short take's stderr on a pty"
wait_until 10 pool_ge slow 4000 || fail "slow pool not refilled"
t0=$(now_us)
ctl_expect 0 take slow 4000 --timeout-ms 20000
assert_ge $((($(now_us) - t0) / 1000)) 1500 "ms of take slow 4000 (long enough to show progress on a terminal)"
assert_eq "" "$ERR" "a long take's stderr when it is not a terminal"
pass "take: a long take shows its progress on a terminal's stderr and blanks it; a short one, or stderr not a terminal, nothing"

# status from the daemon's /v1/apps.
wait_until 5 eval "'$IDPOOLCTL' --json status 2>/dev/null | grep -q '\"source\":[[:space:]]*\"daemon\"'" ||
    fail "status never read the daemon's /v1/apps"
ctl_expect 0 status
out_has "^-- from idpoold at http://127\\.0\\.0\\.1:$HTTP_PORT/v1/apps"
out_has '^user +served +monotonic +[0-9]+ +[0-9.]+% +[0-9.]+ '
out_has '^order +served +trend '
out_has '^b_step +INVALID'
ctl_expect 0 --json status
json_ok
assert_eq daemon "$(jget 'd["source"]')" "status source with a daemon"
assert_eq True "$(jget '[a["rate_ids_per_s"] is not None and a["pool_length"] is not None for a in d["apps"] if a["key"] == "user"][0]')" \
    "user rate and pool length from the daemon"
pass "status reads idpoold's /v1/apps"

stop_daemon a
ctl_expect 0 status
out_has "^-- no idpoold answered at http://127\\.0\\.0\\.1:$HTTP_PORT .*directly"
out_has '^user +served +monotonic +[0-9]+ '
ctl_expect 0 --http '' status
out_has "^-- .*HTTP address is disabled"
pass "status falls back to Redis and MySQL when the daemon is gone"

# ---------------------------------------------------- unreachable servers ---
ctl_expect 1 --redis "redis://:topsecret@127.0.0.1:$DEAD_PORT/0" take user --timeout-ms 300
err_has "environment 0 \\(127\\.0\\.0\\.1:$DEAD_PORT: cannot connect: Connection refused\\)"
one_line_err
[[ $ERR != *topsecret* ]] || fail "a password was printed: $ERR"
# Every environment down: each one's reason, not only the last one tried.
DEAD2=$(free_port) DEAD3=$(free_port)
IDPOOL_TOKEN=idp_x ctl_expect 1 take user --timeout-ms 1000 --env "redis://127.0.0.1:$DEAD_PORT/0" \
    --env "redis://127.0.0.1:$DEAD2/0" --env "http://127.0.0.1:$DEAD3"
for e in "0 $DEAD_PORT" "1 $DEAD2" "2 $DEAD3"; do
    err_has "; environment ${e% *} \\(127\\.0\\.0\\.1:${e#* }: [^)]*(refused|connect)[^)]*\\)"
done
one_line_err
ctl_expect 1 --mysql "mysql://root:topsecret@127.0.0.1:$DEAD_PORT/idpool" apps list
err_has "cannot connect to MySQL at 127\\.0\\.0\\.1:$DEAD_PORT/idpool"
one_line_err
[[ $ERR != *topsecret* ]] || fail "a password was printed: $ERR"
ctl_expect 1 --mysql "mysql://root:topsecret@127.0.0.1:$MYSQL_PORT/idpool" apps show user
err_has "MySQL at 127\\.0\\.0\\.1:$MYSQL_PORT/idpool"
[[ $ERR != *topsecret* ]] || fail "a password was printed: $ERR"
ctl_expect 1 --json --redis "redis://127.0.0.1:$DEAD_PORT/0" apps show user
json_ok
assert_eq user "$(jget 'd["key"]')" "show prints the MySQL part when Redis is down"
err_has "Redis at 127\\.0\\.0\\.1:$DEAD_PORT"
ctl_expect 1 --redis "redis://127.0.0.1:$DEAD_PORT/0" status
err_has "Redis at 127\\.0\\.0\\.1:$DEAD_PORT"
ctl_expect 1 --mysql "mysql://root@127.0.0.1:$DEAD_PORT/idpool" apps add x2
err_has "MySQL at 127\\.0\\.0\\.1:$DEAD_PORT"
pass "unreachable servers: exit 1, one line naming the server, no password"

# ------------------------------------------- same settings as the daemon ---
cat >"$DIR/ctl.conf" <<EOF
# the daemon's config file format
redis = $IDPOOL_REDIS_URL
mysql = "$IDPOOL_MYSQL_URL"
http = 127.0.0.1:$DEAD_PORT
EOF
(
    unset IDPOOL_REDIS_URL IDPOOL_MYSQL_URL IDPOOL_HTTP_ADDR
    ctl_expect 0 --config "$DIR/ctl.conf" apps list
    out_has '^user '
    IDPOOL_CONFIG=$DIR/ctl.conf ctl_expect 0 status
    out_has "^-- no idpoold answered at http://127\\.0\\.0\\.1:$DEAD_PORT"
    IDPOOL_KEY_PREFIX=other IDPOOL_CONFIG=$DIR/ctl.conf ctl_expect 0 apps show user
    out_has '^  pool key +other:\{user\}:pool'
    ctl_expect 0 --config "$DIR/ctl.conf" --key-prefix=p2 apps show user
    out_has '^  pool key +p2:\{user\}:pool'
) || exit 1
# A bad setting is a usage error (2, with "Try ...") wherever it comes from, as for idpoold.
printf 'tick-ms = abc\n' >"$DIR/bad.conf"
IDPOOL_TICK_MS=abc ctl_expect 2 apps list
err_has "^idpoolctl: IDPOOL_TICK_MS: must be an integer"
err_has "^Try 'idpoolctl --help'"
IDPOOL_CONFIG=/nonexistent ctl_expect 2 apps list
err_has "^idpoolctl: IDPOOL_CONFIG: cannot read /nonexistent"
err_has "^Try 'idpoolctl --help'"
IDPOOL_LOG_LEVEL=bogus ctl_expect 2 status
err_has "^Try 'idpoolctl --help'"
IDPOOL_CONFIG=$DIR/bad.conf ctl_expect 2 apps list
err_has "bad\.conf:1"
err_has "^Try 'idpoolctl --help'"
ctl_expect 2 --tick-ms abc apps list
err_has "^Try 'idpoolctl --help'"
pass "config file, environment and flags as for idpoold"

pass "idpoolctl"
