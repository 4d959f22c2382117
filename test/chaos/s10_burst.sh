#!/usr/bin/env bash
# Chaos 10 burst: consumption beyond what the refill can supply (design
# brief §7: "when a pool runs low or empty, idpoold raises an alert";
# alerts "fire once and resolve once (no flapping)"; §4 R).
#
# One monotonic application whose refill capacity is capped on purpose: it
# is checked once a second (interval 1000 ms) and holds at most 2.5
# seconds of the steady consumption, so at most ~2.5x the steady rate goes in.
# Two recorded consumers pop with LPOP at the profile's steady rate (quick
# ~15,000 IDs/s) all along. Each round, a burst of four more recorded
# consumers takes with FCALL idpool_take (the limits and the underflow
# accounting inside Redis) at 4x the steady rate for 5 s: the
# pool runs dry, takes get short or empty replies. Then the burst stops and
# the steady consumers go on. The alert recorder (pub/sub idpool:alerts)
# must see, per round, `underflow` and `low` fire exactly once during the
# burst and resolve exactly once after it, within 20 s, while the steady
# consumers keep popping, and every daemon must report no alert firing any
# more (GET /v1/apps); `stalled` must not fire (IDs kept coming, only
# not enough). R: the pool is back above low water after the burst.
# U M A L over everything popped, by both kinds of consumer.
# Evidence that the fault landed: the burst's take rate, the empty or short
# takes it got (from its summary), and the firing events.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

APP=burst
BURST_S=5
STEADY=$((CHAOS_RATE * CHAOS_BATCH)) # IDs/s of the steady consumers
BURST_RATE=$((CHAOS_RATE * 4))       # requests/s over the burst's 4 connections
# Refill capacity ~ one pool per second: 2.5 times the steady rate (a refill
# every other second in steady state), well below steady + burst (the
# takes reach about 2.5-3x the steady rate on 2 cores).
POOL=$((STEADY * 5 / 2 / 1000 * 1000))
add_app $APP step=1000 max_pool_size=$POOL min_size_percent=50 increment_max=2 \
    interval=1000 max_size_per_times=1000 max_size_per_second=$((STEADY * 100))
app_params $APP

chaos_daemon a
chaos_daemon b
wait_until 20 pool_ge $APP "$P_LOW" || fail "pool never filled"
alerts_start
sampler_start $APP
consumers_start $APP 2
popped_wait $APP $((CHAOS_IDS / 10)) "consumers starved before the burst"
expect "[[ ! -s $DIR/alerts.txt ]]" "alerts fired before the burst: $(head -c 300 "$DIR/alerts.txt")"

# more_alerts KIND STATE N: the recorder saw more than N such events of APP.
more_alerts() { (($(alert_count $APP "$1" "$2") > $3)); }
# summary_field NAME FIELD: a field of a stopped helper's summary line.
summary_field() { tail -n 1 "${BG_LOG[$1]}" | grep -oE " $2=[0-9]+" | cut -d= -f2; }

for ((round = 1; round <= CHAOS_ROUNDS; round++)); do
    n_uf=$(alert_count $APP underflow firing)
    n_ufr=$(alert_count $APP underflow resolved)
    n_low=$(alert_count $APP low firing)
    n_lowr=$(alert_count $APP low resolved)
    bg_start "burst$round" --mode take --key "$(pool_key $APP)" --conns 4 --pipeline 1 \
        --batch "$CHAOS_BATCH" --rate "$BURST_RATE" --duration "$BURST_S" \
        --record "$DIR/$APP.cb$round" --reconnect --timeout-ms 1000
    wait_until 10 more_alerts underflow firing "$n_uf" ||
        failure "round $round: underflow did not fire during the burst"
    wait_until 10 more_alerts low firing "$n_low" ||
        failure "round $round: low did not fire during the burst"
    # The burst ends by itself (--duration); bounded wait.
    wait_until $((BURST_S + 10)) eval "! proc_alive ${BG_PID[burst$round]}" ||
        failure "round $round: the burst did not end"
    bg_stop "burst$round"
    t0=$(now_ns)
    ids=$(summary_field "burst$round" ids)
    empties=$(summary_field "burst$round" empties)
    secs=$(tail -n 1 "${BG_LOG[burst$round]}" | grep -oE ' secs=[0-9.]+' | cut -d= -f2)
    rate=$(awk -v n="${ids:-0}" -v s="${secs:-1}" 'BEGIN { printf "%d", n / (s > 0 ? s : 1) }')
    recovered $APP "$t0"
    # R: both resolve once the burst is over, the steady consumers going on.
    wait_until 20 eval 'more_alerts underflow resolved "$n_ufr" && more_alerts low resolved "$n_lowr"' ||
        failure "round $round: alerts not resolved 20 s after the burst (firing: a=$(alerts_firing a $APP) b=$(alerts_firing b $APP))"
    # ... and every daemon agrees (each keeps its own alert state; the first
    # to see the condition clear announces the resolution for all).
    wait_until 20 alerts_clear $APP ||
        failure "round $round: a daemon still has alerts firing 20 s after the burst: a=$(alerts_firing a $APP) b=$(alerts_firing b $APP)"
    fired_uf=$(($(alert_count $APP underflow firing) - n_uf))
    fired_low=$(($(alert_count $APP low firing) - n_low))
    res_uf=$(($(alert_count $APP underflow resolved) - n_ufr))
    res_low=$(($(alert_count $APP low resolved) - n_lowr))
    expect "((fired_uf == 1 && fired_low == 1 && res_uf <= 1 && res_low <= 1))" \
        "round $round: alerts flapped: underflow fired $fired_uf/resolved $res_uf, low fired $fired_low/resolved $res_low"
    fault_landed "burst:ids_per_s=$rate,empty_takes=${empties:-0},underflow=$fired_uf/$res_uf,low=$fired_low/$res_low" \
        "((fired_uf > 0 && fired_low > 0 && ${empties:-0} > 0))"
done

expect "((\$(alert_count $APP stalled firing) == 0))" \
    "stalled fired although IDs kept coming: $(grep -F '"stalled"' "$DIR/alerts.txt" | head -n 2)"
consumers_wait $APP "$CHAOS_IDS"
consumers_stop $APP
daemons_stop
drain $APP
check_app $APP
row
