#!/usr/bin/env bash
# Chaos 27 cluster_held_migration: a slot migration held half-way by hand
# under load, then finished (issue 21).
#
# The Cluster, daemons and consumers of chaos 26. Three applications share
# one slot of SRC, the primary of slot 0 (migration_trio): hm_a, hm_b,
# hm_c; the slot goes to DST, the primary of slot 16383. T_FROM: SETSLOT
# IMPORTING on DST, MIGRATING on SRC, then MIGRATE of part of the slot:
#   * every key of the first (hm_a): SRC answers ASK for it, DST serves it
#     after ASKING (under the source's epoch: refused with IDPOOL_EPOCH);
#   * the pool of the second (hm_b), not its meta: FCALL idpool_take with
#     its keys split across the nodes answers TRYAGAIN on both;
#   * nothing of the third (hm_c): served on SRC until its pool is
#     emptied (Redis deletes it; the pool absent, its meta present: TRYAGAIN),
#     and its refill's lock is new (SET NX on a key SRC lacks: ASK).
# The daemons meet ASK on the slot and move idpool's keys of it to DST
# themselves (the pool, meta and lock of each application in one MIGRATE),
# then follow the slot there with ASKING: an application split across the
# two nodes, or one whose emptied pool Redis deleted, would answer TRYAGAIN
# to every call until SETSLOT NODE (a call's declared keys partly absent).
# HOLD (3 s quick, 15 s long) under load, then the rest of the slot's keys
# MIGRATEd (none are left: the daemons moved them) and SETSLOT NODE on DST,
# SRC and the other primaries (T_GIVE).
# Checked:
#   * during the hold the takes were answered (ASK followed) or refused
#     (TRYAGAIN, IDPOOL_EPOCH) and retried: the issuer's
#     idpool_cluster_redirects_total and idpool-load's reply_* counters
#     (idpool-load does not follow ASK: its takes wait for SETSLOT NODE);
#     a daemon logged the move; every application's takes by the client
#     libraries were served inside the hold (none wedged by an absent key);
#   * nothing taken twice: U A L over everything and M outside each
#     application's window [T_FROM, the source's epoch gone from DST];
#     exposed_take 0, the take consumers sent requests in the window;
#   * after SETSLOT NODE: every node names DST, nothing left on SRC, R on
#     DST within 30 s for all three (low_water_ms from T_GIVE).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
cluster_setup
failover_rounds
ROUNDS=3
PER_ROUND=$((CHAOS_IDS / 4))
WINDOW_LIMIT_MS=-
if [[ $PROFILE == quick ]]; then HOLD_S=${CHAOS_HOLD_S:-3}; else HOLD_S=${CHAOS_HOLD_S:-15}; fi

migration_ends
migration_slots "$SRC" 5000
migration_trio hm "${MIG_SLOTS[@]}"
APPS=("${MIG_APPS[@]}")
A=${APPS[0]} B=${APPS[1]} C=${APPS[2]}
info "slot $MIG_SLOT of $(cluster_node "$SRC") to $(cluster_node "$DST"): $A all moved first, $B's pool," \
    "$C nothing; held $HOLD_S s"

round_app_add "${APPS[@]}"
failover_daemons "$IDPOOL_REDIS_CLUSTER_URL"
apps_filled "${APPS[@]}"
declare -A N0_OF=() EPOCH_OF=()
migration_consumers "${APPS[@]}"
for app in "${APPS[@]}"; do
    EPOCH_OF[$app]=$(cluster_cli "$SRC" HGET "$(meta_key "$app")" epoch)
    [[ -n ${EPOCH_OF[$app]} ]] || fail "$app: no epoch in its meta on $SRC"
    failover_probe "$SRC" "$app"
    mv "$DIR/probe.pool" "$DIR/probe.$app.pool"
done
expect "migration_owned $MIG_SLOT $SRC" "slot $MIG_SLOT: not every node names $(cluster_node "$SRC") its primary"
migration_redirects
REDIR0=$MIG_REDIR
REFUSALS0=$(logs_count "TRYAGAIN")
for app in "${APPS[@]}"; do migration_watch "$SRC" "$app" "${EPOCH_OF[$app]}"; done

T_FROM=$(now_ns)
expect "[[ \$(cluster_cli $DST CLUSTER SETSLOT $MIG_SLOT IMPORTING $SRC_ID) == OK ]]" "SETSLOT IMPORTING on DST"
expect "[[ \$(cluster_cli $SRC CLUSTER SETSLOT $MIG_SLOT MIGRATING $DST_ID) == OK ]]" "SETSLOT MIGRATING on SRC"
mapfile -t FIRST < <(cluster_cli "$SRC" CLUSTER GETKEYSINSLOT "$MIG_SLOT" 100 | grep -F -e "{$A}" -e "{$B}:pool")
info "first MIGRATE: ${FIRST[*]}"
# NOKEY: a daemon met ASK first and moved them itself
expect "[[ \$(cluster_cli $SRC MIGRATE 127.0.0.1 $DST '' 0 5000 KEYS ${FIRST[*]}) =~ ^(OK|NOKEY)$ ]]" \
    "MIGRATE of ${FIRST[*]}"
