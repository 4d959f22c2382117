#!/usr/bin/env bash
# Signals and start-up errors (brief §5): SIGTERM / SIGINT while a consumer
# drains the pool -> exit 0 within 2 s, locks released, no ID lost to
# duplication; a second SIGTERM while work is stuck in flight exits at once
# (status 1); a single one gives up on stuck work after its grace period;
# SIGHUP with a broken config file keeps the old config and keeps working;
# bad start-up settings exit 2 naming the setting; --help and --version.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

elapsed_ms() { echo $((($(now_us) - $1) / 1000)); }
locks() { rcli --scan --pattern '*:lock' | tr '\n' ' '; }

add_app s1 max_size_per_second=1000 # pool 60000, low water 48000
in_refill() { [[ $(rcli EXISTS "$(lock_key s1)") == 1 ]]; }
# freeze_in_refill NAME: SIGSTOPs the daemon while it holds s1's lock, i.e.
# in the middle of a refill (commands it had already sent have had 50 ms to
# run, so the lock still being there means it has not released it yet).
# It stops the daemon first and looks second: looking first lost the race on
# a loaded machine, where the refill was over before the SIGSTOP landed.
# kill_daemon then sends the signal followed by SIGCONT.
freeze_in_refill() {
    local _
    for _ in $(seq 200); do
        signal_daemon "$1" STOP
        sleep 0.05
        in_refill && return 0
        signal_daemon "$1" CONT
        sleep "0.0$((RANDOM % 5 + 1))"
    done
    return 1
}

# --- SIGTERM / SIGINT during active refilling ------------------------------
round=0
for sig in TERM INT; do
    round=$((round + 1))
    d=$sig
    start_daemon "$d" --tick-ms 20 --lock-ttl-ms 3000
    wait_until 10 pool_ge s1 48000 || fail "s1 not filled"
    # A consumer that drains as fast as it can until told to stop, after the
    # daemon is gone (it then ends short of its count, status 1, with its log
    # written).
    pop s1 100000000 "$DIR/s1.$round" --batch 100 --timeout-ms 3000 --type monotonic \
        --stop-file "$DIR/pop.$round.stop" 2>"$DIR/pop.$round.err" &
    consumer=$!
    sleep 0.7
    n0=$(grep -c 'app=s1 pushed' "$DIR/$d.log" || true)
    sleep 0.2
    n1=$(grep -c 'app=s1 pushed' "$DIR/$d.log" || true)
    assert_gt "$n1" "$n0" "refills in the 200 ms before SIG$sig (the daemon is busy)"
    freeze_in_refill "$d" || fail "could not catch $d in the middle of a refill"
    t0=$(now_us)
    kill_daemon "$d" "$sig" 5
    ms=$(elapsed_ms "$t0")
    left=$(locks)
    info "SIG$sig: exited after $ms ms with status ${DAEMON_STATUS[$d]}; locks left: '$left'"
    assert_eq 0 "${DAEMON_STATUS[$d]}" "exit status after SIG$sig"
    assert_le "$ms" 2000 "ms from SIG$sig to exit"
    assert_eq "" "$left" "lock keys right after the exit"
    log_has "$d" "stopping: finishing in-flight refills, releasing locks" || fail "no 'stopping' line"
    log_has "$d" "in-flight work finished and locks released" || fail "no 'locks released' line"
    if log_has "$d" "exiting anyway"; then fail "SIG$sig: shutdown hit the grace timeout"; fi
    if sed -n '/stopping: finishing/,$p' "$DIR/$d.log" | grep 'app=s1 pushed' >/dev/null; then
        info "SIG$sig arrived during a push, which was completed first"
    fi
    # The consumer outlives the daemon: it drains what the daemon left.
    wait_until 10 eval "[[ \$(llen s1) == 0 ]]" ||
        fail "pool not drained after the daemon stopped: $(llen s1) IDs left"
    proc_alive "$consumer" || fail "the consumer ended before the daemon: $(cat "$DIR/pop.$round.err")"
    touch "$DIR/pop.$round.stop"
    st=0
    wait "$consumer" || st=$?
    # 1 = short of its count (expected: the pool ran dry once the daemon was gone).
    [[ $st == 1 ]] || fail "pop status $st: $(cat "$DIR/pop.$round.err")"
    grep -q 'timeout' "$DIR/pop.$round.err" || fail "pop: $(cat "$DIR/pop.$round.err")"
    pass "SIG$sig while refilling: exit 0 after $ms ms, locks released"
