#!/usr/bin/env bash
# Credentials (issue 18, item 10) against real servers: idpoolctl apps
# grant, tokens revoke and take, an issuer ("issuer": --refill off --api) and
# a refiller ("refill"), both re-reading MySQL every 300 ms.
#
#   a  rotation     apps grant again closes the connections that logged in
#                   with the old password (another user's stay open); a
#                   rotation Redis got only from a daemon (idpoolctl's Redis
#                   user lacks ACL rights: NOPERM) closes them too, within
#                   the reload interval; a daemon that reconnects and
#                   re-applies unchanged users closes nothing
#   b  database     apps grant on a Redis database other than 0 is refused
#                   (exit 1, the message says why, nothing written) unless
#                   --allow-any-db; the reason shown: such a user SELECTs db
#                   0 and pops the pool of the same key there
#   c  not loaded   an issuer started while MySQL is down answers a valid
#                   token 503 IDPOOL_UNAVAILABLE with Retry-After (a missing
#                   token stays 401), then 200 once MySQL is back
#   d  revocation   tokens revoke reaches an issuer that cannot read MySQL
#                   (it is stopped): 401 at the issuer's next reload, through
#                   the Redis set <prefix>:revoked-tokens; with Redis down
#                   idpoolctl warns (exit 0) and says the bound
#   e  take         idpoolctl take reads the issuer's token from IDPOOL_TOKEN
#                   or --token-file (not the command line); a URL without a
#                   token and neither is a usage error naming both; a bad
#                   token file is refused without showing its content
#   f  failures     failed authentications are logged with the peer's
#                   address, one line per burst, never the token, and counted
#                   in idpool_api_auth_failures_total{reason}
# CREDS_PARTS="a c" runs only those parts' checks (the servers and daemons
# are set up all the same), to show each one failing on older code.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"
require_redis_py
PARTS=" ${CREDS_PARTS:-a b c d e f} "
want() { [[ $PARTS == *" $1 "* ]]; }

ctl() { "$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" "$@"; }
new_token() {
    ctl --json tokens add "$1" --apps "$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])'
}
# grant KEY: apps grant, prints the password.
grant() {
    local pw
    pw=$(ctl apps grant "$1" | sed -n 's/^password: //p')
    [[ -n $pw ]] || fail "apps grant $1: no password"
    echo "$pw"
}
sha256() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

# HTTP: req TOKEN PATH against $BASE (an empty TOKEN sends none); status in
# $CODE, body in $DIR/body, headers in $DIR/headers.
req() {
    local auth=() st=0
    [[ -z $1 ]] || auth=(-H "Authorization: Bearer $1")
    CODE=$(curl -sS --max-time 10 -o "$DIR/body" -D "$DIR/headers" -w '%{http_code}' \
        "${auth[@]}" "$BASE$2") || st=$?
    ((st == 0)) || fail "curl $BASE$2: no answer (curl status $st)"
}
answers() { req "$2" "$3" && [[ $CODE == "$1" ]]; }
header() { tr -d '\r' <"$DIR/headers" | sed -n "s/^$1: //Ip" | tail -n 1; }
what() { printf '%s %s' "$CODE" "$(head -c 400 "$DIR/body")"; }
error_is() { # STATUS ERROR: the last answer, a JSON error
    [[ $CODE == "$1" ]] || fail "expected $1 $2, got $(what)"
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if set(d) == {"error", "message"} and d["error"] == sys.argv[2] else 1)' \
        "$DIR/body" "$2" || fail "expected the JSON error $2, got $(what)"
}

# Sessions of a Redis user: session_start NAME USER PASSWORD logs in (on a
# connection of its own, held open) and sends LLEN every 50 ms; session_is
# NAME closed|open tells whether the server has closed it; session_end NAME
# stops it and prints its last state.
cat >"$DIR/session.py" <<'PY'
import os, sys, time
import redis

port, user, pw, base = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
conn = redis.Connection(host="127.0.0.1", port=port, username=user, password=pw, socket_timeout=5)
conn.connect()
state = "open"
deadline = time.time() + 60
while not os.path.exists(base + ".stop") and time.time() < deadline:
    try:
        conn.send_command("LLEN", "idpool:{%s}:pool" % user.split(":", 1)[1])
        conn.read_response()
    except redis.exceptions.ConnectionError as e:
        state = "closed"
    with open(base + ".tmp", "w") as f:
        f.write(state + "\n")
    os.replace(base + ".tmp", base + ".state")
    if state == "closed":
        break
    time.sleep(0.05)
