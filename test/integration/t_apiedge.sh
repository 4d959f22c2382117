#!/usr/bin/env bash
# The ID API's edges (issue 22 item 8), against real daemons; curl and raw
# sockets (Python) as clients:
#   1. percent-decoding: /v1/ids/demo%5Fmono is demo_mono, count=%31%30 is
#      10 (query and form body); %zz and %00 are 400 naming the escape
#      (IDPOOL_BADREQUEST in the path, IDPOOL_BADARG in the query); a
#      decoded '/' makes no segment (404); the status server decodes with
#      the same rules (/v1/apps/demo%5Fmono, /v1%2Fapps 404, %zz 400).
#   2. Accept: q-values weighed (text/plain;q=0.5, application/json is
#      JSON), wildcards, 406 IDPOOL_NOTACCEPTABLE when neither type is
#      acceptable; counted in idpool_api_requests_total{code="406"}.
#   3. two Authorization headers (even one token twice): 400
#      IDPOOL_BADREQUEST naming them, the connection closed.
#   4. plain HTTP to the TLS port: once the request is read, nginx's 400 in
#      plain text ("The plain HTTP request was sent to HTTPS port"), then
#      close; no reset, also with a body; logged; https still served.
#   5. slow clients (http-head-timeout-ms 500, http-timeout-ms 1000): a new
#      connection that sends nothing, part of a head or part of a body gets
#      408 and is closed, over TLS too once the handshake is done; a
#      kept-alive connection idle after an answer, or a TLS one before its
#      handshake, is closed without a word; counted under code 408.
#   6. the access log (api-access-log): one line per answer, the server's
#      own refusals (400, 408) included, with the token's name but never the
#      token or the query; odd bytes escaped; a new file after logrotate's
#      rename and SIGHUP; "-" writes to stderr.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"

add_app user step=100 max_pool_size=500 max_size_per_times=50
add_app demo_mono step=100 max_pool_size=500 max_size_per_times=50
T=$(new_token edge '*') || fail "tokens add edge"

API_PORT=$(free_port)
HTTP_PORT=$(free_port)
API=http://127.0.0.1:$API_PORT
STATUS=http://127.0.0.1:$HTTP_PORT
BASE=$API
SLOW=(--http-head-timeout-ms 500 --http-timeout-ms 1000)
start_daemon a --tick-ms 50 --reload-ms 300 --api "127.0.0.1:$API_PORT" --http "127.0.0.1:$HTTP_PORT" "${SLOW[@]}"
wait_until 5 log_has a "access: 1 API token" || fail "a: tokens not loaded"
for k in user demo_mono; do
    wait_until 10 pool_ge "$k" 500 || fail "$k never filled"
done
# msg_has ERE: the last answer's body matches.
msg_has() { grep -qE -- "$1" "$DIR/body" || fail "body does not match '$1': $(what)"; }

# ------------------------------------------------------ 1. decoding ---
as "$T" /v1/ids/demo%5Fmono
ids_ok 1 demo_mono >/dev/null
as "$T" /v1/ids/%75%73%65%72
ids_ok 1 user >/dev/null
as "$T" '/v1/ids/user?count=%31%30'
ids_ok 10 user >/dev/null
as "$T" '/v1/ids/user?co%75nt=2'
ids_ok 2 user >/dev/null
as "$T" -d 'count=%33' /v1/ids/user
ids_ok 3 user >/dev/null
as "$T" '/v1/ids/us%zzer'
is_error 400 IDPOOL_BADREQUEST
msg_has "bad percent-escape in the path"
as "$T" '/v1/ids/user%00'
is_error 400 IDPOOL_BADREQUEST
for q in 'count=%zz' 'count=%00' 'count=1%' 'co%zznt=1'; do
    as "$T" "/v1/ids/user?$q"
    is_error 400 IDPOOL_BADARG
    msg_has "bad percent-escape in '"
done
as "$T" -d 'count=%3' /v1/ids/user
is_error 400 IDPOOL_BADARG
msg_has "bad percent-escape"
for p in /v1/ids/demo%2Fmono /v1%2Fids/user /v1/ids%2Fuser /v1/ids/%2E%2E; do
    as "$T" --path-as-is "$p"
    is_error 404 IDPOOL_NOTFOUND
