#!/usr/bin/env bash
# Trend applications (brief §1, §3): the pool is made of blocks of exactly
# `step` IDs in list order; each block is a contiguous run (stride delta) that
# is shuffled, and blocks do not overlap (each lies above the one before).
# Then >= 100k IDs per application are consumed through many refills: the
# whole popped stream is still whole blocks, unique, and leased (U A L).
#
#   t1: step 1000, delta 1, pool 6000 (6 blocks)
#   t2: step 500, delta 3, remainder 2, pool 5000 (10 blocks)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

add_app t1 increasing_type=2 max_size_per_second=100
add_app t2 increasing_type=2 step=500 delta=3 remainder=2 start_offset=1000000 \
    max_pool_size=5000
leases() { sql "SELECT lo, hi FROM application_lease WHERE application_id = $(app_col "$1" id)"; }

start_daemon a --tick-ms 20
full() { [[ $(llen t1) == 6000 && $(llen t2) == 5000 ]]; }
above_low() { [[ $(llen t1) -ge 4800 && $(llen t2) -ge 4000 ]]; }
wait_until 10 full ||
    fail "pools did not fill to 6000 / 5000 (t1 $(llen t1), t2 $(llen t2))"
log_has a 'app=t1 serving: trend step=1000 max_pool_size=6000' || fail "t1 not served as trend"
log_has a 'app=t2 serving: trend step=500 max_pool_size=5000' || fail "t2 not served as trend"

# --- the filled pool, in list order -----------------------------------------
rcli LRANGE "$(pool_key t1)" 0 -1 >"$DIR/t1.pool"
rcli LRANGE "$(pool_key t2)" 0 -1 >"$DIR/t2.pool"
check_pops "$DIR/t1.pool.check" --blocks 1000 --count 6000 --leases <(leases t1) \
    --list "$DIR/t1.pool" || fail "t1 pool is not 6 shuffled contiguous blocks of 1000"
check_pops "$DIR/t2.pool.check" --blocks 500 --count 5000 --delta 3 --remainder 2 \
    --start-offset 1000000 --leases <(leases t2) --list "$DIR/t2.pool" ||
    fail "t2 pool is not 10 shuffled contiguous blocks of 500 (stride 3)"
pass "filled pools are whole shuffled contiguous blocks in list order"

# --- consumption with refills --------------------------------------------
# The pools were full, and refills append whole blocks, so everything popped
# from the start is whole blocks too: 100 blocks each.
pop t1 100000 "$DIR/t1" --batch 300 --timeout-ms 30000 &
p1=$!
pop t2 50000 "$DIR/t2a" --batch 700 --timeout-ms 30000 --delta 3 --remainder 2 \
    --start-offset 1000000
st=0
wait "$p1" || st=$?
assert_eq 0 "$st" "t1 pop status"
pop t2 50000 "$DIR/t2b" --batch 1000 --timeout-ms 30000 --delta 3 --remainder 2 \
    --start-offset 1000000 || fail "t2 pop failed"
wait_until 5 above_low || fail "pools not refilled"
stop_daemon a

# t2's two pops are one stream: its blocks run across them.
ids_text "$DIR/t2a.0.bin" "$DIR/t2b.0.bin" >"$DIR/t2.txt"
for k in t1 t2; do
    pop $k "$(llen $k)" "$DIR/$k.rest" || fail "popping the rest of $k"
    n=$(grep -c 'app='$k' pushed [0-9]* IDs' "$DIR/a.log" || true)
    info "$k: $n refills, $(leases $k | wc -l) leases"
    assert_ge "$n" 10 "$k refills"
done
check_pops "$DIR/t1.check" --blocks 1000 --count 100000 --leases <(leases t1) \
    --current-offset "$(app_col t1 current_offset)" "$DIR/t1.0.bin" ||
    fail "t1 consumed stream"
check_pops "$DIR/t2.check" --blocks 500 --count 100000 --delta 3 --remainder 2 \
    --start-offset 1000000 --leases <(leases t2) --current-offset "$(app_col t2 current_offset)" \
    --list "$DIR/t2.txt" || fail "t2 consumed stream"
# Unique and leased including what is still in the pools.
check_pops "$DIR/t1r.check" --leases <(leases t1) "$DIR/t1.0.bin" "$DIR/t1.rest.0.bin" ||
    fail "t1 with the rest"
check_pops "$DIR/t2r.check" --leases <(leases t2) --delta 3 --remainder 2 "$DIR/t2a.0.bin" \
    "$DIR/t2b.0.bin" "$DIR/t2.rest.0.bin" || fail "t2 with the rest"
pass "100k IDs each through refills: whole shuffled blocks, unique, leased"
