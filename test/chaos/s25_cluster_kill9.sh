#!/usr/bin/env bash
# Chaos 25 cluster_kill9: a primary of a Redis Cluster is killed (kill -9)
# under load, and its replica is promoted (issue 21).
#
# The Cluster of servers.sh (three primaries with a replica each,
# cluster-node-timeout 1500 ms) and one MariaDB; two refilling daemons on
# the Cluster URL and an issuer-only one (--api). Each round has two
# monotonic applications, chosen by their keys' slots: the round's (ck..)
# on the primary to be killed, a control (cc..) on another; each is
# popped by two LPOP and two idpool_take consumers that follow the slot
# table themselves (idpool-load --cluster: the table read again, at most
# once a second, after a connection failed or a MOVED), and by one take
# client of every other kind: libidpool and the Python client on the
# Cluster URL, and the issuer (libidpool's HTTP transport). Each round
# kills another primary (one round quick, three long):
#   1. the primary of the round's application is killed (-9): T_FROM; a
#      watcher polls CLUSTER SLOTS of the five surviving nodes until a
#      majority names another primary of the application's slot
#      (detect_ms), then that primary's meta of the application until the
#      daemons' sweep removed the epoch written on the old one (the
#      window's end); every surviving node must flag the killed one fail;
#   2. the promoted node must be the killed primary's replica; the killed
#      node is started again from its AOF and must rejoin as a replica of
#      the promoted one (its link up), the cluster ok on every node;
#   3. the consumers pop on and stop.
# Checked:
#   * the round's application: U A L over everything, M outside [T_FROM,
#     window end]; exposed_take must be 0, exposed_lpop is measured; the
#     take consumers sent requests inside the window (positive control;
#     IDPOOL_EPOCH refusals counted, not required: with the replica in sync
#     the promoted one may hold nothing stale);
#   * the control, on a surviving primary, sees no window at all: its
#     takes were sent inside the round's window (control_takes= in the
#     evidence), none was refused with IDPOOL_EPOCH, its meta keeps its
#     epoch, no daemon discarded its pool, and U A L M hold over all its
#     IDs without any window; control_first_take_ms, the kill to the end of
#     its longest pause in served takes (the whole cluster answers
#     CLUSTERDOWN from the failure report to the promotion), is measured;
#   * the failover time as clients feel it: first_take_ms (the kill to the
#     first take of a direct take consumer answered with IDs, sent after
#     the kill) and low_water_ms (to the pool above low water on the
#     promoted node), beside detect_ms; budget_ms = first_take_ms -
#     detect_ms within 2000 ms (the Sentinel budget plus the second within
#     which the daemons and the clients read the slot table again) plus
#     CHAOS_FAILOVER_SLACK_MS (default 0 long, 1500 quick);
#   * R: the pool is back above low water on the promoted node.
# Evidence that each kill landed: the killed process is gone, every
# surviving node flags it fail, its replica was promoted, the daemons
# validated it under its own server id (run_id:master_replid) and
# discarded the pool it inherited.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
cluster_setup

# The fault of a round: the primary OLD (servers.sh's MEMBER) killed;
# REPLICA, its replica before the kill.
cluster_fault() {
    REPLICA=$(cluster_replicas_of "$1" | head -n 1)
    [[ -n $REPLICA ]] || fail "$2 ($1) has no replica"
    primary_kill9 "$1" "$2"
    FAULT_NOTE="kill9:$2"
    if wait_until 20 cluster_failed "$1"; then
        FAULT_NOTE+=",flagged_fail"
    else
        failure "$2 ($1): not every surviving node flags it fail"
    fi
}
# After the switch: the promoted node is OLD's replica; OLD comes back
# from its AOF, a primary of its slots by its own nodes.conf, learns the
# promotion and rejoins as the promoted node's replica.
cluster_after() {
    expect "[[ $W_NEW == $REPLICA && \$(cluster_role $W_NEW) == master ]]" \
        "$3: $W_NEW took over $2's slots, not its replica $REPLICA, or is no primary"
    "$SERVERS" start "$DIR" "$2" >/dev/null || fail "could not start $2 again"
    wait_until 30 cluster_follows "$1" "$W_NEW" ||
        failure "$2 ($1) did not rejoin as a replica of $W_NEW"
    wait_until 30 cluster_ok || failure "the cluster is not ok on every node after $2 rejoined"
}
cluster_scenario optional
