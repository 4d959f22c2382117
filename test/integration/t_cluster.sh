#!/usr/bin/env bash
# idpoold on a Redis Cluster (redis-cluster://, the seed nodes): it reads
# the slot table, loads the function library on every primary (none had
# it), validates each primary under an epoch of its own, and refills each
# application's pool on the primary of the application's slot, where
# idpool_take serves it (any other node answers MOVED); /healthz, /metrics
# and /v1/apps name the nodes. A busy application's slot is migrated by
# hand: the pool that arrives under the source's epoch is refused until
# the daemon, sent there by MOVED, swept and refilled it. Then a primary is
# killed (-9: the positive control, its pid gone): the daemon follows its
# replica's promotion, which refuses takes until the daemon validated it
# and swept the pools it inherited, refills from fresh leases, and no ID
# taken before the kill is taken again.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
SERVERS_CLUSTER=1 setup

# Three applications, one on each primary (chosen by their keys' slots).
declare -A APP_OF # primary port -> application
cluster_apps c
for p in "${!APP_OF[@]}"; do
    add_app "${APP_OF[$p]}" step=100 max_pool_size=2000 min_size_percent=50 \
        max_size_per_times=1000 max_size_per_second=100000000
done
LOW=$(low_water "${APP_OF[$NODE1_PORT]:-${APP_OF[$(cluster_any)]:-c1}}")

# owner_llen APP: the length of APP's pool on the primary of its slot.
owner_llen() { cluster_cli "$(cluster_owner "$(pool_key "$1")")" LLEN "$(pool_key "$1")"; }
owner_ge() { (($(owner_llen "$1") >= $2)); }
# take_at PORT APP COUNT: idpool_take on the node at PORT (IDs, or the error line).
take_at() {
    cluster_cli "$1" FCALL idpool_take 2 "$(pool_key "$2")" "$(meta_key "$2")" "$3" 2>&1 | sed '/^$/d'
}

HTTP_PORT=$(free_port) API_PORT=$(free_port)
TOKEN=$("$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --json tokens add cl \
    --apps "$(echo "${APP_OF[@]}" | tr ' ' ',')" |
    "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["token"])') || fail "tokens add"
# api_take APP: the issuer's answer to a take of 5 (the body, then the HTTP status).
api_take() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" -w '\n%{http_code}' \
        "http://127.0.0.1:$API_PORT/v1/ids/$1?count=5" 2>&1
}
# api_ids APP: the IDs of a served take of 5 through the issuer, one a line; fails otherwise.
api_ids() {
    local out
    out=$(api_take "$1")
    [[ ${out##*$'\n'} == 200 ]] || return 1
    "$PYTHON" -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])["ids"]))' "${out%$'\n'*}"
}
# get PATH: the status server's answer (body) to GET PATH.
get() { curl -sS --max-time 5 "http://127.0.0.1:$HTTP_PORT$1"; }
start_daemon a --redis "$IDPOOL_REDIS_CLUSTER_URL" --tick-ms 50 --lock-ttl-ms 500 \
    --redis-timeout-ms 500 --instance cl-a --http "127.0.0.1:$HTTP_PORT"
# An issuer-only daemon with a buffer of one ID: (nearly) every request takes from Redis.
start_daemon i --redis "$IDPOOL_REDIS_CLUSTER_URL" --refill off --api "127.0.0.1:$API_PORT" \
    --api-buffer 1 --redis-timeout-ms 500 --reload-ms 300 --instance cl-i
for p in "${!APP_OF[@]}"; do
    wait_until 15 owner_ge "${APP_OF[$p]}" "$LOW" || fail "${APP_OF[$p]} never filled on $p"
done
log_has a "redis: cluster slot table read from " || fail "no slot table in the log"
for p in "${!APP_OF[@]}"; do
    [[ -n $(cluster_cli "$p" FUNCTION LIST LIBRARYNAME idpool) ]] || fail "no library on $p"
    epoch=$(cluster_cli "$p" FCALL_RO idpool_validated 0)
    [[ $epoch == "$(redis_server_id "$p")":* ]] || fail "primary $p: epoch '$epoch' is not its own"
    app=${APP_OF[$p]}
    out=$(take_at "$p" "$app" 5)
    assert_eq 5 "$(grep -cE '^[0-9]+$' <<<"$out")" "IDs taken from $app on its primary $p"
    for q in "${!APP_OF[@]}"; do
        [[ $q != "$p" ]] || continue
        out=$(take_at "$q" "$app" 1)
        [[ $out == MOVED* ]] || fail "a take of $app on $q (not its primary) answered: $out"
    done
done
# The status: each primary up with its share of the slots, each application's node.
wait_until 5 eval '[[ $(curl -sS -o /dev/null -w "%{http_code}" http://127.0.0.1:$HTTP_PORT/healthz) == 200 ]]' ||
    fail "/healthz: $(get /healthz)"
