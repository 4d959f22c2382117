#!/usr/bin/env bash
# Chaos 03, nolock: many refillers with the lock deliberately defeated.
# Four daemons (six in the long profile) refill a monotonic and a trend
# application with a tiny lock TTL (--tick-ms 50 --lock-ttl-ms 100, the
# smallest allowed), so locks expire in the middle of refills. Consumers pop
# all along. Two phases:
#   flip      test/chaos/lockflip.py deletes the lock keys at random and
#             hands them back to earlier holders, while daemons are also
#             frozen for a moment now and then: at any moment several
#             refillers believe they own the lock;
#   handback  per refill stage (locked, reserved, pushing) a victim started
#             with IDPOOL_FAULT=<stage>:stop (and a longer lock TTL, which
#             tells its lock apart) freezes itself holding a lock; the lock
#             is deleted, the others refill past it, then the victim's own
#             token is put back into the lock and the victim continued: its
#             pushes pass the lock check, and only idpool_push's
#             expected-next check (meta next must be what it drew from:
#             a "stale" push) can keep them out.
#
# What it proves: safety does not depend on the lock. The write-ahead leases
# and the expected-next check alone keep concurrent refillers apart: no ID
# is handed out twice, each consumer's IDs of the monotonic application
# increase, every ID is in a lease (U, M, A, L); once the lock is left alone
# the pools are back above low water (R).
#
# Evidence that the fault landed: the flipper's deletions and hand-backs,
# pushes rejected as fenced (lock token no longer theirs), and in every
# handback round the victim's push rejected as stale although it
# held the lock.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

NDAEMONS=4
FLIP_S=8
if [[ $PROFILE == long ]]; then
    NDAEMONS=6
    FLIP_S=60
fi
CHAOS_DAEMON_ARGS+=(--tick-ms 50 --lock-ttl-ms 100)

add_app mono step=500 max_pool_size=$((CHAOS_POOL * 5 / 2)) min_size_percent=50 increment_max=3 \
    delta=2 remainder=1 start_offset=5000
add_app shuf increasing_type=2 step=1000 max_pool_size=$((CHAOS_POOL * 5)) min_size_percent=50
APPS=(mono shuf)
NAMES=()
for ((i = 1; i <= NDAEMONS; i++)); do
    # A long --reload-ms: they learn about the handback rounds' applications
    # by SIGHUP, after the victim.
    chaos_daemon "d$i" --reload-ms 600000
    NAMES+=("d$i")
done
wait_until 15 pool_ge mono $((CHAOS_POOL * 5 / 4)) || fail "mono never filled"
wait_until 15 pool_ge shuf $((CHAOS_POOL * 5 / 2)) || fail "shuf never filled"
sampler_start mono
consumers_start mono 2
consumers_start shuf 2
sleep 1

# ----------------------------------------------------------------- flip ---
bg_run flip "$PYTHON" "$CHAOS_LIB_DIR/lockflip.py" --port "$REDIS_PORT" \
    --keys "$(lock_key mono),$(lock_key shuf)" --stop-file "$DIR/flip.stopfile" \
    --duration $((FLIP_S + 30)) --interval-ms 3 --ttl-ms 100 --seed "$RANDOM"
# Now and then a daemon also stalls for a moment (longer than the TTL).
end=$(($(now_us) + FLIP_S * 1000000))
while (($(now_us) < end)); do
    sleep "0.$((RANDOM % 8 + 2))"
    v=${NAMES[RANDOM % NDAEMONS]}
    signal_daemon "$v" STOP
    sleep 0.2
    signal_daemon "$v" CONT
done
bg_stop flip
t0=$(now_ns)
flip=$(tail -n 1 "$DIR/flip.out")
info "$flip"
dels=$(sed -n 's/.* dels=\([0-9]*\).*/\1/p' <<<"$flip")
flips=$(sed -n 's/.* flips=\([0-9]*\).*/\1/p' <<<"$flip")
fault_landed "dels=${dels:-0},flips=${flips:-0}" "((${dels:-0} > 0 && ${flips:-0} > 0))"
recovered mono "$t0"
recovered shuf "$t0"

