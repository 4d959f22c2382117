#!/usr/bin/env bash
# Chaos 26 cluster_reshard: a live reshard of slots holding busy
# applications, redis-cli --cluster reshard, under load (issue 21).
#
# The Cluster of servers.sh (three primaries with a replica each) and one
# MariaDB; two refilling daemons on the Cluster URL and an issuer-only one
# (--api), as chaos 25. The source SRC is the primary of slot 0, the
# destination DST the primary of slot 16383; reshard moves the first
# MIG_N slots of SRC (redis-cli takes a source's slots upwards; 64 quick,
# 1024 long), and the applications are chosen by their keys' slots
# (migration_apps): three moved ones (cm..) on distinct slots among them,
# and a control (cs..) on a slot of SRC that does not move. Each is popped
# by two LPOP and two idpool_take consumers following the slot table
# (idpool-load --cluster) and by one take client of every other kind:
# libidpool and the Python client on the Cluster URL, and the issuer
# (libidpool's HTTP transport). One reshard (T_FROM: redis-cli started;
# reshard_ms: its run), a watcher per moved application (a majority of the
# other nodes names DST the primary of its slot, then DST's meta of it
# until the source's epoch is gone from it: the window's end).
# Checked:
#   * the slots really moved: before, every node names SRC the primary of
#     each application's slot; after, DST for the moved ones and still SRC
#     for the control's; pool, meta (and lock, if any) moved together: no
#     key of a moved application's slot is left on SRC, and its meta is on
#     DST (its pool too unless the consumers emptied it just then);
#   * a pool that arrived with SRC's epoch was discarded (the watcher saw
#     the old meta go) and refilled by the daemons: R, the pool above low
#     water on DST; gaps fine, repeats never;
#   * each moved application: U A L over everything, M outside [T_FROM,
#     its window end]; exposed_take 0; its take consumers sent requests
#     inside its window (positive control), and the clients were
#     redirected or refused meanwhile: the issuer's
#     idpool_cluster_redirects_total (moved/ask/tryagain), the idpool-load
#     consumers' reply_* counters and the IDPOOL_EPOCH refusals inside the
#     windows, together more than none;
#   * the control sees no window (cluster_control): its takes were sent
#     inside the reshard, none refused, its meta keeps its epoch, no
#     discard; U A L M over all its IDs.
# Evidence: the slots named DST's on every node after, SRC's before.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
cluster_setup
failover_rounds
ROUNDS=3 # the moved applications
PER_ROUND=$((CHAOS_IDS / 4))
WINDOW_LIMIT_MS=-
if [[ $PROFILE == quick ]]; then MIG_N=${CHAOS_RESHARD_SLOTS:-64}; else MIG_N=${CHAOS_RESHARD_SLOTS:-1024}; fi

migration_ends
migration_slots "$SRC" "$MIG_N"
MOVED_SLOTS=("${MIG_SLOTS[@]}")
migration_apps cm 3 "${MOVED_SLOTS[@]}"
MOVED=("${MIG_APPS[@]}")
# the control: a slot of SRC past the moved ones
migration_slots "$SRC" $((MIG_N + 2000))
migration_apps cs 1 "${MIG_SLOTS[@]:MIG_N+100}"
CTL=${MIG_APPS[0]}
info "reshard of $MIG_N slots ${MOVED_SLOTS[0]}..${MOVED_SLOTS[-1]} from $(cluster_node "$SRC") to" \
    "$(cluster_node "$DST"): ${MOVED[*]} moved (slots $(for a in "${MOVED[@]}"; do cluster_slot "$a"; done | tr '\n' ' ')), control $CTL (slot $(cluster_slot "$CTL"))"

round_app_add "${MOVED[@]}" "$CTL"
failover_daemons "$IDPOOL_REDIS_CLUSTER_URL"
apps_filled "${MOVED[@]}" "$CTL"

declare -A N0_OF=() EPOCH_OF=() DISC0=()
failover_consumers "$CTL" "$IDPOOL_REDIS_CLUSTER_URL"
migration_consumers "${MOVED[@]}"

# Before: every node names SRC the primary of every application's slot.
for app in "${MOVED[@]}" "$CTL"; do
    expect "migration_owned $(cluster_slot "$(pool_key "$app")") $SRC" \
        "$app: not every node names $(cluster_node "$SRC") its primary before the reshard"
    EPOCH_OF[$app]=$(cluster_cli "$SRC" HGET "$(meta_key "$app")" epoch)
    [[ -n ${EPOCH_OF[$app]} ]] || fail "$app: no epoch in its meta on $SRC"
    DISC0[$app]=$(pool_discards "$app")
    failover_probe "$SRC" "$app"
    mv "$DIR/probe.pool" "$DIR/probe.$app.pool"