PY
declare -A SESSION=()
session_start() {
    rm -f "$DIR/s.$1".*
    "$PYTHON" "$DIR/session.py" "$REDIS_PORT" "$2" "$3" "$DIR/s.$1" 2>"$DIR/s.$1.err" &
    SESSION[$1]=$!
    wait_until 5 test -s "$DIR/s.$1.state" || fail "session $1 ($2): no login: $(cat "$DIR/s.$1.err")"
    [[ $(<"$DIR/s.$1.state") == open ]] || fail "session $1 ($2): $(cat "$DIR/s.$1.state")"
}
session_is() { [[ $(cat "$DIR/s.$1.state" 2>/dev/null) == "$2" ]]; }
session_end() {
    touch "$DIR/s.$1.stop"
    wait "${SESSION[$1]}" 2>/dev/null || true
    cat "$DIR/s.$1.state"
}

add_app user step=100 max_pool_size=500 max_size_per_times=50
add_app order step=100 max_pool_size=500 max_size_per_times=50
T=$(new_token t user,order) || fail "tokens add t"
rcli ACL SETUSER limited on '>limitedpw' '~*' '&*' +@all -@admin >/dev/null
API_PORT=$(free_port)
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$API_PORT
COMMON=(--tick-ms 50 --reload-ms 300)

# ---------------------------------------------------- b: database not 0 ---
if want b; then
    DB3="redis://127.0.0.1:$REDIS_PORT/3"
    export IDPOOL_MYSQL_URL
    ctl_expect 1 --redis "$DB3" apps grant user
    err_has "database is 3, not 0"
    err_has "every database of this Redis"
    err_has "--allow-any-db"
    assert_eq 0 "$(sql "SELECT COUNT(*) FROM redis_user")" "redis_user rows after the refused grant"
    assert_eq "" "$(rcli ACL GETUSER idpool:user)" "idpool:user in Redis after the refused grant"
    ctl_expect 0 --redis "$DB3" apps grant user --allow-any-db
    pw=$(sed -n 's/^password: //p' "$DIR/out")
    grep -qF -- "-n 3 --user idpool:user" "$DIR/out" || fail "the example lacks -n 3: $(cat "$DIR/out")"
    # Why: the user of db 3 pops the pool of the same key in db 0.
    rcli -n 0 RPUSH 'idpool:{user}:pool' 42 >/dev/null
    "$PYTHON" - "$REDIS_PORT" "$pw" >"$DIR/anydb.out" <<'PY' || fail "the db 3 user: $(cat "$DIR/anydb.out")"
import sys
import redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), db=3, username="idpool:user",
                password=sys.argv[2], socket_timeout=5)
r.execute_command("SELECT", 0)  # one connection: the SELECT holds for the LPOP
print("popped in db 0:", r.execute_command("LPOP", "idpool:{user}:pool"))
PY
    grep -q "popped in db 0: b'42'" "$DIR/anydb.out" || fail "the db 3 user: $(cat "$DIR/anydb.out")"
    info "$(cat "$DIR/anydb.out")"
    ctl apps revoke user >/dev/null || fail "apps revoke user"
    pass "b: apps grant on db 3 refused (exit 1, why, nothing written) unless --allow-any-db; such a user pops db 0's pool"
fi

# ------------------------------------- c: an issuer before its tokens ---
mysql_stop
start_daemon issuer "${COMMON[@]}" --refill off --api "127.0.0.1:$API_PORT" \
    --http "127.0.0.1:$HTTP_PORT" --instance issuer
wait_until 5 log_has issuer "api: listening on 127\\.0\\.0\\.1:$API_PORT" || fail "issuer: API not listening"
if want c; then
    req "$T" /v1/ids/user
    error_is 503 IDPOOL_UNAVAILABLE
    [[ $(header Retry-After) =~ ^[1-9][0-9]*$ ]] || fail "503 before the tokens: Retry-After '$(header Retry-After)'"
    grep -q "tokens have not been read" "$DIR/body" || fail "503 before the tokens: $(what)"
    req "" /v1/ids/user
    error_is 401 IDPOOL_AUTH
fi
mysql_start
start_daemon refill "${COMMON[@]}" --instance refill
wait_until 10 pool_ge user 500 || fail "user never filled"
wait_until 10 answers 200 "$T" /v1/ids/user || fail "issuer after MySQL came back: $(what)"
want c && pass "c: tokens not read yet (MySQL down at start): 503 IDPOOL_UNAVAILABLE with Retry-After, no token 401; 200 once read"

