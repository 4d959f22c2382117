#!/usr/bin/env bash
# The Redis Cluster of scripts/servers.sh (SERVERS_CLUSTER=1), which the
# Cluster tests will stand on: six nodes on loopback, three primaries with
# a replica each, every slot served; an application's keys (hash tag
# {app}) share one slot, Redis' CLUSTER KEYSLOT and idpool's keys_slot
# (idpool-keys) agree on it, its primary takes a write and every other node
# answers MOVED to it; the primary killed (-9: its pid gone, every other
# node flags it fail), its replica is promoted within a bound and holds the
# write, the cluster is ok again; the killed node, started again from its
# nodes.conf, comes back as a replica of the promoted one; and
# `servers.sh stop` leaves no process behind.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
IDPOOL_KEYS=${IDPOOL_KEYS:-$IDPOOL_BUILD/test/idpool-keys}
require_built idpool-keys "$IDPOOL_KEYS"

t0=$(now_us)
SERVERS_CLUSTER=1 setup redis
info "cluster ready $((($(now_us) - t0) / 1000)) ms after setup began"
assert_eq "redis-cluster://127.0.0.1:$NODE1_PORT,127.0.0.1:$NODE2_PORT,127.0.0.1:$NODE3_PORT" \
    "$IDPOOL_REDIS_CLUSTER_URL" "IDPOOL_REDIS_CLUSTER_URL"
assert_eq "redis://127.0.0.1:$NODE1_PORT/0" "$IDPOOL_REDIS_URL" "IDPOOL_REDIS_URL (node1)"
[[ ! -e $DIR/redis.pid ]] || fail "a standalone Redis beside the cluster"

masters=0
for p in $(cluster_ports); do
    ci=$(cluster_cli "$p" CLUSTER INFO)
    for want in cluster_state:ok cluster_slots_ok:16384 cluster_known_nodes:6 cluster_size:3; do
        [[ $ci == *"$want"$'\r'* ]] || fail "$(cluster_node "$p"): not $want: ${ci//$'\r\n'/ }"
    done
    if [[ $(cluster_role "$p") == master ]]; then masters=$((masters + 1)); fi
done
assert_eq 3 "$masters" "primaries"
for p in $NODE1_PORT $NODE2_PORT $NODE3_PORT; do
    assert_eq master "$(cluster_role "$p")" "$(cluster_node "$p")'s first role"
    assert_eq 1 "$(cluster_replicas_of "$p" | wc -l)" "replicas of $(cluster_node "$p")"
    cluster_follows "$(cluster_replicas_of "$p")" "$p" || fail "the replica of $(cluster_node "$p") is not linked"
done
pass "six nodes, three primaries with a replica each, every slot served"

# An application's keys: one slot, the same for Redis and for idpool.
keys=("$(pool_key app)" "$(meta_key app)" "$(lock_key app)")
slot=$(cluster_slot "${keys[0]}")
ours=$(for k in "${keys[@]}"; do printf %s "$k" | od -An -v -tx1 | tr -d ' \n'; echo; done |
    "$IDPOOL_KEYS" slot | sort -u)
assert_eq "$slot" "$ours" "keys_slot of ${keys[*]}"
for k in "${keys[@]}"; do
    assert_eq "$slot" "$(cluster_slot "$k")" "CLUSTER KEYSLOT $k"
done
owner=$(cluster_owner "${keys[0]}")
[[ -n $owner ]] || fail "no primary serves slot $slot"
for p in $(cluster_ports); do
    assert_eq "$owner" "$(cluster_primary_of_slot "$slot" "$p")" "slot $slot's primary as $(cluster_node "$p") sees it"
done
info "the keys of {app} are in slot $slot, served by $(cluster_node "$owner") (port $owner)"

assert_eq 3 "$(cluster_cli "$owner" RPUSH "${keys[0]}" 1 2 3)" "RPUSH through the owner"
assert_eq 1 "$(cluster_cli "$owner" HSET "${keys[1]}" epoch e1)" "HSET through the owner"
assert_eq OK "$(cluster_cli "$owner" SET "${keys[2]}" held)" "SET through the owner"
for p in $(cluster_ports); do
    [[ $p != "$owner" ]] || continue
    assert_eq "MOVED $slot 127.0.0.1:$owner" "$(cluster_cli "$p" SET "${keys[2]}" other)" \
        "SET through $(cluster_node "$p")"
