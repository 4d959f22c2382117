#!/usr/bin/env bash
# Monotonic applications (brief §3, §4 M A L): 250,000 IDs popped while the
# daemon refills a small pool concurrently. Every ID is >= start_offset,
# < 2^63, % delta == remainder; the stream is strictly increasing; inside one
# lease consecutive IDs differ by k x delta with k random in [1, increment_max];
# every ID lies in exactly one application_lease range, the ranges are
# disjoint, and current_offset is at or above every range end.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

START=5000000000
DELTA=7
REM=3
INC=4
N=250000
# Pool 6000 (max_size_per_second 100), step 1000: about 50 refills at least.
add_app mono start_offset=$START delta=$DELTA remainder=$REM increment_max=$INC \
    max_size_per_second=100
app_id=$(app_col mono id)

start_daemon a --tick-ms 20
wait_until 10 pool_ge mono 4800 || fail "mono pool never filled"

t0=$(now_us)
pop mono "$N" "$DIR/mono" --batch 200 --timeout-ms 40000 \
    --type monotonic --start-offset "$START" --delta "$DELTA" --remainder "$REM" ||
    fail "pop: IDs not increasing / out of range / timed out (status $?)"
info "popped $N IDs in $((($(now_us) - t0) / 1000)) ms"
wait_until 5 pool_ge mono 4800 || fail "pool not refilled after the run"
stop_daemon a

refills=$(grep -c 'app=mono pushed [0-9]* IDs' "$DIR/a.log" || true)
info "$refills refills"
assert_ge "$refills" 40 "refills during the run"

sql "SELECT lo, hi FROM application_lease WHERE application_id = $app_id" >"$DIR/leases.tsv"
nleases=$(count_ids "$DIR/leases.tsv")
assert_ge "$nleases" 3 "leases reserved during the run"
cur=$(app_col mono current_offset)
assert_eq "$nleases" "$(app_col mono version)" "version bumped once per reservation"
assert_eq "$cur" "$(sql "SELECT MAX(hi) FROM application_lease WHERE application_id = $app_id")" \
    "current_offset = the end of the newest lease"
assert_eq "$START" "$(sql "SELECT MIN(lo) FROM application_lease WHERE application_id = $app_id")" \
    "the first lease starts at start_offset"

# The IDs still in the pool continue the stream (and are checked too):
# popped after the first pop completed, they must all lie above it.
pop mono "$(llen mono)" "$DIR/rest" || fail "popping the rest of the pool"
check_pops "$DIR/all.check" --type monotonic --leases "$DIR/leases.tsv" --current-offset "$cur" \
    --start-offset "$START" --delta "$DELTA" --remainder "$REM" --gap "1:$INC" --gap-all \
    "$DIR/mono.0.bin" "$DIR/rest.0.bin" || fail "ID checks failed"
pass "$N IDs: increasing, arithmetic, gaps in [1, $INC] x $DELTA, all in $nleases disjoint leases"
