#!/usr/bin/env bash
# Chaos 24 sentinel_mysql_down: the Redis primary of a Sentinel set is
# killed (kill -9) under load while MySQL is down (issue 20: a failover
# while MySQL is unreachable).
#
# As chaos 19 (test/chaos/lib.sh sentinel_scenario: two refilling daemons
# and an issuer on the Sentinel URL, consumers of every take client kind
# and LPOP, all following the sentinels), but each round's application is
# a trend one (sm1, sm2, ...), for which every refilling daemon keeps a
# failover reserve (failover-reserve auto: trend behind Sentinel), and a
# monotonic application `control` (no reserve, no consumers) sits beside
# them. Each round, while the consumers pop:
#   1. MySQL is stopped; the daemons' reservations fail;
#   2. the primary is killed (-9): T_FROM; the sentinels promote a replica,
#      the daemons validate it and discard the inherited pools;
#   3. with MySQL still down, the round's pool must be back above low
#      water on the new primary (R): refilled from a reserve (the daemons
#      say so), never from what the new primary's meta claimed; the
#      control's pool there stays empty, its reservations failing: the
#      positive control (MySQL was down, and without a reserve nothing is
#      refilled; `control` is only refilled once MySQL is back);
#   4. MySQL and the old primary (from its AOF, as a replica) come back.
# Checked: as chaos 19 (U A L over everything, exposed_take 0, takes
# inside every window, first take within Sentinel's detection + 1 s);
# every ID served from a reserve lies inside an application_lease row
# (idpool-check's L).
# Evidence that each fault landed: MySQL was down from before the kill to
# after the recovery, the control stayed empty meanwhile, a majority of
# sentinels named another primary, the daemons validated it, discarded the
# inherited pool and refilled from a reserve.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
sentinel_setup
ROUND_APP_TYPE=2 # trend: the rounds' pools keep failover reserves
add_app control step=1000 max_pool_size=30000 min_size_percent=50 max_size_per_second=1000000

# MySQL down before the fault: every reservation from now on fails.
sentinel_prepare() {
    local app=$3
    pop_past "$app"
    wait_until 20 pool_ge control 15000 || failure "control never filled"
    (($(logs_count "app=$app keeps \\[") > 0)) || failure "$app: no daemon keeps a failover reserve"
    mysql_stop
    T_MYSQL_DOWN=$(now_ns)
    USED0=$(logs_count "app=$app MySQL cannot lease: refilling from this daemon's failover reserve")
    FAILS0=$(logs_count "app=control cannot reserve a lease")
}
sentinel_fault() {
    primary_kill9 "$1" "$2"
    FAULT_NOTE="mysql_down+kill9:$2"
}
# The harness waited for the round's pool above low water on the new
# primary (recovered): MySQL is still down. Then MySQL and the old primary
# come back.
sentinel_after() {
    local used fails control mysql_gone=0 st
    used=$(($(logs_count "app=$3 MySQL cannot lease: refilling from this daemon's failover reserve") - USED0))
    fails=$(($(logs_count "app=control cannot reserve a lease") - FAILS0))
    control=$(redis-cli -p "$REDIS_PORT" LLEN "$(pool_key control)")
    st=$("$SERVERS" status "$DIR" 2>/dev/null) || true # 3: the old primary is down too
    [[ $st == *"mysql: stopped"* ]] && mysql_gone=1
    info "$3: refilled from a reserve $used time(s) with MySQL down" \
        "$((($(now_ns) - T_MYSQL_DOWN) / 1000000)) ms; control: $control IDs, $fails failed reservations"
    expect "((used > 0))" "$3: no daemon refilled it from a failover reserve"
    expect "((control == 0))" "control was refilled on the new primary while MySQL was down ($control IDs)"
    expect "((fails > 0))" "control's reservations did not fail (MySQL was not down?)"
    expect "(($mysql_gone == 1))" "MySQL was up before the round's pool recovered"
    FAULT_NOTE+=",reserve_refills=$used,control_fails=$fails"
    mysql_start
    "$SERVERS" start "$DIR" "$2" >/dev/null || fail "could not start $2 again"
    wait_until 30 eval "[[ \$(redis-cli -p $1 ROLE | head -n 1) == slave ]]" ||
        failure "$2 ($1) was not turned into a replica"
    wait_until 30 pool_ge control 15000 || failure "R: control not refilled after MySQL came back"
}
sentinel_scenario sm optional