# ------------------------------------------- f: failed authentications ---
if want f; then
    lines0=$(grep -c "api: failed authentication from" "$DIR/issuer.log" || true)
    metrics() { curl -sS --max-time 5 -o "$DIR/metrics" "http://127.0.0.1:$HTTP_PORT/metrics" || fail "issuer /metrics"; }
    # m REASON: idpool_api_auth_failures_total{reason=REASON} in the last metrics (0 when absent)
    m() { sed -n "s/^idpool_api_auth_failures_total{reason=\"$1\"} //p" "$DIR/metrics" | grep . || echo 0; }
    metrics
    unknown0=$(m unknown) missing0=$(m missing)
    BAD=idp_$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 43)
    # 20 requests with an unknown token and 15 without one, each curl on one connection
    urls=()
    for _ in $(seq 20); do urls+=(-o /dev/null "$BASE/v1/ids/user"); done
    curl -sS --max-time 10 -w '%{http_code}\n' -H "Authorization: Bearer $BAD" "${urls[@]}" \
        >"$DIR/codes" || fail "curl: bad token"
    curl -sS --max-time 10 -w '%{http_code}\n' "${urls[@]:0:45}" >>"$DIR/codes" || fail "curl: no token"
    assert_eq "35 401" "$(sort "$DIR/codes" | uniq -c | xargs)" "answers to 35 bad requests"
    wait_until 3 log_has issuer "api: failed authentication from 127\\.0\\.0\\.1:[0-9]+: unknown or revoked token" ||
        fail "no failed authentication in the issuer's log: $(grep -i auth "$DIR/issuer.log" | tail -n 3)"
    lines=$(($(grep -c "api: failed authentication from" "$DIR/issuer.log") - lines0))
    assert_le "$lines" 2 "log lines for 35 failed authentications (one per burst and reason)"
    ! grep -qF -- "${BAD#idp_}" "$DIR/issuer.log" || fail "the bad token is in the log"
    metrics
    assert_eq 20 "$(($(m unknown) - unknown0))" 'idpool_api_auth_failures_total{reason="unknown"}, increase'
    assert_eq 15 "$(($(m missing) - missing0))" 'idpool_api_auth_failures_total{reason="missing"}, increase'
    grep -q '^# TYPE idpool_api_auth_failures_total counter' "$DIR/metrics" || fail "no TYPE line"
    info "$(grep 'failed authentication' "$DIR/issuer.log" | head -n 1)"
    pass "f: 35 failed authentications: $lines log line(s) with the peer, no token; counted by reason in /metrics"
fi

# ------------------------------------------------------ e: take's token ---
if want e; then
    export IDPOOL_MYSQL_URL IDPOOL_REDIS_URL
    IDPOOL_TOKEN=$T ctl_expect 0 take user 3 --env "http://127.0.0.1:$API_PORT"
    assert_eq 3 "$(grep -cxE '[1-9][0-9]*' "$DIR/out")" "IDs from take with IDPOOL_TOKEN"
    printf '%s\n' "$T" >"$DIR/token"
    chmod 600 "$DIR/token"
    IDPOOL_TOKEN=idp_wrong ctl_expect 0 take user 2 --env "http://127.0.0.1:$API_PORT" --token-file "$DIR/token"
    assert_eq 2 "$(grep -cxE '[1-9][0-9]*' "$DIR/out")" "IDs from take with --token-file (over IDPOOL_TOKEN)"
    # A token in the URL is still used as it is.
    IDPOOL_TOKEN=idp_wrong ctl_expect 0 take user 1 --env "http://$T@127.0.0.1:$API_PORT"
    ctl_expect 2 take user 1 --env "http://127.0.0.1:$API_PORT"
    err_has "an issuer needs a token: set IDPOOL_TOKEN or give --token-file"
    printf 'idp_sec ret\n' >"$DIR/badtoken"
    ctl_expect 2 take user 1 --env "http://127.0.0.1:$API_PORT" --token-file "$DIR/badtoken"
    err_has "token holds characters other than"
    ! grep -q 'sec ret' "$DIR/err" || fail "the bad token file's content is in the error"
    ctl_expect 2 take user 1 --env "http://127.0.0.1:$API_PORT" --token-file "$DIR/nosuch"
    err_has "--token-file .*nosuch"
    ctl_expect 0 take --help
    grep -q 'IDPOOL_TOKEN' "$DIR/out" || fail "take --help does not name IDPOOL_TOKEN"
    pass "e: take reads an issuer's token from IDPOOL_TOKEN or --token-file; none is a usage error naming both"
fi

