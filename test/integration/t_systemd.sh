#!/usr/bin/env bash
# systemd integration (issue 23), against real servers, with
# notify_listen.py standing in for systemd's end of the notify protocol
# (an AF_UNIX datagram socket named by NOTIFY_SOCKET):
#
#   ready     MySQL down at start: no READY=1 while the daemon runs and
#             retries (its STATUS= says what it waits for, its watchdog
#             pings go on); READY=1 once MySQL is back and the pools were
#             filled (the pool is at its low-water mark when READY arrives)
#   watchdog  WATCHDOG_USEC set: WATCHDOG=1 every half of it; none while
#             the daemon is SIGSTOPped (systemd's watchdog would fire), again
#             after SIGCONT
#   status    STATUS= says redis down while Redis is down, redis up again
#             after, and is not resent while nothing changes
#   reload    SIGHUP: RELOADING=1, then READY=1 only once the rows were
#             read again (none while a session holds the application table
#             locked, positive control: it comes once unlocked); a rejected configuration: READY=1
#             and "reload rejected: <why>" in STATUS= until a reload is
#             accepted
#   stop      SIGTERM: STOPPING=1
#   issuer    an issuer-only daemon (refill off): READY=1 without pool
#             checks, once rows and API tokens are read; its STATUS= says so
#   degraded  MySQL down for longer than the start may wait
#             (IDPOOL_READY_MAX_MS, 60 s by default): READY=1 anyway, the
#             log says degraded and why, STATUS= says mysql down (positive
#             control: none before the bound)
#   creds     passwords only from $CREDENTIALS_DIRECTORY (LoadCredential=):
#             redis-password for an ACL user of Redis, mysql-password for a
#             MySQL user; wrong ones are refused by the servers (nothing
#             fills), right ones fill the pool
#   badfile   an unreadable, missing or empty password file: exit 2, the
#             message names the file and never shows a password
# SYSTEMD_PARTS="ready creds" runs only those parts' checks.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_redis_py
PARTS=" ${SYSTEMD_PARTS:-ready watchdog status reload stop issuer degraded creds badfile} "
want() { [[ $PARTS == *" $1 "* ]]; }

add_app user step=100000 max_pool_size=2000000 # low water 1600000: filling takes a while
add_app order step=100 max_pool_size=2000 increasing_type=2

# ------------------------------------------------- the notify socket ---
SOCK=$DIR/notify.sock
NLOG=$DIR/notify.log
: >"$NLOG"
"$PYTHON" "$(dirname "$0")/notify_listen.py" "$SOCK" "$NLOG" "$REDIS_PORT" "$(pool_key user)" \
    2>"$DIR/listen.err" &
LISTENER=$!
wait_until 5 test -S "$SOCK" || fail "the notify listener did not start: $(cat "$DIR/listen.err")"
# count FIELD: messages with that field so far (e.g. count WATCHDOG=1)
count() { grep -c " $1\$" "$NLOG" || true; }
# count_ge FIELD N: at least N such messages (for wait_until)
count_ge() { (($(count "$1") >= $2)); }
# after LINE FIELD: a line FIELD (exactly) after line LINE of the log
after() { tail -n "+$(($1 + 1))" "$NLOG" | grep -q " $2\$"; }
lines() { wc -l <"$NLOG"; }
status_has() { last_status | grep -qE -- "$1"; }
last_status() { grep ' STATUS=' "$NLOG" | tail -n 1 | cut -d' ' -f2-; }

# ------------------------------------------------------------- ready ---
mysql_stop
: >"$DIR/d.conf" # the reload part makes it bad, then good again
NOTIFY_SOCKET=$SOCK WATCHDOG_USEC=400000 start_daemon d --tick-ms 50 --reload-ms 300 --config "$DIR/d.conf"
wait_until 10 log_has d 'cannot load applications' || fail "the daemon did not try MySQL"
wait_until 5 status_has '^STATUS=starting: application rows not read yet; redis up, mysql down' ||
    fail "no STATUS= saying what the start waits for: $(last_status)"
if want ready; then
    # Positive control: the daemon is alive and retrying (its pings go on, it
    # tries MySQL again) for 2 s, and says nothing of being ready.
    w0=$(count WATCHDOG=1)
    sleep 2 # a window for an absence: no READY=1 in it
    daemon_alive d || fail "the daemon died while MySQL was down"
    assert_ge "$(count WATCHDOG=1)" $((w0 + 5)) "watchdog pings in 2 s with MySQL down"
    assert_eq 0 "$(count READY=1)" "READY=1 while MySQL was down"
    info "with MySQL down: $(last_status)"
