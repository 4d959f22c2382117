#!/usr/bin/env bash
# Chaos 09 flush_evict: Redis loses keys under load (design brief §4.2:
# "Redis is a cache of progress. If meta is missing, the application is
# re-initialised from a fresh lease"; README "Guarantees": eviction cannot
# break U, M, A or L).
#
# Two daemons, a monotonic and a trend application, two recorded consumers
# on each. Each round, under load:
#   flushall  FLUSHALL: pools, meta and locks gone at once;
#   del_meta  DEL of both meta hashes (what eviction of meta does; the pools
#             stay, holding IDs below the fresh lease);
#   del_lock  for 2 s, the lock keys are deleted every 2 ms (an evicted lock:
#             its holder must be fenced off, a second refiller may start),
#             again (at most 5 times) until a holder was fenced off;
#   evict     real eviction for 2 s: maxmemory-policy allkeys-lru and
#             maxmemory just above what Redis uses, so pushes evict pools,
#             meta and locks at random; a third daemon started meanwhile
#             must warn that the policy is not noeviction. Then maxmemory 0
#             and noeviction again.
# After each: the pools are back above low water (R). At the end: every
# alert that fired meanwhile has resolved (the daemons' state), and
# U M A L over everything popped (M for the monotonic application).
# Evidence that the faults landed: after flushall and del_meta, meta was
# re-created from a fresh lease (its next >= the highest lease end reserved
# before: fresh=1); del_lock deleted locks that were held (dels=N) and
# fenced their holders off (fenced=N > 0: the claim itself);
# evict: Redis counted evicted keys (evicted=N) and the daemon warned.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

MONO=fe
TREND=fe_t
APPS=("$MONO" "$TREND")
add_app $MONO step=1000 max_pool_size=30000 min_size_percent=50 increment_max=3 \
    delta=3 remainder=2 start_offset=1000
add_app $TREND increasing_type=2 step=1000 max_pool_size=30000 min_size_percent=50
chaos_daemon a
chaos_daemon b
for app in "${APPS[@]}"; do
    app_params "$app"
    wait_until 20 pool_ge "$app" "$P_LOW" || fail "$app never filled"
done
consumers_start $MONO 2
consumers_start $TREND 2

cat >"$DIR/dellock.py" <<'EOF'
"""dellock.py PORT SECONDS KEY...: DEL the keys every 2 ms for SECONDS;
prints how many DELs removed a key (a lock that was held)."""
import socket
import sys
import time

port, secs, keys = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
s = socket.create_connection(('127.0.0.1', port), timeout=2)
f = s.makefile('rb')
req = b''.join(b'*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n' % (len(k), k.encode()) for k in keys)
dels, end = 0, time.monotonic() + secs
while time.monotonic() < end:
    s.sendall(req)
    for _ in keys:
        line = f.readline()
        if not line.startswith(b':'):
            sys.exit('dellock: unexpected reply %r' % line)
        dels += int(line[1:])
    time.sleep(0.002)
print(dels)
EOF

# max_leased APP: the highest lease end reserved so far for APP.
max_leased() {
    sql "SELECT COALESCE(MAX(l.hi), 0) FROM application_lease l JOIN application a
         ON a.id = l.application_id WHERE a.entity_key = $(sql_value "$1")"
}
# meta_next APP: meta's next (empty while meta is missing).
meta_next() { rcli HGET "$(meta_key "$1")" next; }
# fresh_after APP H: meta exists again and starts at or above H.
fresh_after() {
    local n
    n=$(meta_next "$1")
    [[ $n =~ ^[0-9]+$ ]] && ((n >= $2))
}
# fenced_all: pushes fenced off so far, both daemons, both applications.
fenced_all() {
    echo $(($(fenced_count a $MONO) + $(fenced_count b $MONO) + $(fenced_count a $TREND) +
        $(fenced_count b $TREND)))
}
info_field() { rcli INFO "$1" | sed -n "s/^$2:\([^[:space:]]*\).*/\1/p"; }

