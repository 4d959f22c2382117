#!/usr/bin/env bash
# The ID API (design brief §11, src/daemon/api.h) against real servers, with
# curl and Python (http.client, raw sockets) as clients. Daemons: "refill"
# (--refill on, no API) fills the pools; "issuer1" (--refill off --api) serves
# them; others as each part needs.
#
#   issuer-only alone   before any refiller ran, a live row has no limits in
#                       meta: 503 IDPOOL_UNAVAILABLE with Retry-After
#   every status        200 JSON {"app","ids":[strings]} (count=N gives N;
#                       IDs above 2^53 exact), text/plain with Accept, POST
#                       with the count in the query or a form body; 400
#                       IDPOOL_BADARG / IDPOOL_LIMIT; 401 IDPOOL_AUTH with
#                       WWW-Authenticate: Bearer; 403 IDPOOL_FORBIDDEN; 404
#                       IDPOOL_NOAPP (unknown key, soft-deleted with idpoolctl
#                       apps disable), IDPOOL_NOTFOUND; 405 IDPOOL_METHOD with
#                       Allow: GET, POST; 429 IDPOOL_RATE with Retry-After;
#                       503 IDPOOL_EMPTY, IDPOOL_UNAVAILABLE (Redis down),
#                       IDPOOL_EPOCH (Redis restarted, no refiller has swept
#                       yet; 200 once one has) with Retry-After. Every error
#                       is JSON {"error","message"}; Retry-After only on 429
#                       and 503. A take larger than the pool holds is answered
#                       with what there is (fewer IDs), the next with 503.
#   tokens              tokens add works within reload-ms, and at once after
#                       SIGHUP on an instance that reloads once a minute;
#                       tokens revoke is 401 within reload-ms / after SIGHUP;
#                       no token in any log or in /metrics
#   issuer-only         serves IDs the refiller pushed; no lease, lock or
#                       push of its own (log, application_lease, /metrics)
#   TLS                 https with curl --cacert; plain HTTP to that port
#                       gets a plain-text 400; a key that does not match the
#                       certificate -> exit non-zero naming both files; a certificate without
#                       key -> config error, exit 2
#   Redis users         apps grant: re-created by the issuer after a Redis
#                       restart (AUTH, LPOP own pool ok, RPUSH NOPERM); apps
#                       revoke: not back after another restart
#   bad input           heads > 8 KiB refused (431), bodies > 1 KiB
#                       (413), chunked bodies (411); a
#                       silent or trickling client closed after
#                       http-head-timeout-ms; 50 idle connections do not keep a
#                       daemon that refills and serves from refilling
# All IDs handed out by the API are unique per application.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"
require_redis_py
command -v openssl >/dev/null 2>&1 || skip "openssl is not installed"
T_START=$(now_us)

TOKENS=() # every token made, for the leak checks

# ------------------------------------------------------------- set up ---

BIG=9007199254740993 # 2^53 + 1: a double cannot hold it
add_app user step=100 max_pool_size=500 max_size_per_times=50
add_app big start_offset=$BIG step=100 max_pool_size=500 max_size_per_times=50
add_app rate step=100 max_pool_size=500 max_size_per_times=5 max_size_per_second=20
add_app other step=100 max_pool_size=500 max_size_per_times=50
add_app gone step=100 max_pool_size=500 max_size_per_times=50
add_app dry step=100 max_pool_size=500 max_size_per_times=50
add_app busy step=100 max_pool_size=1000 max_size_per_times=100 min_size_percent=50
add_app pipe step=1000 max_pool_size=5000 max_size_per_times=50
# a take of as many as a second grants: the issuer's take must not ask for more
add_app persec step=100 max_pool_size=500 max_size_per_times=100 max_size_per_second=100
APPS_T1=user,big,rate,dry,gone,busy,persec
T_ALL=$(new_token all '*') || fail "tokens add all"
T1=$(new_token t1 "$APPS_T1") || fail "tokens add t1"
TOKENS+=("$T_ALL" "$T1")

API_PORT=$(free_port)
HTTP_PORT=$(free_port)
API=http://127.0.0.1:$API_PORT
BASE=$API
COMMON=(--tick-ms 50 --reload-ms 300)

# --------------------------------------- issuer-only, nobody refilling ---
# No daemon ever wrote these rows' limits into meta (an issuer-only instance
# does not): idpool_take refuses with IDPOOL_NOAPP. The row is served, so the
# issuer answers 503 IDPOOL_UNAVAILABLE with Retry-After until a refiller
# writes the limits (not 404: the application exists).
start_daemon issuer1 "${COMMON[@]}" --refill off --api "127.0.0.1:$API_PORT" \
    --http "127.0.0.1:$HTTP_PORT" --instance issuer1
wait_until 5 log_has issuer1 "api: listening on 127\\.0\\.0\\.1:$API_PORT" || fail "issuer1: API not listening"
wait_until 5 log_has issuer1 "access: 2 API token" || fail "issuer1: tokens not loaded"
nolimits() { as "$T1" /v1/ids/user && grep -q 'no limits' "$DIR/body"; }
wait_until 5 nolimits || fail "issuer1 alone: $(what)"
is_error 503 IDPOOL_UNAVAILABLE retry
assert_eq "" "$(rcli HGET "$(meta_key user)" per_take)" "per_take in meta with only issuer1 running"
info "issuer-only alone, app never refilled: $(what)"
pass "issuer-only alone: a live row no refiller has seen (no limits in meta) is 503 IDPOOL_UNAVAILABLE with Retry-After"

