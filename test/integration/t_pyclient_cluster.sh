#!/usr/bin/env bash
# The Python client on a redis-cluster:// environment (issue 21, K9): the
# Cluster of servers.sh (three primaries, a replica each), one idpoold on
# its URL, three applications whose slots lie on the three primaries. One
# client (a thread per application, paced) takes all three through the
# URL; each take goes to its slot's primary: no MOVED or ASK on any node.
# It forks once: the child's client is closed (no ID of the parent's).
# Then, while it takes:
#  * the primary of X's slot is killed (-9; positive control: its pid
#    gone), the daemon held (SIGSTOP) from before the kill: the replica is
#    promoted, refuses X's takes until the daemon validated it (the
#    client's own takes were refused: its refused_epoch), and the client
#    takes X from it once the daemon, let go, validated and refilled it;
#  * the slot of Y, a busy application, is migrated by hand from its
#    primary S to T (CLUSTER SETSLOT IMPORTING on T, MIGRATING on S,
#    MIGRATE of its keys, then SETSLOT NODE on every primary): between the
#    MIGRATE and the SETSLOT NODE the client follows S's ASK to T (ASKING
#    there, which only the client sends), after it S's MOVED, and it takes
#    Y from T once the daemon swept the pool that came with another
#    epoch and refilled it.
# No ID is taken twice: check_ids (U, A, L) of each application over every
# ID the client took; no call timed out, its table names the replica for X
# and T for Y.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
SERVERS_CLUSTER=1 setup
export PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python:$PYTHONPATH
"$PYTHON" -c 'import redis.cluster, idpool_client' 2>/dev/null ||
    skip "$PYTHON cannot import redis.cluster (python3-redis) and idpool_client"

# app_on PORT: the first of the application names p1, p2 ... whose keys'
# slot the primary at PORT serves.
app_on() {
    local i
    for i in $(seq 1 100); do
        if [[ $(cluster_owner "$(pool_key "p$i")") == "$1" ]]; then
            echo "p$i"
            return 0
        fi
    done
    fail "no application name p1..p100 has its slot on $1"
}
# Three applications, one on each primary: X, Y and Z on node1, node2 and node3.
X=$(app_on "$NODE1_PORT")
Y=$(app_on "$NODE2_PORT")
Z=$(app_on "$NODE3_PORT")
declare -A PRIMARY_OF=([$X]=$NODE1_PORT [$Y]=$NODE2_PORT [$Z]=$NODE3_PORT)
for a in "$X" "$Y" "$Z"; do
    add_app "$a" step=10000 max_pool_size=50000 min_size_percent=50 \
        max_size_per_times=1000 max_size_per_second=100000000
done
LOW=$(low_water "$X")

# owner_ge APP N: APP's pool on the primary of its slot holds at least N IDs.
owner_ge() {
    local n
    n=$(cluster_cli "$(cluster_owner "$(pool_key "$1")")" LLEN "$(pool_key "$1")" 2>/dev/null) &&
        [[ $n =~ ^[0-9]+$ ]] && ((n >= $2))
}
# take_at PORT APP COUNT: idpool_take on the node at PORT (IDs, or the error line).
take_at() {
    cluster_cli "$1" FCALL idpool_take 2 "$(pool_key "$2")" "$(meta_key "$2")" "$3" 2>&1 | sed '/^$/d'
}
# node_stat PORT errorstat|cmdstat NAME: that counter of the node at PORT
# since its CONFIG RESETSTAT (0 when it has not counted yet).
node_stat() {
    local n section=errorstats
    [[ $2 == errorstat ]] || section=commandstats
    n=$(cluster_cli "$1" INFO "$section" | tr -d '\r' | sed -n "s/^$2_$3:\(count\|calls\)=\([0-9]*\).*/\2/p")
    echo "${n:-0}"
}
# taken APP: the IDs of APP the client has received so far.
taken() { if [[ -f $DIR/ids.$1 ]]; then count_ids "$DIR/ids.$1"; else echo 0; fi; }
taken_ge() { (($(taken "$1") >= $2)); }
# client_json KEY...: what the client last wrote to $DIR/client.json under
# KEY... ("stats APP FIELD", "table APP"); client_ge N KEY...: it is >= N.
client_json() {
    python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[k]
print(v)' "$DIR/client.json" "$@" 2>/dev/null
}
client_ge() {
    local v
    v=$(client_json "${@:2}") && [[ $v =~ ^[0-9]+$ ]] && ((v >= $1))
}

start_daemon a --redis "$IDPOOL_REDIS_CLUSTER_URL" --tick-ms 20 --lock-ttl-ms 500 \
    --redis-timeout-ms 500 --instance cl-a
