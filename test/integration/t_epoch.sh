#!/usr/bin/env bash
# The epoch rule (brief §12; issue "No duplicate ever, round 3", findings 2,
# 3 and 4): no read-only or status call validates a server; validation is one
# explicit call, made after the daemon confirmed on that connection that the
# server is a primary; an epoch is new whenever the function library's state
# is new, so metas written before never match again.
#
# (2) A rollback inside one Redis process: DEBUG RELOAD NOSAVE with an older
#     dump brings back a pool of which 500 IDs were handed out, with run_id
#     and master_replid unchanged. A status call sent by hand with the old
#     epoch (as a daemon's next check would) validates nothing: takes are
#     refused until the daemon validated a new epoch and the sweep discarded
#     the pool; no handed-out ID is taken again. Positive control: the
#     reloaded pool held the 500 IDs, the server is the same process, and a
#     take inside the window was refused.
# (3) A failback through a full resync: A fails over to its replica B, B's
#     daemon validates B and refills; A becomes B's replica (full resync: its
#     library state is new), then lags behind B while 300 IDs are taken from
#     B. A status call by hand on A (a replica) validates nothing, and
#     idpool_validate is refused there; promoted back, A refuses takes until
#     its daemon validated a new epoch and discarded B's pools: none of the
#     300 is taken again from A. Positive control: A's pool held all 300.
# (4) idpool_take with the pool and meta of different applications, or a
#     typo'd pool key: IDPOOL_BADARG, nothing popped, no underflow counted.
# (5) A failback through a partial resync: A (validated) fails over to B and
#     is demoted at once, so that it resyncs partially and keeps its
#     library's state: a replica holding A's epoch (the positive control).
#     Promoted back before B's sweep, it would serve pools written under
#     that epoch. The first daemon to validate the promoted B loads the
#     library again; the load replicates and A forgets its epoch: promoted
#     back, A refuses takes until a daemon validated it.
# (6) Two daemons on one promoted server: the library is reset once. With
#     B's writes held (CLIENT PAUSE WRITE) while it is promoted, both
#     daemons find no epoch of B and try to reset it (the positive control:
#     the second says another daemon did it first); one reset lands, both
#     validate into one epoch (a second reset would wipe the first's epoch,
#     its pushes refused until it noticed).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

KEY=ep
add_app $KEY step=100 max_pool_size=2000 min_size_percent=50 max_size_per_times=1000 \
    max_size_per_second=100000000
LOW=$(low_water $KEY)
POOL=$(pool_key $KEY) META=$(meta_key $KEY)

# take_on PORT COUNT: idpool_take on the Redis at PORT (IDs, or the error line).
take_on() { redis-cli -p "$1" FCALL idpool_take 2 "$POOL" "$META" "$2" 2>&1 | sed '/^$/d'; }
# meta_epoch PORT: the epoch meta was written under (run_id before library version 5).
meta_epoch() {
    local e
    e=$(redis-cli -p "$1" HGET "$META" epoch)
    [[ -n $e ]] || e=$(redis-cli -p "$1" HGET "$META" run_id)
    echo "$e"
}
# hammer PORT SECONDS OUT: idpool_take of 100, back to back (harness.py).
hammer() { "$PYTHON" "$HARNESS_PY" hammer "$1" "$POOL" "$META" 100 "$2" "$3"; }
granted_ids() { awk '$3 == "granted" && $4 > 0 { print $5 }' "$1" | tr ',' '\n'; }
refusals() { grep -c ' error IDPOOL_EPOCH' "$1" || true; }
# none_of HANDED OUT WHAT: no ID of HANDED is in OUT.
none_of() {
    local again
    again=$(sort "$1" "$2" | uniq -d | sed -n 1,5p)
    [[ -z $again ]] || fail "$3: handed-out IDs taken again: $again"
}
# window_then_recover N WHEN: with daemon a stopped, a take on A inside the
# window must be refused (IDPOOL_EPOCH); then a continued and takes for 4 s
# (afterN.txt, afterN.ids): none of takenN.txt again, and at least 1000 IDs
# once a validated a new epoch and refilled (R).
window_then_recover() {
    take_on "$REDIS_PORT" 100 >"$DIR/window$1.txt"
    grep -q '^IDPOOL_EPOCH' "$DIR/window$1.txt" ||
        fail "($1) a take $2 was not refused: $(head -n 3 "$DIR/window$1.txt" | tr '\n' ' ')"
    signal_daemon a CONT
    hammer "$REDIS_PORT" 4 "$DIR/after$1.txt" || fail "($1) hammer $2"
    granted_ids "$DIR/after$1.txt" >"$DIR/after$1.ids"
    none_of "$DIR/taken$1.txt" "$DIR/after$1.ids" "($1)"
    assert_ge "$(count_ids "$DIR/after$1.ids")" 1000 "($1) IDs taken once the daemon validated again (R)"
}