start_daemon refill "${COMMON[@]}" --instance refill1
for k in user:500 big:500 rate:500 other:500 gone:500 dry:500 busy:1000 persec:500; do
    wait_until 10 pool_ge "${k%:*}" "${k#*:}" || fail "${k%:*} never filled"
done
wait_until 3 answers 200 "$T1" /v1/ids/user || fail "issuer1 once refilled: $(what)"
ids_ok 1 user >/dev/null

# ----------------------------------------------------------------- 200 ---
as "$T1" '/v1/ids/user?count=7'
ids_ok 7 user >/dev/null
grep -q '"ids":\["[0-9]' "$DIR/body" || fail "IDs not JSON strings: $(head -c 300 "$DIR/body")"
[[ $(header Cache-Control) == no-store ]] || fail "200: Cache-Control '$(header Cache-Control)'"
as "$T1" '/v1/ids/user?count=50' # max_size_per_times
ids_ok 50 user >/dev/null
as "$T_ALL" /v1/ids/user
ids_ok 1 user >/dev/null
# above 2^53: consecutive (increment_max 1) and exact only as strings
as "$T1" '/v1/ids/big?count=20'
ids_ok 20 big >/dev/null
python3 - "$DIR/body" "$BIG" <<'EOF' || fail "big IDs not exact: $(head -c 600 "$DIR/body")"
import json, sys
from harness import check
ids = [int(i) for i in json.load(open(sys.argv[1]))["ids"]]
check(ids[0] >= int(sys.argv[2]) > 2**53, ids)
check(all(b - a == 1 for a, b in zip(ids, ids[1:])), ids)
check(len({float(i) for i in ids}) < len(ids), "as doubles these IDs would not all be distinct")  # what a double would have made of them
EOF
grep -qF "\"$BIG\"" "$DIR/body" || info "big: $BIG itself was buffered before (fine)"
# text/plain
as "$T1" -H 'Accept: text/plain' '/v1/ids/user?count=5'
[[ $CODE == 200 ]] || fail "text/plain: $(what)"
[[ $(header Content-Type) == text/plain* ]] || fail "text/plain: Content-Type '$(header Content-Type)'"
assert_eq 5 "$(grep -cxE '0|[1-9][0-9]*' "$DIR/body")" "text/plain: ID lines in $(head -c 300 "$DIR/body")"
assert_eq 5 "$(wc -l <"$DIR/body")" "text/plain: lines in the body"
cat "$DIR/body" >>"$DIR/ids.user"
as "$T1" -H 'Accept: text/html, text/plain;q=0.9' /v1/ids/big
[[ $CODE == 200 && $(header Content-Type) == text/plain* ]] || fail "Accept with text/plain second: $(what)"
tr -d '\n' <"$DIR/body" | grep -qxE '[0-9]+' || fail "text/plain body: $(head -c 300 "$DIR/body")"
cat "$DIR/body" >>"$DIR/ids.big"
# POST: count in the query (no body; Content-Length: 0 from Python), or a form body
as "$T1" -X POST '/v1/ids/user?count=3'
ids_ok 3 user >/dev/null
as "$T1" -d count=4 /v1/ids/user
ids_ok 4 user >/dev/null
python3 - "$API_PORT" "$T1" "$DIR/ids.user" <<'EOF' || fail "Python POSTs"
import http.client, json, sys
from harness import check
port, tok = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
got = []
for path, body, n in (("/v1/ids/user?count=6", None, 6), ("/v1/ids/user", "count=2", 2),
                      ("/v1/ids/user", b"count=9", 9)):
    hdr = {"Authorization": "Bearer " + tok}
    if body is not None:
        hdr["Content-Type"] = "application/x-www-form-urlencoded"
    c.request("POST", path, body=body, headers=hdr)  # one keep-alive connection
    r = c.getresponse()
    d = json.loads(r.read())
    check(r.status == 200 and r.getheader("Content-Type").startswith("application/json"), (r.status, d))
    check(d["app"] == "user" and len(d["ids"]) == n and all(isinstance(i, str) for i in d["ids"]), (path, d))
    got += d["ids"]
open(sys.argv[3], "a").write("".join(i + "\n" for i in got))
EOF
pass "200: JSON IDs as strings, count=N gives N, above 2^53 exact, text/plain per Accept, POST with query or form body"

# ----------------------------------------------------------------- 400 ---
for q in 'count=0' 'count=x' 'count=-1' 'count=' 'count' 'foo=1' 'count=1&count=2' 'count=1&x=2' \
    'count=99999999999'; do
    as "$T1" "/v1/ids/user?$q"
    is_error 400 IDPOOL_BADARG
