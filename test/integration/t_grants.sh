#!/usr/bin/env bash
# The MySQL grants of docs/operations.md, as printed (issue 22 item 1): the
# block after "<!-- grants: t_grants runs this block -->" is run as root,
# then a refilling daemon, an issuer-only daemon and idpoolctl each work
# under their own user: idpoolctl adds an application, a token and a Redis
# user (apps grant), shows and changes the row, lists status; the daemon
# refills the pool and syncs the Redis user (/healthz 200); the issuer
# serves the token's takes (it answered 401 to every token under the old
# grants, which left out api_token). Then the daemon's SELECT on api_token
# is revoked: /healthz says which grant is missing ("mysql: SELECT denied
# on idpool.api_token"), not "mysql down", and idpool_mysql_up stays 1;
# granted again, it is healthy again.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

PW=grants-Test-pw1
awk '/<!-- grants: t_grants runs this block -->/ { on = 1; next }
     on && /^```sql/ { inside = 1; next }
     inside && /^```/ { exit }
     inside { print }' "$IDPOOL_SOURCE_ROOT/docs/operations.md" >"$DIR/grants.sql"
grep -q 'GRANT' "$DIR/grants.sql" || fail "no grants block in docs/operations.md"
sed -i "s/IDENTIFIED BY '\\.\\.\\.'/IDENTIFIED BY '$PW'/" "$DIR/grants.sql"
sql_file "$DIR/grants.sql" || fail "the documented grants failed: $(cat "$DIR/grants.sql")"
url_of() { echo "mysql://$1:$PW@127.0.0.1:$MYSQL_PORT/idpool"; }
# as_admin ARGS...: idpoolctl under the operators' user
as_admin() { ctl_expect 0 --mysql "$(url_of idpool_admin)" --redis "$IDPOOL_REDIS_URL" "$@"; }

# --- idpoolctl as the operator ------------------------------------------------
as_admin apps add g1 --step 100 --max-pool 1000
as_admin --json tokens add t1 --apps g1
TOKEN=$(jget 'd["token"]')
as_admin apps grant g1
as_admin apps show g1
as_admin apps set g1 min_size_percent=50
as_admin apps disable g1
as_admin apps enable g1
pass "idpoolctl under the operators' grants: apps add, show, set, disable, enable, tokens add, apps grant"

# --- the refilling daemon -----------------------------------------------------
HTTP_PORT=$(free_port) API_PORT=$(free_port)
start_daemon refill --mysql "$(url_of idpool)" --reload-ms 300 --http "127.0.0.1:$HTTP_PORT"
wait_until 10 pool_ge g1 500 || fail "g1 was not refilled by the daemon under its grants"
healthz() { curl -sS -o "$DIR/healthz" -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/healthz"; }
wait_until 5 eval '[[ $(healthz) == 200 ]]' || fail "/healthz under the daemon's grants: $(cat "$DIR/healthz")"
as_admin status
out_has "^g1 +served +monotonic +[0-9]+ "
pass "the refilling daemon under its grants: g1 refilled, /healthz 200"

# --- the issuer-only daemon ---------------------------------------------------
start_daemon issuer --mysql "$(url_of idpool_issuer)" --reload-ms 300 --refill off \
    --api "127.0.0.1:$API_PORT"
take_ok() {
    [[ $(curl -sS -o "$DIR/take" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:$API_PORT/v1/ids/g1?count=3") == 200 ]]
}
wait_until 10 take_ok || fail "the issuer under its grants did not serve the token: $(cat "$DIR/take")"
pass "the issuer-only daemon under its grants serves the token's takes"

# --- a grant missing: its own health reason ----------------------------------
sql "REVOKE SELECT ON idpool.api_token FROM 'idpool'@'%'"
denied() {
    [[ $(healthz) == 503 ]] && grep -q '"mysql: SELECT denied on idpool.api_token"' "$DIR/healthz"
}
wait_until 10 denied || fail "/healthz with SELECT on api_token revoked: $(cat "$DIR/healthz")"
grep -q '"mysql_up":true' "$DIR/healthz" || fail "mysql_up is not true with a grant missing: $(cat "$DIR/healthz")"
! grep -q '"mysql down"' "$DIR/healthz" || fail "a missing grant is reported as mysql down: $(cat "$DIR/healthz")"
curl -sS "http://127.0.0.1:$HTTP_PORT/metrics" >"$DIR/metrics"
grep -q '^idpool_mysql_up 1$' "$DIR/metrics" || fail "idpool_mysql_up is not 1 with a grant missing"
wait_until 5 log_has refill "warn +mysql: SELECT denied on idpool.api_token: grant it" ||
    fail "the log does not name the missing grant"
sql "GRANT SELECT ON idpool.api_token TO 'idpool'@'%'"
wait_until 10 eval '[[ $(healthz) == 200 ]]' || fail "/healthz once granted again: $(cat "$DIR/healthz")"
pass "SELECT on api_token revoked: /healthz 503 'mysql: SELECT denied on idpool.api_token', mysql_up 1; granted again: 200"

as_admin tokens revoke t1
as_admin apps revoke g1
stop_daemon issuer
stop_daemon refill
pass "grants"
