#!/usr/bin/env bash
# Fault test: Redis restarts, crashes and stalls (brief §5, §9).
#
# (a) Clean restart (SIGTERM, AOF kept): the daemon loses the connection,
#     reconnects by itself, validates a new epoch and discards the pool restored
#     from the AOF; the refilled pool holds none of the old IDs, only higher
#     ones, and is above low water within a few seconds (R). MySQL is down for
#     the first 2 s (a planned maintenance of both), so the discarded pool
#     waits empty for a fresh lease under the checks of two daemons: no page
#     (neither underflow nor low: it is being refilled, not run dry), and an
#     invalid row's invalid_config, whose state lived in the discarded meta,
#     is not announced again.
# (b) kill -9 of Redis while a consumer drains, down ~3 s (longer than the
#     500 ms command timeout), back with an older copy of its data (a failover
#     to a lagging replica): the daemon stays up, logs without flooding,
#     reconnects. The restored pool holds IDs already handed out and meta is
#     behind: the consumer resumes once the daemon reports the restart and
#     must never see an ID twice (fails without the run_id epoch check).
# (c) SIGSTOP of redis-server for ~2 s: the daemon notices the missing reply
#     ("no reply for"), does not wedge, recovers after SIGCONT and does not
#     take the stall for a restart.
# Throughout: one consumer's IDs strictly increasing; U, A, L over all.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

KEY=rr
add_app $KEY step=100 max_pool_size=2000 min_size_percent=50 increment_max=2
add_app rrbad step=100 max_pool_size=1000 # made invalid below: its meta has an epoch
LOW=$(low_water $KEY)
run_id() { redis_server_id; }
redis_down() { ! rcli PING >/dev/null 2>&1; }
# log_more NAME ERE N: the log has more than N matching lines.
log_more() { (($(log_count "$1" "$2") > $3)); }
# probe_lagging OUT: loads a copy of $DIR/redis.lagging in a throwaway
# redis-server; its pool to OUT, its meta next in LAGGING_NEXT.
probe_lagging() {
    probe "$DIR/redis.lagging" "$KEY" 5 "the lagging copy"
    mv "$DIR/probe.pool" "$1"
    LAGGING_NEXT=$PROBE_NEXT
}
LOST='redis: connection to .* lost'
RECOVERED='redis: connected to .*, recovered'
EPOCH="app=$KEY redis restart or failover detected"
REDIS_WARN='warn +redis: '

# stall-ms 60 s: (a)'s MySQL outage (2 s, and however long mariadbd takes to
# start again) stays within the grace a discarded pool gets before a page
start_daemon a --tick-ms 100 --lock-ttl-ms 500 --redis-timeout-ms 500 --instance rr-a --stall-ms 60000
wait_until 5 pool_ge $KEY "$LOW" || fail "pool never filled"
# a second daemon for (a): alerts are announced by one of them, once
start_daemon b --tick-ms 100 --lock-ttl-ms 500 --redis-timeout-ms 500 --instance rr-b --stall-ms 60000
INVALID_FIRING='alert invalid_config firing app=rrbad'
wait_until 5 pool_ge rrbad 800 || fail "rrbad never filled"
set_app rrbad step=-1
wait_until 5 eval '(($(log_count a "$INVALID_FIRING") + $(log_count b "$INVALID_FIRING") == 1))' ||
    fail "invalid_config of rrbad not announced once"

# ================================================= (a) clean restart, AOF ===
pop $KEY 3000 "$DIR/p0" --type monotonic --dump "$DIR/p0.txt" 2>/dev/null || fail "first pop"
wait_until 5 pool_ge $KEY "$LOW" || fail "pool not refilled"
sleep 0.3 # a refill in flight lands
rcli SET witness restored >/dev/null
pool_dump $KEY "$DIR/pre.txt"
old_run_id=$(run_id)
[[ -s $DIR/pre.txt ]] || fail "empty pool before the restart"
redis_stop
redis_down || fail "redis still answers after redis_stop"
wait_until 5 log_more a "$LOST" 0 || fail "daemon did not notice the connection loss"
# MySQL is down too for the first 2 s after Redis is back (a planned
# maintenance of both): the discarded pool waits empty for a fresh lease
# while the daemons check it (the exposure: each check saw an empty pool
# that had been healthy, and paged underflow)
mysql_stop
redis_start
t0=$(now_us)
wait_until 5 eval '[[ $(rcli EXISTS "$(pool_key $KEY)") == 0 ]] && [[ -z $(rcli HGET "$(meta_key $KEY)" epoch) ]]' ||
    fail "the restored pool of $KEY was not discarded while MySQL was down"