done
as "$T1" -d count=2 '/v1/ids/user?count=3'
is_error 400 IDPOOL_BADARG
grep -q 'both' "$DIR/body" || fail "count in query and body: $(what)"
as "$T1" -d count=abc /v1/ids/user
is_error 400 IDPOOL_BADARG
as "$T1" -H 'Content-Type: application/json' -d '{"count":2}' /v1/ids/user
is_error 400 IDPOOL_BADARG
as "$T1" '/v1/ids/user?count=51'
is_error 400 IDPOOL_LIMIT
grep -q 'max_size_per_times 50' "$DIR/body" || fail "LIMIT message: $(what)"
as "$T1" -d count=1000 /v1/ids/user
is_error 400 IDPOOL_LIMIT
# max_size_per_times = max_size_per_second = 100: a request of 100 is
# served whole (the issuer's take of it plus its buffer's top-up would be
# refused whole: a row with max_size_per_times above max_size_per_second,
# where a request of 100 got "count 110 exceeds max_size_per_second 100",
# is invalid now: test_app)
as "$T1" '/v1/ids/persec?count=100'
[[ $CODE == 200 ]] || fail "a request of 100 with max_size_per_second 100: $(what)"
assert_eq 100 "$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["ids"]))' "$DIR/body")" "IDs for a request of 100 with max_size_per_second 100"
pass "400: IDPOOL_BADARG for bad counts, unknown or repeated parameters, count in query and body; IDPOOL_LIMIT above max_size_per_times; a request of max_size_per_second served"

# ----------------------------------------------------------------- 401 ---
req /v1/ids/user
is_error 401 IDPOOL_AUTH
[[ $(header WWW-Authenticate) == Bearer* ]] || fail "401 without token: WWW-Authenticate '$(header WWW-Authenticate)'"
for h in 'Authorization: Bearer idp_nosuchtoken' 'Authorization: Basic dXNlcjpwdw==' 'Authorization: Bearer' \
    "Authorization: Bearer $T1 x"; do
    req -H "$h" /v1/ids/user
    is_error 401 IDPOOL_AUTH
    [[ $(header WWW-Authenticate) == Bearer* ]] || fail "401 ($h): WWW-Authenticate '$(header WWW-Authenticate)'"
done
req -H 'Authorization: Bearer idp_nosuchtoken' /v1/ids/nosuch
is_error 401 IDPOOL_AUTH
pass "401 IDPOOL_AUTH with WWW-Authenticate: Bearer: no, unknown, malformed token"

# ----------------------------------------------------------- 403 / 404 ---
as "$T1" /v1/ids/other
is_error 403 IDPOOL_FORBIDDEN
as "$T1" /v1/ids/nosuch # a token learns nothing of applications it may not see
is_error 403 IDPOOL_FORBIDDEN
# The first request for an application waits for its buffer's first take
# and is answered later; over HTTP/1.0 that answer also closes the
# connection.
as "$T_ALL" --http1.0 /v1/ids/other
ids_ok 1 other >/dev/null
[[ $(header Connection) == close ]] || fail "HTTP/1.0 answer without Connection: close: $(what)"
as "$T_ALL" /v1/ids/nosuch
is_error 404 IDPOOL_NOAPP
for p in /v1/ids/ /v1/ids /v1/idsx/user /v1/ids/user/x / /v1/ids/bad%20key /v1/apps /metrics; do
    as "$T1" "$p"
    is_error 404 IDPOOL_NOTFOUND
done
req /nope
is_error 404 IDPOOL_NOTFOUND
# the absolute form of the request target (RFC 7230 5.3.2) names the same resource
as "$T1" --request-target "http://idpool.example/v1/ids/other" /v1/ids/other
is_error 403 IDPOOL_FORBIDDEN
as "$T_ALL" --request-target "http://idpool.example/v1/ids/other?count=2" /v1/ids/other
ids_ok 2 other >/dev/null
# soft-deleted with idpoolctl: 404 within the reload interval
as "$T1" /v1/ids/gone
ids_ok 1 gone >/dev/null
ctl apps disable gone >/dev/null || fail "apps disable gone"
t0=$(now_us)
wait_until 3 answers 404 "$T1" /v1/ids/gone || fail "gone after apps disable: $(what)"
is_error 404 IDPOOL_NOAPP
info "gone: 404 $((($(now_us) - t0) / 1000)) ms after apps disable"
as "$T_ALL" /v1/ids/gone
is_error 404 IDPOOL_NOAPP
pass "403 IDPOOL_FORBIDDEN (token not for the app); 404 IDPOOL_NOAPP (unknown, disabled), IDPOOL_NOTFOUND (other paths)"

