#!/usr/bin/env bash
# Chaos 23 sentinel_failback: A -> B -> A behind Sentinel before B's sweep
# finished, with a full resync of A in between (issue 20).
#
# A Sentinel set (the primary A, replicas B and C, three sentinels); C has
# replica-priority 0, so every failover goes to the other one of A and B.
# One refilling daemon on the Sentinel URL, armed with
# IDPOOL_FAULT=sweep:stop:2: it stops itself after it validated the next
# primary it meets (its second sweep), before that sweep's first SCAN. One
# monotonic application; two LPOP and two idpool_take consumers following
# the sentinels. Then:
#   1. SENTINEL FAILOVER (A -> B) while the consumers pop: the daemon
#      follows, loads the library again on B, validates B and stops; B
#      holds A's pools (A's epoch in their meta) unswept: takes on B are
#      refused (IDPOOL_EPOCH), LPOP on B serves them;
#   2. A is demoted; the consumers wrote on A after the switch, so its
#      resync from B is a full one (B's sync_full grows);
#   3. SENTINEL FAILOVER again (B -> A): A is primary again, holding (from
#      B) pools of A's old epoch that nobody swept, and no validated epoch;
#   4. the daemon is resumed: it meets B a replica (READONLY, its role
#      check), asks the sentinels, reloads the library on A, validates it
#      and sweeps.
# Checked: U A L over everything, M outside [the first failover, the sweep
# on A]; exposed_take = 0 (the takes were refused on B and on A until the
# sweep: takes inside the window and IDPOOL_EPOCH refusals both required);
# exposed_lpop is measured. Evidence: B validated under its own server id
# while its sweep never ran (the fault fired, no "epoch sweep" line of B's
# epoch), A's pool held meta of A's first epoch when it was promoted back,
# the full resync, and the daemon validated A under a new epoch.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
sentinel_setup

PER_ROUND=$CHAOS_IDS
APP=fb1
A=$REDIS_PORT B=$REPLICA1_PORT C=$REPLICA2_PORT
meta_epoch_on() { redis-cli -p "$1" HGET "$(meta_key "$APP")" epoch; }
failover_to() { # failover_to PORT: SENTINEL FAILOVER, until the sentinels name PORT
    sentinel_failover 20
    wait_until 30 eval "[[ \$(sentinel_primary) == $1 && \$(redis-cli -p $1 ROLE | head -n 1) == master ]]" ||
        fail "the sentinels did not promote $1 (they name $(sentinel_primary))"
}

redis-cli -p "$C" CONFIG SET replica-priority 0 >/dev/null
round_apps_add fb 1
IDPOOL_FAULT=sweep:stop:2 sentinel_daemon a
round_apps_filled fb 1
epoch_a=$(redis-cli -p "$A" FCALL_RO idpool_validated 0)

round_begin "$APP"
pop_past "$APP"
redis-cli -p "$A" LRANGE "$(pool_key "$APP")" 0 -1 >"$DIR/probe.pool"
full0=$(redis_info "$B" stats sync_full)
# 1. A -> B; the daemon validates B and stops before sweeping it.
T_FROM=$(now_ns)
failover_to "$B"
wait_daemon_stopped a 20 || fail "the daemon did not stop at its sweep of B"
fault_fired a "sweep:stop:2" || failure "the daemon stopped without its fault hook"
epoch_b=$(redis-cli -p "$B" FCALL_RO idpool_validated 0)
[[ $epoch_b == "$(redis_server_id "$B")":* ]] || fail "B's epoch '$epoch_b' is not of B"
swept_b=$(logs_count "epoch sweep \\(epoch $epoch_b\\)")
stale_meta=$(meta_epoch_on "$B")
info "B validated ($epoch_b), not swept ($swept_b sweeps); its meta of $APP: $stale_meta"
# 2. A is demoted (a full resync: it took writes after the switch).
wait_until 30 eval "[[ \$(redis-cli -p $A ROLE | head -n 1) == slave ]]" || fail "A was not demoted"
wait_until 30 eval "[[ \$(redis_info $A replication master_link_status) == up ]]" || fail "A did not resync"
full1=$(redis_info "$B" stats sync_full)
# 3. B -> A.
failover_to "$A"
REDIS_PORT=$A
meta_back=$(meta_epoch_on "$A")
info "A promoted back; its meta of $APP: $meta_back, validated: '$(redis-cli -p "$A" FCALL_RO idpool_validated 0)'"
take=$(redis-cli -p "$A" FCALL idpool_take 2 "$(pool_key "$APP")" "$(meta_key "$APP")" 10 2>&1 | head -n 1)
# 4. The daemon resumes.
signal_daemon a CONT
wait_until 20 eval "[[ -n \$(meta_epoch_on $A) && \$(meta_epoch_on $A) == \$(redis-cli -p $A FCALL_RO idpool_validated 0) ]]" ||
    failure "the daemon did not validate and sweep A"
W_TO=$(now_ns)
WINDOW=$(((W_TO - T_FROM) / 1000000))
recovered "$APP" "$T_FROM" 30
round_end 1 "$APP" "$T_FROM" "$W_TO" required
epoch_a2=$(redis-cli -p "$A" FCALL_RO idpool_validated 0)
fault_landed "failback:b_validated_unswept,full_syncs=$((full1 - full0)),stale=$STALE" \
    "((swept_b == 0 && full1 > full0)) && [[ '$meta_back' == '$epoch_a' && '$take' == IDPOOL_EPOCH* &&
     '$epoch_a2' == '$(redis_server_id "$A")':* && '$epoch_a2' != '$epoch_a' ]]"
WINDOW_LIMIT_MS=-
rollback_finish
