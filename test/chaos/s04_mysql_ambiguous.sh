#!/usr/bin/env bash
# Chaos 04, mysql_ambiguous: the MySQL connection dies in the middle of a
# lease reservation. Two daemons reach MariaDB through
# test/chaos/sqlproxy.py, which cuts one reservation per round:
#   commit  the lease's COMMIT reaches MariaDB and is applied, its reply is
#           dropped and the connection closed: the outcome is unknown to the
#           daemon, yet the lease row exists;
#   insert  the connection dies before the lease INSERT (rolled back);
#   update  the connection dies before the compare-and-set UPDATE;
#   kill    a session holds LOCK TABLES application_lease WRITE, a daemon's
#           reservation waits for it, and its connection is KILLed in MariaDB.
# Each round adds a fresh application (its first refill needs a lease) with
# its own consumer, while a monotonic application is popped all along.
#
# What it proves: a reservation whose commit outcome is unknown is never
# used: not one ID of a cut lease is ever handed out (the check runs with the
# ambiguous leases left out of the lease list, so any of their IDs would be
# `unleased`); the daemons re-read and reserve above it, and every pool is
# refilled by itself (U, M, A, L, R).
#
# Evidence that the fault landed: the proxy's cuts, each ambiguous lease
# found committed in application_lease, the daemons' "range discarded"
# lines, and the KILLed connection.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

PROXY_PORT=$(free_port)
mkdir -p "$DIR/proxy"
bg_run proxy python3 "$CHAOS_LIB_DIR/sqlproxy.py" --port "$PROXY_PORT" --to "$MYSQL_PORT" \
    --dir "$DIR/proxy" --stop-file "$DIR/proxy.stopfile"
wait_until 10 grep -q listening "$DIR/proxy.out" || fail "sqlproxy did not start"
VIA_PROXY=(--mysql "mysql://root@127.0.0.1:$PROXY_PORT/idpool")

cuts() { [[ -r $DIR/proxy/cuts.txt ]] && wc -l <"$DIR/proxy/cuts.txt" || echo 0; }
cuts_gt() { (($(cuts) > $1)); }

add_app main step=200 max_pool_size=$CHAOS_POOL min_size_percent=50 increment_max=3 \
    delta=5 remainder=2 start_offset=777
chaos_daemon a "${VIA_PROXY[@]}"
chaos_daemon b "${VIA_PROXY[@]}"
wait_until 10 pool_ge main $((CHAOS_POOL / 2)) || fail "main never filled"
sampler_start main
consumers_start main 2
sleep 1

APPS=(main)
MODES=()
for ((i = 0; i < CHAOS_ROUNDS; i++)); do MODES+=(commit insert update commit); done
r=0
for mode in "${MODES[@]}"; do
    r=$((r + 1))
    key=amb$r
    type=1
    ((r % 2)) || type=2
    n0=$(cuts)
    echo "$mode" >"$DIR/proxy/arm"
    add_app "$key" increasing_type=$type step=200 max_pool_size=3000 min_size_percent=50
    APPS+=("$key")
    consumers_start "$key" 1 --rate 30
    if wait_until 15 cuts_gt "$n0"; then
        t0=$(now_ns)
        info "round $r: $(tail -n 1 "$DIR/proxy/cuts.txt")"
        recovered "$key" "$t0"
    else
        failure "round $r: the proxy never cut a reservation ($mode)"
        rm -f "$DIR/proxy/arm"
    fi
    sleep 1
done

# kill: a reservation waits for LOCK TABLES and its connection is killed.
sql "LOCK TABLES application_lease WRITE; DO SLEEP(4); UNLOCK TABLES;" >"$DIR/locker.out" 2>&1 &
locker=$!
blocked_id() {
    sql "SELECT id FROM information_schema.processlist WHERE state LIKE 'Waiting for table%lock'
         AND info LIKE '%application_lease%' AND info NOT LIKE '%processlist%' LIMIT 1"
}
wait_until 5 eval "[[ \$(sql \"SELECT COUNT(*) FROM information_schema.processlist
    WHERE info LIKE 'DO SLEEP(%'\") == 1 ]]" || fail "the LOCK TABLES session never started"
key=ambkill
add_app "$key" step=200 max_pool_size=3000 min_size_percent=50
APPS+=("$key")
consumers_start "$key" 1 --rate 30
killed=0
if wait_until 5 eval '[[ -n $(blocked_id) ]]'; then
    id=$(blocked_id)
    sql "KILL CONNECTION $id" && killed=1
    info "killed connection $id, waiting for the lease table lock"
else
    failure "no reservation waited for the lease table lock"
fi
wait_until 8 eval "! proc_alive $locker" || fail "the LOCK TABLES session never ended"
wait "$locker" || true
t0=$(now_ns)
recovered "$key" "$t0"
fault_landed "killed=$killed" "((killed == 1))"

# The ambiguous leases: committed in MySQL, unknown to the daemon.
grep '^commit ' "$DIR/proxy/cuts.txt" 2>/dev/null | awk '{print $2, $3, $4}' >"$DIR/ambiguous.txt" || true
namb=$(wc -l <"$DIR/ambiguous.txt")
committed=0
while read -r app lo hi; do
    c=$(sql "SELECT COUNT(*) FROM application_lease
             WHERE application_id = $app AND lo = $lo AND hi = $hi")
    committed=$((committed + c))
done <"$DIR/ambiguous.txt"
discarded=$(logs_count 'range discarded')
ncut=$(cuts)
fault_landed "cuts=$ncut" "((ncut >= ${#MODES[@]}))"
fault_landed "ambiguous_committed=$committed/$namb" "((namb > 0 && committed == namb))"
fault_landed "discarded=$discarded" "((discarded >= namb))"

consumers_wait "$(apps_csv)" "$CHAOS_IDS"
for key in "${APPS[@]}"; do consumers_stop "$key"; done
daemons_stop
for key in "${APPS[@]}"; do
    drain "$key"
    id=$(app_col "$key" id)
    awk -v id="$id" '$1 == id {print $2, $3}' "$DIR/ambiguous.txt" >"$DIR/$key.ambiguous"
    # shellcheck disable=SC2034 # read by check_app
    LEASE_EXCLUDE[$key]=$DIR/$key.ambiguous
    check_app "$key"
done
row
