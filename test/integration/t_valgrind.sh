#!/usr/bin/env bash
# valgrind on the whole life of idpoold: start, fill two pools (one trend),
# a refill under consumption, a SIGHUP reload, a Redis reconnect, SIGTERM.
# No memory error and no leak may be reported, and the exit status is 0.
# (Suite 'valgrind': runs on the normal build only; ASan builds can't run
# under valgrind.)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
command -v valgrind >/dev/null || skip "valgrind is not installed"
setup

add_app vg_mono max_size_per_second=100 increment_max=3
add_app vg_trend increasing_type=2 step=500 max_size_per_second=100

IDPOOLD_REAL=$IDPOOLD
IDPOOLD=$DIR/idpoold-valgrind
cat >"$IDPOOLD" <<SH
#!/bin/sh
exec valgrind --quiet --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible \
    "$IDPOOLD_REAL" "\$@"
SH
chmod +x "$IDPOOLD"
start_daemon vg --tick-ms 100 --reload-ms 1000 --redis-timeout-ms 3000

# valgrind makes everything ~20x slower: generous, bounded waits.
wait_until 60 pool_ge vg_mono 6000 || fail "vg_mono pool not filled"
wait_until 60 pool_ge vg_trend 6000 || fail "vg_trend pool not filled"
pop vg_mono 3000 "$DIR/ids" --batch 500 --type monotonic
wait_until 30 pool_ge vg_mono 6000 || fail "vg_mono not refilled"
signal_daemon vg HUP
wait_until 30 log_has vg 'SIGHUP: reloading' || fail "no reload after SIGHUP"
rcli CLIENT KILL TYPE normal SKIPME yes >/dev/null
wait_until 30 log_has vg 'redis: connected.*recovered' || fail "no reconnect"
stop_daemon vg 60
pass "valgrind: no errors, no leaks, exit 0"
