#!/usr/bin/env bash
# Fault test: FLUSHALL while a consumer drains (brief §4.1-2: Redis is only a
# cache of progress; a missing meta is re-initialised from a fresh lease above
# every ID ever leased, so IDs stay unique and keep increasing).
#
# Two daemons, a monotonic application drained by one consumer and a trend
# application nobody pops. Twice, at a random moment, FLUSHALL runs (inside a
# script, so the pools it throws away are captured atomically). After each:
#   - every ID handed out later is above every ID leased before (so above all
#     popped and all discarded IDs), and the consumer's IDs stay strictly
#     increasing across the flush;
#   - meta is re-created (next/hi from a fresh lease, current run_id);
#   - both pools are back above low water within a few seconds (R);
# and over the whole run U, A and L hold, and leases were reserved upwards.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

COMMON=(--tick-ms 100 --lock-ttl-ms 500 --reload-ms 1000)
KEY=flush
TKEY=flush_t
add_app $KEY step=100 max_pool_size=2000 min_size_percent=50 increment_max=3 \
    delta=2 remainder=0 start_offset=500
add_app $TKEY increasing_type=2 step=100 max_pool_size=1000 min_size_percent=50
LOW=$(low_water $KEY)
LOWT=$(low_water $TKEY)

# max_leased KEY: highest hi in application_lease for KEY (0 if none).
max_leased() {
    sql "SELECT COALESCE(MAX(l.hi), 0) FROM application_lease l
         JOIN application a ON a.id = l.application_id WHERE a.entity_key = $(sql_value "$1")"
}
# flushall ROUND: FLUSHALL in a script that first captures, atomically,
# both pools and meta next: $DIR/flushedROUND.txt and flushed_tROUND.txt get
# the discarded IDs, FLUSH_NEXT the monotonic app's meta next (or "").
flushall() {
    local raw=$DIR/flushed$1.raw np
    rcli EVAL "local r = {redis.call('HGET', KEYS[2], 'next') or ''}
               local p = redis.call('LRANGE', KEYS[1], 0, -1)
               table.insert(r, tostring(#p))
               for _, v in ipairs(p) do table.insert(r, v) end
               for _, v in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
                   table.insert(r, v)
               end
               redis.call('FLUSHALL')
               return r" 3 "$(pool_key $KEY)" "$(meta_key $KEY)" "$(pool_key $TKEY)" >"$raw"
    FLUSH_NEXT=$(sed -n 1p "$raw")
    np=$(sed -n 2p "$raw")
    [[ $np =~ ^[0-9]+$ ]] || fail "FLUSHALL script failed: $(head -c 300 "$raw")"
    awk -v n="$np" 'NR > 2 && NR <= n + 2' "$raw" >"$DIR/flushed$1.txt"
    tail -n +"$((np + 3))" "$raw" >"$DIR/flushed_t$1.txt"
}
meta_ok() { # KEY FLOOR: meta re-created from a lease above FLOOR, this epoch
    local next hi epoch
    next=$(rcli HGET "$(meta_key "$1")" next)
    hi=$(rcli HGET "$(meta_key "$1")" hi)
    epoch=$(rcli HGET "$(meta_key "$1")" epoch)
    [[ $next =~ ^[0-9]+$ && $hi =~ ^[0-9]+$ ]] && ((next > $2 && hi >= next)) &&
        [[ -n $epoch && $epoch == "$(redis_epoch)" ]]
}

start_daemon a "${COMMON[@]}" --instance flush-a
start_daemon b "${COMMON[@]}" --instance flush-b
wait_until 5 pool_ge $KEY "$LOW" || fail "pool never filled"
wait_until 5 pool_ge $TKEY "$LOWT" || fail "trend pool never filled"
pool_dump $TKEY "$DIR/t0.txt"
consumer_start c $KEY 500 0.02
wait_until 15 consumer_ge c 3000 || fail "consumer starved"

trend_dumps=("$DIR/t0.txt")
gaps=()
for round in 1 2; do
    sleep "0.$((RANDOM % 6 + 2))"
    h_main=$(max_leased $KEY)
    h_trend=$(max_leased $TKEY)
    n_before=$(consumer_count c)
    flushall $round
    t_flush=$(now_us)
    # Popped before the flush: below the pool's head then (or meta next if
    # the pool was empty). Popped after: from a fresh lease, >= h_main.
    gap_lo=$(sed -n 1p "$DIR/flushed$round.txt")
    gap_lo=${gap_lo:-$FLUSH_NEXT}
    [[ $gap_lo =~ ^[0-9]+$ ]] || fail "no pool and no meta next at FLUSHALL"
    gaps+=("$gap_lo $h_main")
    info "round $round: FLUSHALL discarded $(wc -l <"$DIR/flushed$round.txt") + \
$(wc -l <"$DIR/flushed_t$round.txt") IDs; meta next was $FLUSH_NEXT; leased before: \
$KEY < $h_main, $TKEY < $h_trend"

    # R on the idle trend pool, measured from the flush.
    wait_until 3 pool_ge $TKEY "$LOWT" || fail "R: $TKEY not refilled after FLUSHALL"
    info "round $round: $TKEY back above low water after $((($(now_us) - t_flush) / 1000)) ms"
    pool_dump $TKEY "$DIR/t$round.txt"
    t_lo=$(min_id "$DIR/t$round.txt")
    ((t_lo >= h_trend)) || fail "$TKEY: ID $t_lo after FLUSHALL is below $h_trend, leased before it"
    trend_dumps+=("$DIR/t$round.txt")

    # The consumer gets fresh IDs; then pause it to see the pool refilled.
    wait_until 15 consumer_ge c $((n_before + 4000)) || fail "consumer starved after FLUSHALL"
    consumer_stop c
    wait_until 3 pool_ge $KEY "$LOW" || fail "R: $KEY not back above low water after FLUSHALL"
    wait_until 2 meta_ok $KEY "$h_main" ||
        fail "$KEY meta not re-initialised above $h_main: $(rcli HGETALL "$(meta_key $KEY)" | tr '\n' ' ')"
    wait_until 2 meta_ok $TKEY "$h_trend" || fail "$TKEY meta not re-initialised"
    new_lo=$(sql "SELECT MIN(l.lo) FROM application_lease l JOIN application a
                  ON a.id = l.application_id WHERE a.entity_key = '$KEY' AND l.lo >= $h_main")
    [[ $new_lo =~ ^[0-9]+$ ]] || fail "no lease reserved for $KEY after FLUSHALL"
    consumer_start c $KEY 500 0.02
done
sleep 1
consumer_stop c
assert_alive a b
wait_until 3 pool_ge $KEY "$LOW" || fail "R: $KEY not above low water at the end"
stop_daemon a
stop_daemon b
pool_dump $KEY "$DIR/pool.txt"

# ---------------------------------------------------------------- checks ---
check_increasing "$DIR/c.txt" "consumer across FLUSHALL"
check_increasing "$DIR/pool.txt" "final pool"
check_above "$DIR/c.txt" -- "$DIR/pool.txt"
# No ID handed out after a flush comes from below the leases reserved
# before it: none lies between the flushed pool's head and that bound.
for g in "${gaps[@]}"; do
    read -r g_lo g_hi <<<"$g"
    bad=$(awk -v lo="$g_lo" -v hi="$g_hi" '$1 >= lo && $1 < hi' "$DIR/c.txt" "$DIR/pool.txt" |
        sed -n 1,5p)
    [[ -z $bad ]] || fail "IDs from before a FLUSHALL ([$g_lo, $g_hi)) handed out after it: $bad"
done
check_ids $KEY "$DIR/c.txt" "$DIR/pool.txt"
check_ids $TKEY "${trend_dumps[@]}"
pass "FLUSHALL twice: U, M, A, L hold, meta re-initialised, pools refilled"
