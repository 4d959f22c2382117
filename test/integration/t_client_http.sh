#!/usr/bin/env bash
# libidpool over HTTP (issue 12): environments that are ID issuers
# (idpoold --api), http[s]://TOKEN@host:port, alone and beside a Redis.
#
#  1. Two environments (t_client's: delta 2, A remainder 0, B remainder 1);
#     the client's environments are A's Redis and B's issuer (issuer-only,
#     --refill off). Four threads take IDs while A's Redis is killed and
#     restarted, until the client failed over to B over HTTP, came back and
#     took at least 1,000,000 IDs (--until-failbacks 1 --min-ids: the load
#     stops on what is asserted, within 120 s). No duplicate (idpool-check),
#     no timeout, IDs of both remainders.
#  2. The issuer alone: 2,000,000 IDs while the issuer is killed with SIGKILL
#     and started again; the client waits it out (no timeout with a 10 s
#     deadline), no duplicate, every ID from B.
#  3. The row's max_size_per_times (300) below the client's batch: the
#     issuer's 400 IDPOOL_LIMIT makes the client ask for 300 at most.
#  4. A wrong token, and a token not allowed for the application: the call
#     fails with "no environment serves this application", and
#     idpool_app_last_error names the environment and the 401/403.
#  5. The Python client (src/python/idpool_client/): the issuer from 3
#     threads (unique, all of B); IDPOOL_LIMIT over HTTP and over Redis
#     brings its batch down to the row's 300; IDPOOL_RATE (4,000 IDs/s) is
#     waited out, never a reason to fail over; a wrong token raises
#     IdpoolNoApp with the 401 in last_error(); IDPOOL_EPOCH after A's Redis
#     restarted under a stopped refiller is waited out, no ID twice.
#  6. https: the issuer with a certificate; the clients (C and Python)
#     verify it with the CA file (IDs come), and without it the handshake
#     fails with "certificate not verified".
#  7. Bad environment URLs are refused by idpool_client_new, naming the
#     environment and what is wrong.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
[[ -x ${IDPOOL_CLIENTLOAD:-} ]] || fail "idpool-clientload not built: ${IDPOOL_CLIENTLOAD:-}"

two_environments h1
sql_b "INSERT INTO application (entity_key, step, max_pool_size, max_size_per_times, max_size_per_second, delta, remainder) VALUES ('h2', 20000, 200000, 300, 50000000, 2, 1)" ||
    fail "row h2 in B"
sql_b "INSERT INTO application (entity_key, step, max_pool_size, max_size_per_times, max_size_per_second, delta, remainder) VALUES ('h3', 20000, 200000, 1000, 4000, 2, 1)" ||
    fail "row h3 in B"
ctl_b() { "$IDPOOLCTL" --mysql "$B_MYSQL" --redis "$B_REDIS" --json "$@"; }
token_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'; }
TOKEN=$(ctl_b tokens add lib --apps h1,h2,h3 | token_of) || fail "tokens add lib"
OTHER=$(ctl_b tokens add other --apps h2 | token_of) || fail "tokens add other"
API_PORT=$(free_port)
issuer_b() {
    start_daemon bi --instance bi --refill off --redis "$B_REDIS" --mysql "$B_MYSQL" \
        --api "127.0.0.1:$API_PORT" --reload-ms 500
    wait_until 5 log_has bi "api: listening on 127.0.0.1:$API_PORT" || fail "bi: API not listening"
    wait_until 5 log_has bi "access: 2 API token" || fail "bi: tokens not loaded"
}
issuer_b
B_HTTP="http://$TOKEN@127.0.0.1:$API_PORT"
wait_until 15 pool_ge h1 300000 || fail "A's pool did not fill"

# ---- 1. failover from a Redis to an issuer, and back
"$IDPOOL_CLIENTLOAD" --threads 4 --ids 5000000 --until-failbacks 1 --min-ids 1000000 \
    --max-secs 120 --mod 2 --timeout-ms 5000 \
    --failback-ms 200 --record "$DIR/pops1" h1 "$A_REDIS" "$B_HTTP" >"$DIR/client1.out" 2>&1 &