T_HOLD=$(now_ns)
sleep "$HOLD_S"
T_HOLD_END=$(now_ns)
migration_redirects
HOLD_REDIR=$MIG_REDIR
mapfile -t REST < <(cluster_cli "$SRC" CLUSTER GETKEYSINSLOT "$MIG_SLOT" 100 | grep .)
info "hold over; the rest: ${REST[*]}"
if ((${#REST[@]} > 0)); then
    expect "[[ \$(cluster_cli $SRC MIGRATE 127.0.0.1 $DST '' 0 5000 KEYS ${REST[*]}) =~ ^(OK|NOKEY)$ ]]" \
        "MIGRATE of ${REST[*]}"
fi
T_GIVE=$(now_ns)
cluster_slot_give "$MIG_SLOT" "$SRC" "$DST"
HOLD_MS=$(((T_GIVE - T_HOLD) / 1000000))

migration_watch_all "$T_GIVE" "${APPS[@]}"
wait_until 10 cluster_ok || failure "the cluster is not ok on every node after the migration"
expect "migration_owned $MIG_SLOT $DST" "slot $MIG_SLOT: not every node names $(cluster_node "$DST") its primary"
LEFT=$(cluster_cli "$SRC" CLUSTER COUNTKEYSINSLOT "$MIG_SLOT")
expect "((LEFT == 0))" "$LEFT keys of slot $MIG_SLOT left on $(cluster_node "$SRC")"
migration_recovered "$T_GIVE" "${APPS[@]}"
REFUSALS=$(($(logs_count "TRYAGAIN") - REFUSALS0))
info "daemons' log lines naming TRYAGAIN during the migration: $REFUSALS"

migration_rounds "${APPS[@]}"
# the takes of the applications during the hold, answered with IDs (the
# logs are whole once the consumers stopped)
# in the hold's last second: the pools filled before it are long drained by
# then (each consumer takes 20,000 IDs a second), so only refills on DST serve
T_LATE=$((T_HOLD_END - 1000000000))
C_SERVED=$(migration_served "$C" "$T_LATE" "$T_HOLD_END")
A_SERVED=$(migration_served "$A" "$T_LATE" "$T_HOLD_END")
B_SERVED=$(migration_served "$B" "$T_LATE" "$T_HOLD_END")
MOVES=$(logs_count "applications moved there")
info "takes served in the last second of the hold: $A (moved) $A_SERVED, $B (split) $B_SERVED, $C (not moved)" \
    "$C_SERVED; the daemons' moves of the slot's keys: $MOVES"
expect "((MOVES > 0))" "no daemon moved the keys of slot $MIG_SLOT to $(cluster_node "$DST")"
expect "((A_SERVED > 0))" "$A (all moved) was not served in the last second of the hold"
expect "((B_SERVED > 0))" "$B (split) was not served in the last second of the hold (wedged by its keys split)"
expect "((C_SERVED > 0))" "$C (nothing moved) was not served in the last second of the hold (wedged by an absent key)"
migration_redirects
info "redirects (moved/ask/tryagain): issuer $REDIR0 -> $HOLD_REDIR (hold end) -> $MIG_REDIR," \
    "idpool-load $MIG_LOAD_REDIR, libidpool (moved/asked/retries) $MIG_LIB_REDIR;" \
    "IDPOOL_EPOCH refusals in the windows $REFUSED_SUM"
IFS=/ read -r _m0 a0 t0 <<<"$REDIR0"
IFS=/ read -r _m1 a1 t1 <<<"$HOLD_REDIR"
IFS=/ read -r _m2 la lt <<<"$MIG_LOAD_REDIR"
IFS=/ read -r _m3 ca cr <<<"$MIG_LIB_REDIR"
ASKS=$((a1 - a0 + la + ca)) TRYAGAINS=$((t1 - t0 + lt + cr))
expect "((ASKS > 0))" "no ASK met during the migration (issuer $((a1 - a0)), idpool-load $la, libidpool $ca)"
fault_landed "held:slot$MIG_SLOT,${HOLD_MS}ms,asks=$ASKS,tryagains=$TRYAGAINS,daemon_tryagain=$REFUSALS" \
    "((LEFT == 0)) && migration_owned $MIG_SLOT $DST"
rollback_finish hold_ms="$HOLD_MS" low_water_ms="$(median "${LOWS[@]}")" \
    issuer_redirects="$(tr '/' ':' <<<"$MIG_REDIR")" load_redirects="$(tr '/' ':' <<<"$MIG_LOAD_REDIR")" \
    lib_redirects="$(tr '/' ':' <<<"$MIG_LIB_REDIR")" served_in_hold="$A_SERVED:$B_SERVED:$C_SERVED" \
    moves="$MOVES"
