#!/usr/bin/env bash
# Chaos 30 cluster_down: two of the three primaries of a Redis Cluster
# stopped (SIGSTOP) with many clients running: the cluster is down, and no
# replica can be promoted (a failover needs the votes of a majority of the
# primaries; one is left). Refresh storms are the most reported failure of
# cluster clients (issue 21): every process that reads the slot table
# must read it at most once a second (core/cluster.h cluster_refresh: the
# daemons' node_cluster.c, libidpool's and idpool-load's route.c; the
# Python client's environment backs off, 0.1 s doubling to 2 s, before it
# reads the table again).
#
# The Cluster of servers.sh (three primaries with a replica each,
# cluster-node-timeout 1500 ms; the URL's seeds are the three primaries)
# and one MariaDB; two refilling daemons on the Cluster URL and an
# issuer-only one (--api). One monotonic application a primary (ck..),
# each popped by CHAOS30_LOADS idpool-load processes following the slot
# table themselves (--cluster; half LPOP, half FCALL idpool_take, one
# connection each), and by one take client of every other kind: libidpool
# and the Python client on the Cluster URL, and the issuer (libidpool's
# HTTP transport). Quick: eight idpool-load processes an application, 8 s
# of outage measured, the other clients at 10 IDs every 50 ms; long:
# sixteen, 60 s, 100 IDs every 5 ms, CHAOS_IDS popped after the recovery.
#   1. the primaries of two applications are stopped (SIGSTOP, state T):
#      T_FROM; every surviving node must say cluster_state:fail and refuse
#      a command with CLUSTERDOWN (T_DOWN);
#   2. the outage is measured for CHAOS30_OUTAGE_S seconds: the CLUSTER
#      SLOTS calls of the four surviving nodes (INFO commandstats,
#      cmdstat_cluster|slots on Redis 7) and the CPU time of the daemons
#      (/proc/PID/stat utime+stime), at its start and its end; no replica
#      may have been promoted;
#   3. SIGCONT to both: the cluster is ok on every node again (T_CONT),
#      takes are served again and the pools recover (R); the consumers pop
#      on and stop.
# Checked:
#   * the refresh rate: the surviving nodes' CLUSTER SLOTS calls during
#     the measured outage at most READERS x (seconds + 1) + 10, READERS
#     being every process that reads the table (the idpool-load and
#     libidpool consumers on the Cluster URL, the Python clients, the three
#     daemons); slots_per_proc_s, the calls per process-second, is shown,
#     and slots_total, every node's calls from before the fault to after
#     the recovery (the stopped nodes answer, after SIGCONT, what was
#     queued on their sockets);
#   * no daemon spun: each one's CPU time during the outage is at most
#     CHAOS30_CPU_PCT (default 25) percent of it (daemon_cpu_pct: the
#     highest);
#   * the positive control: the clients kept trying during the outage and
#     were refused: reply_clusterdown (idpool-load's CLUSTERDOWN replies,
#     more than one a process), and the Python clients' errors;
#   * first_take_ms: SIGCONT to the first take a direct take consumer was
#     served, each application, within CHAOS30_FIRST_MS (10000);
#   * U A L M over every ID of every application with no window (nothing
#     was rolled back: SIGSTOP loses no write); R after SIGCONT.
# Evidence that the fault landed: the stopped processes in state T, every
# surviving node with cluster_state:fail answering CLUSTERDOWN, the two
# replicas still replicas after the outage.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
cluster_setup

# CLIENT_PACE: the libidpool clients' and the Python clients' takes (quick:
# 10 IDs every 50 ms; long: 100 every 5 ms, as in the other scenarios, so
# that the consumers pop CHAOS_IDS after the recovery)
if [[ $PROFILE == quick ]]; then
    : "${CHAOS30_LOADS:=8}" "${CHAOS30_OUTAGE_S:=8}"
    CLIENT_PACE=(10 50)
else
    : "${CHAOS30_LOADS:=16}" "${CHAOS30_OUTAGE_S:=60}"
    CLIENT_PACE=(100 5)
fi
: "${CHAOS30_CPU_PCT:=25}" "${CHAOS30_FIRST_MS:=10000}"