client=$!
sleep 0.3
redis_kill
sleep 0.5
redis_start
wait "$client" || fail "client failed: $(cat "$DIR/client1.out")"
cat "$DIR/client1.out"
"$IDPOOL_CHECK" "$DIR"/pops1.*.bin >"$DIR/check1.out" || fail "idpool-check: $(tail -n 3 "$DIR/check1.out")"
stats=$(grep '^clientload: ids=' "$DIR/client1.out")
ids=$(sed -n 's/^clientload: ids=\([0-9]*\) .*/\1/p' <<<"$stats")
grep -q "^check: ids=$ids .* duplicates=0 " "$DIR/check1.out" || fail "check: $(tail -n 1 "$DIR/check1.out")"
assert_ge "$ids" 1000000 "IDs taken"
[[ $stats == *" timeouts=0 "* ]] || fail "a call timed out: $stats"
r1=$(sed -n 's/.* r1=\([0-9]*\).*/\1/p' "$DIR/client1.out")
assert_gt "$r1" 0 "IDs from B's issuer (remainder 1)"
fo=$(sed -n 's/.* failovers=\([0-9]*\).*/\1/p' <<<"$stats")
fb=$(sed -n 's/.* failbacks=\([0-9]*\).*/\1/p' <<<"$stats")
assert_gt "$fo" 0 "failovers"
assert_gt "$fb" 0 "failbacks"
pass "$ids IDs from A's Redis and B's issuer, A killed and restarted: no duplicate, no timeout, $r1 IDs over HTTP, $fo failover(s), $fb failback(s)"

# ---- 2. the issuer alone, killed and restarted
"$IDPOOL_CLIENTLOAD" --threads 2 --ids 1000000 --mod 2 --timeout-ms 10000 --record "$DIR/pops2" \
    h1 "$B_HTTP" >"$DIR/client2.out" 2>&1 &
client=$!
sleep 0.2
kill_daemon bi KILL
sleep 1
issuer_b
wait "$client" || fail "client failed: $(cat "$DIR/client2.out")"
cat "$DIR/client2.out"
"$IDPOOL_CHECK" "$DIR"/pops2.*.bin >"$DIR/check2.out" || fail "idpool-check: $(tail -n 3 "$DIR/check2.out")"
grep -q '^check: ids=2000000 .* duplicates=0 ' "$DIR/check2.out" || fail "check: $(tail -n 1 "$DIR/check2.out")"
grep -q 'r0=0 r1=2000000' "$DIR/client2.out" || fail "not every ID from B: $(cat "$DIR/client2.out")"
stats=$(grep '^clientload: ids=' "$DIR/client2.out")
errors=$(sed -n 's/.* errors=\([0-9]*\).*/\1/p' <<<"$stats")
assert_gt "$errors" 0 "the client's connection errors (the kill landed)"
# It backs off (100 ms doubling): a busy loop on the dead issuer made 1.4 million.
assert_le "$errors" 100 "failed takes while the issuer was down"
[[ $stats == *" timeouts=0 "* ]] || fail "a call timed out: $stats"
pass "2,000,000 IDs from the issuer alone, killed (SIGKILL) and restarted: no duplicate, no timeout, $errors failed takes waited out"

# ---- 3. max_size_per_times below the client's batch
"$IDPOOL_CLIENTLOAD" --threads 1 --ids 20000 --max-batch 1000 h2 "$B_HTTP" >"$DIR/client3.out" 2>&1 ||
    fail "client3: $(cat "$DIR/client3.out")"
stats=$(grep '^clientload: ids=' "$DIR/client3.out")
batch=$(sed -n 's/.* batch=\([0-9]*\).*/\1/p' <<<"$stats")
assert_le "$batch" 300 "the client's batch after IDPOOL_LIMIT"
pass "IDPOOL_LIMIT over HTTP: the batch came down to $batch (max_size_per_times 300)"

# ---- 4. refused tokens
"$IDPOOL_CLIENTLOAD" --threads 1 --ids 10 --timeout-ms 3000 h1 "http://idp_wrong@127.0.0.1:$API_PORT" \
    >"$DIR/client4.out" 2>&1 && fail "a wrong token got IDs: $(cat "$DIR/client4.out")"
grep -q 'no environment serves this application' "$DIR/client4.out" || fail "wrong token: $(cat "$DIR/client4.out")"
grep -q "environment 0 (127.0.0.1:$API_PORT: 401 IDPOOL_AUTH: unknown or revoked token)" "$DIR/client4.out" ||
    fail "wrong token, last error: $(cat "$DIR/client4.out")"
"$IDPOOL_CLIENTLOAD" --threads 1 --ids 10 --timeout-ms 3000 h1 "http://$OTHER@127.0.0.1:$API_PORT" \
    >"$DIR/client4b.out" 2>&1 && fail "a token without h1 got IDs: $(cat "$DIR/client4b.out")"