metrics=$(get /metrics)
for p in "${!APP_OF[@]}"; do
    grep -qE "^idpool_redis_node_up\{node=\"127\.0\.0\.1:$p\"\} 1$" <<<"$metrics" ||
        fail "/metrics: no idpool_redis_node_up 1 for $p"
    "$PYTHON" - "$(get "/v1/apps/${APP_OF[$p]}")" "127.0.0.1:$p" <<'PY' || fail "/v1/apps/${APP_OF[$p]} does not name 127.0.0.1:$p"
import json, sys
sys.exit(0 if json.loads(sys.argv[1])["node"] == sys.argv[2] else 1)
PY
done
grep -qx 'idpool_cluster_slots_unowned 0' <<<"$metrics" || fail "/metrics: slots without an owner"
"$PYTHON" - "$(get /healthz)" <<'PY' || fail "/healthz cluster object: $(get /healthz)"
import json, sys
c = json.loads(sys.argv[1])["cluster"]
nodes = c["nodes"]
sys.exit(0 if len(nodes) == 3 and sum(n["slots"] for n in nodes) == 16384
         and all(n["up"] for n in nodes) and c["slots_unowned"] == 0 else 1)
PY
pass "three primaries: library loaded and validated on each, every pool filled where its slot lives, MOVED elsewhere; /healthz, /metrics and /v1/apps name the nodes"
# idpoolctl verify reads the pools on the primaries of their slots (issue 24).
ctl_expect 0 verify --env "$IDPOOL_MYSQL_URL,$IDPOOL_REDIS_CLUSTER_URL"
out_has '^verify: ok: 1 environment, [0-9]+ applications?, [0-9,]+ leases, [1-9][0-9,]* pooled IDs checked; 0 conflicts$'
pass "verify through a Cluster: $(cat "$DIR/out")"