done
BASE=$STATUS
req /v1/apps/demo%5Fmono
[[ $CODE == 200 ]] && grep -q '"key":"demo_mono"' "$DIR/body" || fail "status /v1/apps/demo%5Fmono: $(what)"
req /%6Detrics
[[ $CODE == 200 ]] && grep -q '^idpool_' "$DIR/body" || fail "status /%6Detrics: $(what)"
req --path-as-is /v1%2Fapps
[[ $CODE == 404 ]] || fail "status /v1%2Fapps: $(what)"
req /v1/apps/%zz
[[ $CODE == 400 ]] && grep -q 'bad percent-escape' "$DIR/body" || fail "status /v1/apps/%zz: $(what)"
BASE=$API
pass "1. paths and query values are percent-decoded (segments after the split); %zz and %00 are 400; the status server likewise"

# ------------------------------------------------------- 2. Accept ---
# accept_gives ACCEPT json|text: a 200 in that format for that Accept header.
accept_gives() {
    as "$T" -H "Accept: $1" /v1/ids/user
    [[ $CODE == 200 ]] || fail "Accept: $1: $(what)"
    case $2 in
    json) [[ $(header Content-Type) == application/json* ]] && grep -q '"ids":\["' "$DIR/body" ;;
    text) [[ $(header Content-Type) == text/plain* ]] && grep -qxE '[0-9]+' "$DIR/body" ;;
    esac || fail "Accept: $1: expected $2, got $(what)"
}
accept_gives 'text/plain;q=0.5, application/json' json
accept_gives 'application/json;q=0.2, text/plain;q=0.8' text
accept_gives 'text/plain;q=0.7, application/json;q=0.7' text
accept_gives 'application/json, text/plain' json
accept_gives 'text/*' text
accept_gives 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' json
accept_gives 'application/json;q=0, */*' text
for h in 'application/xml' 'text/plain;q=0' 'application/json;q=0, text/plain;q=0' 'image/*'; do
    as "$T" -H "Accept: $h" /v1/ids/user
    is_error 406 IDPOOL_NOTACCEPTABLE
done
pass "2. Accept: q-values weighed (text/plain;q=0.5, application/json is JSON), wildcards; nothing acceptable is 406"

# ----------------------------------------------- 3. Authorization twice ---
# raw PORT REQUEST: the request (printf's format: \r\n...) sent as is on one
# connection; the answer, as read until the server closes, in $DIR/raw
# ("(reset)" appended when the server reset the connection, "(open)" when it
# kept it open for 3 s: harness.read_all).
raw() {
    # shellcheck disable=SC2059 # the request is the format
    printf "$2" >"$DIR/req"
    "$PYTHON" - "$1" "$DIR/req" "$DIR/raw" <<'EOF'
import socket, sys
from harness import read_all
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(open(sys.argv[2], "rb").read())
data, how = read_all(s)
open(sys.argv[3], "wb").write(data + (b"" if how == "closed" else b"(%s)" % how.encode()))
EOF
}
# raw_has ERE WHAT: the last raw answer matches (grep -E), else a failure naming WHAT.
raw_has() { grep -qE -- "$1" "$DIR/raw" || fail "$2: $(redact "$(head -c 600 "$DIR/raw")")"; }
for second in "Bearer idp_other" "Bearer $T"; do
    raw "$API_PORT" "GET /v1/ids/user HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $T\r\nAuthorization: $second\r\n\r\n"
    raw_has '^HTTP/1.1 400 ' "two Authorization headers"
    raw_has '"error":"IDPOOL_BADREQUEST","message":"more than one Authorization header"' "two Authorization headers"
    raw_has '^Connection: close' "two Authorization headers: not closed"
done
pass "3. two Authorization headers: 400 IDPOOL_BADREQUEST 'more than one Authorization header', closed"

# ------------------------------------------ 4. plain HTTP to the TLS port ---
command -v openssl >/dev/null 2>&1 || fail "openssl is not installed"
tls_cert
TLS_PORT=$(free_port)
start_daemon tls --tick-ms 50 --reload-ms 300 --refill off --api "127.0.0.1:$TLS_PORT" \
    --api-tls-cert "$DIR/tls.crt" --api-tls-key "$DIR/tls.key" "${SLOW[@]}"
