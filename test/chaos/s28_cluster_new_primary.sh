#!/usr/bin/env bash
# Chaos 28 cluster_new_primary: a new primary joins a Redis Cluster with
# plain CLUSTER MEET (no function library, no ACL user: redis-cli
# --cluster add-node would copy the library) and receives a busy slot
# under load; later the slot moves back and the node is removed
# (CLUSTER FORGET on every node, then stopped) with commands in flight
# (issue 21).
#
# The Cluster of servers.sh (three primaries with a replica each); two
# refilling daemons and an issuer-only one on the Cluster URL; a monotonic
# application (cn..) on one primary P, a control (cm..) on another; each
# popped by two LPOP and two idpool_take consumers following the slot
# table (idpool-load --cluster) and by one take client of every other
# kind: libidpool and the Python client on the Cluster URL, the issuer
# (libidpool's HTTP transport). While they pop:
#   1. a seventh cluster-enabled redis-server is started (servers.sh
#      cluster-add) and met (CLUSTER MEET from node1): every node knows it,
#      a primary without slots, without the idpool library and with no ACL
#      user but default;
#   2. the application's slot moves from P to the new node as a reshard
#      moves it (T_FROM): IMPORTING/MIGRATING, MIGRATE of its keys (pool,
#      meta, lock: the meta with P's epoch), held half-way until the new
#      node answered a command the clients' ASK sent there (an FCALL that
#      found no function, or TRYAGAIN: once the pool is emptied a key is
#      missing on both sides, and Redis refuses every multi-key command on
#      the slot until the move ends; ten seconds at most), then SETSLOT
#      NODE on the new node, P and every other primary (P may refuse when
#      the move back empties the new node: Redis makes it a replica of P,
#      cluster-allow-replica-migration, as redis-cli reshard allows). The
#      daemons must see the new owner, load the library there (FUNCTION
#      LIST), validate it under its own server id (idpool_validated), and
#      discard the pool that arrived under P's epoch (a new epoch in the
#      meta there, a discard logged: W_TO, the window's end) and refill it
#      (R, on the new node);
#   3. the slot moves back to P the same way (T_BACK), P's sweep discards
#      the pool that arrived under the new node's epoch; then CLUSTER
#      FORGET of the new node on node1..node6 and the node is stopped, the
#      consumers still popping: the daemons log the node as serving no
#      slot (parked: at the MOVED that took its last slot, or at their next
#      read of the slot table), none logs an error (at any time of the
#      run), and every node knows six nodes again, the
#      cluster ok on every node;
#   4. the consumers pop on and stop.
# Checked:
#   * the application: U A L M over every log (no window: the moves lose
#     IDs, never repeat or reorder them); exposed_take 0; the positive
#     control: the clients hit the new node's missing library or its
#     IDPOOL_EPOCH refusal inside the window and retried (fcall_refused=,
#     failed FCALLs on the new node by its commandstats, and refused=, the
#     idpool_take consumers' IDPOOL_EPOCH refusals: their sum > 0), and
#     takes were served on the new node (first_take_ms: T_FROM to the end
#     of the longest pause in served takes);
#   * the control, on another primary, sees no window at all (as chaos
#     25's: takes inside the window, no IDPOOL_EPOCH refusal, its epoch
#     kept, no discard);
#   * R: the pool above low water on the new node, then on P again.
# Evidence that the fault landed: the node met without the library, the
# library there after the move, its own epoch validated there, the
# inherited pool discarded; the slot back, the node forgotten and stopped.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
cluster_setup

failover_rounds
ROUNDS=1
CTL_FIRSTS=()
# the application on the first primary (by port), the control on the next
declare -A APP_OF=()
cluster_apps cn
mapfile -t PRIMARIES < <(printf '%s\n' "${!APP_OF[@]}" | sort -n)
OLD=${PRIMARIES[0]} CTL_PORT=${PRIMARIES[1]}
APP=${APP_OF[$OLD]}
APP_OF=()
cluster_apps cm
CTL=${APP_OF[$CTL_PORT]}
SLOT=$(cluster_slot "$(pool_key "$APP")")
round_app_add "$APP" "$CTL"
failover_daemons "$IDPOOL_REDIS_CLUSTER_URL"
apps_filled "$APP" "$CTL"

# the control first: round_begin's N0 and P_MAX must be the application's
failover_consumers "$CTL" "$IDPOOL_REDIS_CLUSTER_URL"
failover_consumers "$APP" "$IDPOOL_REDIS_CLUSTER_URL"
pop_past "$APP"
CTL_EPOCH=$(cluster_cli "$CTL_PORT" HGET "$(meta_key "$CTL")" epoch)
CTL_DISCARDS=$(pool_discards "$CTL")
PROBE_EPOCH=$(cluster_cli "$OLD" HGET "$(meta_key "$APP")" epoch)
[[ -n $CTL_EPOCH && -n $PROBE_EPOCH ]] || fail "no epoch in the metas of $APP on $OLD or $CTL on $CTL_PORT"

# 1. the new node, met
node_join
NOTE="new:$NEW_NAME,met,bare_lib=$NEW_BARE"

