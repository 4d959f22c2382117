#!/usr/bin/env bash
# Chaos 08 partition: Redis stalls and network partitions (design brief §5:
# "An outage of Redis or MySQL never crashes the daemon; it recovers by
# itself"; README "Outages").
#
# The whole scenario runs inside a network namespace of its own (created
# here, deleted at the end): servers, daemons and consumers talk over that
# namespace's loopback, where nftables can cut one TCP port without touching
# the host. Two daemons, a monotonic application, two recorded consumers
# popping throughout. In turn, each longer than the timeouts involved:
#   stop   redis-server SIGSTOPped for 2.5 s (the connections stay up, nothing
#          answers: --redis-timeout-ms 1000 must fire), then SIGCONT;
#   redis  every packet to and from the Redis port dropped for 3 s (SYNs
#          too: reconnects time out), then the rule is removed;
#   mysql  every packet to and from the MySQL port dropped for 5 s (longer
#          than --mysql-timeout-ms 2000; reloads every second hit it).
# Evidence that each fault landed: the daemons' /healthz turned redis_up (or
# mysql_up) false during it, the nftables counters dropped packets, and the
# logs show the lost connection. After each, both daemons must report
# healthy again within 15 s (nothing wedged), their reconnect must be logged,
# the pool must be back above low water (R) and a Redis stall must not be
# taken for a restart (no pool discarded); after the three, every alert that
# fired meanwhile (the small pool may run dry: underflow) must resolve, as
# the daemons report it (the alert channel is no witness here: a subscriber
# cut off by the partition misses what is published meanwhile). Then U M A L
# over everything popped.
# shellcheck source-path=SCRIPTDIR

# Outside a namespace: run this script inside one of its own (netns.sh).
# shellcheck source=netns.sh
source "$(dirname "$0")/netns.sh"
chaos_netns 08 partition "$0" "$@"

# ---- inside the namespace.
source "$(dirname "$0")/lib.sh"
chaos_setup
rpid=''
# A Redis left stopped by an abort would hold up the servers' shutdown.
s08_exit() {
    local rc=$?
    [[ -z $rpid ]] || kill -CONT "$rpid" 2>/dev/null
    set +e # under -e the failing (exit) would end the trap before chaos_exit cleans up
    (exit "$rc")
    chaos_exit
}
trap s08_exit EXIT
info "network namespace $CHAOS_NETNS"

APP=pt
add_app $APP step=1000 max_pool_size=30000 min_size_percent=50 increment_max=3
app_params $APP
chaos_daemon a
chaos_daemon b
wait_until 20 pool_ge $APP "$P_LOW" || fail "pool never filled"
consumers_start $APP 2

netns_nft # partition PORT, heal, dropped (netns.sh)
# health NAME FIELD: redis_up / mysql_up from the daemon's /healthz (True/False).
health() { http_get "$1" /healthz | json_field "$2"; }
both_health() { [[ $(health a "$1") == "$2" && $(health b "$1") == "$2" ]]; }
any_health() { [[ $(health a "$1") == "$2" || $(health b "$1") == "$2" ]]; }
# logs_more ERE N: the daemons' logs together have more than N lines matching ERE.
logs_more() { (($(logs_count "$1") > $2)); }
RESTARTS='redis restart or failover detected'

popped_wait $APP $((CHAOS_IDS / 6)) "consumers starved before the faults"

for ((round = 1; round <= CHAOS_ROUNDS; round++)); do
    # ------------------------------------------------ Redis SIGSTOP 2.5 s ---
    n_lost=$(logs_count 'redis: connection to .* lost|handshake timed out')
    n_rec=$(logs_count 'redis: connected to .*, recovered')
    n_restart=$(logs_count "$RESTARTS")
    rpid=$(redis_server_pid)
    kill -STOP "$rpid"
    t_stop=$(now_ns)
    noticed=0
    wait_until 2.4 any_health redis_up False && noticed=1
    sleep_until "$t_stop" 2500
    kill -CONT "$rpid"
    rpid=""
    t0=$(now_ns)
    lost=$(($(logs_count 'redis: connection to .* lost|handshake timed out') - n_lost))
    fault_landed "stop:lost=$lost" "((lost > 0 && noticed))"
    recovered $APP "$t0"
    wait_until 15 both_health redis_up True ||
        failure "round $round: a daemon still reports Redis down 15 s after SIGCONT"
    wait_until 10 logs_more 'redis: connected to .*, recovered' "$n_rec" ||
        failure "round $round: no Redis reconnect logged after SIGCONT"
    expect "(($(logs_count "$RESTARTS") == n_restart))" \
        "round $round: a Redis stall was taken for a restart (pool discarded)"

    # ---------------------------------------- Redis port partitioned 3 s ---
    n_lost=$(logs_count 'redis: connection to .* lost')
    n_rec=$(logs_count 'redis: connected to .*, recovered')
    d0=$(dropped)
    partition "$REDIS_PORT"
    t_cut=$(now_ns)
    noticed=0
    wait_until 2.9 both_health redis_up False && noticed=1
    sleep_until "$t_cut" 3000
    n_drop=$(($(dropped) - d0))
    heal
    t0=$(now_ns)
    lost=$(($(logs_count 'redis: connection to .* lost') - n_lost))
    fault_landed "redis:dropped=$n_drop,lost=$lost" "((n_drop > 0 && lost >= 2 && noticed))"
    recovered $APP "$t0"
    wait_until 15 both_health redis_up True ||
        failure "round $round: a daemon still reports Redis down 15 s after the partition healed"
    wait_until 10 logs_more 'redis: connected to .*, recovered' $((n_rec + 1)) ||
        failure "round $round: not both daemons logged their Redis reconnect"
    expect "(($(logs_count "$RESTARTS") == n_restart))" \
        "round $round: a partition was taken for a Redis restart (pool discarded)"

    # ---------------------------------------- MySQL port partitioned 5 s ---
    n_conn=$(logs_count 'mysql: connected to')
    d0=$(dropped)
    partition "$MYSQL_PORT"
    t_cut=$(now_ns)
    noticed=0
    wait_until 4.9 any_health mysql_up False && noticed=1
    sleep_until "$t_cut" 5000
    n_drop=$(($(dropped) - d0))
    heal
    t0=$(now_ns)
    fault_landed "mysql:dropped=$n_drop" "((n_drop > 0 && noticed))"
    recovered $APP "$t0"
    wait_until 15 both_health mysql_up True ||
        failure "round $round: a daemon still reports MySQL down 15 s after the partition healed"
    reconn=$(($(logs_count 'mysql: connected to') - n_conn))
    expect "((reconn >= 1))" "round $round: no MySQL reconnect logged after the partition"
    wait_until 10 popped_ge $APP $(($(popped $APP) + 3000)) ||
        failure "round $round: consumers do not get IDs after the partitions"
    # R: whatever fired meanwhile (underflow, low) resolves by itself.
    wait_until 20 alerts_clear $APP ||
        failure "round $round: alerts still firing 20 s after the partitions: a=$(alerts_firing a $APP) b=$(alerts_firing b $APP)"
done

consumers_wait $APP "$CHAOS_IDS"
consumers_stop $APP
daemons_stop
drain $APP
check_app $APP
row