for a in "$X" "$Y" "$Z"; do
    wait_until 20 owner_ge "$a" "$LOW" || fail "$a never filled on its primary"
done
for p in $(cluster_ports); do cluster_cli "$p" CONFIG RESETSTAT >/dev/null; done

# The client: a thread per application takes next_n(20) every 10 ms
# (about 2,000 IDs/s each) and appends them to $DIR/ids.APP; the main
# thread writes every application's stats(), and the port of the node its
# table names for the application's slot, to $DIR/client.json every
# 100 ms, forks once when every application has IDs and the client holds
# some, and ends when $DIR/stop exists, printing a summary as JSON.
"$PYTHON" - "$IDPOOL_REDIS_CLUSTER_URL" "$DIR" "$X" "$Y" "$Z" <<'PY' >"$DIR/client.out" 2>"$DIR/client.err" &
import json, os, sys, threading, time
import redis.crc
import idpool_client as m

url, d, apps = sys.argv[1], sys.argv[2], sys.argv[3:]
errors, fork = [], "not done"


def work(a):
    with open(f"{d}/ids.{a.key}", "a") as f:
        while not os.path.exists(f"{d}/stop"):
            try:
                f.write("".join(f"{i}\n" for i in a.next_n(20)))
                f.flush()
            except m.IdpoolError as e:
                errors.append(f"{a.key}: {type(e).__name__}: {e}")
                return
            time.sleep(0.01)


def table(c, key):
    """The port of the node the client's table names for key's slot (None: no table now)."""
    nm = c._envs[0].conn
    try:
        return nm.get_node_from_slot(redis.crc.key_slot(m.redis_key("idpool", key, "pool").encode())).port
    except Exception:  # noqa: BLE001 - dropped (DOWN) or the slot not in it: said as None
        return None


def forked(c, handles):
    """Fork; in the child every call raises IdpoolClosed at once: "ok"."""
    pid = os.fork()
    if pid == 0:
        code = 0
        for a in handles:
            try:
                a.next()
                code = 1
            except m.IdpoolClosed:
                pass
            except BaseException:  # noqa: BLE001 - anything else is a failure
                code = 2
        os._exit(code)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return "ok" if code == 0 else f"the child's client answered (status {code})"
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "the child hung (killed after 10 s)"


with m.Client([url], timeout=30.0) as c:
    handles = [c.app(k) for k in apps]
    threads = [threading.Thread(target=work, args=(a,), daemon=True) for a in handles]
    for t in threads:
        t.start()
    while not os.path.exists(f"{d}/stop"):
        st = {a.key: a.stats() for a in handles}
        if fork == "not done" and all(s["taken"] for s in st.values()) and any(s["buffered"] for s in st.values()):
            fork = forked(c, handles)
        out = {"stats": st, "table": {a.key: table(c, a.key) for a in handles}}
        with open(f"{d}/client.json.tmp", "w") as f:
            json.dump(out, f)
        os.replace(f"{d}/client.json.tmp", f"{d}/client.json")
        time.sleep(0.1)
    for t in threads:
        t.join(5)
    print(json.dumps({"errors": errors[:3], "fork": fork, "table": out["table"], "stats": out["stats"]}))
PY
client_pid=$!

# ============================================== routed by the keys' slot ===
for a in "$X" "$Y" "$Z"; do
    wait_until 15 taken_ge "$a" 2000 || fail "the client took too few IDs of $a: $(cat "$DIR/client.err")"
done
for p in $(cluster_ports); do
    for k in MOVED ASK TRYAGAIN CLUSTERDOWN; do
        assert_eq 0 "$(node_stat "$p" errorstat "$k")" "$k answered by $(cluster_node "$p")"
    done
done
for a in "$X" "$Y" "$Z"; do
    assert_eq "${PRIMARY_OF[$a]}" "$(client_json table "$a")" "the node of $a's slot in the client's table"
done
pass "three applications on three primaries: every take on its slot's primary (no MOVED, ASK, TRYAGAIN or CLUSTERDOWN on any node)"

