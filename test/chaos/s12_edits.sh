#!/usr/bin/env bash
# Chaos 12 edits: operator edits of application rows under load (design
# brief §1 "edits take effect without a restart", §4 U: unique across
# "operator edits", §4.4 "Never backwards", §7).
#
# Two daemons (rows re-read every second, and at once on SIGHUP), two
# applications, two recorded consumers on each all along:
#   ed  monotonic throughout, popped slowly (~1/10 of the profile's rate,
#       so its leases stay small):
#       offset  (round 1) current_offset lowered to half of what is
#               reserved (SIGHUP),
#               then max_pool_size raised so far above the pool that the
#               leases held in meta cannot supply the refill (at least
#               tenfold), so a reservation follows at once; it must not
#               go backwards: offset_regression fires (pub/sub), the new
#               lease starts above every earlier one and current_offset is
#               written back above the value the operator lowered;
#       sizes   step 1000 -> 500 and max_pool_size changed (round 1: back
#               down from the offset edit's huge pool; later rounds: doubled),
#               seen by both daemons (GET /v1/apps), then step 1000 again;
#   sw  switched monotonic -> trend -> monotonic -> trend, a few seconds
#       each, then soft-deleted (deleted_at set: no longer refilled, the
#       consumers empty the pool) and restored (refilled again).
# M is checked over all of ed, whose type never changes. sw ends as trend
# and is checked as trend (U, A, L; no order): around a switch the pool
# still holds IDs of the previous type, so "increasing" has no clean
# boundary there; M under every other edit is ed's job. delta, remainder
# and start_offset are not edited: A is checked against the final row.
# R: pools back above low water after the offset edit and the restore, and
# every alert that fired (offset_regression, underflow while sw was
# deleted) resolved. U M A L over everything popped.
# Evidence that the edits landed: offset_regression fired and current_offset
# was restored; both daemons report the new step; sw's IDs came out of
# order after the switches (shuffled trend blocks were served:
# trend_inversions=N); sw's pool ran empty while deleted.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

ED="ed"
SW=sw
APPS=("$ED" "$SW")
add_app $ED step=1000 max_pool_size=20000 min_size_percent=50 increment_max=3
add_app $SW step=1000 max_pool_size=30000 min_size_percent=50 increment_max=2
chaos_daemon a
chaos_daemon b
for app in "${APPS[@]}"; do
    app_params "$app"
    wait_until 20 pool_ge "$app" "$P_LOW" || fail "$app never filled"
done
alerts_start
consumers_start $ED 2 --rate $((CHAOS_RATE / 10 > 0 ? CHAOS_RATE / 10 : 1))
consumers_start $SW 2
# Both daemons re-read the rows now (rather than within --reload-ms).
hup() {
    signal_daemon a HUP
    signal_daemon b HUP
}
# both_see APP FIELD VALUE: GET /v1/apps/APP of both daemons shows it.
both_see() {
    [[ $(app_stat a "$1" "$2") == "$3" && $(app_stat b "$1" "$2") == "$3" ]]
}
max_leased() {
    sql "SELECT COALESCE(MAX(l.hi), 0) FROM application_lease l JOIN application a
         ON a.id = l.application_id WHERE a.entity_key = $(sql_value "$1")"
}
current_ge() { (($(app_col "$1" current_offset) >= $2)); }
more_alerts() { (($(alert_count "$1" "$2" "$3") > $4)); }
# Leases settle (the first ones are sized before any rate is known).
popped_wait "$ED,$SW" $((CHAOS_IDS / 10)) "consumers starved"

