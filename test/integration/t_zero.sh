#!/usr/bin/env bash
# ID 0 is never handed out (issue 18, item 6): MySQL AUTO_INCREMENT reads an
# inserted 0 as "generate one" and most ORMs read 0 as "not set".
#   - a row inserted without start_offset gets the schema's default, 1, and
#     so does `idpoolctl apps add` without --start: both start at 1;
#   - an explicit start_offset 0 still never yields 0: monotonic with
#     delta 1 starts at 1, with delta 5 and remainder 0 at 5 (the next ID
#     with that remainder), trend blocks start at 1.
# Each pool's first IDs are taken and checked by idpool-check against the
# lower bound 1 (A: every ID >= max(start_offset, 1)) and the leases (L).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"

ROW=(step=100 max_pool_size=1000 min_size_percent=50)
add_app z_raw "${ROW[@]}"
"$IDPOOLCTL" apps add z_ctl --step 100 --max-pool 1000 --min-percent 50 >"$DIR/add.out" ||
    fail "apps add z_ctl: $(cat "$DIR/add.out")"
add_app z_zero "${ROW[@]}" start_offset=0
add_app z_d5 "${ROW[@]}" start_offset=0 delta=5 remainder=0
add_app z_trend "${ROW[@]}" start_offset=0 increasing_type=2
assert_eq 1 "$(app_col z_raw start_offset)" "start_offset of a row inserted without one"
assert_eq 1 "$(app_col z_ctl start_offset)" "start_offset written by apps add without --start"

start_daemon a --tick-ms 50
for k in z_raw z_ctl z_zero z_d5 z_trend; do
    wait_until 10 pool_ge $k 500 || fail "$k: pool never filled"
done
# The head of each pool: what the first LPOP gets.
declare -A want=([z_raw]=1 [z_ctl]=1 [z_zero]=1 [z_d5]=5)
for k in "${!want[@]}"; do
    assert_eq "${want[$k]}" "$(rcli LINDEX "$(pool_key "$k")" 0)" "$k: first ID"
done
for k in z_raw z_ctl z_zero z_d5 z_trend; do
    pop "$k" 500 "$DIR/$k" || fail "$k: taking IDs"
    lease_dump $k "$DIR/leases.$k.txt"
    check_pops "$DIR/check.$k" --start-offset 1 --delta "$(app_col $k delta)" --remainder 0 \
        --leases "$DIR/leases.$k.txt" "$DIR/$k.0.bin" || fail "$k: U/A/L with every ID >= 1"
done
assert_eq 1 "$(ids_text "$DIR/z_trend.0.bin" | sort -n | head -n 1)" \
    "z_trend: lowest ID of the first block"
stop_daemon a
pass "no ID 0: start_offset defaults to 1 (schema, apps add); start_offset 0 starts at 1, or at delta (5)"
