#!/usr/bin/env bash
# Live edits of application rows (brief §1, §7): without a restart, within
# one reload interval (300 ms here) the daemon applies new sizes and steps,
# a switch monotonic -> trend -> monotonic, a soft delete and its undo, a
# new row and a removed row; with a long reload interval SIGHUP applies an
# edit at once. IDs stay unique across all of it.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

meta_pushed() { rcli HGET "$(meta_key "$1")" pushed; }
# lpop KEY N: pops N IDs atomically, keeping them for the uniqueness check.
lpop() { rcli LPOP "$(pool_key "$1")" "$2" >>"$DIR/$1.popped"; }
log_count() { grep -cE -- "$2" "$DIR/$1.log" 2>/dev/null || true; }
# wait_log NAME ERE N: the daemon's log matches ERE on at least N lines.
wait_log() {
    wait_until "${4:-3}" eval "(( \$(log_count $1 '$2') >= $3 ))" ||
        fail "log of $1: fewer than $3 lines match '$2'"
}
# settles KEY LEN: the pool reaches exactly LEN (bounded wait).
settles() {
    wait_until 5 eval "[[ \$(llen $1) == $2 ]]" || fail "$1 pool never reached $2 (now $(llen "$1"))"
}
# unchanged KEY LEN SECONDS: the pool stays at LEN, no refill at all.
unchanged() {
    local key=$1 len=$2 pushed deadline
    pushed=$(meta_pushed "$key")
    deadline=$(($(now_us) + $(to_us "$3")))
    while (($(now_us) < deadline)); do
        assert_eq "$len" "$(llen "$key")" "$key pool length"
        sleep 0.1
    done
    assert_eq "$pushed" "$(meta_pushed "$key")" "$key meta pushed (refills)"
}

add_app e1 max_size_per_second=100 # pool 6000, low water 4800
start_daemon a --tick-ms 20 --reload-ms 300
settles e1 6000

# --- sizes ----------------------------------------------------------------
set_app e1 max_pool_size=9000 # low water 7200: 6000 is below it
wait_log a 'app=e1 row changed: monotonic step=1000 max_pool_size=9000 low_water=7200' 1
settles e1 9000
set_app e1 max_size_per_second=200 max_pool_size=0 # 60 x 200 = 12000, low water 9600
wait_log a 'app=e1 row changed: monotonic step=1000 max_pool_size=12000 low_water=9600' 1
settles e1 12000
pass "max_pool_size and max_size_per_second edits resize the pool"

# --- step -------------------------------------------------------------------
set_app e1 step=700
wait_log a 'app=e1 row changed: monotonic step=700 max_pool_size=12000' 1
unchanged e1 12000 0.3
lpop e1 3000 # 9000: room 3000 -> 4 steps of 700
settles e1 11800
pass "a new step is used by the next refill"

# --- monotonic -> trend -> monotonic -----------------------------------------
set_app e1 increasing_type=2
wait_log a 'app=e1 row changed: trend step=700' 1
rcli LRANGE "$(pool_key e1)" 0 -1 >"$DIR/mono1.txt"
assert_increasing "$DIR/mono1.txt"
lpop e1 3000 # 8800: room 3200 -> 4 blocks of 700
settles e1 11600
rcli LRANGE "$(pool_key e1)" 0 -1 >"$DIR/pool2.txt"
assert_eq "$(tail -n 8800 "$DIR/mono1.txt")" "$(head -n 8800 "$DIR/pool2.txt")" "pool head after the trend refill"
tail -n 2800 "$DIR/pool2.txt" >"$DIR/trend.txt"
cat "$DIR/mono1.txt" "$DIR/trend.txt" >"$DIR/before-trend-blocks.txt"
check_pops "$DIR/trend.check" --blocks 700 --count 2800 --list "$DIR/trend.txt" ||
    fail "trend refill is not 4 shuffled blocks"
top=$(sort -n "$DIR/mono1.txt" | tail -n 1)
assert_gt "$(sort -n "$DIR/trend.txt" | head -n 1)" "$top" "first trend ID above the last monotonic ID"

set_app e1 increasing_type=1
wait_log a 'app=e1 row changed: monotonic step=700' 2
lpop e1 3000 # 8600: room 3400 -> 4 steps of 700
settles e1 11400
rcli LRANGE "$(pool_key e1)" 0 -1 >"$DIR/pool3.txt"
assert_eq "$(tail -n 8600 "$DIR/pool2.txt")" "$(head -n 8600 "$DIR/pool3.txt")" "pool head after switching back"
tail -n 2800 "$DIR/pool3.txt" >"$DIR/mono2.txt"
assert_increasing "$DIR/mono2.txt"
top=$(sort -n "$DIR/trend.txt" | tail -n 1)
assert_gt "$(head -n 1 "$DIR/mono2.txt")" "$top" "first monotonic ID above the trend blocks"
cat "$DIR/e1.popped" "$DIR/pool3.txt" >"$DIR/e1.all"
check_pops "$DIR/e1.check" --list "$DIR/e1.all" || fail "IDs repeated across the type switches"
pass "type switch 1 -> 2 -> 1: blocks, then increasing again, all unique"

# --- soft delete and undo ---------------------------------------------------
sql "UPDATE application SET deleted_at = UNIX_TIMESTAMP() WHERE entity_key = 'e1'"
wait_log a 'app=e1 soft-deleted \(deleted_at=[1-9][0-9]*\): no longer refilled' 1
lpop e1 5000 # 6400, far below low water 9600
unchanged e1 6400 1.5
pass "soft-deleted: pool kept but no longer refilled"
set_app e1 deleted_at=0
wait_log a 'app=e1 serving: monotonic step=700 max_pool_size=12000' 1
settles e1 12000 # room 5600 -> 8 steps
pass "undeleted: refilled again"

# --- a new row, a removed row -------------------------------------------------
t0=$(now_us)
add_app e2 max_size_per_second=50 step=500 # pool 3000, low water 2400
wait_until 2 pool_ge e2 3000 || fail "new row not served within one reload"
info "new row served after $((($(now_us) - t0) / 1000)) ms"
sql "DELETE FROM application WHERE entity_key = 'e2'"
wait_log a 'app=e2 row removed from the table' 1
lpop e2 1000 # 2000, below low water 2400
unchanged e2 2000 1
pass "a new row is served within one reload; a removed row is no longer refilled"
stop_daemon a

# --- SIGHUP applies an edit at once -----------------------------------------
start_daemon b --tick-ms 20 --reload-ms 60000
wait_log b 'app=e1 serving:' 1 5
unchanged e1 12000 0.3
set_app e1 max_pool_size=20000 # low water 16000: 12000 is below it
unchanged e1 12000 1 # no reload for 60 s: not applied yet
signal_daemon b HUP
wait_log b 'SIGHUP: reloading configuration and applications' 1
wait_log b 'app=e1 row changed: monotonic step=700 max_pool_size=20000 low_water=16000' 1 2
settles e1 19700 # room 8000 -> 11 steps of 700
stop_daemon b
cat "$DIR/e1.popped" >"$DIR/e1.all"
rcli LRANGE "$(pool_key e1)" 0 -1 >>"$DIR/e1.all"
check_pops "$DIR/e1.check" --list "$DIR/e1.all" || fail "IDs repeated"
pass "SIGHUP applies an edit without waiting for the reload interval"
