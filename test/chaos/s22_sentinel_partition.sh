#!/usr/bin/env bash
# Chaos 22 sentinel_partition: the Redis primary of a Sentinel set is cut
# off from the sentinels, its replicas and the daemons, while clients still
# reach it (a split brain), then the partition heals (issue 20).
#
# The whole scenario runs inside a network namespace of its own (netns.sh):
# nftables drops every packet to and from the primary's port except on
# connections that a process of uid STALE_UID (nobody) opened: the "stale"
# clients, an idpool_take consumer connected to that primary directly (no
# sentinel), run as that user. Otherwise as chaos 19 (test/chaos/lib.sh
# sentinel_scenario: two refilling daemons and an issuer on the Sentinel
# URL, take consumers of every kind following the sentinels; no LPOP
# consumers: a pop of the promoted replica's copy before the sweep would
# be charged to the stale take that got the same ID from the old primary).
# Each round, while they take:
#   1. the partition: the sentinels see the primary down and promote a
#      replica; the daemons lose the old primary (timeouts), follow the
#      sentinels, validate the new one and discard the pools it inherited;
#   2. meanwhile the stale consumer (STALE_RATE takes a second, so that
#      the pool outlasts the detection) keeps taking on the old primary, from
#      the pool it holds under its own epoch (no daemon can push there any
#      more). Odd rounds run without min-replicas-to-write: the old primary
#      must still serve the stale takes after the sentinels named the new
#      one (the positive control: two primaries served at once). Even rounds
#      run with min-replicas-to-write 1 and min-replicas-max-lag MAX_LAG
#      (deploy/redis-idpool.conf): the old primary must refuse them
#      (NOREPLICAS) and serve none later than MAX_LAG + 2 s after the cut;
#   3. the partition heals: the sentinels turn the old primary into a
#      replica of the new one (its data replaced by a full resync); the
#      stale consumer is stopped.
# Checked: as chaos 19 (U A L over every log, the stale ones included:
# no ID twice, although two primaries served takes; exposed_take 0; takes
# inside every window; first take within detection + 1 s in the rounds
# without min-replicas-to-write, which keeps the new primary from writing
# until a replica attached to it).
# Evidence that each fault landed: packets were dropped, a majority of
# sentinels named another primary, the daemons validated it and discarded
# the inherited pool; in the rounds without min-replicas the stale takes
# got IDs after the detection, in the others NOREPLICAS refusals.
# shellcheck source-path=SCRIPTDIR

# Outside a namespace: run this script inside one of its own (netns.sh).
# shellcheck source=netns.sh
source "$(dirname "$0")/netns.sh"
chaos_netns 22 sentinel_partition "$0" "$@"

# ---- inside the namespace.
source "$(dirname "$0")/lib.sh"
sentinel_setup
info "network namespace $CHAOS_NETNS"
netns_nft
((CHAOS_ROUNDS >= 2)) || CHAOS_ROUNDS=2 # one round of each kind
# shellcheck disable=SC2034 # read by round_begin
ROUND_LPOP=0
STALE_UID=65534
MAX_LAG=2
# takes/s of the stale consumer: slow, so that the pool it finds on the
# partitioned primary (at least low water) outlasts the sentinels' detection
STALE_RATE=10
# The stale consumer runs as STALE_UID: it reaches its stop file in $DIR
# (traverse only) and writes its logs to $DIR/stale, from a copy of
# idpool-load there (the build directory may not be readable to it).
chmod o+x "$DIR"
STALE_DIR=$DIR/stale
mkdir "$STALE_DIR"
cp "$IDPOOL_LOAD" "$STALE_DIR/idpool-load"
chown "$STALE_UID" "$STALE_DIR"

# split PORT: drop every packet to and from PORT except on connections
# STALE_UID's processes opened (marked by conntrack at their first packet).
split() {
    nft add rule inet chaos out tcp dport "$1" meta skuid "$STALE_UID" ct mark set 1
    nft add rule inet chaos out tcp dport "$1" ct mark != 1 counter drop
    nft add rule inet chaos out tcp sport "$1" ct mark != 1 counter drop
}