done
migration_redirects
REDIR0=$MIG_REDIR
for app in "${MOVED[@]}"; do migration_watch "$SRC" "$app" "${EPOCH_OF[$app]}"; done

T_FROM=$(now_ns)
redis-cli --cluster reshard "127.0.0.1:$SRC" --cluster-from "$SRC_ID" --cluster-to "$DST_ID" \
    --cluster-slots "$MIG_N" --cluster-yes >"$DIR/reshard.out" 2>&1 || failure "redis-cli --cluster reshard failed (see reshard.out)"
T_RESHARD=$(now_ns)
RESHARD_MS=$(((T_RESHARD - T_FROM) / 1000000))
info "reshard: $RESHARD_MS ms, $(grep -c '^Moving slot' "$DIR/reshard.out") slots moved by redis-cli"

migration_watch_all "$T_RESHARD" "${MOVED[@]}"
# R on DST first: an upper bound of the time (a pool is looked at when its
# turn comes), and the checks below ask every node about every moved slot
# (a minute for the long profile's 1024)
migration_recovered "$T_FROM" "${MOVED[@]}"

# After: the slots moved (every node names DST), the control's did not;
# nothing of a moved application left on SRC, its pool and meta on DST.
wait_until 10 cluster_ok || failure "the cluster is not ok on every node after the reshard"
for s in "${MOVED_SLOTS[@]}"; do
    migration_owned "$s" "$DST" || failure "slot $s: not every node names $(cluster_node "$DST") its primary"
done
expect "migration_owned $(cluster_slot "$(pool_key "$CTL")") $SRC" "control $CTL: its slot moved"
LEFT=0
for app in "${MOVED[@]}"; do
    n=$(migration_left "$SRC" "$app")
    LEFT=$((LEFT + n))
    expect "((n == 0))" "$app: $n keys of its slot left on $(cluster_node "$SRC")"
    dst_keys=$(migration_keys "$DST" "$app")
    # its pool may be empty (Redis deletes an empty list): its meta must be there
    expect "[[ '$dst_keys' == *meta* ]]" "$app: its meta is not on DST ($dst_keys)"
    expect "(($(pool_discards "$app") > ${DISC0[$app]}))" "$app: no daemon discarded the pool that arrived with the source's epoch"
done

migration_rounds "${MOVED[@]}"
consumers_stop "$CTL"
CTL_FIRSTS=()
cluster_control "$CTL" "$SRC" "${EPOCH_OF[$CTL]}" "${DISC0[$CTL]}"
migration_redirects
info "redirects (moved/ask/tryagain): issuer $REDIR0 -> $MIG_REDIR, idpool-load $MIG_LOAD_REDIR," \
    "libidpool (moved/asked/retries) $MIG_LIB_REDIR;" \
    "IDPOOL_EPOCH refusals in the windows $REFUSED_SUM"
REDIR_N=$(($(tr '/' '+' <<<"$MIG_REDIR") - ($(tr '/' '+' <<<"$REDIR0")) + $(tr '/' '+' <<<"$MIG_LOAD_REDIR") + $(tr '/' '+' <<<"$MIG_LIB_REDIR")))
expect "((REDIR_N + REFUSED_SUM > 0))" \
    "no client was redirected (MOVED/ASK/TRYAGAIN) or refused (IDPOOL_EPOCH) inside the reshard"
fault_landed "reshard:${MIG_N}slots,${RESHARD_MS}ms,src=$(cluster_node "$SRC"),dst=$(cluster_node "$DST"),redirects=$REDIR_N,control_takes=$CTL_TAKES" \
    "((LEFT == 0)) && migration_owned ${MOVED_SLOTS[0]} $DST && migration_owned ${MOVED_SLOTS[-1]} $DST"

daemons_stop
drain "$CTL"
check_rollback "$CTL" 0 0
rollback_finish reshard_ms="$RESHARD_MS" reshard_slots="$MIG_N" low_water_ms="$(median "${LOWS[@]}")" \
    issuer_redirects="$(tr '/' ':' <<<"$MIG_REDIR")" load_redirects="$(tr '/' ':' <<<"$MIG_LOAD_REDIR")" \
    lib_redirects="$(tr '/' ':' <<<"$MIG_LIB_REDIR")" control_first_take_ms="$(median "${CTL_FIRSTS[@]}")"