fi
mysql_start
wait_until 20 count_ge READY=1 1 || fail "no READY=1 after MySQL came back: $(last_status)"
if want ready; then
    ready_len=$(sed -n 's/^[0-9]* llen=//p' "$NLOG" | head -n 1)
    [[ $ready_len =~ ^[0-9]+$ ]] || fail "the pool's length at READY=1: '$ready_len'"
    assert_ge "$ready_len" 1600000 "user's pool length when READY=1 arrived (its low-water mark)"
    assert_eq 1 "$(count READY=1)" "READY=1 messages for one start"
    wait_until 3 status_has '^STATUS=serving 2 applications; redis up, mysql up; no alerts$' ||
        fail "STATUS= once ready: $(last_status)"
    pass "ready: no READY=1 while MySQL was down (the daemon alive, retrying); READY=1 with the pool at $ready_len >= 1600000 once it came back"
fi

# ---------------------------------------------------------- watchdog ---
if want watchdog; then
    log_has d 'systemd: watchdog every 400 ms: pinging every 200 ms' || fail "the watchdog was not set up"
    w0=$(count WATCHDOG=1)
    wait_until 3 count_ge WATCHDOG=1 $((w0 + 5)) || fail "WATCHDOG=1 did not go on"
    signal_daemon d STOP
    wait_until 3 proc_stopped "$(daemon_pid d)" || fail "the daemon did not stop"
    sleep 0.3 # a ping sent just before the stop has arrived by then
    w1=$(count WATCHDOG=1)
    sleep 1.2 # six ping intervals: the window of the absence
    w2=$(count WATCHDOG=1)
    signal_daemon d CONT
    assert_eq "$w1" "$w2" "WATCHDOG=1 while the daemon was stopped (systemd would restart it)"
    wait_until 3 count_ge WATCHDOG=1 $((w2 + 1)) || fail "no WATCHDOG=1 after SIGCONT"
    # WATCHDOG_PID names another process: not this daemon's watchdog (its
    # socket is one nobody reads: its messages stay out of the log).
    NOTIFY_SOCKET=$DIR/nobody.sock WATCHDOG_USEC=400000 WATCHDOG_PID=1 start_daemon other \
        --tick-ms 50 --instance other
    wait_until 5 log_has other 'idpoold .* starting' || fail "other did not start"
    sleep 0.5
    ! log_has other 'systemd: watchdog' || fail "a daemon whose WATCHDOG_PID is another process pings"
    kill_daemon other TERM
    pass "watchdog: WATCHDOG=1 every 200 ms ($w0 -> $w2), none in 1.2 s of SIGSTOP, again after SIGCONT; WATCHDOG_PID honoured"
fi

# ------------------------------------------------------------ status ---
if want status; then
    n0=$(grep -c ' STATUS=' "$NLOG")
    sleep 1 # four polls with nothing changed: no new STATUS=
    assert_eq "$n0" "$(grep -c ' STATUS=' "$NLOG")" "STATUS= messages while nothing changed"
    redis_stop
    wait_until 5 status_has '^STATUS=serving 2 applications; redis down, mysql up' ||
        fail "STATUS= with Redis down: $(last_status)"
    info "Redis down: $(last_status)"
    redis_start
    wait_until 10 status_has '^STATUS=serving 2 applications; redis up, mysql up' ||
        fail "STATUS= with Redis back: $(last_status)"
    pass "status: one STATUS= per change: redis down, then redis up again"
fi

