#!/usr/bin/env bash
# libidpool, idpoolctl and idpool-load on a Redis Cluster (issue 21, K8):
# the environment redis-cluster://node1,node2,node3 (the seeds), idpoold
# filling three applications, one on each primary (t_cluster shows the
# daemon's side).
#
# (1) One client (idpool-clientload, a thread per application) takes IDs of
# the three applications: each take goes to the primary of its slot. All
# IDs, none twice, each in a lease (U, A, L per application).
# (2) The primary of c1's slot is killed (-9; positive control: its pid
# gone) while the client takes: the client follows the promotion of its
# replica (CLUSTERDOWN, a lost connection, IDPOOL_EPOCH until the daemon
# validated the promoted replica and refilled c1 there) and takes at least
# 2000 of c1's IDs reserved after the kill, none twice across the failover.
# (3) The slot of c2 is migrated by hand while the client takes (CLUSTER
# SETSLOT IMPORTING and MIGRATING, MIGRATE of its keys, SETSLOT NODE on
# every primary): the client follows ASK (positive control: ASKING calls on
# the target, which only the client sends), then MOVED, and takes at least
# 2000 of c2's IDs served by the target, none twice.
# (4) Forked children take through the inherited Cluster environment: no
# ID in two processes.
# (5) idpoolctl on the Cluster URL: status and apps show read each pool on
# its primary; apps grant creates the ACL user on every primary (ACL is per
# node; the user LPOPs its pool on its primary, the example names it), apps
# revoke deletes it everywhere; take goes through libidpool; tokens revoke
# writes the revoked hash where its key's slot lives.
# (6) idpool-load --cluster takes and LPOPs through the seeds, from the
# primary of the key's slot.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
SERVERS_CLUSTER=1 setup
require_built idpool-clientload "$IDPOOL_CLIENTLOAD"
require_built idpool-clientedge "$IDPOOL_CLIENTEDGE"
require_built idpoolctl "$IDPOOLCTL"

CURL=$IDPOOL_REDIS_CLUSTER_URL
HTTP_PORT=$(free_port)
export IDPOOL_HTTP_ADDR=127.0.0.1:$HTTP_PORT # no daemon answers there: status reads Redis

# Three applications, one on each primary (chosen by their keys' slots).
declare -A APP_OF # primary port -> application
cluster_apps k
APPS=()
for p in "${!APP_OF[@]}"; do APPS+=("${APP_OF[$p]}"); done
A1=${APPS[0]} A2=${APPS[1]} A3=${APPS[2]}
for a in "${APPS[@]}"; do
    add_app "$a" step=2000 max_pool_size=40000 min_size_percent=50 max_size_per_times=1000 \
        max_size_per_second=100000000
done
LOW=$(low_water "$A1")