# Pipelining: 300 requests in one write (36 KB, four times the connection's
# buffer), the first of them for an application nobody asked yet (it waits
# for the first take): every one answered, in order, no ID twice.
python3 - "$API_PORT" "$T_ALL" >"$DIR/pipe.out" 2>&1 <<'EOF' || fail "pipelining: $(tail -n 5 "$DIR/pipe.out")"
import json, socket, sys, time
from harness import check
port, tok = int(sys.argv[1]), sys.argv[2]
req = ("GET /v1/ids/pipe HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % tok).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(req * 300)
data, ids, deadline = b"", [], time.time() + 10
while len(ids) < 300 and time.time() < deadline:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        status = head.split(b"\r\n", 1)[0]
        check(status == b"HTTP/1.1 200 OK", status)
        n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
        if len(rest) < n:
            break
        ids += json.loads(rest[:n])["ids"]
        data = rest[n:]
print("answers", len(ids), "unique", len(set(ids)))
sys.exit(0 if len(ids) == 300 and len(set(ids)) == 300 else 1)
EOF
pass "300 pipelined requests (36 KB at once, the first one waiting for a take): all answered in order, $(cat "$DIR/pipe.out")"

# ----------------------------------------------------------------- 405 ---
for m in PUT DELETE PATCH OPTIONS; do
    as "$T1" -X "$m" /v1/ids/user
    is_error 405 IDPOOL_METHOD
    assert_eq 'GET, POST' "$(header Allow)" "$m: Allow"
done
as "$T1" -I /v1/ids/user
[[ $CODE == 405 ]] || fail "HEAD: $(what)"
assert_eq 'GET, POST' "$(header Allow)" "HEAD: Allow"
[[ $(header Content-Type) == application/json* ]] || fail "HEAD: Content-Type '$(header Content-Type)'"
# no body bytes after the headers (HTTP/1.0: read to the end)
python3 - "$API_PORT" "$T1" <<'EOF' || fail "HEAD: raw answer"
import socket, sys
from harness import check
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(("HEAD /v1/ids/user HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n" % sys.argv[2]).encode())
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
check(head.startswith(b"HTTP/1.") and head.split()[1] == b"405", head)
check(b"\r\nAllow: GET, POST" in head, head)
check(body == b"", body)
EOF
req -X PUT /v1/ids/user # the method before the token
is_error 405 IDPOOL_METHOD
pass "405 IDPOOL_METHOD with Allow: GET, POST for PUT, DELETE, PATCH, OPTIONS, HEAD (no body)"

# ----------------------------------------------------------------- 429 ---
# rate: max_size_per_times 5, max_size_per_second 20; 40 takes of 5 at once.
python3 - "$API_PORT" "$T1" "$DIR/ids.rate" >"$DIR/rate.out" <<'EOF' || fail "429: $(cat "$DIR/rate.out")"
import http.client, json, sys, time
from harness import check
port, tok = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
ids, codes, first429, t0 = [], {}, None, time.time()
for i in range(40):
    c.request("GET", "/v1/ids/rate?count=5", headers={"Authorization": "Bearer " + tok})
    r = c.getresponse()
    body = json.loads(r.read())
    codes[r.status] = codes.get(r.status, 0) + 1
    if r.status == 200:
        check(1 <= len(body["ids"]) <= 5, body)
        ids += body["ids"]
    elif r.status == 429:
        if first429 is None:
            first429 = (time.time() - t0, r.getheader("Retry-After"), body)
    else:
        sys.exit("unexpected %d %s" % (r.status, body))
el = time.time() - t0
print("codes %s, %d IDs in %.3f s, first 429 %s" % (codes, len(ids), el, first429))
check(first429 is not None, "no 429")
check(first429[0] < 1.0, "the first 429 came after %.3f s" % first429[0])
check(first429[1] is not None and first429[1].isdigit() and int(first429[1]) >= 1, first429)
check(set(first429[2]) == {"error", "message"} and first429[2]["error"] == "IDPOOL_RATE", first429)
# at most 20 granted per second, plus one buffer refill of 5 at the window's edge
check(len(ids) <= 20 * (int(el) + 2) + 5, len(ids))
open(sys.argv[3], "a").write("".join(i + "\n" for i in ids))
EOF
info "429: $(cat "$DIR/rate.out")"
as "$T1" '/v1/ids/rate?count=5'
if [[ $CODE == 429 ]]; then is_error 429 IDPOOL_RATE retry; fi
pass "429 IDPOOL_RATE with Retry-After within one second of hammering (max_size_per_second 20)"

# ------------------------------------------------------------ tokens ---
# issuer1 reloads every 300 ms.
T2=$(new_token t2 user) || fail "tokens add t2"
TOKENS+=("$T2")
t0=$(now_us)
wait_until 3 answers 200 "$T2" /v1/ids/user || fail "t2 not accepted within 3 s: $(what)"
ids_ok 1 user >/dev/null
info "t2 accepted $((($(now_us) - t0) / 1000)) ms after tokens add"
ctl tokens revoke t2 >/dev/null || fail "tokens revoke t2"
t0=$(now_us)
wait_until 3 answers 401 "$T2" /v1/ids/user || fail "t2 still accepted 3 s after revoke: $(what)"
ms=$((($(now_us) - t0) / 1000))
is_error 401 IDPOOL_AUTH
assert_le "$ms" 1500 "ms from tokens revoke to 401 with reload-ms 300"
info "t2 refused $ms ms after tokens revoke"
# An instance that reloads once a minute: only SIGHUP brings the change.
SLOW_PORT=$(free_port)
start_daemon slow --tick-ms 50 --reload-ms 60000 --refill off --api "127.0.0.1:$SLOW_PORT" --instance slow1
wait_until 5 log_has slow "access: [0-9]+ API token" || fail "slow: tokens not loaded"
BASE=http://127.0.0.1:$SLOW_PORT
wait_until 3 answers 200 "$T1" /v1/ids/user || fail "slow: $(what)"
ids_ok 1 user >/dev/null
T3=$(new_token t3 user) || fail "tokens add t3"
TOKENS+=("$T3")
sleep 0.5
as "$T3" /v1/ids/user
is_error 401 IDPOOL_AUTH # not reloaded yet
signal_daemon slow HUP
t0=$(now_us)
wait_until 2 answers 200 "$T3" /v1/ids/user || fail "slow: t3 not accepted after SIGHUP: $(what)"
ids_ok 1 user >/dev/null
info "slow: t3 accepted $((($(now_us) - t0) / 1000)) ms after SIGHUP"
ctl tokens revoke t3 >/dev/null || fail "tokens revoke t3"
sleep 0.5
as "$T3" /v1/ids/user
ids_ok 1 user >/dev/null # still loaded
signal_daemon slow HUP
t0=$(now_us)
wait_until 2 answers 401 "$T3" /v1/ids/user || fail "slow: t3 accepted after revoke and SIGHUP: $(what)"
is_error 401 IDPOOL_AUTH
info "slow: t3 refused $((($(now_us) - t0) / 1000)) ms after SIGHUP"
stop_daemon slow
BASE=$API
pass "tokens add: accepted within reload-ms, or at SIGHUP; tokens revoke: 401 within reload-ms (${ms} ms), or at SIGHUP"

# ---------------------------------------------------------------- TLS ---
TLS_PORT=$(free_port)
tls_cert
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$DIR/other.key" >>"$DIR/openssl.out" 2>&1 ||
    fail "openssl genpkey: $(cat "$DIR/openssl.out")"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DIR/ec.key" >>"$DIR/openssl.out" 2>&1 ||
    fail "openssl genpkey EC: $(cat "$DIR/openssl.out")"
start_daemon tls "${COMMON[@]}" --refill off --api "127.0.0.1:$TLS_PORT" --instance tls1 \
    --api-tls-cert "$DIR/tls.crt" --api-tls-key "$DIR/tls.key"
wait_until 5 log_has tls "api: listening on https://127\\.0\\.0\\.1:$TLS_PORT" || fail "tls: not listening: $(cat "$DIR/tls.log")"
wait_until 5 log_has tls "access: [0-9]+ API token" || fail "tls: tokens not loaded"
BASE=https://127.0.0.1:$TLS_PORT
wait_until 3 answers 200 "$T1" --cacert "$DIR/tls.crt" "/v1/ids/user?count=3" ||
    fail "https: $(what)"
ids_ok 3 user >/dev/null
as "$T1" --cacert "$DIR/tls.crt" /v1/ids/other
is_error 403 IDPOOL_FORBIDDEN
python3 - "$TLS_PORT" "$T1" "$DIR/tls.crt" "$DIR/ids.user" <<'EOF' || fail "https from Python"
import http.client, json, ssl, sys
from harness import check
ctx = ssl.create_default_context(cafile=sys.argv[3])
c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=ctx, timeout=5)
c.request("GET", "/v1/ids/user?count=2", headers={"Authorization": "Bearer " + sys.argv[2]})
r = c.getresponse()
d = json.loads(r.read())
check(r.status == 200 and len(d["ids"]) == 2, (r.status, d))
open(sys.argv[4], "a").write("".join(i + "\n" for i in d["ids"]))
EOF
# plain HTTP to the TLS port: nginx's plain-text 400 (more in t_apiedge)
BASE=http://127.0.0.1:$TLS_PORT
as "$T1" /v1/ids/user
[[ $CODE == 400 ]] && grep -qx 'The plain HTTP request was sent to HTTPS port' "$DIR/body" ||
    fail "plain HTTP to the TLS port: $(what)"