# ------------------------------------------------------------ reload ---
if want reload; then
    # The reload ends when the rows were read again: not while a session of
    # ours holds the application table locked (3 s, less than the daemon's
    # 5 s MySQL read timeout, after which the load would end failed).
    mariadb_at "$MYSQL_PORT" -e "LOCK TABLES application WRITE; SELECT SLEEP(3); UNLOCK TABLES" \
        >/dev/null 2>"$DIR/lock.err" &
    locker=$!
    sleeping() { [[ $(sql "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(3)%'") == 1 ]]; }
    wait_until 5 sleeping || fail "the table lock was not taken: $(cat "$DIR/lock.err")"
    t_lock=$(now_us)
    mark=$(lines)
    signal_daemon d HUP
    wait_until 2 after "$mark" RELOADING=1 || fail "no RELOADING=1 after SIGHUP"
    rl=$(($(tail -n "+$((mark + 1))" "$NLOG" | grep -n ' RELOADING=1$' | head -n 1 | cut -d: -f1) + mark))
    tail -n "+$((mark + 1))" "$NLOG" | grep -q ' MONOTONIC_USEC=[0-9]*$' || fail "RELOADING=1 without MONOTONIC_USEC"
    # a window for an absence, inside the lock's 3 s: no READY=1 while the rows cannot be read
    sleep 1.5
    (($(now_us) - t_lock < 2800000)) || fail "the window outlasted the lock (a slow machine): no verdict"
    ! after "$rl" READY=1 || fail "READY=1 after SIGHUP before the rows were read again (table locked)"
    wait "$locker" || fail "the locking session failed: $(cat "$DIR/lock.err")"
    wait_until 5 after "$rl" READY=1 || fail "no READY=1 after RELOADING=1 once the table was unlocked"
    pass "reload: SIGHUP gives RELOADING=1 (with MONOTONIC_USEC), no READY=1 while the rows cannot be read (table locked), READY=1 once they were"

    # A rejected configuration: READY=1 all the same (the old one is kept),
    # STATUS= says so until a reload is accepted.
    printf 'tick-ms = soon\n' >"$DIR/d.conf"
    mark=$(lines)
    signal_daemon d HUP
    wait_until 5 after "$mark" READY=1 || fail "no READY=1 after a rejected reload"
    wait_until 3 status_has '; reload rejected: .*tick-ms' || fail "STATUS= after a rejected reload: $(last_status)"
    info "rejected: $(last_status)"
    log_has d 'reload: configuration rejected, keeping the current one: .*tick-ms' || fail "the rejection is not logged"
    : >"$DIR/d.conf"
    mark=$(lines)
    signal_daemon d HUP
    wait_until 5 after "$mark" READY=1 || fail "no READY=1 after the accepted reload"
    wait_until 3 eval '! status_has "reload rejected"' || fail "STATUS= still says rejected after an accepted reload: $(last_status)"
    pass "reload rejected: READY=1, STATUS= says 'reload rejected: <why>' until a reload is accepted"
fi

# -------------------------------------------------------------- stop ---
if want stop; then
    mark=$(lines)
    stop_daemon d
    wait_until 3 after "$mark" STOPPING=1 || fail "no STOPPING=1 on SIGTERM"
    pass "stop: SIGTERM gives STOPPING=1 (and exit 0)"
else
    stop_daemon d
fi

# ------------------------------------------------------------ issuer ---
if want issuer; then
    # An issuer-only daemon checks no pool: ready once rows and tokens are read.
    r0=$(count READY=1)
    NOTIFY_SOCKET=$SOCK start_daemon issuer --refill off --api "127.0.0.1:$(free_port)" \
        --tick-ms 50 --instance issuer
    wait_until 10 count_ge READY=1 $((r0 + 1)) || fail "the issuer sent no READY=1: $(last_status)"
    wait_until 3 status_has '^STATUS=issuing \(refill off\) for 2 applications; redis up, mysql up' ||
        fail "the issuer's STATUS=: $(last_status)"
    st=$(last_status)
    stop_daemon issuer
    pass "issuer: READY=1 and its own STATUS= ($st)"
fi

# ---------------------------------------------------------- degraded ---
if want degraded; then
    mysql_stop
    r0=$(count READY=1)
    t0=$(now_us)
    NOTIFY_SOCKET=$SOCK IDPOOL_READY_MAX_MS=2000 start_daemon deg --tick-ms 50 --instance deg
    wait_until 5 log_has deg 'cannot load applications' || fail "the degraded daemon did not try MySQL"
    assert_eq "$r0" "$(count READY=1)" "READY=1 before the bound with MySQL down"
    wait_until 10 count_ge READY=1 $((r0 + 1)) || fail "no READY=1 after IDPOOL_READY_MAX_MS with MySQL down"
    waited=$((($(now_us) - t0) / 1000))
    assert_ge "$waited" 2000 "ms until the degraded READY=1"
    wait_until 3 log_has deg 'the start is not complete after 2000 ms \(starting: application rows not read yet.*\): ready anyway, degraded' ||
        fail "the log does not say the start is degraded and why: $(tail -n 3 "$DIR/deg.log")"
    wait_until 3 status_has 'mysql down' || fail "STATUS= after a degraded start: $(last_status)"
    stop_daemon deg
    mysql_start
    pass "degraded: MySQL down past the bound: READY=1 after ${waited} ms anyway, logged as degraded, STATUS= says mysql down"
fi