# owner_of APP: the port of the primary of APP's slot. on_owner APP ARGS...: redis-cli there.
owner_of() { cluster_owner "$(pool_key "$1")"; }
on_owner() { cluster_cli "$(owner_of "$1")" "${@:2}"; }
owner_ge() {
    local n
    n=$(on_owner "$1" LLEN "$(pool_key "$1")" 2>/dev/null) && [[ $n =~ ^[0-9]+$ ]] && ((n >= $2))
}
# taken APP: meta's count of IDs taken, on the primary of APP's slot (0 when none).
taken() {
    local n
    n=$(on_owner "$1" HGET "$(meta_key "$1")" taken 2>/dev/null) || n=0
    echo "${n:-0}"
}
taken_ge() { (($(taken "$1") >= $2)); }
# served_by APP PORT: APP's meta on PORT was written under that node's own validated epoch.
served_by() {
    local e
    e=$(cluster_cli "$2" FCALL_RO idpool_validated 0 2>/dev/null) && [[ -n $e ]] &&
        [[ $(cluster_cli "$2" HGET "$(meta_key "$1")" epoch 2>/dev/null) == "$e" ]]
}
# app_logs APP PREFIX: the pop logs PREFIX.<thread>.bin of APP's threads in a
# clientload run with the applications "$A1,$A2,$A3" (thread i: application i mod 3).
app_logs() {
    local k f t
    for k in "${!APPS[@]}"; do
        [[ ${APPS[$k]} == "$1" ]] || continue
        for f in "$2".*.bin; do
            t=${f%.bin}
            t=${t##*.}
            ((t % 3 == k)) && echo "$f"
        done
    done
}
# app_ids APP PREFIX OUT: the IDs of APP in those logs, as text.
app_ids() {
    local logs
    mapfile -t logs < <(app_logs "$1" "$2")
    ids_text "${logs[@]}" >"$3"
}
# got_above APP NAME LOW N: the client NAME's threads of APP got (and
# flushed to their pop logs) at least N IDs >= LOW. Not meta's `taken`:
# that counts IDs libidpool took into its buffer, up to target_ms of demand
# (25,000 here) that no thread got yet (CI: 1825 of 2000 above LOW). A log
# read while a record is half written is read again.
got_above() {
    local logs st=0
    mapfile -t logs < <(app_logs "$1" "$DIR/$2")
    "$IDPOOL_CHECK" --dump /dev/fd/3 "${logs[@]}" 3>"$DIR/$2.above" >/dev/null 2>&1 || st=$?
    ((st <= 1)) && (($(above "$DIR/$2.above" "$3") >= $4))
}
# clientload_start NAME: the three applications' client in the background
# (a thread each, 100 IDs every 2 ms at most, until $DIR/NAME.stop), pop logs
# $DIR/NAME.<thread>.bin.
clientload_start() {
    "$IDPOOL_CLIENTLOAD" --threads 3 --ids 100000000 --take 100 --pause-ms 2 --timeout-ms 30000 \
        --stop-file "$DIR/$1.stop" --flush \
        --record "$DIR/$1" "$A1,$A2,$A3" "$CURL" >"$DIR/$1.out" 2>&1 &
    CLIENT_PID=$!
    info "client $1 (pid $CLIENT_PID) takes $A1, $A2, $A3"
}
clientload_stop() {
    touch "$DIR/$1.stop"
    wait "$CLIENT_PID" || fail "client $1: $(cat "$DIR/$1.out")"
    cat "$DIR/$1.out"
}
# above FILE LOW: how many IDs of FILE are >= LOW.
above() { awk -v lo="$2" '$1 >= lo { n++ } END { print n + 0 }' "$1"; }

start_daemon a --redis "$CURL" --tick-ms 50 --lock-ttl-ms 500 --redis-timeout-ms 500 --instance cl-a
for a in "${APPS[@]}"; do
    wait_until 20 owner_ge "$a" "$LOW" || fail "$a never filled on $(owner_of "$a")"
done

# --- (1) one client, three primaries ---------------------------------------------
"$IDPOOL_CLIENTLOAD" --threads 3 --ids 5000 --timeout-ms 5000 --record "$DIR/p1" \
    "$A1,$A2,$A3" "$CURL" >"$DIR/p1.out" 2>&1 || fail "client: $(cat "$DIR/p1.out")"
cat "$DIR/p1.out"
for a in "${APPS[@]}"; do
    app_ids "$a" "$DIR/p1" "$DIR/p1.$a.txt"
    assert_eq 5000 "$(count_ids "$DIR/p1.$a.txt")" "IDs of $a"
    check_ids "$a" "$DIR/p1.$a.txt"
done
pass "one client took 5000 IDs of each of $A1, $A2, $A3 from their three primaries: U, A, L hold"

# --- (2) idpoolctl --------------------------------------------------------------------
ctl_expect 0 --redis "$CURL" status
out_has "Redis cluster via seeds 127\\.0\\.0\\.1:$NODE1_PORT,"
for a in "${APPS[@]}"; do
    out_has "^$a +served +monotonic +[1-9][0-9]* " # read on its primary (elsewhere: MOVED)
done
# One primary unreachable (held with SIGSTOP for less than the node
# timeout, before the others answer CLUSTERDOWN): the pools on it are '?'
# and the node named on stderr, the others still read, exit 0. A try that
# ran into the cluster's own verdict (it is slower than the timeout) is
# tried again, three times at most.
victim=$(owner_of "$A1")
vpid=$(cat "$DIR/$(cluster_node "$victim").pid")
stopped() { [[ $(ps -o stat= -p "$vpid" | tr -d ' ') == T* ]]; }
partial_status() {
    kill -STOP "$vpid"
    # (continued whatever happens: a stopped server would hold up the cleanup)
    trap 'kill -CONT "$vpid" 2>/dev/null; cleanup' EXIT
    wait_until 2 stopped || fail "$victim (pid $vpid) was not stopped"
    ctl_run --redis "$CURL" --redis-timeout-ms 300 status
    kill -CONT "$vpid"
    trap cleanup EXIT
    [[ $RC == 0 ]] && grep -Eq "^$A1 +served +monotonic +\? " "$DIR/out" &&
        grep -Eq "^$A2 +served +monotonic +[1-9][0-9]* " "$DIR/out" &&
        grep -Eq "^$A3 +served +monotonic +[1-9][0-9]* " "$DIR/out"
}
for try in 1 2 3; do
    partial_status && break
    ((try < 3)) || fail "status with $victim stopped: exit $RC; stdout: $(cat "$DIR/out"); stderr: $ERR"
    wait_until 30 cluster_ok || fail "the cluster is not ok after $victim was continued"
done
err_has "Redis cluster node 127\\.0\\.0\\.1:$victim: .*(its applications' pools unknown)"
out_has "1 pool unknown \\('\\?'\\): its Redis server could not be read"
wait_until 30 cluster_ok || fail "the cluster is not ok after $victim was continued"
for a in "${APPS[@]}"; do
    ctl_expect 0 --redis "$CURL" --json apps show "$a"
    got=$(jget 'd["redis"]["pool_length"]')
    ((got > 0)) || fail "apps show $a: pool_length $got"
    [[ $(jget 'd["redis"]["meta"]["epoch"]') == $(cluster_cli "$(owner_of "$a")" FCALL_RO idpool_validated 0) ]] ||
        fail "apps show $a: not the meta of its primary $(owner_of "$a")"
done
ctl_expect 0 --redis "$CURL" take "$A2" 3
assert_eq 3 "$(wc -l <"$DIR/out")" "IDs from idpoolctl take"
ctl_expect 0 --redis "$CURL" apps grant "$A3"
pw=$(sed -n 's/^password: //p' "$DIR/out")
user=$(sed -n "s/^granted Redis user '\\([^']*\\)'.*/\\1/p" "$DIR/out")
out_has "^example:  redis-cli -h 127\\.0\\.0\\.1 -p $(owner_of "$A3") -c --user "
for p in $(cluster_ports); do
    if [[ $(cluster_role "$p") == master ]]; then
        cluster_cli "$p" ACL GETUSER "$user" | grep -q . || fail "apps grant: no user $user on primary $p"
    fi
done
id=$(redis-cli -h 127.0.0.1 -p "$(owner_of "$A3")" --user "$user" --pass "$pw" --no-auth-warning \
    LPOP "$(pool_key "$A3")")
[[ $id =~ ^[0-9]+$ ]] || fail "the granted user's LPOP on $A3's primary: $id"
ctl_expect 0 --redis "$CURL" apps revoke "$A3"
for p in $(cluster_ports); do
    if [[ $(cluster_role "$p") == master && -n $(cluster_cli "$p" ACL GETUSER "$user") ]]; then
        fail "apps revoke: user $user still on primary $p"
    fi
done
ctl_expect 0 --redis "$CURL" tokens add cl --apps "$A1"
ctl_expect 0 --redis "$CURL" tokens revoke cl
revoked=$(redis_key x y | sed 's/:{x}:y$//'):revoked-tokens
[[ $(cluster_cli "$(cluster_owner "$revoked")" SCARD "$revoked") == 1 ]] ||
    fail "tokens revoke: the hash is not in $revoked on the primary of its slot"
pass "idpoolctl on the cluster: status and apps show read each pool on its primary (status with one primary stopped: its pools '?', the others read), take, apps grant and revoke on every primary (the user LPOPs on its primary), tokens revoke where the set's slot lives"

# --- (3) idpool-load --cluster --------------------------------------------------------
SEEDS=127.0.0.1:$NODE1_PORT,127.0.0.1:$NODE2_PORT
for mode in take lpop; do
    "$IDPOOL_LOAD" --cluster "$SEEDS" --mode "$mode" --key "$(pool_key "$A1")" --batch 100 \
        --count 1000 --record "$DIR/load.$mode" >"$DIR/load.out" 2>&1 || fail "idpool-load --cluster --mode $mode: $(cat "$DIR/load.out")"
    grep -q "conn 0: primary 127\\.0\\.0\\.1:$(owner_of "$A1") (slot $(cluster_slot "$(pool_key "$A1")"))\$" "$DIR/load.out" ||
        fail "idpool-load did not say the primary of $A1's slot: $(cat "$DIR/load.out")"
    grep -q ' ids=1000 ' "$DIR/load.out" || fail "idpool-load --mode $mode took not 1000 IDs: $(cat "$DIR/load.out")"
done
ids_text "$DIR"/load.take.0.bin "$DIR"/load.lpop.0.bin >"$DIR/load.txt"
check_ids "$A1" "$DIR/p1.$A1.txt" "$DIR/load.txt"
pass "idpool-load --cluster: takes and LPOPs on the primary of the key's slot, found through the seeds"

# --- (4) fork ---------------------------------------------------------------------------
st=0
"$IDPOOL_CLIENTEDGE" fork --children 3 --ids 2000 "$DIR/fork" "$A2" "$CURL" >"$DIR/fork.out" 2>&1 || st=$?
cat "$DIR/fork.out"
((st == 0)) || fail "a forked process did not get its IDs (status $st)"
check_pops "$DIR/fork.check" --allow-empty "$DIR"/fork.*.bin || fail "fork: an ID in two processes"
tail -n 1 "$DIR/fork.check"
pass "forked children take through the inherited Cluster environment: no ID in two processes"

# --- (5) a primary killed (-9) while the client takes ----------------------------------
victim=$(owner_of "$A1")
replica=$(cluster_replicas_of "$victim" | head -n 1)
[[ -n $replica ]] || fail "no replica of $victim"
clientload_start p5
base=$(taken "$A1")
wait_until 15 taken_ge "$A1" $((base + 2000)) || fail "the client does not take $A1: $(cat "$DIR/p5.out")"
reserved=$(app_col "$A1" current_offset) # an ID at or above it was reserved after the kill
pid=$(cat "$DIR/$(cluster_node "$victim").pid")
kill -9 "$pid"
wait_until 5 eval '! kill -0 '"$pid"' 2>/dev/null' || fail "the primary $victim (pid $pid) did not die"
info "primary $victim (pid $pid) killed"
wait_until 20 eval '[[ $(cluster_role '"$replica"') == master ]]' || fail "$replica was not promoted"
wait_until 20 served_by "$A1" "$replica" ||
    fail "the daemon did not validate the promoted $replica and refill $A1 under its epoch"
wait_until 20 got_above "$A1" p5 "$reserved" 2000 ||
    fail "the client does not get $A1's IDs reserved after the kill from $replica: $(cat "$DIR/p5.out")"
clientload_stop p5
app_ids "$A1" "$DIR/p5" "$DIR/p5.$A1.txt"
after=$(above "$DIR/p5.$A1.txt" "$reserved")
assert_ge "$after" 2000 "IDs of $A1 reserved after the kill, taken from the promoted $replica"
check_ids "$A1" "$DIR/p1.$A1.txt" "$DIR/load.txt" "$DIR/p5.$A1.txt"
pass "primary $victim killed while the client took: it followed the promoted $replica (after the daemon validated it), $after of $A1's IDs from there, none twice"

# --- (6) the slot of a busy application migrated by hand -----------------------------------
src=$(owner_of "$A2")
dst=$(owner_of "$A3")
slot=$(cluster_slot "$(pool_key "$A2")")
src_id=$(cluster_cli "$src" CLUSTER MYID)
dst_id=$(cluster_cli "$dst" CLUSTER MYID)
# asking_calls PORT: ASKING commands the node at PORT served (0 when none).
asking_calls() {
    local n
    n=$(cluster_cli "$1" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_asking:calls=\([0-9]*\),.*/\1/p')
    echo "${n:-0}"
}
asked_ge() { (($(asking_calls "$1") >= $2)); }
# migrate_keys SLOT FROM TO: MIGRATE of the keys of SLOT left on FROM to TO; true when none is left.
migrate_keys() {
    local keys
    mapfile -t keys < <(cluster_cli "$2" CLUSTER GETKEYSINSLOT "$1" 100)
    if ((${#keys[@]} > 0)) && [[ -n ${keys[0]} ]]; then
        cluster_cli "$2" MIGRATE 127.0.0.1 "$3" "" 0 5000 KEYS "${keys[@]}" >/dev/null
    fi
    [[ $(cluster_cli "$2" CLUSTER COUNTKEYSINSLOT "$1") == 0 ]]
}
clientload_start p6
base=$(taken "$A2")
wait_until 15 taken_ge "$A2" $((base + 2000)) || fail "the client does not take $A2: $(cat "$DIR/p6.out")"
reserved=$(app_col "$A2" current_offset)
asked0=$(asking_calls "$dst")
assert_eq OK "$(cluster_cli "$dst" CLUSTER SETSLOT "$slot" IMPORTING "$src_id")" "SETSLOT IMPORTING on $dst"
assert_eq OK "$(cluster_cli "$src" CLUSTER SETSLOT "$slot" MIGRATING "$dst_id")" "SETSLOT MIGRATING on $src"
wait_until 10 migrate_keys "$slot" "$src" "$dst" || fail "keys of slot $slot are left on $src"
info "slot $slot ($A2) migrating from $src to $dst: its keys moved"
# Only the client sends ASKING (the daemon waits for the MOVED).
wait_until 10 asked_ge "$dst" $((asked0 + 1)) || fail "the client did not follow ASK to $dst"
for p in "$dst" "$src" $(cluster_ports); do
    if [[ $(cluster_role "$p" 2>/dev/null) == master ]]; then
        assert_eq OK "$(cluster_cli "$p" CLUSTER SETSLOT "$slot" NODE "$dst_id")" "SETSLOT NODE on $p"
    fi
done
wait_until 10 cluster_owned_by "$slot" "$dst" || fail "not every node names $dst the owner of slot $slot"
wait_until 20 served_by "$A2" "$dst" || fail "the daemon did not refill $A2 on $dst under its epoch"
wait_until 20 got_above "$A2" p6 "$reserved" 2000 ||
    fail "the client does not get $A2's IDs reserved after the migration began from $dst: $(cat "$DIR/p6.out")"
clientload_stop p6
stats=$(grep '^clientload: ids=' "$DIR/p6.out")
moved=$(sed -n 's/.* moved=\([0-9]*\).*/\1/p' <<<"$stats")
asked=$(sed -n 's/.* asked=\([0-9]*\).*/\1/p' <<<"$stats")
assert_gt "$asked" 0 "ASK redirections the client followed"
assert_gt "$moved" 0 "MOVED redirections the client followed"
app_ids "$A2" "$DIR/p6" "$DIR/p6.$A2.txt"
after=$(above "$DIR/p6.$A2.txt" "$reserved")
assert_ge "$after" 2000 "IDs of $A2 reserved after the migration began, taken from $dst"
for a in "${APPS[@]}"; do
    files=("$DIR/p1.$a.txt")
    for run in p5 p6; do
        [[ -f $DIR/$run.$a.txt ]] || app_ids "$a" "$DIR/$run" "$DIR/$run.$a.txt"
        files+=("$DIR/$run.$a.txt")
    done
    [[ $a != "$A1" ]] || files+=("$DIR/load.txt")
    check_ids "$a" "${files[@]}"
done
pass "slot $slot of $A2 migrated from $src to $dst while the client took: $asked ASK and $moved MOVED followed, $after IDs from $dst, no ID twice of any application"
stop_daemon a
