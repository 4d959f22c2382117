#!/usr/bin/env bash
# Smoke test of the harness itself (lib.sh, scripts/servers.sh, pop);
# needs no working idpoold. A fake daemon stands in for it.
# shellcheck source-path=SCRIPTDIR disable=SC2016 # nested bodies expand later
source "$(dirname "$0")/lib.sh"
setup

# --- both servers answer, the schema is there and loads again -------------
assert_eq PONG "$(rcli PING)" "redis PING"
assert_eq 0 "$(sql 'SELECT COUNT(*) FROM application')" "empty application table"
sql_file "$IDPOOL_SOURCE_ROOT/sql/schema.sql"
sql_file "$IDPOOL_SOURCE_ROOT/sql/schema.sql"
assert_eq 2 "$(sql "SELECT COUNT(*) FROM information_schema.tables
    WHERE table_schema = 'idpool' AND table_name IN ('application', 'application_lease')")" \
    "tables after loading the schema twice"
assert_eq noeviction "$(rcli CONFIG GET maxmemory-policy | tail -n 1)" "maxmemory-policy"
assert_eq yes "$(rcli CONFIG GET appendonly | tail -n 1)" "appendonly"
pass "servers up, schema idempotent"

# --- add_app / set_app / app_col, with quoting and the reserved `interval` --
add_app t1 increasing_type=2 step=500 interval=50 "entity_name=it's a \\ test"
assert_eq 500 "$(app_col t1 step)" "step"
assert_eq 50 "$(app_col t1 interval)" "interval"
assert_eq "it's a \\ test" "$(app_col t1 entity_name)" "entity_name"
set_app t1 step=700 deleted_at=1
assert_eq 700 "$(app_col t1 step)" "step after set_app"
if (add_app t1) 2>/dev/null; then fail "duplicate entity_key was accepted"; fi
pass "add_app/set_app"

# --- Redis restart keeps the AOF; a MariaDB crash keeps committed rows ----
rcli RPUSH "$(pool_key r)" 1 2 3 >/dev/null
redis_stop
if rcli PING >/dev/null 2>&1; then fail "redis still answers after redis_stop"; fi
redis_start
assert_eq "1 2 3" "$(rcli LRANGE "$(pool_key r)" 0 -1 | tr '\n' ' ' | sed 's/ $//')" "pool after restart"
mysql_kill
if sql 'SELECT 1' >/dev/null 2>&1; then fail "mysql still answers after mysql_kill"; fi
mysql_start
assert_eq 700 "$(app_col t1 step)" "row after mariadbd kill -9"
pass "server restarts"

# --- wait_until is bounded ------------------------------------------------
t0=$(now_us)
if wait_until 0.3 false 2>/dev/null; then fail "wait_until false succeeded"; fi
elapsed=$((($(now_us) - t0) / 1000))
assert_ge "$elapsed" 300 "wait_until waited (ms)"
assert_le "$elapsed" 2000 "wait_until bounded (ms)"
wait_until 1 true || fail "wait_until true failed"
pass "wait_until"

# --- pop (idpool-load, idpool-check): order, strict parsing, timeout --------
seq 1000 2999 | xargs -n 500 | sed "s/^/RPUSH $(pool_key p) /" | rcli >/dev/null
assert_eq 2000 "$(llen p)" "filled pool"
pop p 2000 "$DIR/p" --type monotonic --start-offset 1000 --dump "$DIR/p.txt"
assert_eq 2000 "$(count_ids "$DIR/p.txt")" "popped"
assert_increasing "$DIR/p.txt"
assert_unique "$DIR/p.txt"
rcli RPUSH "$(pool_key p)" 5 7 7 >/dev/null
st=0
pop p 3 "$DIR/r" --batch 1 --type monotonic 2>/dev/null || st=$?
assert_eq 2 "$st" "pop status on a repeated ID"
assert_eq "5 7 7" "$(ids_text "$DIR/r.0.bin" | tr '\n' ' ' | sed 's/ $//')" "pop log"
rcli RPUSH "$(pool_key p)" 12x >/dev/null
st=0
pop p 1 "$DIR/x" 2>/dev/null || st=$?
assert_eq 1 "$st" "pop status on a non-ID"
st=0
pop p 1 "$DIR/t" --timeout-ms 200 2>"$DIR/t.err" || st=$?
assert_eq 1 "$st" "pop status on timeout"
grep -q 'timeout: 0 of 1 IDs' "$DIR/t.err" || fail "pop on timeout: $(cat "$DIR/t.err")"
pass "pop"

# --- a nested test: cleanup kills daemons and servers, keeps the status ---
cat >"$DIR/fake-idpoold" <<'EOF'
#!/usr/bin/env bash
echo "fake idpoold $*"
[[ ${FAKE_ASAN:-0} == 1 ]] && echo "==1==ERROR: AddressSanitizer: heap-use-after-free"
trap 'echo "bye"; exit 0' TERM
while :; do sleep 0.1; done
EOF
chmod +x "$DIR/fake-idpoold"

# nested SCRIPT: runs SCRIPT after setup in a child test; prints its status.
nested() {
    local st=0
    (
        unset DIR REDIS_PORT MYSQL_PORT IDPOOL_REDIS_URL IDPOOL_MYSQL_URL
        export IDPOOLD=$1 PIDS_FILE=$2
        bash -c "source '$IDPOOL_SOURCE_ROOT/test/integration/lib.sh'; $3"
    ) >"$DIR/nested.out" 2>&1 || st=$?
    echo "$st"
}

check_gone() { # the work dir (first word) is removed, every pid is dead
    local words pid
    read -r -a words <"$1"
    [[ ! -e ${words[0]} ]] || fail "nested work dir ${words[0]} not removed"
    for pid in "${words[@]:1}"; do
        if proc_alive "$pid"; then
            fail "process $pid ($(cat "/proc/$pid/comm")) survived cleanup"
        fi
    done
}

body='setup; start_daemon a --flag; start_daemon b
      echo "$DIR $(cat "$DIR/redis.pid") $(cat "$DIR/mysql.pid") $(daemon_pid a) $(daemon_pid b)" >"$PIDS_FILE"
      wait_until 5 log_has a "fake idpoold .*--flag" || fail "no log"'

st=$(nested "$DIR/fake-idpoold" "$DIR/pids1" "$body; stop_daemon b; pass done")
assert_eq 0 "$st" "nested test status (output: $(cat "$DIR/nested.out"))"
grep -q 'PASS: done' "$DIR/nested.out" || fail "nested test did not finish"
check_gone "$DIR/pids1"

st=$(nested "$DIR/fake-idpoold" "$DIR/pids2" "$body; fail on purpose")
assert_eq 1 "$st" "nested failing test status"
grep -q -- '----- a.log' "$DIR/nested.out" || fail "daemon log not printed on failure"
grep -q -- 'fake idpoold' "$DIR/nested.out" || fail "daemon log content not printed"
check_gone "$DIR/pids2"

st=$(FAKE_ASAN=1 nested "$DIR/fake-idpoold" "$DIR/pids3" "$body")
assert_eq 1 "$st" "nested test with a sanitizer report"
check_gone "$DIR/pids3"

st=$(nested /nonexistent/idpoold "$DIR/pids4" 'setup; echo "$DIR" >"$PIDS_FILE"; start_daemon a')
assert_eq 1 "$st" "nested test without idpoold"
pass "cleanup"