grep -q "403 IDPOOL_FORBIDDEN: token 'other' may not take IDs of 'h1'" "$DIR/client4b.out" ||
    fail "forbidden, last error: $(cat "$DIR/client4b.out")"
pass "a wrong token (401) and a token without the application (403): no IDs, the reason in last_error"

# ---- 5. the Python client against the same servers: an issuer, and the
# refusals as real servers send them (IDPOOL_LIMIT over HTTP and Redis,
# IDPOOL_RATE, IDPOOL_EPOCH after a Redis restart, 401)
b_filled() { (($(redis-cli -h 127.0.0.1 -p "$B_REDIS_PORT" LLEN "$(pool_key "$1")") > 0)); }
wait_until 10 b_filled h3 || fail "h3's pool did not fill"
export PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python:$PYTHONPATH
"$PYTHON" - "$A_REDIS" "$B_REDIS" "$B_HTTP" "http://idp_wrong@127.0.0.1:$API_PORT" "$DIR/py.stop" \
    "$DIR/py.restarted" >"$DIR/py.out" 2>&1 <<'EOF' &
import os, sys, threading, time
import idpool_client as m
from harness import check
a_url, b_url, b_http, wrong, stop_flag, restarted = sys.argv[1:]

# The issuer alone: 3 threads, unique, all from B.
with m.Client([b_http]) as c:
    out, lock = [], threading.Lock()
    def work():
        a = c.app("h1")
        mine = [a.next() for _ in range(20000)] + a.next_n(10000)
        with lock:
            out.extend(mine)
    ts = [threading.Thread(target=work) for _ in range(3)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    check(len(out) == 90000 and len(set(out)) == 90000, f"{len(out)} IDs, {len(set(out))} unique")
    check(all(i % 2 == 1 for i in out), "an ID not of B (remainder 1)")
    print(f"http: 90000 IDs from the issuer in 3 threads, unique, all remainder 1; {c.app('h1').stats()}")

# IDPOOL_LIMIT: the row says 300 per take; the client asks 1000 at first.
for url in (b_http, b_url):
    with m.Client([url], min_batch=1000, max_batch=1000) as c:
        a = c.app("h2")
        ids = a.next_n(3000)
        st = a.stats()
        check(len(set(ids)) == 3000 and st["batch"] <= 300, f"LIMIT over {url.split(':')[0]}: {st}")
        print(f"limit over {url.split(':')[0]}: batch {st['batch']} (max_size_per_times 300)")

# IDPOOL_RATE: max_size_per_second 4000; 12000 IDs take about 3 s, never a failover.
for url in (b_http, b_url):
    with m.Client([url, a_url], timeout=5.0, min_batch=1000, max_batch=1000) as c:
        a = c.app("h3")
        t0 = time.monotonic()
        ids = a.next_n(12000)
        dt = time.monotonic() - t0
        st = a.stats()
        check(len(set(ids)) == 12000, "duplicates under the rate limit")
        check(st["refused_rate"] > 0 and st["failovers"] == 0 and dt >= 1.5,
              f"RATE over {url.split(':')[0]}: {dt:.2f} s, {st}")
        print(f"rate over {url.split(':')[0]}: 12000 IDs in {dt:.2f} s, {st['refused_rate']} refusals, no failover")

# A wrong token: IdpoolNoApp at once, last_error says why.
with m.Client([wrong], timeout=3.0) as c:
    try:
        c.app("h1").next()
        sys.exit("FAIL: IDs with a wrong token")
    except m.IdpoolNoApp:
        le = c.app("h1").last_error()
        check("401 IDPOOL_AUTH: unknown or revoked token" in le, f"last_error: {le!r}")
        print(f"wrong token: IdpoolNoApp; last_error {le!r}")

# IDPOOL_EPOCH: A's Redis restarted while its refiller is stopped; the
# client waits (refused_epoch), then gets IDs once the refiller re-validated.
with m.Client([a_url], timeout=15.0) as c:
    a = c.app("h1")
    before = set(a.next_n(5000))
    open(stop_flag, "w").close()  # the script stops daemon a, restarts Redis
    deadline = time.monotonic() + 20
    while not os.path.exists(restarted) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(os.path.exists(restarted), "the script did not restart Redis")
    for _ in range(3):  # drain the buffer filled before the restart
        a.next_n(1000)
    after = a.next_n(5000)
    st = a.stats()
    check(not before & set(after), "an ID twice across the restart")
    check(st["refused_epoch"] > 0, f"no IDPOOL_EPOCH seen: {st}")
    print(f"epoch: {st['refused_epoch']} IDPOOL_EPOCH refusals while the pool was not re-validated, then IDs")
print("python: ok")
EOF
py=$!
wait_until 60 test -e "$DIR/py.stop" || fail "python: $(cat "$DIR/py.out")"
signal_daemon a STOP
redis_kill
redis_start
touch "$DIR/py.restarted"
sleep 1.5
signal_daemon a CONT
wait "$py" || fail "python: $(cat "$DIR/py.out")"
cat "$DIR/py.out"
grep -q '^python: ok$' "$DIR/py.out" || fail "python: $(cat "$DIR/py.out")"
pass "idpool_client: an issuer in 3 threads, IDPOOL_LIMIT over HTTP and Redis, IDPOOL_RATE waited out, 401, IDPOOL_EPOCH after a restart"

# ---- 6. https
command -v openssl >/dev/null 2>&1 || skip "openssl is not installed"
tls_cert
TLS_PORT=$(free_port)
start_daemon tls --instance tls --refill off --redis "$B_REDIS" --mysql "$B_MYSQL" \
    --api "127.0.0.1:$TLS_PORT" --api-tls-cert "$DIR/tls.crt" --api-tls-key "$DIR/tls.key"
wait_until 5 log_has tls "api: listening on https://127\\.0\\.0\\.1:$TLS_PORT" || fail "tls: not listening"
wait_until 5 log_has tls "access: 2 API token" || fail "tls: tokens not loaded"
"$IDPOOL_CLIENTLOAD" --threads 2 --ids 50000 --mod 2 --ca-file "$DIR/tls.crt" \
    h1 "https://$TOKEN@127.0.0.1:$TLS_PORT" >"$DIR/client5.out" 2>&1 || fail "https: $(cat "$DIR/client5.out")"
grep -q 'r0=0 r1=100000' "$DIR/client5.out" || fail "https: $(cat "$DIR/client5.out")"
"$IDPOOL_CLIENTLOAD" --threads 1 --ids 10 --timeout-ms 500 h1 "https://$TOKEN@127.0.0.1:$TLS_PORT" \
    >"$DIR/client5b.out" 2>&1 && fail "an unverified certificate was accepted: $(cat "$DIR/client5b.out")"
grep -q "TLS: certificate not verified: self.signed certificate" "$DIR/client5b.out" ||
    fail "unverified, last error: $(cat "$DIR/client5b.out")"
"$PYTHON" - "https://$TOKEN@127.0.0.1:$TLS_PORT" "$DIR/tls.crt" >"$DIR/py.tls.out" 2>&1 <<'EOF' ||
import sys
import idpool_client as m
from harness import check
url, ca = sys.argv[1:]
with m.Client([url], ca_file=ca) as c:
    ids = c.app("h1").next_n(5000)
    check(len(set(ids)) == 5000 and all(i % 2 for i in ids), "https IDs")
with m.Client([url], timeout=1.0) as c:
    try:
        c.app("h1").next()
        sys.exit("IDs from an unverified issuer")
    except m.IdpoolTimeout:
        le = c.app("h1").last_error()
        check("certificate not verified" in le, le)
print("python https: ok")
EOF
    fail "python https: $(cat "$DIR/py.tls.out")"
pass "https: 100,000 IDs (C) and 5,000 (Python) with the certificate verified; refused without it (self-signed)"

# ---- 7. bad environment URLs
bad_env() { # URL EXPECTED
    local out
    out=$("$IDPOOL_CLIENTLOAD" --threads 1 --ids 1 h1 "$A_REDIS" "$1" 2>&1) && fail "accepted: $1"
    [[ $out == *"$2"* ]] || fail "environment '$1': expected '$2', got: $out"
}
bad_env "http://127.0.0.1:$API_PORT" "environment 1: an issuer needs a token: http[s]://TOKEN@host[:port]"
bad_env "ftp://x@127.0.0.1" "environment 1: unsupported scheme 'ftp://', expected redis://"
bad_env "http://a:b@127.0.0.1" "environment 1: the userinfo must be the token alone"
bad_env "http://$TOKEN@127.0.0.1:99999" "environment 1: port must be an integer in 1..65535"
bad_env "127.0.0.1:6379" "environment 1: not an environment URL, expected redis://"
pass "bad environment URLs refused, naming the environment and the part"