# ------------------------------------------------------------- creds ---
if want creds; then
    rcli ACL SETUSER idpd on '>redis-secret' '~*' '&*' +@all >/dev/null
    sql "CREATE USER 'idpd'@'%' IDENTIFIED BY 'mysql-secret'; GRANT ALL ON idpool.* TO 'idpd'@'%'"
    rcli DEL "$(pool_key user)" "$(pool_key order)" >/dev/null
    mkdir -m 0700 "$DIR/creds"
    printf 'wrong\n' >"$DIR/creds/redis-password"
    printf 'wrong\n' >"$DIR/creds/mysql-password"
    as_idpd=(--redis "redis://idpd@127.0.0.1:$REDIS_PORT/0" --mysql "mysql://idpd@127.0.0.1:$MYSQL_PORT/idpool")
    # Control: wrong passwords are refused (the credentials are what is sent).
    CREDENTIALS_DIRECTORY=$DIR/creds start_daemon wrong --tick-ms 50 "${as_idpd[@]}"
    wait_until 10 log_has wrong 'WRONGPASS|invalid username-password' || fail "Redis did not refuse the wrong password"
    wait_until 10 log_has wrong "Access denied for user 'idpd'" || fail "MySQL did not refuse the wrong password"
    assert_eq 0 "$(llen user)" "user's pool with wrong passwords"
    ! grep -q 'wrong' <(grep -v "Access denied\|WRONGPASS\|invalid username" "$DIR/wrong.log") ||
        info "(the word 'wrong' appears in the log: $(grep -m1 wrong "$DIR/wrong.log"))"
    kill_daemon wrong TERM
    printf 'redis-secret\n' >"$DIR/creds/redis-password"
    printf 'mysql-secret\r\n' >"$DIR/creds/mysql-password"
    CREDENTIALS_DIRECTORY=$DIR/creds start_daemon creds --tick-ms 50 "${as_idpd[@]}"
    wait_until 15 pool_ge user 1600000 || fail "user's pool never filled with the passwords from the credentials"
    [[ $(rcli CLIENT LIST | grep -c 'user=idpd') -ge 2 ]] || fail "no connection of Redis user idpd: $(rcli CLIENT LIST)"
    ! grep -qE 'redis-secret|mysql-secret' "$DIR/creds.log" "$DIR/wrong.log" || fail "a password is in the log"
    stop_daemon creds
    pass "creds: passwords only from \$CREDENTIALS_DIRECTORY: wrong ones refused by Redis and MySQL, right ones fill the pool"
fi

# ----------------------------------------------------------- badfile ---
if want badfile; then
    # run_bad ENV... -- ARGS...: idpoold with a bad password file; exit 2
    run_bad() {
        local envs=() st=0
        while [[ $1 != -- ]]; do
            envs+=("$1")
            shift
        done
        shift
        env "${envs[@]}" "$IDPOOLD" --http '' "$@" >"$DIR/out" 2>"$DIR/err" </dev/null || st=$?
        assert_eq 2 "$st" "exit status of idpoold $* ($(cat "$DIR/err"))"
    }
    mkdir -p "$DIR/bad/dir-creds/mysql-password"
    printf 'top-secret\nsecond line\n' >"$DIR/bad/two-lines"
    : >"$DIR/bad/empty"
    run_bad -- --redis-password-file "$DIR/bad/missing"
    err_has "^idpoold: --redis-password-file: cannot read $DIR/bad/missing: No such file or directory"
    run_bad IDPOOL_MYSQL_PASSWORD_FILE="$DIR/bad/two-lines" --
    err_has "^idpoold: IDPOOL_MYSQL_PASSWORD_FILE: $DIR/bad/two-lines holds more than one line"
    err_lacks 'top-secret'
    run_bad CREDENTIALS_DIRECTORY="$DIR/bad/dir-creds" --
    err_has "^idpoold: systemd credential mysql-password: $DIR/bad/dir-creds/mysql-password is not a regular file"
    cp "$DIR/bad/empty" "$DIR/bad/dir-creds/redis-password"
    run_bad CREDENTIALS_DIRECTORY="$DIR/bad/dir-creds" --
    err_has "^idpoold: systemd credential redis-password: $DIR/bad/dir-creds/redis-password is empty"
    mkdir "$DIR/bad/pw-creds"
    printf 'pw\n' >"$DIR/bad/pw-creds/redis-password"
    run_bad CREDENTIALS_DIRECTORY="$DIR/bad/pw-creds" IDPOOL_REDIS_PASSWORD=x --
    err_has "IDPOOL_REDIS_PASSWORD: set, and systemd passed the credential redis-password too"
    pass "badfile: a missing, multi-line, unreadable or empty password file, or a password given twice: exit 2 naming the file"
fi

rm -f "$SOCK"
reap "$LISTENER" 5 || true
pass "systemd"