# slots_calls VAR PORT...: VAR becomes the CLUSTER SLOTS calls so far,
# summed over the nodes at PORTs (INFO commandstats: cmdstat_cluster|slots
# on Redis 7); a node that does not answer within 5 s, three times, is a
# failure (VAR then counts it 0).
slots_calls() {
    local var=$1 p n sum=0 k
    shift
    for p in "$@"; do
        for k in 1 2 3; do
            n=$(timeout 5 redis-cli -p "$p" INFO commandstats 2>/dev/null) && break
            n=fail
        done
        ((k == 1)) || info "$(cluster_node "$p") answered INFO commandstats at try $k"
        [[ $n != fail ]] || failure "$(cluster_node "$p") did not answer INFO commandstats"
        n=$(sed -n 's/^cmdstat_cluster|slots:calls=\([0-9]*\),.*/\1/p' <<<"$n")
        sum=$((sum + ${n:-0}))
    done
    printf -v "$var" %d "$sum"
}

# first_served_ms APP T0_NS: ms from T0_NS to the first take of APP's direct
# take consumers (idpool-load --mode take) answered with IDs at or after
# T0_NS, or "none".
first_served_ms() {
    local logs=() f
    for f in "$DIR/$1".c*.bin; do [[ $f == *.buffered.* ]] || logs+=("$f"); done
    PYTHONPATH=$CHAOS_LIB_DIR "$PYTHON" - "$2" "${logs[@]}" <<'PY'
import struct, sys
from rollback import records
t0, first = int(sys.argv[1]), None
for path in sys.argv[2:]:
    it = records(path)
    if struct.unpack_from('<I', next(it), 16)[0] != 1:  # not a take consumer's
        continue
    for _, raw, _, count in it:
        t_recv = struct.unpack_from('<Q', raw, 8)[0]
        if count and t_recv >= t0 and (first is None or t_recv < first):
            first = t_recv
print('none' if first is None else (first - t0) // 1000000)
PY
}

# cpu_ticks PID: the process' CPU time so far (utime + stime, in clock ticks).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# cluster_down_at PORT...: every node at PORTs says cluster_state:fail and
# refuses a read with CLUSTERDOWN (the survivors only: a stopped node would
# not answer).
cluster_down_at() {
    local p
    for p in "$@"; do
        [[ $(timeout 2 redis-cli -p "$p" CLUSTER INFO 2>/dev/null) == *cluster_state:fail* ]] || return 1
        [[ $(timeout 2 redis-cli -p "$p" GET chaos30 2>&1) == *CLUSTERDOWN* ]] || return 1
    done
}

# out_sum KEY FILE...: the sum of KEY=N over the last lines of the outputs.
out_sum() {
    local key=$1
    shift
    tail -q -n 1 "$@" 2>/dev/null | grep -o "\b$key=[0-9]*" | awk -F= '{ s += $2 } END { print s + 0 }'
}

declare -A APP_OF=()
cluster_apps ck
mapfile -t PRIMARIES < <(printf '%s\n' "${!APP_OF[@]}" | sort -n)
APPS=()
for p in "${PRIMARIES[@]}"; do APPS+=("${APP_OF[$p]}"); done
round_app_add "${APPS[@]}"
failover_daemons "$IDPOOL_REDIS_CLUSTER_URL"
apps_filled "${APPS[@]}"

# The consumers: CHAOS30_LOADS idpool-load processes an application (half
# LPOP, half takes; 20 requests/s of 10 IDs each, errors retried after 20
# ms doubling to 200), libidpool on the URL
# and through the issuer, the Python client (10 IDs every 50 ms each). The
# Python clients' seeds are the replicas (PY_URL): they read the table
# there (redis-py's NodesManager asks its startup nodes only), the others
# from the primaries, so that the survivors' counts tell them apart.
C_READERS=3 PY_READERS=0 # the daemons
PY_URL=redis-cluster://127.0.0.1:$NODE4_PORT,127.0.0.1:$NODE5_PORT,127.0.0.1:$NODE6_PORT
for app in "${APPS[@]}"; do
    app_params "$app"
    for ((k = 0; k < CHAOS30_LOADS; k++)); do
        mode=lpop
        ((k % 2 == 0)) || mode=take
        consumers_start "$app" 1 --mode "$mode" --rate 20 --batch 10 --backoff-ms 20:200
    done
    client_consumers_start "$app" "$IDPOOL_REDIS_CLUSTER_URL" --take "${CLIENT_PACE[0]}" --pause-ms "${CLIENT_PACE[1]}"
    client_consumers_start "$app" "http://$TOKEN@127.0.0.1:$API_PORT" --take "${CLIENT_PACE[0]}" --pause-ms "${CLIENT_PACE[1]}"
    g=${CONS_GEN[$app]}
    CONS_GEN[$app]=$((g + 1))
    bg_run "cons.$app.$g" env PYTHONPATH="$IDPOOL_SOURCE_ROOT/src/python" "$PYTHON" \
        "$CHAOS_LIB_DIR/pytake.py" "$app" "$PY_URL" "$DIR/$app.c$g.buffered.0.bin" \
        "$DIR/cons.$app.$g.stopfile" "${CLIENT_PACE[@]}"
    C_READERS=$((C_READERS + CHAOS30_LOADS + 1)) PY_READERS=$((PY_READERS + 1))
done
for app in "${APPS[@]}"; do popped_wait "$app" 5000 "$app: consumers starved"; done

# The fault: the primaries of the first two applications stopped.

STOPPED=("${PRIMARIES[0]}" "${PRIMARIES[1]}")
REPLICAS=()
for p in "${STOPPED[@]}"; do
    r=$(cluster_replicas_of "$p" | head -n 1)
    [[ -n $r ]] || fail "$(cluster_node "$p") has no replica"
    REPLICAS+=("$r")
done
SURVIVORS=() REPLICA_PORTS=("$NODE4_PORT" "$NODE5_PORT" "$NODE6_PORT")
for p in $(cluster_ports); do [[ " ${STOPPED[*]} " == *" $p "* ]] || SURVIVORS+=("$p"); done
UP=${PRIMARIES[2]}
for p in "${REPLICA_PORTS[@]}"; do
    [[ $(cluster_role "$p") == slave ]] || fail "$(cluster_node "$p") is no replica: PY_URL would name a primary"
done
PIDS=()
for p in "${STOPPED[@]}"; do PIDS+=("$(redis_info "$p" server process_id)"); done
# shellcheck disable=SC2046 # the ports, split
slots_calls CALLS0 $(cluster_ports)
slots_calls STOPPED0 "${STOPPED[@]}"
T_FROM=$(now_ns)
kill -STOP "${PIDS[@]}" || fail "could not stop ${PIDS[*]}"
note="stopped=$(cluster_node "${STOPPED[0]}"),$(cluster_node "${STOPPED[1]}")"
for pid in "${PIDS[@]}"; do
    wait_until 5 eval "[[ \$(awk '{ print \$3 }' /proc/$pid/stat) == T ]]" || failure "pid $pid is not stopped"
done
# (Cluster's own failure detection: 6.9 to 17.7 s on a 2-core machine at
# load 8 to 80; more than 20 s once at load 82)
if wait_until 60 cluster_down_at "${SURVIVORS[@]}"; then
    note+=",clusterdown_on=${#SURVIVORS[@]}"
else
    failure "the surviving nodes do not all answer CLUSTERDOWN"
fi
T_DOWN=$(now_ns)
DOWN_MS=$(((T_DOWN - T_FROM) / 1000000))
info "the cluster is down on the ${#SURVIVORS[@]} surviving nodes $DOWN_MS ms after the stop"

# The outage, measured: CLUSTER SLOTS on the survivors, the daemons' CPU.
declare -A TICKS0=()
for d in a b i; do TICKS0[$d]=$(cpu_ticks "$(daemon_pid "$d")"); done
slots_calls C1 "$UP"
slots_calls PY1 "${REPLICA_PORTS[@]}"
T1=$(now_ns)
info "the outage measured from now, for $CHAOS30_OUTAGE_S s"
sleep_until "$T1" $((CHAOS30_OUTAGE_S * 1000))
slots_calls C2 "$UP"
slots_calls PY2 "${REPLICA_PORTS[@]}"
T2=$(now_ns)
HZ=$(getconf CLK_TCK)
CPU_MAX=0
for d in a b i; do
    pct=$((($(cpu_ticks "$(daemon_pid "$d")") - TICKS0[$d]) * 100 * 1000000000 / HZ / (T2 - T1)))
    info "daemon $d: $pct % CPU during the outage"
    ((pct <= CPU_MAX)) || CPU_MAX=$pct
done
expect "((CPU_MAX <= CHAOS30_CPU_PCT))" "a daemon used $CPU_MAX % CPU during the outage (bound $CHAOS30_CPU_PCT %): it spun"
OUT_MS=$(((T2 - T1) / 1000000))
C_CALLS=$((C2 - C1)) PY_CALLS=$((PY2 - PY1))
C_LIMIT=$((C_READERS * (OUT_MS / 1000 + 1) + 10)) PY_LIMIT=$((PY_READERS * (OUT_MS / 1000 + 1) + 5))
per_proc_s() { awk -v c="$1" -v p="$2" -v ms="$OUT_MS" 'BEGIN { printf "%.3f", c / p / (ms / 1000) }'; }
C_PER=$(per_proc_s "$C_CALLS" "$C_READERS") PY_PER=$(per_proc_s "$PY_CALLS" "$PY_READERS")
info "CLUSTER SLOTS during $OUT_MS ms of outage: $C_CALLS on the surviving primary from $C_READERS" \
    "C processes ($C_PER a process-second, bound $C_LIMIT), $PY_CALLS on the replicas from" \
    "$PY_READERS Python clients ($PY_PER a process-second, bound $PY_LIMIT)"
expect "((C_CALLS <= C_LIMIT))" "$C_CALLS CLUSTER SLOTS calls of the C clients and daemons in $OUT_MS ms (bound $C_LIMIT): a refresh storm"
expect "((PY_CALLS <= PY_LIMIT))" "$PY_CALLS CLUSTER SLOTS calls of the Python clients in $OUT_MS ms (bound $PY_LIMIT): a refresh storm"
expect "((C_CALLS > 0 && PY_CALLS > 0))" "no CLUSTER SLOTS call during the outage ($C_CALLS, $PY_CALLS): the clients did not refresh"
for k in 0 1; do
    role=$(timeout 2 redis-cli -p "${REPLICAS[k]}" ROLE | head -n 1)
    expect "[[ $role == slave ]]" "replica ${REPLICAS[k]} of a stopped primary is $role: promoted without a majority"
    [[ $role != slave ]] || note+=",$(cluster_node "${REPLICAS[k]}")=replica"
done

# Healed: SIGCONT, the cluster ok everywhere, takes served, R.
kill -CONT "${PIDS[@]}"
T_CONT=$(now_ns)
wait_until 60 cluster_ok || failure "the cluster is not ok on every node after SIGCONT"
OK_MS=$(ms_since "$T_CONT")
info "the cluster is ok again $OK_MS ms after SIGCONT"
N_CONT=$(popped "$(apps_csv)")
for app in "${APPS[@]}"; do
    app_params "$app"
    redis_of "$app"
    recovered "$app" "$T_CONT" 30
done
popped_wait "$(apps_csv)" $((N_CONT + 10000)) "the consumers were not served after SIGCONT"
[[ $PROFILE == quick ]] || consumers_wait "$(apps_csv)" "$CHAOS_IDS"
for f in "${BG_STOP[@]}"; do touch "$f"; done # all at once; consumers_stop reaps them
FIRSTS=()
for app in "${APPS[@]}"; do
    consumers_stop "$app"
    f=$(first_served_ms "$app" "$T_CONT")
    FIRSTS+=("$f")
    expect "[[ $f != none ]] && ((f <= CHAOS30_FIRST_MS))" "$app: first take $f ms after SIGCONT (bound $CHAOS30_FIRST_MS)"
done
# shellcheck disable=SC2046 # the ports, split
slots_calls CALLS3 $(cluster_ports)
slots_calls STOPPED3 "${STOPPED[@]}"
TOTAL=$((CALLS3 - CALLS0)) STOPPED_CALLS=$((STOPPED3 - STOPPED0))

# The positive control: requests sent and refused during the outage.
LOAD_OUTS=() PY_OUTS=()
for f in "$DIR"/cons.*.out; do
    if grep -q '^pytake:' "$f"; then PY_OUTS+=("$f"); elif grep -q '^load:' "$f"; then LOAD_OUTS+=("$f"); fi
done
CLUSTERDOWN=$(out_sum reply_clusterdown "${LOAD_OUTS[@]}")
LOAD_ERRORS=$(out_sum errors "${LOAD_OUTS[@]}")
PY_ERRORS=$(out_sum errors "${PY_OUTS[@]}")
info "refused during the outage: idpool-load $CLUSTERDOWN CLUSTERDOWN ($LOAD_ERRORS errors in all," \
    "${#LOAD_OUTS[@]} processes), the Python clients $PY_ERRORS errors"
expect "((CLUSTERDOWN > ${#LOAD_OUTS[@]}))" "idpool-load got only $CLUSTERDOWN CLUSTERDOWN replies: the clients did not try"
expect "((PY_ERRORS > 0))" "the Python clients saw no error during the outage"
fault_landed "$note,down_ms=$DOWN_MS,clusterdown=$CLUSTERDOWN,py_errors=$PY_ERRORS"

daemons_stop
for app in "${APPS[@]}"; do
    drain "$app"
    check_rollback "$app" 0 0
done
row readers="$C_READERS+$PY_READERS" outage_ms="$OUT_MS" slots_calls="$C_CALLS+$PY_CALLS" \
    slots_limit="$C_LIMIT+$PY_LIMIT" slots_per_proc_s="$C_PER+$PY_PER" slots_total="$TOTAL" \
    slots_stopped="$STOPPED_CALLS" daemon_cpu_pct="$CPU_MAX" ok_ms="$OK_MS" \
    first_take_ms="$(joined / "${FIRSTS[@]}")"