empty_from=$(now_us)
sleep 2 # the maintenance window: the pool stays empty, the daemons check it every 100 ms
assert_eq 0 "$(llen $KEY)" "$KEY's pool during the MySQL outage (the window)"
info "(a) the pool stayed empty $((($(now_us) - empty_from) / 1000)) ms while MySQL was down"
mysql_start
assert_eq restored "$(rcli GET witness)" "AOF restored the data set"
new_run_id=$(run_id)
assert_ne "$old_run_id" "$new_run_id" "run_id after the restart"
wait_until 5 log_more a "$RECOVERED" 0 || fail "daemon did not reconnect"
wait_until 3 eval 'log_more a "$EPOCH" 0 || log_more b "$EPOCH" 0' ||
    fail "no daemon detected the restart (run_id change)"
# (MySQL reconnects with backoff, at most 5 s apart)
wait_until 15 pool_ge $KEY "$LOW" || fail "R: pool not above low water after the restart"
info "(a) pool back above low water $((($(now_us) - t0) / 1000)) ms after Redis came back"
assert_alive a
pool_dump $KEY "$DIR/post.txt"
same=$(sort "$DIR/pre.txt" "$DIR/post.txt" | uniq -d | sed -n 1,5p)
[[ -z $same ]] || fail "IDs from the pool before the restart are served again: $same"
check_above "$DIR/pre.txt" -- "$DIR/post.txt"
assert_eq "$(redis_epoch)" "$(rcli HGET "$(meta_key $KEY)" epoch)" "meta epoch"
# A planned restart pages nobody: the discarded pool was refilled, not run
# dry (no underflow, no low), and the invalid row's alert, whose state lived
# in the discarded meta, is not announced again by either daemon.
sleep 1 # (a second of checks after the refill: an alert would have fired by now)
for d in a b; do
    assert_eq 0 "$(log_count $d "alert (underflow|low) firing app=$KEY")" "underflow/low alerts of $KEY in $d's log"
done
assert_eq 1 "$(($(log_count a "$INVALID_FIRING") + $(log_count b "$INVALID_FIRING")))" \
    "announcements of rrbad's invalid_config across the restart"
[[ $(rcli HGET "$(meta_key rrbad)" alert:invalid_config) == firing ]] ||
    fail "rrbad's invalid_config state did not survive the discard: $(rcli HGETALL "$(meta_key rrbad)" | tr '\n' ' ')"
stop_daemon b
[[ $(redis_epoch) == "$new_run_id":* ]] || fail "epoch $(redis_epoch) is not of the new process $new_run_id"
n=$(llen $KEY)
pop $KEY $((n + 2000)) "$DIR/p1" --type monotonic --dump "$DIR/p1.txt" 2>/dev/null ||
    fail "pop after the restart"
check_above "$DIR/p0.txt" -- "$DIR/p1.txt"
pass "(a) clean Redis restart: restored pool discarded, refilled from a fresh lease; no underflow or low page, the invalid row's alert not announced again"

