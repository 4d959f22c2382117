#!/usr/bin/env bash
# Chaos 20 sentinel_manual: a manual failover of a Sentinel set under load
# (SENTINEL FAILOVER: the primary is demoted while it still runs, and a
# replica promoted), issue 20.
#
# As chaos 19 (test/chaos/lib.sh sentinel_scenario: two refilling daemons
# and an issuer on the Sentinel URL; consumers of every take client kind
# and LPOP, all following the sentinels), but each round's fault is
# SENTINEL FAILOVER. The old primary keeps running and is turned into a
# replica of the new one; until then it refuses nothing: every consumer
# and daemon must leave it because the sentinels name another primary
# (their poll, +switch-master), and the writes it takes meanwhile are lost
# in its resync (gaps, never repeats).
# Checked: as chaos 19 (U A L, M outside the window, exposed_take = 0,
# takes inside the window); the window of plain LPOP clients lasts until
# the old primary was demoted (they may pop there meanwhile what others
# popped on the new one before its sweep); budget_ms is reported only. Evidence: the sentinels named
# another primary, validated under its own server id, the inherited pool
# discarded, the old primary a replica of the new one, and no epoch on it
# (the daemons loaded the library again on the promoted server: it
# replicates).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
sentinel_setup

sentinel_fault() {
    sentinel_failover 15
    FAULT_NOTE="failover:$2"
}
sentinel_after() {
    wait_until 30 eval "[[ \$(redis-cli -p $1 ROLE | head -n 1) == slave ]]" ||
        failure "$2 ($1) was not turned into a replica"
    T_OLD_GONE=$(now_ns)
    wait_until 20 eval "[[ \$(redis_info $1 replication master_link_status) == up ]]" ||
        failure "$2 ($1) did not resync from the new primary"
    wait_until 10 eval "[[ -z \$(redis-cli -p $1 FCALL_RO idpool_validated 0) ]]" ||
        failure "$2 ($1), a replica now, still holds epoch $(redis-cli -p "$1" FCALL_RO idpool_validated 0)"
}
# The old primary serves on until it is demoted: the first take after the
# fault says nothing about the switch (first_take_ms is reported, not bounded).
SENTINEL_BUDGET=0
sentinel_scenario sm optional