# 2. the busy slot to it
DISCARDS0=$(pool_discards "$APP")
REFUSED0=$(node_errors "$NEW_PORT" ERR)
T_FROM=$(now_ns)
slot_move "$SLOT" "$OLD" "$NEW_PORT" 1
NOTE+=",moved_slot=$SLOT,held_ms=$HELD_MS,held=$HELD_NOTE"
wait_until 20 library_on "$NEW_PORT" || failure "$NEW_NAME: no idpool library after it got slot $SLOT"
NEW_ID=$(redis_server_id "$NEW_PORT")
wait_until 20 eval "[[ \$(cluster_cli $NEW_PORT FCALL_RO idpool_validated 0 2>/dev/null) == $NEW_ID:* ]]" ||
    failure "$NEW_NAME: not validated under its own server id $NEW_ID"
W_EPOCH=$(cluster_cli "$NEW_PORT" FCALL_RO idpool_validated 0)
meta_swept() { [[ $(cluster_cli "$1" HGET "$(meta_key "$APP")" epoch) == "$2" ]]; }
wait_until 20 meta_swept "$NEW_PORT" "$W_EPOCH" ||
    failure "$APP: its meta on $NEW_NAME is not of the epoch validated there ($W_EPOCH)"
wait_until 10 eval "((\$(pool_discards $APP) > DISCARDS0))" ||
    failure "$APP: no daemon discarded the pool that arrived under $OLD's epoch"
W_TO=$(now_ns)
WINDOW=$(((W_TO - T_FROM) / 1000000))
info "$APP: slot $SLOT on $NEW_NAME, library loaded, validated as $W_EPOCH, the pool discarded," \
    "$WINDOW ms after the move began"
REDIS_PORT=$NEW_PORT
recovered "$APP" "$T_FROM" 30
LOW_NEW=$LAST_RECOVERY_MS
wait_until 10 popped_ge "$APP" $(($(popped "$APP") + P_MAX / 3)) || failure "$APP: consumers starved on $NEW_NAME"
FIRST=$(first_take_ms "$APP" "$T_FROM")
REFUSED_FCALL=$(($(node_errors "$NEW_PORT" ERR) - REFUSED0))
takes_in "$APP" "$T_FROM" "$W_TO"
REFUSED_EPOCH=$REFUSED_IN TAKES_WINDOW=$TAKES_IN
info "$APP: $REFUSED_FCALL FCALLs found no function on $NEW_NAME, $REFUSED_EPOCH takes refused with IDPOOL_EPOCH" \
    "of $TAKES_WINDOW sent inside the window; served again after $FIRST ms"
expect "((REFUSED_FCALL + REFUSED_EPOCH > 0))" \
    "$APP: no client met the new node's missing library or its IDPOOL_EPOCH refusal"
expect "((TAKES_WINDOW > 0))" "$APP: no idpool_take request inside the window"
fault_landed "$NOTE,lib_loaded,validated,discarded,nofunc=$REFUSED_FCALL,refused=$REFUSED_EPOCH" \
    "[[ $W_EPOCH == $NEW_ID:* && $W_EPOCH != $PROBE_EPOCH ]] && (($(pool_discards "$APP") > DISCARDS0))"

# 3. the slot back, the node forgotten and stopped
# shellcheck disable=SC2034 # read by the eval below
DISCARDS1=$(pool_discards "$APP")
T_BACK=$(now_ns)
slot_move "$SLOT" "$NEW_PORT" "$OLD" 0
OLD_EPOCH=$(cluster_cli "$OLD" FCALL_RO idpool_validated 0)
wait_until 20 meta_swept "$OLD" "$OLD_EPOCH" ||
    failure "$APP: its meta back on $OLD is not of the epoch validated there ($OLD_EPOCH)"
wait_until 10 eval "((\$(pool_discards $APP) > DISCARDS1))" ||
    failure "$APP: no daemon discarded the pool that came back under $NEW_NAME's epoch"
BACK_MS=$(ms_since "$T_BACK")
info "$APP: back on $OLD; $NEW_NAME made a replica by the move: $SRC_DEMOTED"
node_remove
REDIS_PORT=$OLD
recovered "$APP" "$T_BACK" 30
# every daemon parks the node: at the MOVED that took its last slot, or at
# its next read of the slot table (every 10 s)
parked() { logs_count "redis: 127\.0\.0\.1:$NEW_PORT serves no slot now: disconnecting"; }
wait_until 15 eval "((\$(parked) >= 3))" || failure "not every daemon parked $NEW_NAME"
PARKED=$(parked)
ERRORS=$(logs_count "Z error ")
info "$APP: back on $OLD after $BACK_MS ms; $NEW_NAME parked by $PARKED daemons; $ERRORS errors logged"
expect "((ERRORS == 0))" "the daemons logged $ERRORS errors"
fault_landed "back_ms=$BACK_MS,forgotten,stopped,parked=$PARKED" "((PARKED >= 3 && ERRORS == 0))"

# 4. the end
consumers_wait "$APP" "$PER_ROUND"
consumers_stop "$APP"
consumers_stop "$CTL"
takes_exposed "$APP" "$T_FROM" "$W_TO" optional
cluster_control "$CTL" "$CTL_PORT" "$CTL_EPOCH" "$CTL_DISCARDS"
daemons_stop
for a in "$APP" "$CTL"; do
    drain "$a"
    check_rollback "$a" 0 0
done
row window_ms="$WINDOW" back_ms="$BACK_MS" first_take_ms="$FIRST" low_water_ms="$LOW_NEW" \
    takes="$TAKES_WINDOW" refused="$REFUSED_EPOCH" nofunc="$REFUSED_FCALL" \
    control_takes="$CTL_TAKES" control_first_take_ms="${CTL_FIRSTS[0]}"
