#!/usr/bin/env bash
# The quick start with your own servers (README; issue 13, item 11):
# passwords with reserved characters, percent-encoded in IDPOOL_REDIS_URL
# and IDPOOL_MYSQL_URL as idpoold reads them.
#   * the quick start succeeds (decoded passwords reach redis-cli and the
#     mariadb client), the demo pools fill;
#   * no password appears in its output, nor on idpoold's command line (ps);
#   * a wrong Redis password fails at once with a clear message (it passed
#     the PING check before and the script waited 20 s for nothing);
#   * it prints a curl line with an API token that works as printed (and
#     the token is not in idpoold's log).
# Runs scripts/quickstart.sh on this build (QUICKSTART_NO_BUILD) with its
# run/ in the test's directory.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

QS=$IDPOOL_SOURCE_ROOT/scripts/quickstart.sh
RPW='r@p:ss/w%rd#1'      # raw
RPW_ENC='r%40p%3Ass%2Fw%25rd%231'
MPW='m@y:/pw%'
MPW_ENC='m%40y%3A%2Fpw%25'
QUICKSTART_BUILD=$(dirname "$IDPOOLD")
export QUICKSTART_NO_BUILD=1 QUICKSTART_BUILD QUICKSTART_RUN=$DIR/qs
export QUICKSTART_WAIT_S=15
unset IDPOOL_HTTP_ADDR

rcli CONFIG SET requirepass "$RPW" >/dev/null
# From here on redis-cli needs the password.
rauth() { REDISCLI_AUTH=$RPW redis-cli -p "$REDIS_PORT" "$@"; }
trap 'st=$?; rauth CONFIG SET requirepass "" >/dev/null 2>&1; (exit $st); cleanup' EXIT
sql "CREATE USER IF NOT EXISTS 'qs'@'%' IDENTIFIED BY '${MPW//\'/\'\'}';
     GRANT ALL ON idpool.* TO 'qs'@'%'"

# A password must never show: raw or encoded.
no_secret() { # FILE WHAT
    local p
    for p in "$RPW" "$RPW_ENC" "$MPW" "$MPW_ENC" 'r@p' 'r%40p' 'm@y' 'm%40y'; do
        ! grep -qF -- "$p" "$1" || fail "$2 shows a password ('$p'): $(grep -F -- "$p" "$1" | head -n 2)"
    done
}

# --- wrong password: fails at once, clearly -----------------------------------------------------
t0=$SECONDS
st=0
IDPOOL_REDIS_URL="redis://:wrong%40pw@127.0.0.1:$REDIS_PORT/0" \
    IDPOOL_MYSQL_URL="mysql://qs:$MPW_ENC@127.0.0.1:$MYSQL_PORT/idpool" \
    timeout 60 "$QS" >"$DIR/wrong.out" 2>&1 || st=$?
((st != 0)) || fail "the quick start succeeded with a wrong Redis password"
((SECONDS - t0 <= 5)) || fail "a wrong password took $((SECONDS - t0)) s to report"
grep -q 'does not answer PING with PONG: .*\(WRONGPASS\|NOAUTH\|invalid\)' "$DIR/wrong.out" ||
    fail "no clear message for a wrong password: $(cat "$DIR/wrong.out")"
grep -qF 'wrong%40pw' "$DIR/wrong.out" && fail "the wrong password is printed: $(cat "$DIR/wrong.out")"
pass "a wrong Redis password fails at once: $(grep -o 'does not answer.*' "$DIR/wrong.out" | head -n 1)"

# A password with a bad percent-escape (idpoold refuses it too) is named, not used.
st=0
IDPOOL_REDIS_URL="redis://:bad%zzpw@127.0.0.1:$REDIS_PORT/0" \
    IDPOOL_MYSQL_URL="mysql://qs:$MPW_ENC@127.0.0.1:$MYSQL_PORT/idpool" \
    timeout 60 "$QS" >"$DIR/bad.out" 2>&1 || st=$?
((st != 0)) || fail "the quick start accepted a bad percent-escape"
grep -q 'IDPOOL_REDIS_URL: a bad percent-escape in the password' "$DIR/bad.out" ||
    fail "no message for a bad percent-escape: $(cat "$DIR/bad.out")"
grep -qF 'bad%zzpw' "$DIR/bad.out" && fail "the bad password is printed: $(cat "$DIR/bad.out")"