start_daemon a --tick-ms 50 --lock-ttl-ms 500 --redis-timeout-ms 500 --instance ep-a
wait_until 10 pool_ge $KEY "$LOW" || fail "pool never filled"

# ============================================ (2) rollback in the process ===
rcli SAVE >/dev/null
pool_dump $KEY "$DIR/dumped.txt"
id_before=$(redis_server_id)
epoch_before=$(meta_epoch "$REDIS_PORT")
take_on "$REDIS_PORT" 500 >"$DIR/taken2.txt"
assert_eq 500 "$(grep -cE '^[0-9]+$' "$DIR/taken2.txt")" "IDs handed out before the rollback"
signal_daemon a STOP # its checks would race the positive control below
rcli DEBUG RELOAD NOSAVE >/dev/null || fail "DEBUG RELOAD NOSAVE"
pool_dump $KEY "$DIR/reloaded.txt"
assert_eq "$(count_ids "$DIR/dumped.txt")" "$(count_ids "$DIR/reloaded.txt")" "pool after the reload"
assert_eq 500 "$(sort "$DIR/taken2.txt" "$DIR/reloaded.txt" | uniq -d | wc -l)" \
    "handed-out IDs back in the reloaded pool (the exposure)"
assert_eq "$id_before" "$(redis_server_id)" "run_id:master_replid (the same process)"
assert_eq "$epoch_before" "$(meta_epoch "$REDIS_PORT")" "meta's epoch after the reload"
# What a daemon's next check sent before: the status with its (old) epoch.
rcli FCALL_RO idpool_status 2 "$POOL" "$META" "$epoch_before" >/dev/null
window_then_recover 2 "after the reload and a stale status"
log_has a 'validating again' || fail "(2) the daemon did not log its new validation"
log_has a "app=$KEY redis restart or failover detected" || fail "(2) the stale pool was not discarded"
epoch_after=$(redis_epoch)
assert_ne "$epoch_before" "$epoch_after" "epoch after the reload"
[[ $epoch_after == "$id_before":* ]] || fail "epoch $epoch_after is not of the same process $id_before"
check_ids $KEY "$DIR/taken2.txt" "$DIR/after2.ids"
pass "(2) DEBUG RELOAD NOSAVE of an older dump: a stale status validates nothing, 1 take in the window refused ($(refusals "$DIR/after2.txt") more while the daemon came back), none of 500 handed-out IDs again"

# ======================================== (3) failback through a resync ===
env_b
bcli() { redis-cli -p "$B_REDIS_PORT" "$@"; }
link_up() { [[ $(redis-cli -p "$1" INFO replication | tr -d '\r' | sed -n 's/^master_link_status://p') == up ]]; }
bcli REPLICAOF 127.0.0.1 "$REDIS_PORT" >/dev/null
wait_until 10 link_up "$B_REDIS_PORT" || fail "B did not become A's replica"
out=$(bcli FCALL idpool_validate 0 "$(redis_server_id)" 0123456789abcdef0123456789abcdef 2>&1)
[[ $out == READONLY* ]] || fail "idpool_validate on a replica was not refused: $out"
# Failover to B: its own daemon validates it and refills from fresh leases.
bcli REPLICAOF NO ONE >/dev/null
take_on "$REDIS_PORT" 1 >/dev/null # A writes after the failover: it cannot resync partially
start_daemon b --tick-ms 50 --lock-ttl-ms 500 --redis-timeout-ms 500 --instance ep-b \
    --redis "$B_REDIS"