# ------------------------------------------------------------- handback ---
# victim_locks: the lock keys the frozen victim holds (the only locks with a
# TTL beyond the others' 100 ms; it may be refilling several applications).
victim_locks() {
    local k t
    for k in "${APPS[@]}"; do
        t=$(rcli PTTL "$(lock_key "$k")")
        if ((t > 300)); then lock_key "$k"; fi
    done
}
# metas_moved: meta next of every app in LOCKS differs from NEXT0 (its value then).
metas_moved() {
    local i=0 lk
    for lk in "${LOCKS[@]}"; do
        [[ $(rcli HGET "${lk%:lock}:meta" next) != "${NEXT0[i]}" ]] || return 1
        i=$((i + 1))
    done
}
STALE_RE='IDPOOL_STALE|push failed: meta next is'
stale_gt() { (($(log_count "$1" "$STALE_RE") > $2)); }
STAGES=()
for ((i = 0; i < CHAOS_ROUNDS; i++)); do STAGES+=(locked reserved pushing); done
r=0 handback=0
for stage in "${STAGES[@]}"; do
    r=$((r + 1))
    key=hb$r
    add_app "$key" step=500 max_pool_size=5000 min_size_percent=50 increment_max=2
    APPS+=("$key")
    x=x$r
    IDPOOL_FAULT=$stage:stop chaos_daemon "$x" --lock-ttl-ms 3000
    if ! wait_daemon_stopped "$x" 15; then
        failure "handback $stage: $x never stopped itself"
        daemons_stop "$x"
        continue
    fi
    consumers_start "$key" 1 --rate 50
    for n in "${NAMES[@]}"; do signal_daemon "$n" HUP; done
    mapfile -t LOCKS < <(victim_locks)
    if ((${#LOCKS[@]} == 0)); then
        failure "handback $stage: no lock held by the frozen $x"
        daemons_stop "$x"
        continue
    fi
    TOKENS=() NEXT0=()
    for lk in "${LOCKS[@]}"; do
        TOKENS+=("$(rcli GET "$lk")")
        NEXT0+=("$(rcli HGET "${lk%:lock}:meta" next)")
        rcli DEL "$lk" >/dev/null
    done
    # The others refill past the victim: meta moves on.
    wait_until 10 metas_moved ||
        failure "handback $stage: nobody refilled past the frozen $x (${LOCKS[*]})"
    sleep 0.2
    for i in "${!LOCKS[@]}"; do
        rcli SET "${LOCKS[i]}" "${TOKENS[i]}" PX 5000 >/dev/null
    done
    s0=$(log_count "$x" "$STALE_RE")
    f0=$(log_count "$x" 'push fenced off')
    signal_daemon "$x" CONT
    if wait_until 5 stale_gt "$x" "$s0"; then
        handback=$((handback + 1))
        info "handback $stage: $x holding ${LOCKS[*]} again was rejected:" \
            "$(grep -m1 -E "$STALE_RE" "$(daemon_log "$x")" | cut -c 1-160)"
    else
        failure "handback $stage: $x pushed with its lock back and was not rejected as stale" \
            "(fenced $f0 -> $(log_count "$x" 'push fenced off'))"
    fi
    sleep 0.5
    daemons_stop "$x"
done
fault_landed "handback_stale=$handback/${#STAGES[@]}" "((handback == ${#STAGES[@]}))"
t0=$(now_ns)
recovered mono "$t0"
recovered shuf "$t0"

consumers_wait "$(apps_csv)" "$CHAOS_IDS"
fenced=$(logs_count 'push fenced off')
stale=$(logs_count "$STALE_RE")
pushers=$(sql "SELECT COUNT(DISTINCT instance) FROM application_lease")
fault_landed "fenced=$fenced,stale=$stale" "((fenced + stale > 0))"
expect "((pushers >= 2))" "only $pushers daemon(s) ever reserved a lease"
finish_apps daemons="$NDAEMONS" reservers="$pushers"