sentinel_prepare() {
    local old=$1 app=$3 r min=0 p
    r=${app#sp}
    ((r % 2 == 0)) && min=1
    ROUND_MIN=$min
    # With min-replicas-to-write on every server, the promoted replica
    # refuses writes (NOREPLICAS: idpool_validate, the pushes) until a
    # replica of its own is attached: the sentinels reconfigure the other
    # one after the promotion, then it resyncs, seconds that are Redis' own
    # (5.2 and 6.2 s here, before and after issue 21's work). The budget
    # (first take - switch) is asserted in the rounds without it; here the
    # row still reports first_take_ms.
    # shellcheck disable=SC2034 # read by lib.sh (sentinel_round)
    SENTINEL_BUDGET=$((1 - min))
    for p in "$REDIS_PORT_0" "$REPLICA1_PORT" "$REPLICA2_PORT"; do
        redis-cli -p "$p" CONFIG SET min-replicas-to-write "$min" min-replicas-max-lag "$MAX_LAG" >/dev/null ||
            fail "CONFIG SET min-replicas-to-write on $p"
    done
    STALE_NAME=cons.$app.${CONS_GEN[$app]:-0}
    STALE_PREFIX=$STALE_DIR/$app.c${CONS_GEN[$app]:-0}.stale
    CONS_GEN[$app]=$((${CONS_GEN[$app]:-0} + 1))
    bg_run "$STALE_NAME" setpriv --reuid="$STALE_UID" --regid="$STALE_UID" --clear-groups \
        "$STALE_DIR/idpool-load" --port "$old" --mode take --key "$(pool_key "$app")" --conns 1 \
        --pipeline 1 --batch "$CHAOS_BATCH" --rate "$STALE_RATE" --duration "$CHAOS_MAX_S" \
        --record "$STALE_PREFIX" --reconnect --timeout-ms 1000 --backoff-ms "$CONSUMER_BACKOFF" \
        --stop-file "$DIR/$STALE_NAME.stopfile"
    wait_until 10 eval "[[ -s $STALE_PREFIX.0.bin ]] && (( \$(stat -c %s $STALE_PREFIX.0.bin) > 32 ))" ||
        failure "$app: the stale consumer took nothing before the partition"
    pop_past "$app"
}
sentinel_fault() {
    split "$1"
    FAULT_NOTE="partition:$2,min_replicas=$ROUND_MIN"
}
# served_after T0 T1: the stale consumer's takes sent at or after T0,
# answered with IDs by T1 (its log is flushed every second).
served_after() { "$PYTHON" "$ROLLBACK_PY" served "$1" "$2" "$STALE_PREFIX.0.bin"; }
sentinel_after() {
    local old=$1 member=$2 app=$3 n late drop noreplicas
    if ((ROUND_MIN == 0)); then
        # two primaries serve: the old one still hands out its pool
        wait_until 10 eval "((\$(served_after $T_DETECT \$(now_ns)) > 0))" ||
            failure "$app: the partitioned primary served no take after the sentinels named $W_NEW"
    else
        sleep_until_ms $((MAX_LAG * 1000 + 3000))
    fi
    drop=$(dropped)
    heal
    wait_until 30 eval "[[ \$(redis-cli -p $old ROLE | head -n 1) == slave ]]" ||
        failure "$member ($old) was not turned into a replica after the partition healed"
    T_OLD_GONE=$(now_ns)
    bg_stop "$STALE_NAME"
    n=$(served_after "$T_DETECT" "$T_OLD_GONE")
    late=$(served_after $((T_FROM + (MAX_LAG + 2) * 1000000000)) "$T_OLD_GONE")
    noreplicas=$(sed -n 's/.* reply_noreplicas=\([0-9]*\).*/\1/p' "$DIR/$STALE_NAME.out")
    info "$app: $drop packets dropped; the partitioned primary served $n stale takes after the" \
        "detection ($late over $((MAX_LAG + 2)) s after the cut), ${noreplicas:-0} refused NOREPLICAS"
    expect "((drop > 0))" "$app: the partition dropped no packet"
    if ((ROUND_MIN == 0)); then
        expect "((n > 0))" "$app: no take served by the partitioned primary after the detection"
    else
        expect "((${noreplicas:-0} > 0))" "$app: min-replicas-to-write refused no stale take"
        expect "((late == 0))" "$app: the partitioned primary served $late takes over $((MAX_LAG + 2)) s after the cut, with min-replicas-to-write 1"
    fi
    FAULT_NOTE+=",dropped=$drop,stale_served=$n,noreplicas=${noreplicas:-0}"
    mv "$STALE_PREFIX".* "$DIR/"
}
# sleep_until_ms MS: until MS after the cut (T_FROM).
sleep_until_ms() {
    local left=$((T_FROM / 1000000 + $1 - $(now_ns) / 1000000))
    ((left <= 0)) || sleep "$(awk -v m="$left" 'BEGIN { printf "%.3f", m / 1000 }')"
}
REDIS_PORT_0=$REDIS_PORT
sentinel_scenario sp optional