done

# A new daemon carries on; nothing handed out before is handed out again.
start_daemon c --tick-ms 20
pop s1 30000 "$DIR/s1.3" --batch 500 --timeout-ms 10000 --type monotonic ||
    fail "popping after the restart"
stop_daemon c
# One consumer after the other: each one's IDs lie above the ones before.
check_pops "$DIR/s1.check" --type monotonic --current-offset "$(app_col s1 current_offset)" \
    --leases <(sql "SELECT lo, hi FROM application_lease WHERE application_id = $(app_col s1 id)") \
    "$DIR"/s1.[1-3].0.bin || fail "IDs across the stops"
pass "IDs stay unique and increasing across SIGTERM, SIGINT and a restart"

# --- work in flight: a reservation waiting on a row lock ---------------------
# A client holding an application's row lock (SELECT ... FOR UPDATE) makes
# the daemon's reservation (UPDATE application SET current_offset ...) wait
# inside MySQL: that refill stays in flight, with the application's Redis
# lock held, for as long as the test wants.
declare -A HOLD_FD=() HOLD_PID=()
row_locked() { # KEY: another session holds the row lock
    local err
    err=$(sql "SELECT id FROM application WHERE entity_key = '$1' FOR UPDATE NOWAIT" 2>&1 >/dev/null) && return 1
    [[ $err == *1205* ]]
}
hold() { # KEY: lock the row until release KEY
    local key=$1 fd
    mkfifo "$DIR/hold.$key"
    mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root idpool -N -B \
        <"$DIR/hold.$key" >/dev/null 2>&1 &
    HOLD_PID[$key]=$!
    exec {fd}>"$DIR/hold.$key"
    HOLD_FD[$key]=$fd
    echo "START TRANSACTION; SELECT id FROM application WHERE entity_key = '$key' FOR UPDATE;" >&"$fd"
    wait_until 5 row_locked "$key" || fail "could not lock the row of $key"
}
release() { # KEY
    local fd=${HOLD_FD[$1]}
    echo "ROLLBACK;" >&"$fd"
    exec {fd}>&-
    wait "${HOLD_PID[$1]}" || true
}
waiting() { # KEY: a daemon's reservation for KEY waits for the row lock
    [[ $(sql "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'
              AND trx_query LIKE 'UPDATE application SET current_offset = % WHERE id = $(app_col "$1" id) AND %'") -ge 1 ]]
}
# A daemon that exited at once leaves its session waiting (MariaDB does not
# notice the dead client): end it, so that `waiting` sees only the next one.
kill_waiting() { # KEY
    local tid
    for tid in $(sql "SELECT trx_mysql_thread_id FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'
                      AND trx_query LIKE 'UPDATE application SET current_offset = % WHERE id = $(app_col "$1" id) AND %'"); do
        sql "KILL $tid" || true
    done
    wait_until 5 eval "! waiting $1" || fail "a dead daemon's reservation for $1 is still waiting"
}
add_app s2 max_size_per_second=100

# SIGTERM waits for the refill in flight, then releases its lock and exits 0.
hold s2
start_daemon d --tick-ms 20 --mysql-timeout-ms 20000 --lock-ttl-ms 10000
wait_until 5 waiting s2 || fail "the daemon's reservation for s2 did not block on the row lock"
assert_eq 1 "$(rcli EXISTS "$(lock_key s2)")" "s2's Redis lock while its reservation waits"
t0=$(now_us)
signal_daemon d TERM
wait_until 1 log_has d "stopping: finishing in-flight refills" || fail "no 'stopping' line"
sleep 0.3
daemon_alive d || fail "daemon exited while a refill was in flight (it should finish it)"
assert_eq 1 "$(rcli EXISTS "$(lock_key s2)")" "s2's Redis lock while the daemon waits for its refill"
release s2
wait_until 2 eval '! daemon_alive d' || fail "daemon still running after its in-flight refill ended"
ms=$(elapsed_ms "$t0")
kill_daemon d TERM 1 # reaps it
left=$(locks)
info "SIGTERM with a refill in flight: exited $ms ms after the signal, status ${DAEMON_STATUS[d]}"
assert_eq 0 "${DAEMON_STATUS[d]}" "exit status"
assert_eq "" "$left" "lock keys after the in-flight refill finished (TTL 10 s: released, not expired)"
log_has d "in-flight work finished and locks released" || fail "no 'locks released' line"
if log_has d "exiting anyway"; then fail "hit the grace timeout"; fi
pass "SIGTERM waits for the refill in flight, then releases its lock and exits 0"

# A second SIGTERM exits at once.
add_app s3 max_size_per_second=100
hold s3
start_daemon e --tick-ms 20 --mysql-timeout-ms 20000
wait_until 5 waiting s3 || fail "the daemon's reservation for s3 did not block on the row lock"
signal_daemon e TERM
wait_until 1 log_has e "stopping: finishing in-flight refills" || fail "no 'stopping' line"
sleep 0.3
daemon_alive e || fail "daemon exited while a refill was in flight (it should wait for it)"
t1=$(now_us)
kill_daemon e TERM 3
ms=$(elapsed_ms "$t1")
info "second SIGTERM: exited after $ms ms with status ${DAEMON_STATUS[e]}"
assert_eq 1 "${DAEMON_STATUS[e]}" "exit status after a second SIGTERM"
# At once: status 1 and its own line, not the grace period's (1500 ms,
# main.c), which exits 0. The time includes the exit itself (under ASan, the
# leak check's) and the reaping, so its bound is loose.
assert_le "$ms" 1500 "ms from the second SIGTERM to exit"
log_has e "again: exiting at once" || fail "no 'exiting at once' line"
if log_has e "exiting anyway"; then fail "the second SIGTERM waited for the grace period"; fi
pass "a second SIGTERM exits at once (status 1) while work is in flight"

# One SIGTERM and work that never finishes: exit 0 after the grace period.
kill_waiting s3
start_daemon f --tick-ms 20 --mysql-timeout-ms 20000
wait_until 5 waiting s3 || fail "the reservation for s3 did not block (daemon f)"
t0=$(now_us)
kill_daemon f TERM 5
ms=$(elapsed_ms "$t0")
info "single SIGTERM with stuck work: exited after $ms ms with status ${DAEMON_STATUS[f]}"
assert_eq 0 "${DAEMON_STATUS[f]}" "exit status after SIGTERM with stuck work"
# The grace period (1500 ms) plus the exit and the reaping (under ASan on a
# loaded machine, up to about a second).
assert_le "$ms" 3500 "ms from SIGTERM to exit with stuck work"
assert_ge "$ms" 1000 "ms from SIGTERM to exit with stuck work (it waited for the work)"
log_has f "exiting anyway" || fail "no grace-timeout line"
release s3
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE application_id = $(app_col s3 id)")" \
    "leases of s3 (every reservation was cut off)"
pass "one SIGTERM with stuck work exits 0 after the grace period"

# --- SIGHUP with a broken config file ------------------------------------------
rcli DEL "$(pool_key s3)" "$(meta_key s3)" "$(lock_key s3)" >/dev/null
printf 'tick-ms = 20\nreload-ms = 500\n' >"$DIR/idpoold.conf"
start_daemon g --config "$DIR/idpoold.conf"
wait_until 10 eval 'pool_ge s1 48000 && pool_ge s2 6000' || fail "pools not filled (daemon g)"
log_has g "tick 20 ms, lock ttl 1000 ms, reload 500 ms" || fail "config file not used"
printf 'tick-ms = abc\nreload-ms = 500\n' >"$DIR/idpoold.conf"
signal_daemon g HUP
wait_until 2 log_has g "reload: configuration rejected, keeping the current one: .*tick-ms.*abc" ||
    fail "no 'configuration rejected' line naming tick-ms"
sleep 0.3
daemon_alive g || fail "daemon died on a bad config"
rcli LPOP "$(pool_key s1)" 20000 >/dev/null
t0=$(now_us)
wait_until 2 pool_ge s1 58000 || fail "no refill after the rejected config"
info "refilled $(elapsed_ms "$t0") ms after the pop"
# Fixed again: a second SIGHUP is accepted.
printf 'tick-ms = 20\nreload-ms = 500\n' >"$DIR/idpoold.conf"
signal_daemon g HUP
two_hups() { (($(grep -c "SIGHUP: reloading" "$DIR/g.log") == 2)); }
wait_until 2 two_hups || fail "second SIGHUP not seen"
sleep 0.3
assert_eq 1 "$(grep -c 'configuration rejected' "$DIR/g.log")" "'rejected' lines after a good config"
stop_daemon g
pass "SIGHUP with a bad config file: rejected, old config kept, still refilling"

# --- start-up errors, --help, --version -------------------------------------------
# run_bad WHAT EXPECTED_IN_STDERR ARGS...: idpoold exits 2 at once naming the setting.
run_bad() {
    local what=$1 want=$2 st=0
    shift 2
    timeout 5 "$@" >"$DIR/out" 2>"$DIR/err" </dev/null || st=$?
    assert_eq 2 "$st" "exit status for $what (stderr: $(cat "$DIR/err"))"
    grep -qF -- "$want" "$DIR/err" || fail "$what: stderr does not name '$want': $(cat "$DIR/err")"
    grep -q '^idpoold: ' "$DIR/err" || fail "$what: stderr not prefixed 'idpoold: '"
}
R=(--redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" --http '')
run_bad "bad --tick-ms" "--tick-ms" "$IDPOOLD" "${R[@]}" --tick-ms abc
run_bad "--tick-ms 0" "--tick-ms" "$IDPOOLD" "${R[@]}" --tick-ms 0
run_bad "unknown flag" "--no-such-flag" "$IDPOOLD" "${R[@]}" --no-such-flag
run_bad "bad --redis URL" "--redis" "$IDPOOLD" --redis 'http://127.0.0.1:1' --mysql "$IDPOOL_MYSQL_URL" --http ''
run_bad "bad --redis port" "--redis" "$IDPOOLD" --redis 'redis://127.0.0.1:99999' --mysql "$IDPOOL_MYSQL_URL" --http ''
run_bad "bad --mysql URL" "--mysql" "$IDPOOLD" --redis "$IDPOOL_REDIS_URL" --mysql 'postgres://x' --http ''
run_bad "lock ttl below 2 ticks" "--lock-ttl-ms" "$IDPOOLD" "${R[@]}" --tick-ms 100 --lock-ttl-ms 150
run_bad "bad --reload-ms" "--reload-ms" "$IDPOOLD" "${R[@]}" --reload-ms 50
run_bad "bad --log-level" "--log-level" "$IDPOOLD" "${R[@]}" --log-level verbose
run_bad "missing config file" "$DIR/none.conf" "$IDPOOLD" "${R[@]}" --config "$DIR/none.conf"
printf 'tick-ms = abc\n' >"$DIR/bad.conf"
run_bad "bad config file" "tick-ms" "$IDPOOLD" "${R[@]}" --config "$DIR/bad.conf"
run_bad "bad IDPOOL_TICK_MS" "IDPOOL_TICK_MS" env IDPOOL_TICK_MS=abc "$IDPOOLD" --redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" --http ''
pass "bad start-up settings exit 2 and name the setting"

st=0
timeout 5 "$IDPOOLD" --help >"$DIR/out" 2>"$DIR/err" || st=$?
assert_eq 0 "$st" "--help exit status"
grep -q IDPOOL_REDIS_URL "$DIR/out" || fail "--help does not mention IDPOOL_REDIS_URL"
grep -q -- '--tick-ms' "$DIR/out" || fail "--help does not mention --tick-ms"
st=0
timeout 5 "$IDPOOLD" --version >"$DIR/out" 2>"$DIR/err" || st=$?
assert_eq 0 "$st" "--version exit status"
grep -qE '^idpoold [0-9]+\.[0-9]+' "$DIR/out" || fail "--version output: $(cat "$DIR/out")"
pass "--help and --version exit 0"