# lost_meta WHAT: after FLUSHALL or DEL meta: both applications get a fresh
# lease, above everything reserved before (H_<app>), and recover.
lost_meta() {
    local what=$1 app fresh=0 t0=$2
    for app in "${APPS[@]}"; do
        if wait_until 10 fresh_after "$app" "${H[$app]}"; then
            fresh=$((fresh + 1))
        else
            info "$app: meta next '$(meta_next "$app")', leases reserved before up to ${H[$app]}"
        fi
    done
    for app in "${APPS[@]}"; do recovered "$app" "$t0"; done
    fault_landed "$what:fresh=$fresh" "((fresh == ${#APPS[@]}))"
}

declare -A H=()
popped_wait "$MONO,$TREND" $((CHAOS_IDS / 8)) "consumers starved"
for ((round = 1; round <= CHAOS_ROUNDS; round++)); do
    # ------------------------------------------------------- FLUSHALL ---
    for app in "${APPS[@]}"; do H[$app]=$(max_leased "$app"); done
    rcli FLUSHALL >/dev/null
    lost_meta flushall "$(now_ns)"
    sleep 1

    # ---------------------------------------------- DEL meta (eviction) ---
    for app in "${APPS[@]}"; do H[$app]=$(max_leased "$app"); done
    rcli DEL "$(meta_key $MONO)" "$(meta_key $TREND)" >/dev/null
    lost_meta del_meta "$(now_ns)"
    sleep 1

    # ---------------------------------------------- DEL locks, 2 s -------
    fenced0=$(fenced_all)
    # Until a holder was fenced off (a lock deleted between two of its
    # pushes), at most 5 bursts: the stopping rule is the claim checked.
    dels=0 fenced=0 bursts=0
    while ((fenced == 0 && bursts < 5)); do
        n=$(python3 "$DIR/dellock.py" "$REDIS_PORT" 2 "$(lock_key $MONO)" "$(lock_key $TREND)") ||
            n=0
        dels=$((dels + n)) bursts=$((bursts + 1))
        # a push under way when the last DEL landed is fenced off right after
        wait_until 1 eval '(($(fenced_all) > fenced0))' || true
        fenced=$(($(fenced_all) - fenced0))
    done
    t0=$(now_ns)
    for app in "${APPS[@]}"; do recovered "$app" "$t0"; done
    fault_landed "del_lock:dels=$dels,fenced=$fenced,bursts=$bursts" "((dels > 0 && fenced > 0))"

    # ----------------------------------------- real eviction, 2 s --------
    ev0=$(info_field stats evicted_keys)
    # Below what Redis uses now, by about a third of the data: it evicts at
    # once, and again whenever a refill pushes.
    used=$(info_field memory used_memory)
    data=$(info_field memory used_memory_dataset)
    rcli CONFIG SET maxmemory-policy allkeys-lru >/dev/null
    rcli CONFIG SET maxmemory $((used - data / 3)) >/dev/null
    info "eviction: maxmemory $((used - data / 3)) (used $used, data $data)"
    t_ev=$(now_ns)
    warned=0
    if ((round == 1)); then
        chaos_daemon c
        wait_until 5 log_has c "maxmemory-policy is 'allkeys-lru'" && warned=1
    fi
    while (($(ms_since "$t_ev") < 2000)); do sleep 0.1; done
    rcli CONFIG SET maxmemory 0 >/dev/null
    rcli CONFIG SET maxmemory-policy noeviction >/dev/null
    t0=$(now_ns)
    evicted=$(($(info_field stats evicted_keys) - ev0))
    ((round > 1)) || expect "((warned))" "daemon c did not warn about maxmemory-policy allkeys-lru"
    for app in "${APPS[@]}"; do recovered "$app" "$t0"; done
    ((round > 1)) || evicted+=",warned=$warned"
    fault_landed "evict:evicted=$evicted" "((${evicted%%,*} > 0))"
    if ((round == 1)); then daemons_stop c; fi
done

# R: whatever fired meanwhile (underflow, low) resolves while the consumers
# go on popping at their steady rate.
all_clear() { alerts_clear $MONO && alerts_clear $TREND; }
if ! wait_until 20 all_clear; then
    msg=''
    for app in "${APPS[@]}"; do msg+=" $app: a=$(alerts_firing a "$app") b=$(alerts_firing b "$app")"; done
    failure "alerts still firing 20 s after the faults (now:$msg)"
fi
consumers_wait "$MONO,$TREND" "$CHAOS_IDS"
consumers_stop $MONO
consumers_stop $TREND
daemons_stop
for app in "${APPS[@]}"; do
    drain "$app"
    check_app "$app"
done
row