# ============================= (b) crash, lagging data, down 3 s ===
# Models a failover to a replica that lagged behind: Redis is killed -9 and
# comes back (after ~3 s) with a copy of its data taken earlier, whose pool
# holds IDs the consumer has popped since and whose meta is behind.
consumer_start c $KEY 500 0.02
wait_until 15 consumer_ge c 5000 || fail "consumer starved"
cp -a "$DIR/redis" "$DIR/redis.lagging"
n=$(consumer_count c)
wait_until 15 consumer_ge c $((n + 5000)) || fail "consumer starved"
n_lost=$(log_count a "$LOST")
n_rec=$(log_count a "$RECOVERED")
n_epoch=$(log_count a "$EPOCH")
n_cannot=$(log_count a "$REDIS_WARN")
redis_kill
t_down=$(now_us)
redis_down || fail "redis still answers after kill -9"
# No pop may reach the restarted Redis before the daemon discards its pool.
consumer_stop c
wait_until 3 log_more a "$LOST" "$n_lost" || fail "daemon did not notice the crash"
sleep "$(awk -v t=$((($(now_us) - t_down) / 1000)) 'BEGIN { printf "%.3f", t < 3000 ? (3000 - t) / 1000 : 0 }')"
assert_alive a
# Logged, but not flooded: the loss once, retries throttled.
cannot=$(($(log_count a "$REDIS_WARN") - n_cannot))
assert_le "$cannot" 3 "redis warnings during a 3 s outage (not a flood)"
assert_ge "$cannot" 1 "redis warnings during a 3 s outage"
# What the lagging copy holds (read on a throwaway server, as the daemon
# will race us for the real one): meta behind, maybe IDs already handed out.
consumer_collect c
probe_lagging "$DIR/lagging_pool.txt"
handed=$(max_id "$DIR/c.txt")
stale=$(sort "$DIR/lagging_pool.txt" "$DIR/c.txt" | uniq -d | wc -l)
info "(b) lagging copy: meta next $LAGGING_NEXT (IDs handed out up to $handed), pool of \
$(grep -c . "$DIR/lagging_pool.txt") IDs, $stale of them already handed out"
if ! [[ $LAGGING_NEXT =~ ^[0-9]+$ ]] || ((LAGGING_NEXT > handed)); then
    fail "the lagging copy's meta is not behind: the scenario did not happen"
fi
rm -rf "$DIR/redis"
mv "$DIR/redis.lagging" "$DIR/redis"
redis_start
t0=$(now_us)
wait_until 7 log_more a "$RECOVERED" "$n_rec" || fail "daemon did not reconnect after the crash"
wait_until 3 log_more a "$EPOCH" "$n_epoch" || fail "daemon did not detect the restart after kill -9"
info "(b) reconnected and discarded the restored pool $((($(now_us) - t0) / 1000)) ms after Redis came back"
cp "$DIR/c.txt" "$DIR/before_b.txt"
mark=$(consumer_chunks c)
consumer_start c $KEY 500 0.02
n=$(consumer_count c)
wait_until 15 consumer_ge c $((n + 5000)) || fail "consumer starved after the crash"
consumer_stop c
consumer_since c "$mark" "$DIR/after_b.txt"
same=$(sort "$DIR/before_b.txt" "$DIR/after_b.txt" | uniq -d | sed -n 1,5p)
[[ -z $same ]] || fail "IDs handed out before the crash were handed out again: $same"
check_above "$DIR/before_b.txt" -- "$DIR/after_b.txt"
wait_until 3 pool_ge $KEY "$LOW" || fail "R: pool not above low water after the crash"
assert_alive a
pass "(b) Redis killed -9, down ~3 s, back with lagging data: stale pool discarded, no duplicate"

# ================================================== (c) SIGSTOP for ~2 s ===
consumer_start c $KEY 500 0.02
n=$(consumer_count c)
wait_until 15 consumer_ge c $((n + 3000)) || fail "consumer starved"
n_rec=$(log_count a "$RECOVERED")
n_epoch=$(log_count a "$EPOCH")
n_noreply=$(log_count a 'no reply for')
rpid=$(redis_server_pid)
kill -STOP "$rpid"
sleep 2
assert_alive a
kill -CONT "$rpid"
t0=$(now_us)
log_more a 'no reply for' "$n_noreply" || fail "daemon did not detect the stalled Redis"
wait_until 5 log_more a "$RECOVERED" "$n_rec" || fail "daemon did not reconnect after SIGCONT"
n=$(consumer_count c)
wait_until 15 consumer_ge c $((n + 3000)) || fail "consumer starved after SIGCONT"
consumer_stop c
wait_until 3 pool_ge $KEY "$LOW" || fail "R: pool not above low water after the stall"
info "(c) recovered and refilled $((($(now_us) - t0) / 1000)) ms after SIGCONT"
assert_eq "$n_epoch" "$(log_count a "$EPOCH")" "restart detections after a mere stall"
assert_alive a
stop_daemon a
pool_dump $KEY "$DIR/pool.txt"
pass "(c) Redis stalled ~2 s: timeout detected, recovered"