wait_until 5 log_has tls "access: 1 API token" || fail "tls: tokens not loaded"
for r in "GET /v1/ids/user HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer $T\r\n\r\n" \
    "POST /v1/ids/user HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\ncount=2" \
    "GET / HTTP/1.0\r\n\r\n" "nonsense\r\n\r\n"; do
    raw "$TLS_PORT" "$r"
    raw_has '^HTTP/1.1 400 Bad Request' "plain HTTP to the TLS port"
    raw_has '^Content-Type: text/plain' "plain HTTP to the TLS port: not text/plain"
    raw_has '^The plain HTTP request was sent to HTTPS port$' "plain HTTP to the TLS port: body"
    raw_has '^Connection: close' "plain HTTP to the TLS port: not closed"
    ! grep -qE '\((reset|open)\)$' "$DIR/raw" || fail "plain HTTP to the TLS port: $(tail -c 20 "$DIR/raw")"
done
wait_until 2 log_has tls 'api: plain HTTP from 127\.0\.0\.1:[0-9]+ to the TLS port, answered 400' ||
    fail "tls: plain HTTP not logged"
BASE=https://127.0.0.1:$TLS_PORT
as "$T" --cacert "$DIR/tls.crt" '/v1/ids/user?count=2'
ids_ok 2 user >/dev/null
BASE=$API
pass "4. plain HTTP to the TLS port: nginx's plain-text 400 once the request is read (no reset), logged; https still served"