b_run_id() { bcli INFO server | tr -d '\r' | sed -n 's/^run_id://p'; }
epoch_b() { [[ $(meta_epoch "$B_REDIS_PORT") == "$(b_run_id)":* ]]; } # meta written on B
wait_until 10 epoch_b || fail "B's daemon did not validate B and refill"
# A is demoted: a full resync from B.
rcli REPLICAOF 127.0.0.1 "$B_REDIS_PORT" >/dev/null
wait_until 10 link_up "$REDIS_PORT" || fail "A did not resync from B"
wait_until 10 eval '[[ $(meta_epoch "$REDIS_PORT") == "$(meta_epoch "$B_REDIS_PORT")" ]]' ||
    fail "A does not hold B's pools after the resync"
wait_until 5 log_has a 'the server is a replica' || fail "A's daemon did not notice the demotion"
# A lags: it keeps B's data but stops following it; then 300 IDs are taken from B.
rcli REPLICAOF 127.0.0.1 "$(free_port)" >/dev/null
stale_epoch=$(meta_epoch "$REDIS_PORT")
redis-cli -p "$B_REDIS_PORT" FCALL idpool_take 2 "$POOL" "$META" 300 >"$DIR/taken3.txt"
assert_eq 300 "$(grep -cE '^[0-9]+$' "$DIR/taken3.txt")" "IDs taken from B"
pool_dump $KEY "$DIR/lagging.txt"
assert_eq 300 "$(sort "$DIR/taken3.txt" "$DIR/lagging.txt" | uniq -d | wc -l)" \
    "IDs taken from B still in A's pool (the exposure)"
# A's daemon, and a status call with B's epoch on A while it is a replica:
signal_daemon a STOP
rcli FCALL_RO idpool_status 2 "$POOL" "$META" "$stale_epoch" >/dev/null
# Failback: A is promoted again.
rcli REPLICAOF NO ONE >/dev/null
window_then_recover 3 "on A promoted back"
assert_ne "$stale_epoch" "$(redis_epoch)" "A's epoch after the failback"
check_ids $KEY "$DIR/taken2.txt" "$DIR/after2.ids" "$DIR/taken3.txt" "$DIR/after3.ids"
pass "(3) failback through a full resync: validate refused on a replica, a stale status validates nothing, the take at the promotion refused, none of 300 IDs taken from B again"
stop_daemon b

# ================================== (4) pool and meta of one application ===
add_app other step=100 max_pool_size=2000 min_size_percent=50
wait_until 10 pool_ge other "$(low_water other)" || fail "other never filled"
wait_until 10 pool_ge $KEY "$LOW" || fail "$KEY not refilled"
len=$(llen $KEY) uf=$(rcli HGET "$(meta_key other)" underflows)
out=$(rcli FCALL idpool_take 2 "$POOL" "$(meta_key other)" 3 2>&1)
[[ $out == IDPOOL_BADARG* ]] || fail "a take with $KEY's pool and other's meta: $out"
out=$(rcli FCALL idpool_take 2 "$(pool_key "${KEY}x")" "$META" 3 2>&1)
[[ $out == IDPOOL_BADARG* ]] || fail "a take with a typo'd pool key: $out"
out=$(rcli FCALL idpool_take 2 "$META" "$META" 3 2>&1)
[[ $out == IDPOOL_BADARG* ]] || fail "a take with the meta as the pool: $out"
assert_eq "$len" "$(llen $KEY)" "$KEY's pool after the refused takes"
assert_eq "$uf" "$(rcli HGET "$(meta_key other)" underflows)" "other's underflows"
pass "(4) a take with the pool and meta of different applications is IDPOOL_BADARG: $out"

# ================================== (5) failback through a partial resync ===
partial_ok() { redis-cli -p "$1" INFO stats | tr -d '\r' | sed -n 's/^sync_partial_ok://p'; }
# Nothing may write to A between B's promotion and A's demotion, or A cannot
# resync partially: its daemon stopped, and no replication PING meanwhile.
rcli CONFIG SET repl-ping-replica-period 3600 >/dev/null
wait_until 10 pool_ge $KEY "$LOW" || fail "(5) $KEY not refilled on A"
signal_daemon a STOP
epoch_a=$(redis_epoch)
[[ -n $epoch_a ]] || fail "(5) A holds no epoch"
bcli REPLICAOF 127.0.0.1 "$REDIS_PORT" >/dev/null
wait_until 10 link_up "$B_REDIS_PORT" || fail "(5) B did not become A's replica"
wait_until 5 eval '[[ $(bcli INFO replication | tr -d "\r" | sed -n "s/^master_repl_offset://p") == $(rcli INFO replication | tr -d "\r" | sed -n "s/^master_repl_offset://p") ]]' ||
    fail "(5) B did not catch up with A"
