#!/usr/bin/env bash
# Chaos 19 sentinel_kill9: the Redis primary of a Sentinel set is killed
# (kill -9) under load, and the sentinels promote a replica (issue 20).
#
# A Sentinel set (servers.sh: the primary, two replicas, three sentinels,
# down-after-milliseconds 1000) and one MariaDB; two refilling daemons on
# the Sentinel URL and an issuer-only one (--api). One monotonic
# application per round (sk1, sk2, ...), popped by two LPOP and two
# idpool_take consumers that follow the sentinels themselves (idpool-load
# --sentinel: asked at every reconnect, ROLE checked) and retry every
# millisecond, and by one take client of every other kind: libidpool and
# the Python client on the Sentinel URL, and the issuer (libidpool's HTTP
# transport). Each round, while they pop:
#   1. the primary is killed (-9): T_FROM; a watcher polls the sentinels
#      until a majority names another primary (detect_ms), then the new
#      primary's meta of the application until the daemons' sweep replaced
#      the epoch written on the old one (the window's end);
#   2. the old primary is started again from its AOF: it comes back a
#      master with its old data, and the sentinels turn it into a replica
#      (nothing that follows the sentinels uses it meanwhile);
#   3. the consumers pop on and stop.
# Checked:
#   * U A L over everything, M outside [T_FROM, window end]; exposed_take
#     must be 0, exposed_lpop is measured;
#   * the take consumers sent requests inside the window (positive
#     control; IDPOOL_EPOCH refusals counted, not required: with replicas in
#     sync the promoted one may hold nothing stale);
#   * the failover time as clients feel it: first_take_ms (the kill to the
#     first take of a direct take consumer answered with IDs, sent after
#     the kill: the buffered clients hide part of the outage) and low_water_ms
#     (to the pool above low water on the new primary), beside detect_ms;
#     budget_ms = first_take_ms - detect_ms must stay within 1000 ms plus
#     CHAOS_FAILOVER_SLACK_MS (default 0 in the long profile, 1500 in the
#     quick one, which CI runs on a loaded machine);
#   * R: the pool is back above low water on the new primary.
# Evidence that each kill landed: the killed process is gone, a majority
# of sentinels named another primary, the daemons validated it under its
# own server id (run_id:master_replid) and discarded the pool it inherited.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
sentinel_setup

# The fault of a round: the primary OLD (servers.sh's MEMBER) killed.
sentinel_fault() {
    primary_kill9 "$1" "$2"
    FAULT_NOTE="kill9:$2"
}
# After the switch: the old primary comes back from its AOF, a master with
# its old data, and the sentinels turn it into a replica.
sentinel_after() {
    "$SERVERS" start "$DIR" "$2" >/dev/null || fail "could not start $2 again"
    wait_until 30 eval "[[ \$(redis-cli -p $1 ROLE | head -n 1) == slave ]]" ||
        failure "$2 ($1) was not turned into a replica"
}
sentinel_scenario sk optional