BASE=https://127.0.0.1:$TLS_PORT
st=0
curl -sS --max-time 5 -o /dev/null -H "Authorization: Bearer $T1" \
    "https://127.0.0.1:$TLS_PORT/v1/ids/user" 2>"$DIR/curl.err" || st=$?
((st != 0)) || fail "https without --cacert: the self-signed certificate was accepted"
stop_daemon tls
BASE=$API
# A key of another certificate (of its type: refused while loading; of
# another type: by the check): exits at start naming both files.
for k in other ec; do
    start_daemon "badtls_$k" "${COMMON[@]}" --refill off --api "127.0.0.1:$(free_port)" --instance badtls \
        --api-tls-cert "$DIR/tls.crt" --api-tls-key "$DIR/$k.key"
    wait_until 5 eval "! daemon_alive badtls_$k" || fail "badtls_$k keeps running with a key that does not match"
    kill_daemon "badtls_$k" TERM
    badtls_st=${DAEMON_STATUS[badtls_$k]}
    [[ $badtls_st != 0 && $badtls_st != timeout ]] || fail "badtls_$k: exit status '$badtls_st'"
    log_has "badtls_$k" "the TLS private key [^ ]*/$k\\.key \\(api-tls-key\\) does not match the certificate [^ ]*/tls\\.crt \\(api-tls-cert\\)" ||
        fail "badtls_$k: the error does not name both files: $(cat "$DIR/badtls_$k.log")"
    info "badtls_$k (status $badtls_st): $(grep -E 'error|fatal' "$DIR/badtls_$k.log" | head -n 2 | tr '\n' ' ')"
done
# A certificate without its key: a configuration error.
st=0
timeout 10 "$IDPOOLD" --redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" --http '' --refill off \
    --api "127.0.0.1:$(free_port)" --api-tls-cert "$DIR/tls.crt" >"$DIR/nokey.out" 2>&1 || st=$?
assert_eq 2 "$st" "exit status with api-tls-cert and no api-tls-key ($(cat "$DIR/nokey.out"))"
grep -q 'api-tls-key' "$DIR/nokey.out" || fail "no key: the error does not name api-tls-key: $(cat "$DIR/nokey.out")"
pass "TLS: https with --cacert (curl, Python), plain HTTP gets 400, a mismatched key (RSA, EC) exits $badtls_st naming both files, cert without key exits 2"