# ----------------------------------------------- a: password rotation ---
if want a; then
    pw1=$(grant user)
    pw_o=$(grant order)
    session_start u1 idpool:user "$pw1"
    session_start o1 idpool:order "$pw_o"
    pw2=$(grant user)
    wait_until 3 session_is u1 closed || fail "a session with the old password survived apps grant: $(session_end u1)"
    assert_eq open "$(session_end o1)" "a session of another user after the rotation of idpool:user"
    pass "a: apps grant again closes the connections of the old password; another user's stay open"

    # The daemons apply a rotation idpoolctl could not (NOPERM).
    wait_until 5 log_has refill 'applied 2 Redis user' || fail "the refiller did not apply the users"
    session_start u2 idpool:user "$pw2"
    ctl --redis "redis://limited:limitedpw@127.0.0.1:$REDIS_PORT/0" apps grant user >"$DIR/grant3" 2>&1 ||
        fail "apps grant with NOPERM: $(cat "$DIR/grant3")"
    grep -q 'NOPERM' "$DIR/grant3" || fail "the grant was not refused by Redis: $(cat "$DIR/grant3")"
    pw3=$(sed -n 's/^password: //p' "$DIR/grant3")
    t0=$(now_us)
    wait_until 5 session_is u2 closed || fail "the daemons applied the new password but the old session survived: $(session_end u2)"
    info "old session closed $((($(now_us) - t0) / 1000)) ms after the grant reached MySQL only"
    log_has refill 'closed 1 connection\(s\) of Redis user idpool:user: its password changed' ||
        log_has issuer 'closed 1 connection\(s\) of Redis user idpool:user: its password changed' ||
        fail "no daemon logged closing the connection"
    pass "a: a rotation applied by the daemons closes the old password's connections within the reload interval"

    # Reconnect with nothing changed: users applied again, connections kept.
    session_start u3 idpool:user "$pw3"
    session_start o3 idpool:order "$pw_o"
    n0=$(grep -c 'applied 2 Redis user' "$DIR/refill.log")
    killed() { cat "$DIR/refill.log" "$DIR/issuer.log" | grep -c 'its password changed' || true; }
    k0=$(killed)
    rcli CLIENT KILL USER default SKIPME yes >/dev/null
    applied_again() { (($(grep -c 'applied 2 Redis user' "$DIR/refill.log") > n0)); }
    wait_until 5 applied_again || fail "the refiller did not apply the users again after reconnecting"
    sleep 0.3 # the GETUSER replies are in by then; a CLIENT KILL would have closed u3 and o3
    assert_eq "open open" "$(session_end u3) $(session_end o3)" "sessions after the daemons re-applied unchanged users"
    assert_eq "$k0" "$(killed)" "connections closed by the daemons re-applying unchanged users"
    pass "a: daemons reconnecting re-apply unchanged users and close no connection"
fi

# ------------------------------- d: revocation while MySQL is unreachable ---
if want d; then
    SLOW_PORT=$(free_port)
    start_daemon slow --tick-ms 50 --reload-ms 60000 --refill off --api "127.0.0.1:$SLOW_PORT" --instance slow
    BASE=http://127.0.0.1:$SLOW_PORT
    T2=$(new_token t2 user) || fail "tokens add t2"
    signal_daemon slow HUP
    wait_until 5 answers 200 "$T2" /v1/ids/user || fail "slow: t2 not accepted: $(what)"
    ctl --json tokens revoke t2 >"$DIR/revoke.json" || fail "tokens revoke t2"
    mysql_stop
    signal_daemon slow HUP # a reload: MySQL fails, Redis answers
    t0=$(now_us)
    wait_until 3 answers 401 "$T2" /v1/ids/user || fail "t2 accepted after revoke with MySQL down: $(what)"
    info "t2 refused $((($(now_us) - t0) / 1000)) ms after the reload, MySQL down"
    error_is 401 IDPOOL_AUTH
    wait_until 5 log_has slow "cannot read the API tokens" || fail "slow read MySQL (the outage did not happen)"
    log_has slow "1 API token\\(s\\) revoked through Redis" || fail "slow did not log the revocation from Redis"
    req "$T" /v1/ids/user
    [[ $CODE == 200 ]] || fail "t (not revoked) with MySQL down: $(what)"
    assert_eq "revoked True" "$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["result"], d["redis"])' "$DIR/revoke.json")" \
        "--json tokens revoke: result, redis"
    assert_eq 1 "$(rcli SISMEMBER idpool:revoked-tokens "$(sha256 "$T2")")" "t2's hash in idpool:revoked-tokens"
    mysql_start
    export IDPOOL_MYSQL_URL
    ctl_expect 0 --redis "redis://127.0.0.1:$(free_port)/0" tokens revoke t
    err_has "warning: .*revoked in MySQL; an issuer that cannot read MySQL keeps accepting it until it can"
    pass "d: tokens revoke reaches an issuer that cannot read MySQL (through Redis); Redis down: a warning with the bound"
fi

stop_daemon refill
stop_daemon issuer
daemon_alive slow && stop_daemon slow
pass "creds"
