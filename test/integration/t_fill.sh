#!/usr/bin/env bash
# Pool sizing (brief §5): a pool fills to exactly max_pool_size and never
# above it, is left alone while it is at or above the low-water mark, and is
# topped up in whole steps once it drops below; two applications are filled
# independently.
#
#   f1: max_size_per_second=100 -> max_pool_size 6000, step 1000, low water 4800
#   f2: max_size_per_second=50, step 500 -> max_pool_size 3000, low water 2400
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

add_app f1 max_size_per_second=100
add_app f2 max_size_per_second=50 step=500

# meta_pushed KEY: the daemon's count of IDs ever pushed to KEY's pool.
meta_pushed() { rcli HGET "$(meta_key "$1")" pushed; }
# lpop KEY N: pops N IDs in one atomic command (no refill can interleave).
lpop() { rcli LPOP "$(pool_key "$1")" "$2" >>"$DIR/$1.popped"; }
# stays KEY LEN PUSHED SECONDS: over SECONDS, sampled every 50 ms, the pool
# length is always LEN and meta 'pushed' always PUSHED.
stays() {
    local key=$1 len=$2 pushed=$3 secs=$4 deadline n p
    deadline=$(($(now_us) + $(to_us "$secs")))
    while (($(now_us) < deadline)); do
        n=$(llen "$key")
        p=$(meta_pushed "$key")
        assert_eq "$len" "$n" "$key pool length while idle"
        assert_eq "$pushed" "$p" "$key meta pushed while idle (no extra refill)"
        sleep 0.05
    done
}
# settles KEY LEN: waits (bounded) until the pool holds exactly LEN IDs.
settles() { wait_until 5 eval "[[ \$(llen $1) == $2 ]]" || fail "$1 pool never reached $2 (now $(llen "$1"))"; }

start_daemon a --tick-ms 20 --reload-ms 500

# --- initial fill: up to max_pool_size, never above ------------------------
maxseen=0
deadline=$(($(now_us) + 10000000))
while (($(now_us) < deadline)); do
    n=$(llen f1)
    ((n > maxseen)) && maxseen=$n
    [[ $n == 6000 && $(llen f2) == 3000 ]] && break
    sleep 0.01
done
assert_eq 6000 "$(llen f1)" "f1 initial fill"
assert_eq 3000 "$(llen f2)" "f2 initial fill"
assert_le "$maxseen" 6000 "f1 pool length seen during the fill"
log_has a 'app=f1 serving: monotonic step=1000 max_pool_size=6000 low_water=4800' ||
    fail "no 'serving' line with the resolved sizes for f1"
log_has a 'app=f2 serving: monotonic step=500 max_pool_size=3000 low_water=2400' ||
    fail "no 'serving' line with the resolved sizes for f2"
assert_eq 6000 "$(meta_pushed f1)" "f1 pushed after the fill"
assert_eq 3000 "$(meta_pushed f2)" "f2 pushed after the fill"
stays f1 6000 6000 1
assert_eq 3000 "$(meta_pushed f2)" "f2 pushed while idle"
pass "pools fill to exactly max_pool_size and stay there without consumption"

# --- at or above low water: no refill ---------------------------------------
lpop f1 1000 # 5000 left
stays f1 5000 6000 0.6
lpop f1 200 # exactly the low-water mark: not below it
stays f1 4800 6000 0.6
pass "no refill while the pool is at or above low water (5000, 4800)"

# --- below low water: whole steps up to max_pool_size -----------------------
lpop f1 1 # 4799: room 1201 -> one step of 1000
settles f1 5799
stays f1 5799 7000 0.5
lpop f1 3799 # 2000: room 4000 -> four steps
settles f1 6000
stays f1 6000 11000 0.5
lpop f1 5999 # 1: room 5999 -> five steps
settles f1 5001
stays f1 5001 16000 0.5
pass "below low water the pool is refilled in whole steps, never above max_pool_size"

# --- f2 is independent ----------------------------------------------------
assert_eq 3000 "$(llen f2)" "f2 untouched while f1 was drained"
assert_eq 3000 "$(meta_pushed f2)" "f2 pushed untouched while f1 was drained"
lpop f2 601 # 2399: room 601 -> one step of 500
settles f2 2899
stays f2 2899 3500 0.5
assert_eq 16000 "$(meta_pushed f1)" "f1 pushed while f2 was refilled"
assert_eq 5001 "$(llen f1)" "f1 length while f2 was refilled"
pass "two applications are filled independently"

# Everything handed out is unique and increasing in pop order, per app.
for k in f1 f2; do
    rcli LRANGE "$(pool_key "$k")" 0 -1 >>"$DIR/$k.popped"
    assert_increasing "$DIR/$k.popped"
done
assert_eq 16000 "$(count_ids "$DIR/f1.popped")" "f1 IDs popped + left in the pool"
stop_daemon a
pass "fill"