# ----------------------------------------------------- 5. slow clients ---
"$PYTHON" - "$API_PORT" "$TLS_PORT" "$DIR/tls.crt" "$T" >"$DIR/slow.out" 2>&1 <<'EOF' ||
import socket, ssl, sys, time
from harness import check, read_all
api, tls, ca, tok = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
def run(name, port, send=b"", handshake=False, first=None, want408=True):
    """Connect, send, wait for the server to close: (seconds, answer)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=4)
    if handshake:
        s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    if first:  # one request answered first: the connection is then kept alive, idle
        s.sendall(first)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(65536)
        check(head.startswith(b"HTTP/1.1 200 "), "%s: first request: %r" % (name, head[:100]))
    t0 = time.monotonic()
    s.sendall(send)
    data, how = read_all(s)
    took = time.monotonic() - t0
    print("%s: %s after %.2f s: %r" % (name, how, took, data[:120]))
    check(how in ("closed", "reset") and 0.3 <= took <= 2.5, "%s: %s after %.2f s" % (name, how, took))
    if want408:
        check(data.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"IDPOOL_BADREQUEST" in data
              and b"\r\nConnection: close\r\n" in data, "%s: %r" % (name, data[:200]))
    else:
        check(data == b"", "%s: answered %r" % (name, data[:200]))
auth = b"Authorization: Bearer " + tok.encode() + b"\r\n"
ok = b"GET /v1/ids/user HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n"
run("nothing sent", api)
run("part of a head", api, b"GET /v1/ids/user HTTP/1.1\r\nHost: x\r\n")
run("part of a body", api, b"POST /v1/ids/user HTTP/1.1\r\nHost: x\r\n" + auth +
    b"Content-Length: 7\r\n\r\ncou")
run("TLS, nothing sent after the handshake", tls, handshake=True)
run("TLS, part of a head", tls, b"GET /v1/ids/user HTTP/1.1\r\n", handshake=True)
run("TLS, no handshake", tls, want408=False)
run("kept alive, idle", api, first=ok, want408=False)
run("TLS, kept alive, idle", tls, handshake=True, first=ok, want408=False)
EOF
    fail "slow clients: $(cat "$DIR/slow.out")"
info "$(tr '\n' ';' <"$DIR/slow.out")"
pass "5. slow clients: 408 then close for nothing, part of a head or body sent (TLS too, after the handshake); idle kept-alive and pre-handshake connections closed silently"

# ------------------------------------------------------- 6. access log ---
LOG_PORT=$(free_port)
start_daemon logd --tick-ms 50 --reload-ms 300 --refill off --api "127.0.0.1:$LOG_PORT" \
    --api-access-log "$DIR/access.log" "${SLOW[@]}"
wait_until 5 log_has logd "access: 1 API token" || fail "logd: tokens not loaded"
BASE=http://127.0.0.1:$LOG_PORT
as "$T" '/v1/ids/user?count=3&secret=s3cr3t'
is_error 400 IDPOOL_BADARG
as "$T" '/v1/ids/user?count=3'
ids_ok 3 user >/dev/null
req /v1/ids/user
is_error 401 IDPOOL_AUTH
raw "$LOG_PORT" 'GET /v1/ids/\xff"x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
raw_has '^HTTP/1.1 404 ' "a path with odd bytes"
raw "$LOG_PORT" 'nonsense\r\n\r\n'
raw_has '^HTTP/1.1 400 ' "a malformed request"
raw "$LOG_PORT" '' # nothing: 408 after http-head-timeout-ms
raw_has '^HTTP/1.1 408 ' "a silent client"
# access_has ERE: a line of the access log (time and address first) ends so.
access_has() { grep -qE "^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z 127\.0\.0\.1:[0-9]+ $1\$" "$DIR/access.log"; }
MS='[0-9]+\.[0-9]{3}'
for l in "GET /v1/ids/user 400 [0-9]+ $MS edge" "GET /v1/ids/user 200 [0-9]+ $MS edge" \
    "GET /v1/ids/user 401 [0-9]+ $MS -" "GET /v1/ids/\\\\xff\\\\x22x 404 [0-9]+ $MS -" \
    "- - 400 [0-9]+ $MS -" "- - 408 [0-9]+ $MS -"; do
    wait_until 2 access_has "$l" || fail "no access log line '... $l': $(cat "$DIR/access.log")"
done
assert_eq 6 "$(wc -l <"$DIR/access.log")" "access log lines"
! grep -qF -- "${T#idp_}" "$DIR/access.log" || fail "the token is in the access log"
! grep -qE 'count=|s3cr3t' "$DIR/access.log" || fail "a query is in the access log: $(cat "$DIR/access.log")"
# logrotate: rename, SIGHUP, a new file
mv "$DIR/access.log" "$DIR/access.log.1"
signal_daemon logd HUP
wait_until 3 eval '[[ -e $DIR/access.log ]]' || fail "logd: no new access log after SIGHUP"
as "$T" /v1/ids/user
ids_ok 1 user >/dev/null
wait_until 2 access_has "GET /v1/ids/user 200 [0-9]+ $MS edge" || fail "no line in the new access log"
assert_eq 1 "$(wc -l <"$DIR/access.log")" "lines in the new access log"
assert_eq 6 "$(wc -l <"$DIR/access.log.1")" "lines in the rotated access log"
stop_daemon logd
# "-": stderr, next to the daemon's own log
start_daemon logd2 --tick-ms 50 --reload-ms 300 --refill off --api "127.0.0.1:$LOG_PORT" --api-access-log -
wait_until 5 log_has logd2 "access: 1 API token" || fail "logd2: tokens not loaded"
as "$T" /v1/ids/user
ids_ok 1 user >/dev/null
wait_until 2 log_has logd2 "Z 127\.0\.0\.1:[0-9]+ GET /v1/ids/user 200 [0-9]+ $MS edge\$" ||
    fail "logd2: no access log line on stderr"
stop_daemon logd2
BASE=$API
pass "6. access log: a line per answer (400, 408 and 401 too), the token's name, never the token or the query; reopened on SIGHUP; - is stderr"

# metric NAME: its value on the status server's /metrics.
metric() { curl -sS --max-time 5 "$STATUS/metrics" | sed -n "s/^$1 //p"; }
assert_ge "$(metric 'idpool_api_requests_total{code="406"}')" 4 'idpool_api_requests_total{code="406"}'
assert_ge "$(metric 'idpool_api_requests_total{code="408"}')" 3 'idpool_api_requests_total{code="408"}'

stop_daemon tls
stop_daemon a
pass "apiedge"