# ================================================================ checks ===
check_increasing "$DIR/c.txt" "consumer"
check_increasing "$DIR/pool.txt" "final pool"
check_above "$DIR/p0.txt" -- "$DIR/p1.txt"
check_above "$DIR/p1.txt" -- "$DIR/c.txt"
check_above "$DIR/c.txt" -- "$DIR/pool.txt"
check_ids $KEY "$DIR/p0.txt" "$DIR/p1.txt" "$DIR/c.txt" "$DIR/pool.txt"
pass "U, M, A, L over $(cat "$DIR/p0.txt" "$DIR/p1.txt" "$DIR/c.txt" | wc -l) popped IDs"

# ===================================== (d) failover in place (replid) ===
# The same Redis process is demoted to a replica and promoted again, as a
# failover behind a fixed address would look: run_id stays, master_replid
# changes. The daemon must stop writing while it is a replica, then treat
# the promoted server as a new epoch and discard the pool.
start_daemon a --tick-ms 100 --lock-ttl-ms 500 --redis-timeout-ms 500 --instance rr-a
wait_until 5 pool_ge $KEY "$LOW" || fail "pool not refilled after the restart of a"
pop $KEY 2000 "$DIR/d0" --type monotonic --dump "$DIR/d0.txt" 2>/dev/null || fail "pop before (d)"
wait_until 5 pool_ge $KEY "$LOW" || fail "pool not refilled before (d)"
pool_dump $KEY "$DIR/d_pre.txt"
n_epoch=$(log_count a "$EPOCH")
old_epoch=$(redis_epoch)
old_id=$(redis_server_id)
# A master on a port nobody listens on: the server becomes a replica, keeps
# its data and refuses writes.
rcli REPLICAOF 127.0.0.1 "$(free_port)" >/dev/null
wait_until 5 log_has a 'failover check: the server is a replica' ||
    fail "daemon did not notice that Redis became a replica"
rcli REPLICAOF NO ONE >/dev/null
t0=$(now_us)
new_id=$(redis_server_id)
assert_ne "$old_id" "$new_id" "master_replid after demotion and promotion"
assert_eq "${old_id%%:*}" "${new_id%%:*}" "run_id (same process)"
wait_until 5 log_more a "$EPOCH" "$n_epoch" || fail "daemon did not discard the pool of the old epoch"
wait_until 5 pool_ge $KEY "$LOW" || fail "R: pool not above low water after the promotion"
info "(d) pool refilled $((($(now_us) - t0) / 1000)) ms after the promotion"
new_epoch=$(redis_epoch)
assert_ne "$old_epoch" "$new_epoch" "epoch after demotion and promotion"
[[ $new_epoch == "$new_id":* ]] || fail "epoch $new_epoch is not of the promoted server $new_id"
assert_eq "$new_epoch" "$(rcli HGET "$(meta_key $KEY)" epoch)" "meta epoch after (d)"
pool_dump $KEY "$DIR/d_post.txt"
same=$(sort "$DIR/d_pre.txt" "$DIR/d_post.txt" | uniq -d | sed -n 1,5p)
[[ -z $same ]] || fail "IDs of the old epoch's pool are served again: $same"
check_above "$DIR/d_pre.txt" -- "$DIR/d_post.txt"
stop_daemon a
pass "(d) demoted and promoted in place: master_replid change detected, pool discarded"
