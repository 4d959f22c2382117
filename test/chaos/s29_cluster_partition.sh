#!/usr/bin/env bash
# Chaos 29 cluster_partition: a primary of a Redis Cluster is partitioned
# away from the other nodes, the daemons and the consumers for longer than
# cluster-node-timeout, its replica is promoted by the majority, then the
# partition heals and the old primary rejoins as a replica (issue 21).
#
# The whole scenario runs inside a network namespace of its own (netns.sh,
# as chaos 22), on the Cluster of servers.sh (three primaries with a
# replica each, cluster-node-timeout 1500 ms); otherwise as chaos 25
# (test/chaos/lib.sh cluster_scenario: two refilling daemons and an issuer
# on the Cluster URL, idpool_take consumers following the slot table, one
# take client of every other kind: libidpool and the Python client on the
# Cluster URL, the issuer; a control application on another primary that
# must see no window). No LPOP consumers (as chaos 22): a plain pop of the
# promoted replica's copy before the sweep would be charged to the stale
# take that got the same ID from the old primary. Each round, while they
# take:
#   1. a stale consumer (STALE_RATE idpool_take requests a second, no
#      slot table: the old primary's port only) runs as uid STALE_UID and
#      takes from the old primary; the old primary's own cluster-bus links
#      are made to leave from 127.0.0.2 (cluster_src_addr), then the
#      partition (cluster_partition): nftables drops every packet to and
#      from its client port and its bus port, and from and to 127.0.0.2,
#      except on connections STALE_UID opened. The majority flags it fail
#      and promotes its replica (the watcher: detect_ms), the daemons
#      validate the promoted node and discard the pool it inherited;
#   2. the old primary, in the minority, flags the cluster fail after the
#      node timeout (cluster_state:fail, read as STALE_UID) and refuses the
#      stale takes with CLUSTERDOWN from then on: the stale takes served
#      by it after the majority named the new primary and those it refused
#      are counted (refused is what Redis 7 does: writes stop once the
#      minority primary sees the majority unreachable; a take sent after
#      its cluster_state went fail and served is a failure);
#   3. the partition heals: the old primary learns the promotion and
#      rejoins as a replica of the promoted node (its link up), the cluster
#      ok on every node; the stale consumer stops.
# Checked: as chaos 25 (U A L over every log, the stale one included: no
# ID twice although two primaries held the pool; exposed_take 0; takes
# inside the window; budget_ms = first_take_ms - detect_ms within 2000 ms
# plus the profile's slack; the control without any window).
# Evidence that each fault landed: packets were dropped, the old primary's
# bus links left from 127.0.0.2, every node of the majority flags it fail,
# its replica was promoted, validated under its own server id, the
# inherited pool discarded; the minority primary's cluster_state went
# fail, and its CLUSTERDOWN refusals (or stale takes served) are counted.
# shellcheck source-path=SCRIPTDIR

# Outside a namespace: run this script inside one of its own (netns.sh).
# shellcheck source=netns.sh
source "$(dirname "$0")/netns.sh"
chaos_netns 29 cluster_partition "$0" "$@"

# ---- inside the namespace.
source "$(dirname "$0")/lib.sh"
cluster_setup
info "network namespace $CHAOS_NETNS"
netns_nft
# shellcheck disable=SC2034 # read by round_begin
ROUND_LPOP=0
STALE_UID=65534
# takes/s of the stale consumer: slow, so that the pool it finds on the
# partitioned primary outlasts the node timeout
# shellcheck disable=SC2034 # stale_start's
STALE_RATE=10
stale_dir

cluster_fault() {
    local old=$1 member=$2 app=$3 links
    REPLICA=$(cluster_replicas_of "$old" | head -n 1)
    [[ -n $REPLICA ]] || fail "$member ($old) has no replica"
    stale_start "$old" "$app"
    links=$(cluster_src_addr "$old" 127.0.0.2)
    # shellcheck disable=SC2034 # the fault itself (failover_strike's)
    T_FROM=$(now_ns)
    cluster_partition "$old" "$(cluster_bus_port "$old")" 127.0.0.2 "$STALE_UID"
    FAULT_NOTE="partition:$member,src2_links=$links"
    if wait_until 20 cluster_failed "$old"; then
        FAULT_NOTE+=",flagged_fail"
    else
        failure "$member ($old): not every node of the majority flags it fail"
    fi
}
cluster_after() {
    local old=$1 member=$2 app=$3 drop served late clusterdown t_fail
    expect "[[ $W_NEW == $REPLICA && \$(cluster_role $W_NEW) == master ]]" \
        "$app: $W_NEW took over $member's slots, not its replica $REPLICA, or is no primary"
    # the minority: the old primary flags the cluster fail, then refuses
    if wait_until 15 stale_state_is "$old" fail; then t_fail=$(now_ns); else
        t_fail=0
        failure "$member ($old), partitioned, never flagged the cluster fail"
    fi
    wait_until 10 eval "((\$(stale_errorstat $old CLUSTERDOWN) > 0))" ||
        failure "$member ($old), partitioned, refused no stale take with CLUSTERDOWN"
    drop=$(dropped)
    cluster_heal "$old"
    wait_until 30 cluster_follows "$old" "$W_NEW" ||
        failure "$member ($old) did not rejoin as a replica of $W_NEW after the partition healed"
    wait_until 30 cluster_ok || failure "the cluster is not ok on every node after $member rejoined"
    bg_stop "$STALE_NAME"
    served=$(stale_served "$T_DETECT" "$(now_ns)")
    if ((t_fail > 0)); then late=$(stale_served "$t_fail" "$(now_ns)"); else late=-; fi
    clusterdown=$(sed -n 's/.* reply_clusterdown=\([0-9]*\).*/\1/p' "$DIR/$STALE_NAME.out")
    info "$app: $drop packets dropped; the partitioned primary served $served stale takes after" \
        "the majority named $W_NEW, $late after it flagged the cluster fail, refused" \
        "${clusterdown:-0} with CLUSTERDOWN"
    expect "((drop > 0))" "$app: the partition dropped no packet"
    expect "((${clusterdown:-0} > 0))" "$app: the stale consumer counted no CLUSTERDOWN refusal"
    expect "[[ $late == 0 ]]" "$app: the partitioned primary served $late stale takes after it flagged the cluster fail"
    FAULT_NOTE+=",dropped=$drop,minority_fail=$((t_fail > 0)),stale_served=$served,stale_clusterdown=${clusterdown:-0}"
    stale_finish
}
cluster_scenario optional