# =========================================== a primary killed (-9) =========
victim=$NODE1_PORT
replica=$(cluster_replicas_of "$victim" | head -n 1)
[[ -n $replica ]] || fail "no replica of $victim"
# The daemon held from before the kill until the client's own takes of X
# were refused on the promoted replica: it must not validate it earlier.
signal_daemon a STOP
name=$(cluster_node "$victim")
pid=$(tr -dc 0-9 <"$DIR/$name.pid")
"$SERVERS" kill "$DIR" "$name" >/dev/null || fail "could not kill $name"
proc_gone "$pid" || fail "$name (pid $pid) is still running after kill -9"
t0=$(now_us)
promoted() { [[ $(cluster_role "$replica" 2>/dev/null) == master ]]; }
wait_until 30 promoted || fail "$replica was not promoted"
info "$(cluster_node "$replica") promoted $((($(now_us) - t0) / 1000)) ms after the kill"
out=$(take_at "$replica" "$X" 1)
[[ $out == IDPOOL_EPOCH* ]] || fail "a take of $X on the promoted $replica before the daemon validated it: $out"
wait_until 20 client_ge 1 stats "$X" refused_epoch ||
    fail "the client's takes of $X never reached the promoted $replica: $(cat "$DIR/client.json")"
mark=$(taken "$X")
signal_daemon a CONT
own_epoch() { [[ $(cluster_cli "$replica" FCALL_RO idpool_validated 0) == "$(redis_server_id "$replica")":* ]]; }
wait_until 15 own_epoch || fail "the daemon did not validate the promoted $replica"
wait_until 20 taken_ge "$X" $((mark + 2000)) ||
    fail "the client took too few IDs of $X from the promoted $replica: $(taken "$X") (mark $mark)"
pass "primary $victim killed: the client's takes of $X refused on the promoted $replica until the daemon validated it, then served there"

# ============================================ a busy slot migrated by hand ===
S=$NODE2_PORT
T=$NODE3_PORT
slot=$(cluster_slot "$(pool_key "$Y")")
assert_eq "$S" "$(cluster_owner "$(pool_key "$Y")")" "the primary of $Y's slot $slot"
wait_until 10 taken_ge "$Y" $(($(taken "$Y") + 1000)) || fail "$Y is not busy"
cluster_migrate_keys "$slot" "$S" "$T"
grep -qxF "$(pool_key "$Y")" "$DIR/migrated" && grep -qxF "$(meta_key "$Y")" "$DIR/migrated" ||
    fail "slot $slot held $(xargs <"$DIR/migrated"), not $Y's pool and meta"
# The keys are on T, the slot still S's: S answers ASK, and the client
# asks T (the daemon never sends ASKING).
asked_at_t() { (($(node_stat "$T" cmdstat asking) > 0)); }
wait_until 10 asked_at_t || fail "the client did not follow S's ASK to T"
asks=$(node_stat "$S" errorstat ASK)
assert_gt "$asks" 0 "ASK answered by S"
cluster_slot_give "$slot" "$S" "$T"
wait_until 10 cluster_owned_by "$slot" "$T" || fail "slot $slot is not T's on every node"
mark=$(taken "$Y")
wait_until 20 taken_ge "$Y" $((mark + 2000)) || fail "the client took too few IDs of $Y from T: $(taken "$Y") (mark $mark)"
moved=$(node_stat "$S" errorstat MOVED)
assert_gt "$moved" 0 "MOVED answered by S"
[[ $(take_at "$S" "$Y" 1) == MOVED* ]] || fail "S still serves $Y"
info "slot $slot: S answered ASK $asks times, MOVED $moved times; T ran ASKING $(node_stat "$T" cmdstat asking) times"
pass "slot $slot of $Y migrated from $S to $T while the client took: ASK followed to T, then MOVED; taken from T"

# ============================================================== the end ===
touch "$DIR/stop"
wait_until 15 proc_gone "$client_pid" || fail "the client did not stop"
wait "$client_pid" || fail "the client failed: $(cat "$DIR/client.err")"
res=$(tail -n 1 "$DIR/client.out")
info "client: $(cut -c1-300 <<<"$res")"
"$PYTHON" - "$res" "$X" "$replica" "$Y" "$T" <<'PY' || fail "the client: $res"
import json, sys
r, x, replica, y, t = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
for bad, why in ((r["errors"], f"errors: {r['errors']}"),
                 (r["fork"] != "ok", f"fork: {r['fork']}"),
                 (r["table"][x] != replica, f"its table names {r['table'][x]} for {x}, not {replica}"),
                 (r["table"][y] != t, f"its table names {r['table'][y]} for {y}, not {t}"),
                 (any(s["timeouts"] for s in r["stats"].values()), "a call timed out")):
    if bad:
        sys.exit(why)
PY
for a in "$X" "$Y" "$Z"; do
    check_ids "$a" "$DIR/ids.$a"
done
pass "no ID taken twice by the client (U, A and L of $X, $Y and $Z: $(taken "$X"), $(taken "$Y"), $(taken "$Z") IDs); a forked child's client closed"
stop_daemon a
pass "pyclient_cluster"
