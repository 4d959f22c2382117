#!/usr/bin/env bash
# The end of the ID space (brief §3; issue 13, item 3). A row at the largest
# start_offset the validation accepts (room for exactly one full pool below
# 2^63) is served; its first lease takes current_offset to 2^63-1. That is
# a state of the application, not a config error: the row stays valid and
# served, idpool_take keeps handing out what the pool holds (never
# IDPOOL_NOAPP), id_space_exhaustion fires (invalid_config never does), and
# once the pool is empty the daemon says that the ID space is exhausted.
# The warning names the offset that caused it (start_offset first, then
# current_offset).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

MAX=9223372036854775807
SPAN=1001 # max_pool_size 1000, delta 1, increment_max 1: 1000 + 1
START=$((MAX - SPAN))
add_app end max_pool_size=1000 step=100 min_size_percent=50 max_size_per_times=100 \
    start_offset=$START
take() { rcli FCALL idpool_take 2 "$(pool_key end)" "$(meta_key end)" "$1" 2>&1 | sed '/^$/d'; }

start_daemon a --tick-ms 50 --reload-ms 200 --alert-resolve-ms 300
wait_until 5 pool_ge end 900 || fail "the row at the largest start_offset was not served"
wait_until 3 eval '[[ $(app_col end current_offset) == $MAX ]]' ||
    fail "the first lease did not take current_offset to 2^63-1 ($(app_col end current_offset))"
wait_until 3 log_has a "alert id_space_exhaustion firing app=end:" || fail "id_space_exhaustion did not fire"
sleep 0.5 # several reloads with current_offset = 2^63-1
log_has a "application 'end' .*not served" && fail "the row was flagged invalid: $(grep "'end'" "$DIR/a.log" | tail -n 1)"
log_has a "alert invalid_config firing app=end" && fail "invalid_config fired"
log_has a "app=end ID space nearly exhausted: start_offset $START " ||
    fail "no warning naming start_offset"
pass "current_offset at 2^63-1 after the first lease: still valid and served, id_space_exhaustion fires"

# Everything the pool holds is handed out, then the daemon says why no more come.
: >"$DIR/ids.txt"
for _ in $(seq 12); do
    out=$(take 100)
    [[ $out == IDPOOL_NOAPP* || $out == ERR* ]] && fail "idpool_take refused: $out"
    [[ -n $out ]] && printf '%s\n' "$out" >>"$DIR/ids.txt"
done
n=$(grep -c . "$DIR/ids.txt")
((n >= 900 && n <= SPAN)) || fail "took $n IDs, expected the pool's 900..$SPAN"
python3 -c 'import sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
bad = [i for i in map(int, open(sys.argv[3]).read().split()) if not lo <= i < hi]
sys.exit("an ID outside [start_offset, 2^63-1): %s" % bad[:3] if bad else 0)' "$START" "$MAX" "$DIR/ids.txt" ||
    fail "IDs outside the ID space"
[[ $(sort -u "$DIR/ids.txt" | grep -c .) == "$n" ]] || fail "an ID was taken twice"
wait_until 5 log_has a "app=end .*ID space exhausted" || fail "no log line saying the ID space is exhausted"
log_has a "application 'end' .*not served" && fail "the row was flagged invalid once empty"
[[ $(take 1) != IDPOOL_NOAPP* ]] || fail "idpool_take answers IDPOOL_NOAPP for an exhausted application"
daemon_alive a || fail "daemon died"
stop_daemon a
pass "the last $n IDs below 2^63 are handed out, each once; then 'ID space exhausted', never IDPOOL_NOAPP"
pass "idspace"