# -------------------------------------------------------- bad input ---
# headers above 8 KiB, a body above 1 KiB
python3 - "$API_PORT" "$T1" >"$DIR/big.out" <<'EOF' || fail "oversized requests: $(cat "$DIR/big.out")"
import socket, sys
from harness import read_all
port, tok = int(sys.argv[1]), sys.argv[2]
def send(raw):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(raw)
    except OSError:
        pass
    data, how = read_all(s)
    return data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed (%s)" % how
auth = ("Authorization: Bearer %s\r\n" % tok).encode()
big_hdr = b"GET /v1/ids/user HTTP/1.1\r\nHost: x\r\n" + auth + b"X-Big: " + b"a" * 9000 + b"\r\n\r\n"
many = b"GET /v1/ids/user HTTP/1.1\r\nHost: x\r\n" + auth + b"".join(b"X-%d: %s\r\n" % (i, b"b" * 90) for i in range(100)) + b"\r\n"
body = b"count=1&" + b"x" * 2000
big_body = (b"POST /v1/ids/user HTTP/1.1\r\nHost: x\r\n" + auth +
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
chunked = (b"POST /v1/ids/user HTTP/1.1\r\nHost: x\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n" +
           b"".join(b"100\r\n" + b"x" * 256 + b"\r\n" for _ in range(8)) + b"0\r\n\r\n")
ok = True
for name, raw, want in (("one header of 9000 bytes", big_hdr, ("431",)),
                        ("100 headers of 100 bytes", many, ("431",)),
                        ("a body of %d bytes" % len(body), big_body, ("413",)),
                        ("a chunked body (no Content-Length)", chunked, ("411",)),
                        ("HTTP/3.0", b"GET /v1/ids/user HTTP/3.0\r\nHost: x\r\n" + auth + b"\r\n", ("505",))):
    line = send(raw)
    good = len(line.split()) > 1 and line.split()[1] in want
    ok &= good
    print("%s: %s -> %s" % ("ok" if good else "WRONG", name, line))
sys.exit(0 if ok else 1)
EOF
info "oversized: $(tr '\n' ';' <"$DIR/big.out")"
req -H "Authorization: Bearer $T1" -d "count=1&$(printf 'x%.0s' {1..1100})" /v1/ids/user
[[ $CODE == 413 ]] || fail "curl POST with a 1.1 KiB body: $(what)"
pass "heads above 8 KiB refused with 431, bodies above 1 KiB with 413, chunked bodies with 411 (Content-Length only), HTTP/3.0 with 505"

# ------------------------------------------ issuer-only: no refill work ---
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE instance = 'issuer1'")" "leases of issuer1"
assert_gt "$(sql "SELECT COUNT(*) FROM application_lease WHERE instance = 'refill1'")" 0 "leases of refill1"
for re in 'reserved lease' 'pushed [0-9]+ IDs' 'epoch sweep' 'lock (release|expired)' 'fenced'; do
    ! log_has issuer1 "$re" || fail "issuer1's log shows refill activity: $(grep -E -m 3 -- "$re" "$DIR/issuer1.log")"
done
log_has refill 'reserved lease' || fail "refill1's log has no 'reserved lease' (the pattern checked above is stale)"
curl -sS --max-time 5 -o "$DIR/metrics.issuer1" "http://127.0.0.1:$HTTP_PORT/metrics" || fail "issuer1 /metrics"
grep -E '^idpool_(refills_total|ids_pushed_total)\{' "$DIR/metrics.issuer1" >"$DIR/m.refill" ||
    fail "issuer1 /metrics lacks idpool_refills_total / idpool_ids_pushed_total"
! grep -vE ' 0$' "$DIR/m.refill" || fail "issuer1 /metrics: refills or pushes counted: $(grep -vE ' 0$' "$DIR/m.refill" | head -n 3)"
m_val() { sed -n "s/^$1 //p" "$DIR/metrics.issuer1"; }
# 411, 413, 431 and 505: answered by the HTTP server itself (above)
for code in 200 400 401 403 404 405 429 411 413 431 505; do
    assert_gt "$(m_val "idpool_api_requests_total{code=\"$code\"}")" 0 "idpool_api_requests_total{code=\"$code\"}"
done
assert_gt "$(m_val idpool_api_ids_total)" 0 idpool_api_ids_total
assert_gt "$(m_val idpool_api_takes_total)" 0 idpool_api_takes_total
assert_eq 2 "$(m_val idpool_api_tokens)" "idpool_api_tokens (all, t1)"
pass "issuer-only: IDs refilled by refill1; no lease, lock or push of its own (application_lease, log, /metrics); idpool_api_* counted"

# ----------------------- pool short, dry, Redis down, restarted (EPOCH) ---
# The Redis user of 'user', granted while the daemons run.
ctl apps grant user >"$DIR/grant.out" || fail "apps grant user"
RPW=$(sed -n 's/^password: //p' "$DIR/grant.out")
[[ -n $RPW ]] || fail "apps grant: no password: $(cat "$DIR/grant.out")"
wait_until 3 log_has issuer1 'applied 1 Redis user' || fail "issuer1 did not apply the grant"
cat >"$DIR/ruser.py" <<'EOF'
import sys
import redis
port, user, pw = int(sys.argv[1]), sys.argv[2], sys.argv[3]
out = []
try:
    r = redis.Redis(host="127.0.0.1", port=port, username=user, password=pw, socket_timeout=3)
    r.llen("idpool:{user}:pool")  # AUTH on connect; the user may only LPOP and LLEN
    out.append("auth=ok")
    r.lpop("idpool:{user}:pool")
    out.append("lpop=ok")
    try:
        r.rpush("idpool:{user}:pool", "1")
        out.append("rpush=ok")
    except redis.exceptions.NoPermissionError:
        out.append("rpush=NOPERM")
except redis.exceptions.AuthenticationError:
    out.append("auth=WRONGPASS")
except redis.exceptions.RedisError as e:
    if str(e).startswith("WRONGPASS"):  # python3-redis 4.3 raises a ResponseError
        out.append("auth=WRONGPASS")
    else:
        out.append("error=%s %s" % (type(e).__name__, e))
print(" ".join(out))
EOF
ruser() { "$PYTHON" "$DIR/ruser.py" "$REDIS_PORT" idpool:user "$RPW"; }
ruser_is() { [[ $(ruser) == "$1" ]]; }
assert_eq "auth=ok lpop=ok rpush=NOPERM" "$(ruser)" "the Redis user after apps grant"

# The refiller pauses; dry keeps 3 IDs; issuer1 never buffered any of dry's.
signal_daemon refill STOP
sleep 0.2
rcli LTRIM "$(pool_key dry)" 0 2 >/dev/null
assert_eq 3 "$(llen dry)" "dry's pool"
as "$T1" '/v1/ids/dry?count=10'
got=$(ids_ok 10 dry upto)
assert_eq 3 "$got" "IDs for count=10 with 3 in the pool (never a partial write, never an error)"
as "$T1" '/v1/ids/dry?count=10'
is_error 503 IDPOOL_EMPTY retry
as "$T1" -H 'Accept: text/plain' /v1/ids/dry
is_error 503 IDPOOL_EMPTY retry # errors are JSON whatever Accept says
pass "a take larger than the pool: 200 with the 3 IDs there were; then 503 IDPOOL_EMPTY with Retry-After"

redis_stop
wait_until 5 refused IDPOOL_UNAVAILABLE "$T1" /v1/ids/dry ||
    fail "Redis down: $(what)"
is_error 503 IDPOOL_UNAVAILABLE retry
redis_start
t0=$(now_us)
wait_until 5 refused IDPOOL_EPOCH "$T1" /v1/ids/dry || fail "after the Redis restart: $(what)"
is_error 503 IDPOOL_EPOCH retry
info "EPOCH $((($(now_us) - t0) / 1000)) ms after redis-server restarted: $(head -c 300 "$DIR/body")"
# issuer1 (the refiller is stopped) re-creates the Redis user
wait_until 5 ruser_is "auth=ok lpop=ok rpush=NOPERM" ||
    fail "the Redis user was not re-created after the restart: $(ruser)"
info "Redis user back $((($(now_us) - t0) / 1000)) ms after redis-server restarted"
# refused until a refiller sweeps, however long that takes
for _ in 1 2 3 4 5; do
    sleep 0.2
    as "$T1" '/v1/ids/dry?count=2'
    is_error 503 IDPOOL_EPOCH retry
done
rcli FCALL idpool_take 2 "$(pool_key dry)" "$(meta_key dry)" 1 >"$DIR/take.out" 2>&1 || true
grep -q IDPOOL_EPOCH "$DIR/take.out" || fail "idpool_take after the restart: $(cat "$DIR/take.out")"
signal_daemon refill CONT
t0=$(now_us)
wait_until 10 answers 200 "$T1" "/v1/ids/dry?count=5" || fail "dry after the refiller resumed: $(what)"
ids_ok 5 dry >/dev/null
info "dry served $((($(now_us) - t0) / 1000)) ms after the refiller resumed"
as "$T1" '/v1/ids/user?count=5'
ids_ok 5 user >/dev/null
pass "503 IDPOOL_UNAVAILABLE while Redis is down, IDPOOL_EPOCH after its restart until a refiller swept, then 200; Redis user re-created by the issuer"

# apps revoke: deleted, and no daemon brings it back after a restart
ctl apps revoke user >/dev/null || fail "apps revoke user"
assert_eq "auth=WRONGPASS" "$(ruser)" "the Redis user after apps revoke"
# revoked_applied N: issuer1 and refill each logged deleting the revoked user N times or more.
revoked_applied() {
    local d
    for d in issuer1 refill; do
        (($(grep -c 'deleted 1 revoked' "$DIR/$d.log") >= $1)) || return 1
    done
}
wait_until 3 revoked_applied 1 ||
    fail "the daemons did not load the revocation"
redis_stop
redis_start
# each daemon sends its users again on reconnecting: the revoked one as ACL DELUSER
wait_until 5 revoked_applied 2 ||
    fail "the daemons did not apply their users after the second Redis restart"
wait_until 10 answers 200 "$T1" "/v1/ids/dry?count=2" || fail "dry after the second restart: $(what)"
ids_ok 2 dry >/dev/null
assert_eq "auth=WRONGPASS" "$(ruser)" "the revoked Redis user after a Redis restart"
assert_eq "" "$(rcli ACL GETUSER idpool:user)" "ACL GETUSER idpool:user after revoke and restart"
pass "apps revoke: the Redis user does not come back after a Redis restart"

# ------------------- slow clients; 50 idle connections; refills go on ---
stop_daemon refill
B_PORT=$(free_port)
start_daemon both "${COMMON[@]}" --api "127.0.0.1:$B_PORT" --http-timeout-ms 500 --http-head-timeout-ms 500 \
    --instance both1
wait_until 5 log_has both "api: listening on 127\\.0\\.0\\.1:$B_PORT" || fail "both: API not listening"
wait_until 5 log_has both "access: [0-9]+ API token" || fail "both: tokens not loaded"
BASE=http://127.0.0.1:$B_PORT
wait_until 5 answers 200 "$T1" /v1/ids/busy || fail "both: $(what)"
ids_ok 1 busy >/dev/null
python3 - "$B_PORT" >"$DIR/slow.out" <<'EOF' || fail "slow clients: $(cat "$DIR/slow.out")"
import socket, sys, time
port = int(sys.argv[1])
def closed_after(trickle):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.time()
    msg, i = b"GET /v1/ids/busy HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 40 + b"\r\n\r\n", 0
    try:
        while True:
            if trickle and i < len(msg):
                s.sendall(msg[i:i + 1])
                i += 1
                s.settimeout(0.05)
            try:
                data = s.recv(4096)
                if not data:
                    break
            except socket.timeout:
                if time.time() - t0 > 4:
                    return "open after 4 s"
    except OSError:
        pass
    return int((time.time() - t0) * 1000)
silent, trick = closed_after(False), closed_after(True)
print("silent closed after %s ms, trickling (1 byte / 50 ms) closed after %s ms" % (silent, trick))
ok = all(isinstance(v, int) and 350 <= v <= 1500 for v in (silent, trick))
sys.exit(0 if ok else 1)
EOF
info "$(cat "$DIR/slow.out")"
wait_until 3 log_has both 'api: closed a connection from 127\.0\.0\.1 port [0-9]+: no complete request head within http-head-timeout-ms \(head_timeout\)' ||
    fail "both's log does not report the closed connections"
# 50 idle connections (each reopened when closed) for 4 s, while a consumer
# drains busy five times over and the API keeps answering.
python3 - "$B_PORT" >"$DIR/idle.out" 2>&1 <<'EOF' &
import selectors, socket, sys, time
port, sel, opened, lives = int(sys.argv[1]), selectors.DefaultSelector(), 0, []
def open_one():
    global opened
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, time.time())
    opened += 1
for _ in range(50):
    open_one()
end = time.time() + 4
while time.time() < end:
    for key, _ in sel.select(timeout=0.05):
        try:
            data = key.fileobj.recv(4096)
        except OSError:
            data = b""
        if not data:
            lives.append(time.time() - key.data)
            sel.unregister(key.fileobj)
            key.fileobj.close()
            open_one()
print("opened %d, closed by the server %d, lifetime %.0f..%.0f ms, %d open at the end" %
      (opened, len(lives), 1000 * min(lives or [0]), 1000 * max(lives or [0]), len(sel.get_map())))
sys.exit(0 if len(sel.get_map()) == 50 and lives and max(lives) < 1.5 else 1)
EOF
idle=$!
sleep 0.3
pushed0=$(rcli HGET "$(meta_key busy)" pushed)
pop busy 2000 "$DIR/busy" --batch 50 --timeout-ms 6000 || fail "busy: refills stalled with 50 idle API connections open"
as "$T1" '/v1/ids/busy?count=10'
ids_ok 10 busy >/dev/null
pushed1=$(rcli HGET "$(meta_key busy)" pushed)
wait "$idle" || fail "idle connections: $(cat "$DIR/idle.out")"
info "idle: $(cat "$DIR/idle.out"); busy pushed $pushed0 -> $pushed1"
assert_ge "$((${pushed1:-0} - ${pushed0:-0}))" 1600 "IDs pushed to busy while 2000 were popped"
ids_text "$DIR/busy.0.bin" >>"$DIR/ids.busy"
pass "slow clients closed after http-head-timeout-ms (500); with 50 idle connections open the pool of busy kept being refilled"
BASE=$API

# ----------------------------------- unique IDs; no token in logs or /metrics ---
for f in "$DIR"/ids.*; do
    assert_unique "$f"
done
info "IDs checked: $(wc -l "$DIR"/ids.* | tail -n 1)"
curl -sS --max-time 5 -o "$DIR/metrics.issuer1" "http://127.0.0.1:$HTTP_PORT/metrics" || fail "issuer1 /metrics"
assert_gt "$(m_val 'idpool_api_requests_total{code="503"}')" 0 'idpool_api_requests_total{code="503"}'
assert_eq 0 "$(m_val 'idpool_api_requests_total{code="500"}')" 'idpool_api_requests_total{code="500"}'
for tok in "${TOKENS[@]}"; do
    for f in "$DIR"/*.log "$DIR/metrics.issuer1"; do
        ! grep -qF -- "${tok#idp_}" "$f" || fail "a token appears in $(basename "$f")"
    done
done
! grep -qF -- "$RPW" "$DIR"/*.log || fail "the Redis user's password appears in a daemon log"
stop_daemon both
stop_daemon issuer1
info "t_api took $((($(now_us) - T_START) / 1000)) ms"
pass "api"