done
assert_eq held "$(cluster_cli "$owner" GET "${keys[2]}")" "the key after the refused writes"
replica=$(cluster_replicas_of "$owner")
assert_eq 1 "$(cluster_cli "$owner" WAIT 1 5000)" "replicas that acknowledged the writes"
pass "slot $slot: written through its primary, MOVED from the five other nodes"

# The fault: the owner killed (-9). Positive control: its pid is gone and
# every other node flags it fail before the promotion is looked for.
name=$(cluster_node "$owner")
pid=$(tr -dc 0-9 <"$DIR/$name.pid")
t0=$(now_us)
"$SERVERS" kill "$DIR" "$name" >/dev/null || fail "could not kill $name"
proc_gone "$pid" || fail "$name (pid $pid) is still running after kill -9"
cluster_cli "$owner" PING >/dev/null 2>&1 && fail "$name still answers after kill -9"
# The bound: failure detection (node timeout, then a majority's reports),
# the election's delay (up to 1 s), and room for one more election after a
# failed one (twice the failover timeout, 4 node timeouts) on a loaded
# machine. Waited on the replica's view, then on every node's (a FAIL and
# a promotion are broadcast).
bound=$(((6 * CLUSTER_NODE_TIMEOUT_MS + 4000) / 1000))
wait_until "$bound" cluster_failed "$owner" "$replica" || fail "$name not flagged fail within ${bound}s"
failed_ms=$((($(now_us) - t0) / 1000))
wait_until 5 cluster_failed "$owner" || fail "not every node flags $name fail"
wait_until "$bound" cluster_owned_by "$slot" "$replica" "$replica" ||
    fail "$(cluster_node "$replica") not promoted to slot $slot's primary within ${bound}s of the kill"
promoted_ms=$((($(now_us) - t0) / 1000))
assert_eq master "$(cluster_role "$replica")" "the promoted replica's role"
wait_until 5 cluster_owned_by "$slot" "$replica" || fail "not every node names $(cluster_node "$replica") slot $slot's primary"
wait_until 10 cluster_ok || fail "cluster_state not ok after the promotion"
info "$name flagged fail after $failed_ms ms, $(cluster_node "$replica") serving slot $slot after $promoted_ms ms, all nodes ok after $((($(now_us) - t0) / 1000)) ms (node timeout $CLUSTER_NODE_TIMEOUT_MS ms)"
assert_eq "1 2 3" "$(cluster_cli "$replica" LRANGE "${keys[0]}" 0 -1 | xargs)" "the pool on the promoted replica"
assert_eq held "$(cluster_cli "$replica" GET "${keys[2]}")" "the lock on the promoted replica"
pass "the primary killed: its replica promoted, holding the writes, the cluster ok again"

# The killed node started again: it rejoins from its nodes.conf, as a
# replica of the node that took its slots.
"$SERVERS" start "$DIR" "$name" >/dev/null || fail "could not start $name again"
assert_eq "$owner" "$(sed -n "s/^export ${name^^}_PORT=//p" "$DIR/env")" "$name's port"
wait_until 20 cluster_follows "$owner" "$replica" ||
    fail "$name did not come back as a replica of $(cluster_node "$replica"): $(cluster_cli "$owner" ROLE | xargs)"
t1=$(now_us)
"$SERVERS" start "$DIR" cluster >/dev/null || fail "the whole cluster is not ready after $name came back"
info "servers.sh start DIR cluster (nothing to start, readiness only): $((($(now_us) - t1) / 1000)) ms"
pass "$name started again: a replica of $(cluster_node "$replica"), the cluster ready"

# Stop: no process of the cluster is left, no port answers. A node runs in
# DIR/NAME (its --dir; its command line is its title, no path): the six
# are found that way first, the positive control of the check after.
in_dir() { find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$DIR/*" 2>/dev/null || true; }
assert_eq 6 "$(in_dir | wc -l)" "processes running in $DIR/*"
pids=()
for m in node1 node2 node3 node4 node5 node6; do pids+=("$(tr -dc 0-9 <"$DIR/$m.pid")"); done
"$SERVERS" stop "$DIR" || fail "servers.sh stop failed"
for p in "${pids[@]}"; do
    proc_gone "$p" || fail "pid $p still runs after servers.sh stop"
done
for p in $(cluster_ports); do
    cluster_cli "$p" PING >/dev/null 2>&1 && fail "port $p still answers after servers.sh stop"
done
left=$(in_dir)
[[ -z $left ]] || fail "processes left running in $DIR/*: $left"
pass "servers.sh stop: no node left"
pass "cluster_set"
