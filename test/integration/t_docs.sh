#!/usr/bin/env bash
# The documentation as printed (issue 22 item 7): every block of commands
# in README.md and docs/*.md, shell or Redis, is run as a reader would run
# it, against throwaway servers and an idpoold that refills, serves the ID
# API and its status server; a block that cannot run in a test says why on
# the line before it (<!-- t_docs skips this block: REASON -->), so a new
# block is run unless it says so. The rules (transcripts and their output,
# the example addresses replaced) are in docs.py, which runs the blocks.
#
# What the documents take for granted here: applications user (monotonic)
# and order (trend) served, an API token in $TOKEN for every application,
# the ID API on $API_PORT (the documents' 127.0.0.1:9472 and issuer:8080),
# the status server where idpoolctl looks (IDPOOL_HTTP_ADDR), idpoolctl on
# PATH, jq installed (scripts/packages-test.txt).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"
command -v jq >/dev/null || skip "jq is not installed (scripts/packages-test.txt)"

HTTP_PORT=$(free_port)
API_PORT=$(free_port)
add_app user step=1000 max_pool_size=100000
add_app order increasing_type=2 step=1000 max_pool_size=100000
"$IDPOOLCTL" --json tokens add docs --apps '*' >"$DIR/token.json" || fail "tokens add docs"
TOKEN=$(jq -r .token "$DIR/token.json")
start_daemon d --tick-ms 20 --reload-ms 300 --http "127.0.0.1:$HTTP_PORT" --api "127.0.0.1:$API_PORT"
wait_until 10 pool_ge user 50000 || fail "user's pool never filled"
wait_until 10 pool_ge order 50000 || fail "order's pool never filled"
api_ok() {
    [[ $(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:$API_PORT/v1/ids/user") == 200 ]]
}
wait_until 10 api_ok || fail "the ID API does not serve the token"

mkdir "$DIR/run"
export TOKEN API_PORT IDPOOL_HTTP_ADDR=127.0.0.1:$HTTP_PORT
PATH=$(dirname "$IDPOOLCTL"):$PATH "$PYTHON" "$(dirname "$0")/docs.py" run "$IDPOOL_SOURCE_ROOT" "$DIR/run" ||
    fail "a documented command does not work as printed (above)"
stop_daemon d
pass "every command block of README.md and docs/*.md works as printed, or says why it is not run"