# ====================================== a busy slot migrated by hand ===
# The slot of one application moves to another primary while the daemon
# refills it: its keys are MIGRATEd half-way (the source answers ASK for
# them, the target serves them only after ASKING), then the slot is given
# to the target. The pool arrives under the source's epoch: refused there
# until the daemon, sent there by MOVED, swept it and refilled it under the
# target's epoch; no ID taken on the source is taken again.
mig_app=${APP_OF[$NODE2_PORT]:-c1}
src=$(cluster_owner "$(pool_key "$mig_app")")
for p in "${!APP_OF[@]}"; do [[ $p == "$src" ]] || dst=$p; done
slot=$(cluster_slot "$(pool_key "$mig_app")")
src_id=$(cluster_cli "$src" CLUSTER MYID) dst_id=$(cluster_cli "$dst" CLUSTER MYID)
take_at "$src" "$mig_app" 500 | grep -E '^[0-9]+$' >"$DIR/mig_before.ids"
assert_eq 500 "$(count_ids "$DIR/mig_before.ids")" "IDs taken from $mig_app before the migration"
wait_until 5 eval 'api_ids '"$mig_app"' >>"$DIR/mig_before.ids"' || fail "the issuer did not serve $mig_app"
assert_eq OK "$(cluster_cli "$dst" CLUSTER SETSLOT "$slot" IMPORTING "$src_id")" "IMPORTING on $dst"
assert_eq OK "$(cluster_cli "$src" CLUSTER SETSLOT "$slot" MIGRATING "$dst_id")" "MIGRATING on $src"
mapfile -t keys < <(cluster_cli "$src" CLUSTER GETKEYSINSLOT "$slot" 100)
((${#keys[@]} >= 2)) || fail "the slot of $mig_app holds ${#keys[@]} keys: ${keys[*]}"
assert_eq OK "$(cluster_cli "$src" MIGRATE 127.0.0.1 "$dst" "" 0 5000 KEYS "${keys[@]}")" "MIGRATE"
out=$(take_at "$src" "$mig_app" 10)
[[ $out == ASK* ]] || fail "a take of $mig_app on the source after MIGRATE: $out"
out=$(printf 'ASKING\nFCALL idpool_take 2 %s %s 10\n' "$(pool_key "$mig_app")" "$(meta_key "$mig_app")" |
    cluster_cli "$dst" 2>&1 | sed -n 2p)
[[ $out == IDPOOL_EPOCH* ]] || fail "a take of the migrated pool on $dst (ASKING) was not refused: $out"
# The issuer follows the ASK (ASKING and its take on the target) and is
# refused there too: it answers with what its buffer (one ID) held, or 503.
asking_calls() { cluster_cli "$dst" INFO commandstats | sed -n 's/^cmdstat_asking:calls=\([0-9]*\),.*/\1/p'; }
asked0=$(asking_calls)
out=$(api_take "$mig_app")
if [[ ${out##*$'\n'} == 200 ]]; then
    "$PYTHON" -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])["ids"]))' "${out%$'\n'*}" \
        >"$DIR/mig_window.ids"
    assert_le "$(count_ids "$DIR/mig_window.ids")" 1 "IDs the issuer handed out half-way (its buffer)"
    cat "$DIR/mig_window.ids" >>"$DIR/mig_before.ids"
else
    assert_eq 503 "${out##*$'\n'}" "the issuer's answer for $mig_app half-way through the migration"
fi
assert_gt "$(asking_calls)" "$asked0" "ASKING sent to $dst by the issuer (it followed the ASK)"
for p in $(cluster_ports); do
    cluster_cli "$p" CLUSTER SETSLOT "$slot" NODE "$dst_id" >/dev/null 2>&1 || true
done
wait_until 10 eval '[[ $(cluster_primary_of_slot '"$slot"' '"$src"') == '"$dst"' ]]' ||
    fail "the slot did not move to $dst"
mig_served() { [[ $(take_at "$dst" "$mig_app" 1) =~ ^[0-9]+$ ]]; }
wait_until 15 mig_served || fail "$mig_app not served on $dst after the migration: $(take_at "$dst" "$mig_app" 1)"
take_at "$dst" "$mig_app" 500 | grep -E '^[0-9]+$' >"$DIR/mig_after.ids"
assert_eq 500 "$(count_ids "$DIR/mig_after.ids")" "IDs taken from $mig_app on $dst"
wait_until 5 eval 'api_ids '"$mig_app"' >>"$DIR/mig_after.ids"' ||
    fail "the issuer did not serve $mig_app after the migration: $(api_take "$mig_app")"
again=$(sort "$DIR/mig_before.ids" "$DIR/mig_after.ids" | uniq -d | head -n 3)
[[ -z $again ]] || fail "IDs taken again after the migration: $again"
redirects=$(get /metrics | awk '/^idpool_cluster_redirects_total\{kind="(moved|ask)"\}/ { n += $2 } END { print n + 0 }')
assert_gt "$redirects" 0 "MOVED and ASK replies the daemon saw (it followed the slot)"
pass "$mig_app's slot $slot migrated from $src to $dst: ASK half-way (followed by the issuer), the migrated pool refused under $src's epoch, refilled on $dst; no ID taken twice"

# ================================================ a primary killed (-9) ===
victim=$(cluster_owner "$(pool_key "${APP_OF[$NODE1_PORT]:-c1}")")
app=${APP_OF[$victim]}
replica=$(cluster_replicas_of "$victim" | head -n 1)
[[ -n $replica ]] || fail "no replica of $victim"
take_at "$victim" "$app" 1000 | grep -E '^[0-9]+$' >"$DIR/before.ids"
assert_eq 1000 "$(count_ids "$DIR/before.ids")" "IDs taken from $app before the kill"
# The daemon held (SIGSTOP) from before the kill until a take on the
# promoted replica was refused: its pool, replicated from the victim, may
# hold IDs the victim handed out after the last write it replicated.
signal_daemon a STOP
pid=$(cat "$DIR/$(cluster_node "$victim").pid")
kill -9 "$pid"
wait_until 5 eval '! kill -0 '"$pid"' 2>/dev/null' || fail "the primary $victim (pid $pid) did not die"
wait_until 20 eval '[[ $(cluster_role '"$replica"') == master ]]' || fail "$replica was not promoted"
out=$(take_at "$replica" "$app" 10)
[[ $out == IDPOOL_EPOCH* ]] || fail "a take on the promoted $replica before the daemon validated it: $out"
signal_daemon a CONT
own_epoch() { [[ $(cluster_cli "$replica" FCALL_RO idpool_validated 0) == "$(redis_server_id "$replica")":* ]]; }
wait_until 15 own_epoch || fail "the daemon did not validate the promoted $replica"
wait_until 15 eval '[[ $(cluster_cli '"$replica"' HGET '"$(meta_key "$app")"' epoch) == $(cluster_cli '"$replica"' FCALL_RO idpool_validated 0) ]]' ||
    fail "$app's pool on $replica was not swept and refilled under its epoch"
wait_until 15 owner_ge "$app" "$LOW" || fail "$app was not refilled on the promoted $replica"
take_at "$replica" "$app" 1000 | grep -E '^[0-9]+$' >"$DIR/after.ids"
assert_eq 1000 "$(count_ids "$DIR/after.ids")" "IDs taken from $app on the promoted replica"
again=$(sort "$DIR/before.ids" "$DIR/after.ids" | uniq -d | head -n 3)
[[ -z $again ]] || fail "IDs taken again after the failover: $again"
pass "primary $victim killed: a take on the promoted $replica refused until the daemon validated it and refilled $app; no ID taken twice"
stop_daemon i
stop_daemon a
