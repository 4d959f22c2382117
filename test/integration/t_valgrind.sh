#!/usr/bin/env bash
# valgrind on the whole life of idpoold: start, fill two pools (one trend),
# a refill under consumption, the ID API over TLS (IDs, refusals, a Redis
# user applied), a SIGHUP reload, a Redis reconnect, SIGTERM; and libidpool
# (idpool-clientload: clients created, used by two threads and freed, over
# Redis and over https from the issuer).
# No memory error and no leak may be reported, and the exit status is 0.
# (Suite 'valgrind': runs on the normal build only; ASan builds can't run
# under valgrind.)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
command -v valgrind >/dev/null || skip "valgrind is not installed"
setup

add_app vg_mono max_size_per_second=100 increment_max=3
add_app vg_trend increasing_type=2 step=500 max_size_per_second=100
add_app vg_lib step=1000 max_pool_size=20000 max_size_per_second=100000

IDPOOLD_REAL=$IDPOOLD
SUPP=$IDPOOL_SOURCE_ROOT/test/valgrind.supp # glibc's thread stack cache, explained there
IDPOOLD=$DIR/idpoold-valgrind
cat >"$IDPOOLD" <<SH
#!/bin/sh
exec valgrind --quiet --error-exitcode=99 --leak-check=full --suppressions="$SUPP" \
    --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible \
    "$IDPOOLD_REAL" "\$@"
SH
chmod +x "$IDPOOLD"
TOKEN=$("$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --json \
    tokens add vg --apps vg_mono | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])') ||
    fail "tokens add failed"
"$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" apps grant vg_mono >/dev/null ||
    fail "apps grant failed"
rcli ACL DELUSER idpool:vg_mono >/dev/null # the daemon must apply it
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$DIR/key.pem" -out "$DIR/cert.pem" \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -days 1 2>/dev/null ||
    fail "openssl req failed"
API_PORT=$(free_port)
start_daemon vg --tick-ms 100 --reload-ms 1000 --redis-timeout-ms 3000 \
    --api "127.0.0.1:$API_PORT" --api-tls-cert "$DIR/cert.pem" --api-tls-key "$DIR/key.pem"

# valgrind makes everything ~20x slower: generous, bounded waits.
wait_until 60 pool_ge vg_mono 6000 || fail "vg_mono pool not filled"
wait_until 60 pool_ge vg_trend 6000 || fail "vg_trend pool not filled"
pop vg_mono 3000 "$DIR/ids" --batch 500 --type monotonic
wait_until 30 pool_ge vg_mono 6000 || fail "vg_mono not refilled"
# api [curl options] PATH: the status code
api() {
    curl -sS --cacert "$DIR/cert.pem" -o "$DIR/api.body" -w '%{http_code}' "${@:1:$#-1}" \
        "https://127.0.0.1:$API_PORT${*: -1}"
}
api_ok() { [[ $(api -H "Authorization: Bearer $TOKEN" '/v1/ids/vg_mono?count=5') == 200 ]]; }
wait_until 60 api_ok ||
    fail "the API did not answer 200: $(cat "$DIR/api.body")"
assert_eq 401 "$(api /v1/ids/vg_mono)" "API answer without a token"
auth=(-H "Authorization: Bearer $TOKEN")
assert_eq 403 "$(api "${auth[@]}" /v1/ids/vg_trend)" "API answer for another application"
assert_eq 400 "$(api "${auth[@]}" '/v1/ids/vg_mono?count=x')" "API answer to a bad count"
assert_eq 404 "$(api /nope)" "API answer to another path"
wait_until 30 eval 'rcli ACL GETUSER idpool:vg_mono | grep -q lpop' || fail "the Redis user was not applied"
signal_daemon vg HUP
wait_until 30 log_has vg 'SIGHUP: reloading' || fail "no reload after SIGHUP"
rcli CLIENT KILL TYPE normal SKIPME yes >/dev/null
wait_until 30 log_has vg 'redis: connected.*recovered' || fail "no reconnect"
# libidpool under valgrind too: clients created, used (two threads) and freed.
[[ -x ${IDPOOL_CLIENTLOAD:-} ]] || fail "idpool-clientload not built"
valgrind --quiet --error-exitcode=99 --leak-check=full --suppressions="$SUPP" \
    --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
    "$IDPOOL_CLIENTLOAD" --threads 2 --cycles 10 vg_lib "$IDPOOL_REDIS_URL" >"$DIR/clientload.out" 2>&1 ||
    fail "libidpool under valgrind: $(tail -n 20 "$DIR/clientload.out")"
valgrind --quiet --error-exitcode=99 --leak-check=full --suppressions="$SUPP" \
    --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
    "$IDPOOL_CLIENTLOAD" --threads 2 --ids 5000 vg_lib "$IDPOOL_REDIS_URL" >>"$DIR/clientload.out" 2>&1 ||
    fail "libidpool under valgrind: $(tail -n 20 "$DIR/clientload.out")"
# The HTTP transport: the issuer over https (TLS verified with the test's
# certificate), the Redis behind it when the valgrinded issuer is too slow.
issuer="https://$TOKEN@127.0.0.1:$API_PORT"
for args in "--cycles 5 --timeout-ms 20000" "--ids 3000 --timeout-ms 20000"; do
    # shellcheck disable=SC2086 # $args are words
    valgrind --quiet --error-exitcode=99 --leak-check=full --suppressions="$SUPP" \
        --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
        "$IDPOOL_CLIENTLOAD" --threads 2 --ca-file "$DIR/cert.pem" $args vg_mono "$issuer" "$IDPOOL_REDIS_URL" \
        >>"$DIR/clientload.out" 2>&1 || fail "libidpool (https) under valgrind: $(tail -n 20 "$DIR/clientload.out")"
done
grep -q '^clientload: ids=6000 ' "$DIR/clientload.out" || fail "https run: $(tail -n 5 "$DIR/clientload.out")"
stop_daemon vg 60
pass "valgrind: no errors, no leaks, exit 0 (idpoold, and libidpool through idpool-clientload)"