for ((round = 1; round <= CHAOS_ROUNDS; round++)); do
    # ------------------------------------- ed: current_offset lowered ---
    # Once (round 1): a refill drawing more than the leases held in meta is
    # what forces the reservation, and later rounds would start with leases
    # sized for the huge pool (more than one refill draws).
    app_params $ED
    pool0=$P_MAX
    if ((round == 1)); then
        cur=$(app_col $ED current_offset)
        reserved=$(max_leased $ED)
        n_reg=$(alert_count $ED offset_regression firing)
        set_app $ED current_offset=$((cur / 2))
        hup
        wait_until 10 both_see $ED current_offset $((cur / 2)) ||
            failure "round $round: the daemons did not read the lowered current_offset"
        # A pool larger than what the leases held in meta can supply (current and
        # prefetched, at the smallest gap): the refill must reserve a lease now.
        mapfile -t m < <(rcli HMGET "$(meta_key $ED)" next hi nlo nhi) # next hi nlo nhi
        avail=$((${m[1]:-0} - ${m[0]:-0} + ${m[3]:-0} - ${m[2]:-0}))
        len=$(llen $ED) # earlier rounds may have left a large pool behind
        big=$(((len + avail + 2 * pool0 + 999) / 1000 * 1000))
        ((big >= pool0 * 10)) || big=$((pool0 * 10))
        info "$ED: pool $len, meta holds leases for at most $avail IDs; max_pool_size $pool0 -> $big"
        set_app $ED max_pool_size=$big
        hup
        fired=0 restored=0
        wait_until 15 more_alerts $ED offset_regression firing "$n_reg" && fired=1
        wait_until 15 current_ge $ED "$reserved" && restored=1
        first_new=$(sql "SELECT COALESCE(MIN(l.lo), 0) FROM application_lease l JOIN application a
            ON a.id = l.application_id WHERE a.entity_key = 'ed' AND l.lo >= $reserved")
        expect "((restored))" "round $round: current_offset $(app_col $ED current_offset) not written back above $reserved"
        fault_landed "offset:lowered=$((cur / 2)),reserved=$reserved,regression=$fired,restored=$restored" \
            "((fired && restored))"
        t0=$(now_ns)
        recovered $ED "$t0"
        info "$ED: after lowering current_offset to $((cur / 2)) (reserved up to $reserved) the next" \
            "lease starts at ${first_new:-?}; current_offset now $(app_col $ED current_offset)"
    fi

    # --------------------------------------- ed: step and pool size -----
    # Round 1: back down from the huge pool; later rounds: doubled for a while.
    from=$(app_col $ED max_pool_size)
    to=$pool0
    ((round == 1)) || to=$((pool0 * 2))
    set_app $ED step=500 max_pool_size="$to"
    # via the periodic reload this time (--reload-ms)
    sizes=0
    wait_until 10 eval 'both_see $ED step 500 && both_see $ED max_pool_size $to' && sizes=1
    fault_landed "sizes:step=500,max_pool_size=$from->$to,seen=$sizes" "((sizes))"
    set_app $ED step=1000 max_pool_size="$pool0"

    # -------------------------------------- sw: type switches -----------
    for type in 2 1 2; do
        name=trend
        ((type == 1)) && name=monotonic
        set_app $SW increasing_type=$type
        ((type == 1)) && hup # one via SIGHUP, the others via the reload
        wait_until 10 both_see $SW type $name || failure "round $round: sw not $name in both daemons"
        n=$(popped $SW)
        wait_until 20 popped_ge $SW $((n + 30000)) || failure "round $round: sw starved as $name"
    done

    # -------------------------------------- sw: soft delete, restore ----
    set_app $SW deleted_at="$(date +%s)"
    wait_until 10 both_see $SW deleted True || failure "round $round: sw not deleted in both daemons"
    emptied=0
    wait_until 20 eval "[[ \$(llen $SW) == 0 ]]" && emptied=1
    sleep 0.5 # the consumers get empty pops: the pool is not refilled
    set_app $SW deleted_at=0
    t0=$(now_ns)
    wait_until 10 both_see $SW deleted False || failure "round $round: sw not restored in both daemons"
    recovered $SW "$t0"
    fault_landed "soft_delete:emptied=$emptied" "((emptied))"
done

# R: offset_regression (and underflow while sw was deleted) resolve.
all_clear() { alerts_clear $ED && alerts_clear $SW; }
if ! wait_until 20 all_clear; then
    msg=''
    for app in "${APPS[@]}"; do msg+=" $app: a=$(alerts_firing a "$app") b=$(alerts_firing b "$app")"; done
    failure "alerts still firing 20 s after the edits (now:$msg)"
fi
consumers_wait "$ED,$SW" "$CHAOS_IDS"
consumers_stop $ED
consumers_stop $SW
daemons_stop
for app in "${APPS[@]}"; do
    drain "$app"
    check_app "$app"
done
# The switches landed: checked as monotonic, sw's IDs are out of order.
app_params $SW
"$IDPOOL_CHECK" --type monotonic --start-offset "$P_START" "$DIR/$SW".c*.bin >"$DIR/sw.mcheck" 2>&1 || true
inv=$(grep '^check: ' "$DIR/sw.mcheck" | grep -oE ' order=[0-9]+' | cut -d= -f2)
fault_landed "types:trend_inversions=${inv:-0}" "((${inv:-0} > 0))"
row
