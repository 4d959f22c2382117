#!/usr/bin/env bash
# The failover reserve (issue 20): a daemon keeps a range of each pool's ID
# space that it reserved in MySQL and never wrote to Redis, and refills the
# pool from it once when MySQL cannot lease. On one Redis the fault is
# FLUSHALL (every pool and meta gone, as after a failover's sweep) while
# MySQL is stopped.
#
# (1) --failover-reserve trend: the trend application rt holds a reserve
#     (/v1/apps failover_reserve, idpool_failover_reserve_ids) inside one of
#     its application_lease rows, the monotonic rm none. MySQL stopped,
#     FLUSHALL: rt is refilled from the reserve (counted, logged), rm stays
#     empty (the positive control: MySQL was down for both, and without a
#     reserve nothing refills); every ID popped from rt lies in the reserve.
#     MySQL back: rm refilled, rt keeps a new reserve.
# (2) --failover-reserve all: after the same fault the monotonic rm2 is
#     refilled from its reserve, strictly increasing.
# Over everything popped: no ID twice, every ID inside one lease row (L).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

HTTP_PORT=$(free_port)
apps() { curl -sS --max-time 5 "http://127.0.0.1:$HTTP_PORT/v1/apps"; }
metric() { # metric NAME APP: its value on /metrics
    curl -sS --max-time 5 "http://127.0.0.1:$HTTP_PORT/metrics" |
        awk -v m="$1{app=\"$2\"}" '$1 == m { print $2 }'
}
# reserve APP: "lo hi" of the reserve /v1/apps shows, or "none"
reserve() {
    apps | "$PYTHON" -c '
import json, sys
r = [a for a in json.load(sys.stdin) if a["key"] == sys.argv[1]][0]["failover_reserve"]
print("none" if r is None else r["lo"] + " " + r["hi"])' "$1"
}
has_reserve() { [[ $(reserve "$1") =~ ^[0-9]+\ [0-9]+$ ]]; }
# in_lease APP LO HI: [LO, HI) lies inside one application_lease row of APP
in_lease() {
    [[ $(sql "SELECT COUNT(*) FROM application_lease WHERE application_id = $(app_col "$1" id)
              AND lo <= $2 AND hi >= $3") == 1 ]]
}
# ids_within LOG LO HI: every ID of the pop log is in [LO, HI)
ids_within() {
    ids_text "$1" | awk -v lo="$2" -v hi="$3" '$1 < lo || $1 >= hi { bad++ } END { exit bad > 0 }'
}

common=(step=1000 max_pool_size=20000 min_size_percent=50 max_size_per_times=1000
    max_size_per_second=100000000)
add_app rt increasing_type=2 "${common[@]}"
add_app rm increasing_type=1 "${common[@]}"

# --- (1) trend ------------------------------------------------------------------
start_daemon a --failover-reserve trend --tick-ms 20 --http "127.0.0.1:$HTTP_PORT"
wait_until 15 pool_ge rt 20000 || fail "rt's pool did not fill"
wait_until 15 pool_ge rm 20000 || fail "rm's pool did not fill"
wait_until 5 has_reserve rt || fail "rt holds no failover reserve: $(apps)"
read -r lo hi <<<"$(reserve rt)"
assert_eq none "$(reserve rm)" "rm's reserve (monotonic, failover-reserve trend)"
in_lease rt "$lo" "$hi" || fail "rt's reserve [$lo, $hi) is not inside one of its lease rows: $(leases rt)"
assert_eq $((hi - lo)) "$(metric idpool_failover_reserve_ids rt)" "idpool_failover_reserve_ids of rt"
pass "trend: rt keeps [$lo, $hi) as its reserve, inside one of its lease rows; monotonic rm keeps none"

pop rt 5000 "$DIR/before" || fail "popping rt before the fault"
mysql_stop
rcli FLUSHALL >/dev/null
info "MySQL stopped, Redis flushed"
wait_until 10 pool_ge rt 1000 || fail "rt was not refilled from its reserve: $(tail -n 5 "$(daemon_log a)")"
log_has a "app=rt MySQL cannot lease: refilling from this daemon's failover reserve \\[$lo, $hi\\)" ||
    fail "the daemon did not say it used rt's reserve"
assert_eq 1 "$(metric idpool_failover_reserve_used_total rt)" "idpool_failover_reserve_used_total of rt"
# the positive control: MySQL is down for rm too, which has no reserve
wait_until 10 log_has a "app=rm cannot reserve a lease" || fail "rm did not try to lease (MySQL was not down?)"
assert_eq 0 "$(llen rm)" "rm's pool while MySQL is down"
n=$(llen rt)
pop rt "$n" "$DIR/reserve" || fail "popping rt's reserve"
ids_within "$DIR/reserve.0.bin" "$lo" "$hi" || fail "an ID of rt after the flush is outside its reserve [$lo, $hi)"
assert_eq none "$(reserve rt)" "rt's reserve after it was used"
pass "MySQL down and Redis flushed: rt refilled from its reserve ($n IDs, all inside [$lo, $hi)); rm, without one, stayed empty"

mysql_start
wait_until 20 pool_ge rm 20000 || fail "rm was not refilled after MySQL came back"
wait_until 20 pool_ge rt 10000 || fail "rt was not refilled after MySQL came back"
wait_until 10 has_reserve rt || fail "rt keeps no new reserve after MySQL came back"
read -r lo2 hi2 <<<"$(reserve rt)"
((lo2 >= hi)) || fail "rt's new reserve [$lo2, $hi2) is not above the old one"
pop rt 5000 "$DIR/after" || fail "popping rt after MySQL came back"
pass "MySQL back: rm refilled, rt keeps a new reserve [$lo2, $hi2)"
stop_daemon a

# --- (2) all: a monotonic pool that starts over ---------------------------------------
add_app rm2 increasing_type=1 "${common[@]}"
start_daemon b --failover-reserve all --tick-ms 20 --http "127.0.0.1:$HTTP_PORT"
wait_until 15 pool_ge rm2 20000 || fail "rm2's pool did not fill"
wait_until 5 has_reserve rm2 || fail "rm2 holds no reserve under failover-reserve all: $(apps)"
read -r mlo mhi <<<"$(reserve rm2)"
pop rm2 5000 "$DIR/m.before" --type monotonic || fail "popping rm2 before the fault"
mysql_stop
rcli FLUSHALL >/dev/null
wait_until 10 pool_ge rm2 1000 || fail "rm2 was not refilled from its reserve"
n=$(llen rm2)
pop rm2 "$n" "$DIR/m.reserve" --type monotonic || fail "rm2's refill from the reserve is not strictly increasing"
ids_within "$DIR/m.reserve.0.bin" "$mlo" "$mhi" || fail "an ID of rm2 is outside its reserve [$mlo, $mhi)"
mysql_start
pass "failover-reserve all: monotonic rm2 refilled from [$mlo, $mhi) after the flush, strictly increasing"

# --- over everything --------------------------------------------------------------
leases rt | tr '\t' ' ' >"$DIR/rt.leases"
check_pops "$DIR/rt.check" --leases "$DIR/rt.leases" "$DIR"/before.0.bin "$DIR"/reserve.0.bin \
    "$DIR"/after.0.bin || fail "idpool-check over rt's pops"
leases rm2 | tr '\t' ' ' >"$DIR/rm2.leases"
check_pops "$DIR/all.check" --leases "$DIR/rm2.leases" "$DIR"/m.before.0.bin "$DIR"/m.reserve.0.bin ||
    fail "idpool-check over rm2's pops"
tail -n 1 "$DIR/rt.check"
tail -n 1 "$DIR/all.check"
pass "no ID twice, every ID inside one lease row"