# --- the right ones, percent-encoded -------------------------------------------------------------
export IDPOOL_REDIS_URL="redis://:$RPW_ENC@127.0.0.1:$REDIS_PORT/0"
export IDPOOL_MYSQL_URL="mysql://qs:$MPW_ENC@127.0.0.1:$MYSQL_PORT/idpool"
st=0
timeout 90 "$QS" >"$DIR/qs.out" 2>&1 || st=$?
((st == 0)) || fail "the quick start failed (status $st): $(tail -n 15 "$DIR/qs.out")"
grep -q '^idpool is running' "$DIR/qs.out" || fail "no 'idpool is running': $(tail -n 5 "$DIR/qs.out")"
[[ $(rauth LLEN 'idpool:{demo_mono}:pool') -gt 0 ]] || fail "demo_mono has no IDs"
no_secret "$DIR/qs.out" "the quick start's output"
pid=$(tr -dc 0-9 <"$DIR/qs/idpoold.pid")
[[ -n $pid && -r /proc/$pid/cmdline ]] || fail "no idpoold running (pid '$pid')"
tr '\0' ' ' <"/proc/$pid/cmdline" >"$DIR/cmdline"
info "idpoold's command line: $(cat "$DIR/cmdline")"
no_secret "$DIR/cmdline" "idpoold's command line"
no_secret "$DIR/qs/idpoold.log" "idpoold's log"
grep -q 'using your servers: redis://:\*\*\*@127' "$DIR/qs.out" || fail "the servers line is not redacted"
# The printed curl works as printed: it names the token and the API's port.
curl_line=$(grep -o "curl -H 'Authorization: Bearer idp_[A-Za-z0-9_-]*' 'http://127.0.0.1:[0-9]*/v1/ids/demo_trend?count=3'" "$DIR/qs.out") ||
    fail "no working curl line in the quick start's output: $(tail -n 15 "$DIR/qs.out")"
eval "$curl_line" -sS >"$DIR/curl.out" 2>"$DIR/curl.err" || fail "the printed curl failed: $(cat "$DIR/curl.err")"
python3 -c 'import json, sys
from harness import check
d = json.load(open(sys.argv[1]))
check(d["app"] == "demo_trend" and len(d["ids"]) == 3 and all(i.isdigit() for i in d["ids"]), d)' \
    "$DIR/curl.out" || fail "the printed curl did not get 3 IDs: $(cat "$DIR/curl.out")"
grep -q '"app":"demo_mono","ids":\["[0-9]*"' "$DIR/qs.out" || fail "the quick start did not show an API answer"
token=$(grep -o 'idp_[A-Za-z0-9_-]*' "$DIR/qs.out" | head -n 1)
! grep -qF -- "$token" "$DIR/qs/idpoold.log" || fail "the API token is in idpoold's log"
pass "the quick start prints a working curl with a token ($(cat "$DIR/curl.out"))"
# How a new shell reaches the servers: idpoolctl reads the two URLs (your
# servers: export them; run/'s: source run/env), and the SQL line's password.
grep -qF '  idpoolctl setup:     export IDPOOL_REDIS_URL=... IDPOOL_MYSQL_URL=...' "$DIR/qs.out" ||
    fail "the quick start does not say how idpoolctl finds the servers: $(tail -n 20 "$DIR/qs.out")"
grep -qF '(your MySQL password: export MYSQL_PWD=..., or add -p to be asked)' "$DIR/qs.out" ||
    fail "the SQL line gives no password hint: $(tail -n 20 "$DIR/qs.out")"
"$IDPOOLCTL" apps list >"$DIR/list.out" 2>&1 || fail "idpoolctl apps list as the quick start says: $(cat "$DIR/list.out")"
grep -q demo_mono "$DIR/list.out" || fail "idpoolctl apps list: $(cat "$DIR/list.out")"
pass "the quick start says how idpoolctl finds the servers (it works so) and how the SQL line gets a password"
"$QS" stop >"$DIR/stop.out" 2>&1 || fail "quickstart.sh stop failed: $(cat "$DIR/stop.out")"
wait_until 10 eval '! [[ -r /proc/$pid/cmdline ]]' || fail "idpoold still running after stop"
pass "percent-encoded passwords work; none is printed, logged or on idpoold's command line"

rauth CONFIG SET requirepass "" >/dev/null
trap cleanup EXIT
pass "quickstart"