p0=$(partial_ok "$B_REDIS_PORT")
bcli REPLICAOF NO ONE >/dev/null
rcli REPLICAOF 127.0.0.1 "$B_REDIS_PORT" >/dev/null
wait_until 10 link_up "$REDIS_PORT" || fail "(5) A did not resync from B"
assert_eq $((p0 + 1)) "$(partial_ok "$B_REDIS_PORT")" "(5) partial resyncs on B (A kept its memory)"
assert_eq "$epoch_a" "$(redis_epoch)" "(5) the epoch A, a replica now, holds (the exposure)"
start_daemon b5 --tick-ms 50 --lock-ttl-ms 500 --redis-timeout-ms 500 --instance ep-b5 \
    --redis "$B_REDIS"
wait_until 10 log_has b5 "redis: 127\.0\.0\.1:$B_REDIS_PORT was promoted: loaded the idpool library again" ||
    fail "(5) B's daemon did not load the library again on the promoted B"
wait_until 5 eval '[[ -z $(redis_epoch) ]]' || fail "(5) A still holds epoch $(redis_epoch)"
wait_until 10 epoch_b || fail "(5) B's daemon did not validate B and refill"
signal_daemon b5 STOP
rcli REPLICAOF NO ONE >/dev/null
out=$(take_on "$REDIS_PORT" 10)
[[ $out == IDPOOL_EPOCH* ]] || fail "(5) a take on A promoted back was not refused: $out"
signal_daemon a CONT
wait_until 10 eval '[[ $(take_on "$REDIS_PORT" 1) =~ ^[0-9]+$ ]]' || fail "(5) A served no take after its daemon came back"
pass "(5) failback through a partial resync: A forgot epoch ${epoch_a:0:8}... when B was validated, and refused takes promoted back"
signal_daemon b5 CONT
stop_daemon b5

# ================================ (6) two daemons on one promoted server ===
bcli REPLICAOF 127.0.0.1 "$REDIS_PORT" >/dev/null
wait_until 10 link_up "$B_REDIS_PORT" || fail "(6) B did not become A's replica"
for d in c6 d6; do
    start_daemon $d --tick-ms 50 --lock-ttl-ms 500 --redis-timeout-ms 5000 --instance ep-$d \
        --redis "$B_REDIS"
done
wait_until 10 eval 'log_has c6 "is a replica" && log_has d6 "is a replica"' ||
    fail "(6) the daemons did not find B a replica"
bcli CLIENT PAUSE 3000 WRITE >/dev/null
bcli REPLICAOF NO ONE >/dev/null
connected() { grep -E "redis: connected to 127\.0\.0\.1:$B_REDIS_PORT .*\(epoch " "$(daemon_log "$1")"; }
wait_until 10 eval 'connected c6 >/dev/null && connected d6 >/dev/null' ||
    fail "(6) the daemons did not validate the promoted B"
# logged_by_both ERE: how many lines of c6's and d6's logs match.
logged_by_both() { cat "$(daemon_log c6)" "$(daemon_log d6)" | grep -cE -- "$1" || true; }
resets=$(logged_by_both "127\.0\.0\.1:$B_REDIS_PORT was promoted: loaded")
raced=$(logged_by_both "another daemon reset the library of the promoted 127\.0\.0\.1:$B_REDIS_PORT")
assert_eq 1 "$resets" "(6) library resets of the promoted B"
assert_eq 1 "$raced" "(6) daemons that found no epoch of B and lost the reset (the positive control)"
epoch_c=$(connected c6 | tail -n 1 | sed 's/.*(epoch \([^)]*\)).*/\1/')
epoch_d=$(connected d6 | tail -n 1 | sed 's/.*(epoch \([^)]*\)).*/\1/')
assert_eq "$epoch_c" "$epoch_d" "(6) the epochs the two daemons validated"
assert_eq "$epoch_c" "$(bcli FCALL_RO idpool_validated 0)" "(6) B's epoch"
assert_eq 1 "$(bcli EXISTS "idpool:promoted:${epoch_c%:*}")" "(6) B's reset marker"
pass "(6) two daemons on a promoted server: one library reset, the other validated into its epoch ${epoch_c:0:8}..."
stop_daemon c6
stop_daemon d6
stop_daemon a
