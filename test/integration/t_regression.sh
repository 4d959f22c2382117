#!/usr/bin/env bash
# Operator lowers current_offset (brief §4 "Never backwards"): the daemon
# keeps the higher value, logs offset_regression, and keeps handing out
# increasing, unique, leased IDs through many new leases.
#
#   rA: current_offset set to 0 (twice: once while idle, once during pops)
#   rB: current_offset set to the start of the newest lease (below its end)
#
# To get many leases in a few seconds whatever the consumption rate, the
# applications spread IDs far apart: delta 10^6 x increment_max 10^6 makes
# one full pool (2000 IDs) span 2 x 10^15, above the daemon's cap on one
# lease (2^48), so each lease holds roughly one pool's worth of IDs.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

D=1000000
for kr in rA:12345 rB:54321; do
    add_app "${kr%:*}" delta=$D remainder="${kr#*:}" increment_max=1000000 max_pool_size=2000 \
        step=500 min_size_percent=50 max_size_per_times=100
done
rem_of() { app_col "$1" remainder; }
maxhi() { sql "SELECT COALESCE(MAX(hi), 0) FROM application_lease WHERE application_id = $(app_col "$1" id)"; }
maxlease() { sql "SELECT COALESCE(MAX(id), 0) FROM application_lease WHERE application_id = $(app_col "$1" id)"; }
# popn KEY N PHASE: pops N IDs from KEY into $DIR/KEY.PHASE.0.bin, checking
# order and arithmetic.
popn() {
    pop "$1" "$2" "$DIR/$1.$3" --batch 100 --timeout-ms 30000 --type monotonic --delta $D \
        --remainder "$(rem_of "$1")"
}
# full KEY: the pool is at or above low water (1000) and no refill is running,
# so none will start until IDs are popped again.
full() { pool_ge "$1" 1000 && [[ $(rcli EXISTS "$(lock_key "$1")") == 0 ]]; }

start_daemon a --tick-ms 20 --reload-ms 200
wait_until 10 eval 'full rA && full rB' || fail "pools did not fill"

# --- phase 1: normal consumption ------------------------------------------
popn rA 20000 1 || fail "rA phase 1"
popn rB 20000 1 || fail "rB phase 1"
wait_until 5 eval 'full rA && full rB' || fail "pools not refilled after phase 1"
# A prefetch right after the last refill lands in the table (bounded wait).
leases_ge() { (($(leases "$1" | wc -l) >= $2)); }
wait_until 5 eval 'leases_ge rA 4 && leases_ge rB 4' || true
for k in rA rB; do
    info "$k: $(leases $k | wc -l) leases after phase 1"
    assert_ge "$(leases $k | wc -l)" 4 "$k leases in phase 1"
done

# --- the operator's edits -------------------------------------------------
hiA=$(maxhi rA)
hiB=$(maxhi rB)
lastA=$(maxlease rA)
lastB=$(maxlease rB)
loB=$(sql "SELECT lo FROM application_lease WHERE id = $lastB")
assert_eq "$hiA" "$(app_col rA current_offset)" "rA current_offset before the edit"
set_app rA current_offset=0
set_app rB current_offset="$loB"
info "rA: current_offset $hiA -> 0; rB: $hiB -> $loB"

# --- phase 2: consumption through new leases --------------------------------
popn rA 40000 2 &
pa=$!
popn rB 40000 2 || fail "rB phase 2"
st=0
wait "$pa" || st=$?
assert_eq 0 "$st" "rA phase 2 pop status"
wait_until 5 log_has a "app=rA offset_regression: current_offset 0 is below the $hiA already reserved; kept the higher value" ||
    fail "no offset_regression line for rA (expected 0 below $hiA)"
wait_until 5 log_has a "app=rB offset_regression: current_offset $loB is below the $hiB already reserved; kept the higher value" ||
    fail "no offset_regression line for rB (expected $loB below $hiB)"
for k in rA rB; do
    last=$([[ $k == rA ]] && echo "$lastA" || echo "$lastB")
    n=$(sql "SELECT COUNT(*) FROM application_lease WHERE application_id = $(app_col $k id) AND id > $last")
    info "$k: $n leases after the edit"
    assert_ge "$n" 4 "$k leases reserved after the edit"
done
lo1=$(sql "SELECT lo FROM application_lease WHERE application_id = $(app_col rA id) AND id > $lastA ORDER BY id LIMIT 1")
assert_ge "$lo1" "$hiA" "rA: first lease after the edit starts at or above the old high-water mark"
pass "offset_regression logged; new leases start above everything reserved before"

# --- phase 3: rA regressed again while IDs are being popped ------------------
popn rA 40000 3 &
pa=$!
sleep 0.2
set_app rA current_offset=0
st=0
wait "$pa" || st=$?
assert_eq 0 "$st" "rA phase 3 pop status"
popn rA 20000 4 || fail "rA phase 4"
wait_until 5 eval 'full rA && full rB' || fail "pools not refilled at the end"
n=$(grep -c 'app=rA offset_regression: current_offset 0 is below' "$DIR/a.log" || true)
assert_ge "$n" 2 "rA offset_regression lines"
stop_daemon a

# --- everything ever handed out ---------------------------------------------
# The phases popped one after the other, then the rest of the pool: as
# monotonic consumers, each one's IDs lie above everything popped before.
for k in rA rB; do
    pop $k "$(llen $k)" "$DIR/$k.5" || fail "$k: popping the rest of the pool"
    cur=$(app_col $k current_offset)
    check_pops "$DIR/$k.check" --type monotonic --leases <(leases $k) --current-offset "$cur" \
        --delta $D --remainder "$(rem_of $k)" "$DIR/$k".[1-5].0.bin || fail "$k: IDs"
    assert_eq "$cur" "$(maxhi $k)" "$k: current_offset back at the newest lease end"
done
pass "regression: unique, increasing across the edits, all leased, current_offset above every ID"
