#!/usr/bin/env bash
# Throwaway redis-server + mariadbd for the quickstart and the integration
# tests. Everything lives in one directory; nothing touches system services.
#
#   scripts/servers.sh start  DIR [NAME]  start (or reuse) the servers
#   scripts/servers.sh stop   DIR [NAME]  TERM, bounded wait, then KILL
#   scripts/servers.sh kill   DIR [NAME]  SIGKILL at once (crash test)
#   scripts/servers.sh status DIR         which servers are running
#   scripts/servers.sh cluster-add DIR    one more cluster node, alone
#
# NAME is redis or mysql, or a Sentinel set or a Cluster (below), whole or
# one member of it; without NAME, every server of DIR.
#
# `start DIR` picks free loopback ports, writes DIR/env (IDPOOL_REDIS_URL,
# IDPOOL_MYSQL_URL, REDIS_PORT, MYSQL_PORT, MYSQL_SOCKET) and prints it.
# It is idempotent: a server already running from DIR is left alone, and a
# stopped one is started again on the port and data recorded in DIR/env, so
# `stop DIR redis; start DIR redis` is a Redis restart that keeps its AOF.
#
# MariaDB: root has no password and may connect over TCP from 127.0.0.1 and
# ::1 (users root@localhost, root@127.0.0.1, root@::1; --skip-name-resolve).
# An initialised datadir is cached once per MariaDB version and copied.
#
# Environment: SERVERS_DETACH=1 starts the servers in their own session
# (setsid; used by the quickstart so that Ctrl-C does not reach them),
# SERVERS_START_TIMEOUT / SERVERS_STOP_TIMEOUT (seconds, default 30 / 20),
# SERVERS_REDIS_ARGS: more arguments of every redis-server that holds data
# (the primary, replicas, cluster nodes), split at spaces, after and over
# this script's (e.g. "--cluster-enabled yes" for one cluster-enabled
# Redis, its nodes.conf in DIR/redis).
#
# A Sentinel set: SERVERS_SENTINEL=1 makes `start DIR` also start two
# replicas of that Redis (replica1, replica2) and three sentinels
# (sentinel1..3, quorum 2, down-after-milliseconds SERVERS_SENTINEL_DOWN_MS,
# default 1000) monitoring it as master "idpool", and wait until every
# sentinel knows both replicas and the two other sentinels. DIR/env then
# also has IDPOOL_REDIS_SENTINEL_URL, SENTINEL_MASTER and the ports
# REPLICA1_PORT, REPLICA2_PORT, SENTINEL1_PORT..SENTINEL3_PORT. Each member
# can be named alone: `stop|kill|start DIR replica1` ... `sentinel3`;
# `redis` is the server started as the primary (after a failover it may be
# a replica), `set` all five members; with SERVERS_SENTINEL=1, `start DIR
# redis` starts the primary and its set.
#
# A Redis Cluster: SERVERS_CLUSTER=1 makes `start DIR` start six cluster
# nodes (node1..node6) instead of the one Redis (nothing would use it, and
# a test could take it for the cluster), and MariaDB as before. Each node
# is a data server as the one Redis is, plus cluster-enabled, its
# nodes.conf in DIR/NAME, a bus port of its own, cluster-node-timeout
# SERVERS_CLUSTER_NODE_TIMEOUT_MS (default 1500; kept from the first start),
# cluster-allow-reads-when-down no, cluster-require-full-coverage left at
# its default (yes: a slot without a primary stops the whole cluster) and
# repl-diskless-sync-delay 0 (a replica syncs at once, not 5 s later).
# A new cluster is made by redis-cli --cluster create: node1..node3 the
# primaries, each with one of node4..node6 as its replica (which one is
# redis-cli's choice; roles move with failovers). It is ready when every
# node says cluster_state:ok and cluster_slots_ok:16384, every replica's
# link is up and every node's CLUSTER NODES tells the same map (ids,
# addresses, roles, config epochs, slots). DIR/env then also has
# IDPOOL_REDIS_CLUSTER_URL (redis-cluster://, node1..node3 as seeds),
# CLUSTER_NODE_TIMEOUT_MS, NODE1_PORT..NODE6_PORT and the bus ports
# NODE1_BUS_PORT..NODE6_BUS_PORT; IDPOOL_REDIS_URL and REDIS_PORT name
# node1, a cluster node (a client that does not follow MOVED reaches only
# node1's slots; after a failover node1 may be a replica). Each node can be
# named alone: `stop|kill|start DIR node2` (started again, a node rejoins
# from its nodes.conf: a former primary comes back as a replica), and
# waits for its PING only; `cluster`, and in a cluster's DIR `redis`, is
# all six, and waits until the cluster is ready. SERVERS_SENTINEL and
# SERVERS_CLUSTER exclude each other.
#
# `cluster-add DIR` (a Cluster's DIR) starts one more cluster node, node7
# (then node8 ...), on free loopback ports (a bus port of its own), with
# the same settings as node1..node6, and waits for its PING; it prints
# "NAME PORT BUS_PORT". The node knows only itself (CLUSTER MEET adds it,
# as a primary without slots; nothing is loaded into it: no function, no
# ACL user). `stop|kill DIR NAME` stops it, and `stop|kill DIR` (or
# `cluster`, `redis`) stops it with the others; it is not in DIR/env and
# is not started again by `start`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCHEMA=$ROOT/sql/schema.sql
START_TIMEOUT=${SERVERS_START_TIMEOUT:-30}
STOP_TIMEOUT=${SERVERS_STOP_TIMEOUT:-20}
SENTINEL_MASTER=idpool
SENTINEL_MEMBERS=(replica1 replica2 sentinel1 sentinel2 sentinel3)
CLUSTER_MEMBERS=(node1 node2 node3 node4 node5 node6)
# Bump when the template recipe below changes, to invalidate old caches.
TEMPLATE_RECIPE=1

say() { printf 'servers: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# Finds a binary on PATH or in the sbin directories a non-root PATH lacks.
find_bin() {
    local name
    for name in "$@"; do
        if command -v "$name" >/dev/null 2>&1; then
            command -v "$name"
            return 0
        fi
        local d
        for d in /usr/sbin /usr/local/sbin /sbin /usr/local/bin /usr/bin; do
            if [[ -x $d/$name ]]; then
                echo "$d/$name"
                return 0
            fi
        done
    done
    return 1
}

now() { echo "${EPOCHREALTIME/[,.]/}"; } # microseconds

# True if PID is a live (non-zombie) process whose name is COMM. (Read
# with builtins: this and pid_of run a dozen times per call of a set.)
alive() {
    local pid=$1 comm=$2 name stat
    [[ -n $pid ]] || return 1
    read -r name 2>/dev/null <"/proc/$pid/comm" || return 1
    [[ $name == "$comm" ]] || return 1
    read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# starting PID: a process this script just launched still exists (and is
# no zombie). Unlike alive(), no name check: between fork and exec the
# child still has the shell's name, and it is ours, so pid reuse is moot.
starting() {
    local stat
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

pid_of() { # pidfile -> pid or empty
    local pid=''
    if [[ -r $1 ]]; then read -r pid 2>/dev/null <"$1" || true; fi
    echo "${pid//[!0-9]/}"
}

# COUNT different ports nobody listens on, on one line: asked of the kernel
# at once (one python3 start for all the ports a start needs; a start costs
# up to a second on a loaded machine), else found by probing.
free_ports() {
    local n=$1 p ps=''
    if ps=$(python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$n" 2>/dev/null) && [[ -n $ps ]]; then
        echo "$ps"
        return 0
    fi
    ps=' '
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 10000))
        if [[ $ps != *" $p "* ]] && port_free "$p"; then
            ps+="$p "
            ((--n > 0)) || break
        fi
    done
    ((n == 0)) || die "no free TCP port found"
    echo "$ps"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------- paths ---

setup_paths() {
    mkdir -p "$1"
    DIR=$(cd "$1" && pwd)
    ENV_FILE=$DIR/env
    REDIS_PIDFILE=$DIR/redis.pid
    REDIS_LOG=$DIR/redis.log
    MYSQL_PIDFILE=$DIR/mysql.pid
    MYSQL_LOG=$DIR/mysql.err
    REDIS_PORT='' MYSQL_PORT='' MYSQL_SOCKET='' SENTINEL_SET=0 CLUSTER_SET=0
    CLUSTER_NODE_TIMEOUT_MS=''
    local var
    for var in $(member_port_vars); do
        printf -v "$var" %s ''
    done
    if [[ -r $ENV_FILE ]]; then
        read_env
        [[ -z $SENTINEL1_PORT ]] || SENTINEL_SET=1
        [[ -z $NODE1_PORT ]] || CLUSTER_SET=1
    fi
    [[ ${SERVERS_SENTINEL:-0} != 1 ]] || SENTINEL_SET=1
    [[ ${SERVERS_CLUSTER:-0} != 1 ]] || CLUSTER_SET=1
    ((!SENTINEL_SET || !CLUSTER_SET)) || die "a Sentinel set and a Cluster exclude each other ($DIR)"
    [[ -n $CLUSTER_NODE_TIMEOUT_MS ]] || CLUSTER_NODE_TIMEOUT_MS=${SERVERS_CLUSTER_NODE_TIMEOUT_MS:-1500}
    if [[ -z $MYSQL_SOCKET ]]; then
        # sun_path holds 108 bytes: fall back to a short path for deep DIRs.
        MYSQL_SOCKET=$DIR/mysql.sock
        if ((${#MYSQL_SOCKET} > 100)); then
            MYSQL_SOCKET=${TMPDIR:-/tmp}/idpool-$(printf %s "$DIR" | md5sum | cut -c1-12).sock
        fi
    fi
}

# Reads back what DIR/env records of the servers (ports, socket, node
# timeout), in one pass: no process per variable.
read_env() {
    local line known
    known=" REDIS_PORT MYSQL_PORT MYSQL_SOCKET CLUSTER_NODE_TIMEOUT_MS $(member_port_vars | tr '\n' ' ') "
    while IFS= read -r line; do
        [[ $line =~ ^export\ ([A-Z0-9_]+)=(.*)$ && $known == *" ${BASH_REMATCH[1]} "* ]] || continue
        printf -v "${BASH_REMATCH[1]}" %s "${BASH_REMATCH[2]}"
    done <"$ENV_FILE"
}

# The names of the members' port variables in DIR/env (a cluster node has
# two ports: clients' and the cluster bus').
member_port_vars() {
    local m
    for m in "${SENTINEL_MEMBERS[@]}"; do echo "${m^^}_PORT"; done
    for m in "${CLUSTER_MEMBERS[@]}"; do echo "${m^^}_PORT ${m^^}_BUS_PORT"; done
}

write_env() {
    local tmp=$ENV_FILE.tmp
    # A cluster's DIR has no Redis of its own: node1 stands for it.
    if ((CLUSTER_SET)) && [[ -n $NODE1_PORT ]]; then REDIS_PORT=$NODE1_PORT; fi
    cat >"$tmp" <<EOF
export IDPOOL_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0
export IDPOOL_MYSQL_URL=mysql://root@127.0.0.1:$MYSQL_PORT/idpool
export REDIS_PORT=$REDIS_PORT
export MYSQL_PORT=$MYSQL_PORT
export MYSQL_SOCKET=$MYSQL_SOCKET
export SERVERS_DIR=$DIR
EOF
    if ((SENTINEL_SET)); then
        local m var
        for m in "${SENTINEL_MEMBERS[@]}"; do
            var=${m^^}_PORT
            echo "export $var=${!var}" >>"$tmp"
        done
        {
            echo "export SENTINEL_MASTER=$SENTINEL_MASTER"
            printf 'export IDPOOL_REDIS_SENTINEL_URL=redis-sentinel://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s/0#%s\n' \
                "$SENTINEL1_PORT" "$SENTINEL2_PORT" "$SENTINEL3_PORT" "$SENTINEL_MASTER"
        } >>"$tmp"
    fi
    if ((CLUSTER_SET)) && [[ -n $NODE1_PORT ]]; then
        local m var
        for m in "${CLUSTER_MEMBERS[@]}"; do
            for var in "${m^^}_PORT" "${m^^}_BUS_PORT"; do
                echo "export $var=${!var}" >>"$tmp"
            done
        done
        {
            echo "export CLUSTER_NODE_TIMEOUT_MS=$CLUSTER_NODE_TIMEOUT_MS"
            printf 'export IDPOOL_REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' \
                "$NODE1_PORT" "$NODE2_PORT" "$NODE3_PORT"
        } >>"$tmp"
    fi
    mv -f "$tmp" "$ENV_FILE"
}

# Runs a server in the background with no terminal I/O; prints its pid.
launch() {
    local log=$1
    shift
    if [[ ${SERVERS_DETACH:-0} == 1 ]]; then
        setsid "$@" </dev/null >>"$log" 2>&1 &
    else
        "$@" </dev/null >>"$log" 2>&1 &
    fi
    echo $!
}

log_tail() {
    say "last lines of $1:"
    tail -n "${2:-30}" "$1" >&2 2>/dev/null || true
}

# ---------------------------------------------------------------- redis ---

redis_cli() { "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

start_redis() {
    local pid
    pid=$(pid_of "$REDIS_PIDFILE")
    if alive "$pid" redis-server; then
        say "redis already running (pid $pid, port $REDIS_PORT)"
        return 0
    fi
    choose_port REDIS_PORT
    redis_args "$REDIS_PORT" redis
    pid=$(launch "$REDIS_LOG" "$REDIS_SERVER" "${REDIS_ARGS[@]}")
    echo "$pid" >"$REDIS_PIDFILE"
    REDIS_STARTED=$pid
}

# cluster_node_args PORT NAME BUS_PORT: REDIS_ARGS of a cluster node (node1..,
# and cluster-add's), the same settings for every one.
cluster_node_args() {
    redis_args "$1" "$2" --cluster-enabled yes \
        --cluster-config-file "$DIR/$2/nodes.conf" --cluster-port "$3" \
        --cluster-node-timeout "$CLUSTER_NODE_TIMEOUT_MS" \
        --cluster-allow-reads-when-down no --repl-diskless-sync-delay 0
}

# REDIS_ARGS: the arguments of a data server (the primary, a replica or a
# cluster node) named NAME on PORT, its data in DIR/NAME; ARGS (a cluster
# node's own) come before SERVERS_REDIS_ARGS, which may override them.
redis_args() {
    local port=$1 name=$2
    shift 2
    mkdir -p "$DIR/$name"
    REDIS_ARGS=(--port "$port" --bind 127.0.0.1 --dir "$DIR/$name"
        --save '' --appendonly yes --appendfsync everysec
        --maxmemory-policy noeviction --daemonize no
        --enable-debug-command local
        --pidfile "$DIR/$name.pid" --logfile "$DIR/$name.log" "$@")
    # shellcheck disable=SC2206 # SERVERS_REDIS_ARGS is a list of arguments
    REDIS_ARGS+=(${SERVERS_REDIS_ARGS:-})
}

# ------------------------------------------------ sentinel and cluster ---

# Whether member NAME (of a Sentinel set or a Cluster) runs.
member_running() { alive "$(pid_of "$DIR/$1.pid")" redis-server; }

# Chooses the ports of the members NAME... that do not run, before any of
# them starts: a sentinel's file names the others, node1..node3 are the
# cluster's seeds. A running member keeps its port.
choose_member_ports() {
    local m vars=()
    for m in "$@"; do
        member_running "$m" && continue
        vars+=("${m^^}_PORT")
        if [[ $m == node* ]]; then vars+=("${m^^}_BUS_PORT"); fi
    done
    choose_port "${vars[@]}"
}

# Starts member NAME (replica1, replica2, sentinel1..3 of a Sentinel set;
# node1..node6 of a Cluster) unless it runs.
start_member() {
    local name=$1 var pid conf bus
    var=${name^^}_PORT
    pid=$(pid_of "$DIR/$name.pid")
    if alive "$pid" redis-server; then
        say "$name already running (pid $pid, port ${!var})"
        return 0
    fi
    choose_port "$var"
    case $name in
    node*)
        bus=${name^^}_BUS_PORT
        choose_port "$bus"
        cluster_node_args "${!var}" "$name" "${!bus}"
        pid=$(launch "$DIR/$name.log" "$REDIS_SERVER" "${REDIS_ARGS[@]}")
        ;;
    replica*)
        redis_args "${!var}" "$name"
        pid=$(launch "$DIR/$name.log" "$REDIS_SERVER" "${REDIS_ARGS[@]}" \
            --replicaof 127.0.0.1 "$REDIS_PORT")
        ;;
    sentinel*)
        # Sentinel rewrites its file with what it learns: written once, then kept.
        conf=$DIR/$name.conf
        mkdir -p "$DIR/$name"
        if [[ ! -e $conf ]]; then
            cat >"$conf" <<CONF
port ${!var}
bind 127.0.0.1
daemonize no
dir $DIR/$name
pidfile $DIR/$name.pid
logfile $DIR/$name.log
sentinel monitor $SENTINEL_MASTER 127.0.0.1 $REDIS_PORT 2
sentinel down-after-milliseconds $SENTINEL_MASTER ${SERVERS_SENTINEL_DOWN_MS:-1000}
sentinel failover-timeout $SENTINEL_MASTER 10000
sentinel parallel-syncs $SENTINEL_MASTER 1
sentinel myid $(sentinel_id "$name")
CONF
            # What they would find out in ~10 s (replicas from INFO, sentinels
            # from hello messages), told at once.
            local r s
            for r in replica1 replica2; do
                var=${r^^}_PORT
                echo "sentinel known-replica $SENTINEL_MASTER 127.0.0.1 ${!var}" >>"$conf"
            done
            for s in sentinel1 sentinel2 sentinel3; do
                [[ $s != "$name" ]] || continue
                var=${s^^}_PORT
                echo "sentinel known-sentinel $SENTINEL_MASTER 127.0.0.1 ${!var} $(sentinel_id "$s")" >>"$conf"
            done
            var=${name^^}_PORT
        else
            sed -i "s/^port .*/port ${!var}/" "$conf"
        fi
        pid=$(launch "$DIR/$name.log" "$REDIS_SERVER" "$conf" --sentinel)
        ;;
    esac
    echo "$pid" >"$DIR/$name.pid"
    STARTED_MEMBERS+=("$name:$pid")
}

# A sentinel's run id (40 hex digits), fixed by DIR and its name.
sentinel_id() { printf '%s/%s' "$DIR" "$1" | sha1sum | cut -c1-40; }

member_cli() { # NAME ARGS...
    local var=${1^^}_PORT
    shift
    "$REDIS_CLI" -h 127.0.0.1 -p "${!var}" "$@"
}

# Every member just started answers PING before DEADLINE (microseconds).
wait_answering() {
    local deadline=$1 entry name pid
    for entry in "${STARTED_MEMBERS[@]}"; do
        name=${entry%%:*} pid=${entry#*:}
        until [[ $(member_cli "$name" ping 2>/dev/null) == PONG ]]; do
            if ! starting "$pid"; then
                log_tail "$DIR/$name.log"
                die "$name exited during start-up"
            fi
            (($(now) < deadline)) || die "$name not answering after ${START_TIMEOUT}s"
            sleep 0.05
        done
    done
}

# Every member just started answers; when the whole set (or its primary)
# was started, every replica finished its first sync (a promoted one holds
# what was written before) and every sentinel knows the master, both replicas and the two
# other sentinels.
wait_members() {
    local deadline=$(($(now) + START_TIMEOUT * 1000000)) ok m info
    wait_answering "$deadline"
    [[ -z $ONLY || $ONLY == set || $ONLY == redis ]] || return 0
    while :; do
        ok=1
        for m in redis replica1 replica2; do # every replica (roles move with failovers) synced
            info=$(member_cli "$m" INFO replication 2>/dev/null) || info=''
            [[ $info != *role:slave* || $info == *master_link_status:up* ]] || ok=0
        done
        for m in sentinel1 sentinel2 sentinel3; do
            [[ $(member_cli "$m" SENTINEL replicas "$SENTINEL_MASTER" 2>/dev/null | grep -c '^ip$') == 2 &&
                $(member_cli "$m" SENTINEL sentinels "$SENTINEL_MASTER" 2>/dev/null | grep -c '^ip$') == 2 ]] || ok=0
        done
        ((ok)) && return 0
        if (($(now) >= deadline)); then
            log_tail "$DIR/sentinel1.log"
            die "the replicas did not sync, or the sentinels did not find both replicas and each other, in ${START_TIMEOUT}s"
        fi
        sleep 0.1
    done
}

# Every node just started answers; when the whole cluster was started, a
# new one is made (cluster_create) and waited for until it is ready.
wait_cluster() {
    local deadline=$(($(now) + START_TIMEOUT * 1000000))
    wait_answering "$deadline"
    [[ -z $ONLY || $ONLY == cluster || $ONLY == redis ]] || return 0
    cluster_create "$deadline"
    until cluster_ready; do
        if (($(now) >= deadline)); then
            log_tail "$DIR/$CLUSTER_WAITING_ON.log" 10
            die "the cluster is not ready after ${START_TIMEOUT}s: $CLUSTER_WAITING"
        fi
        sleep 0.1
    done
}

# Makes a new cluster of node1..node6 (each knows only itself) with
# redis-cli --cluster create, bounded by DEADLINE; nodes that know each
# other from their nodes.conf are left to find each other again.
cluster_create() {
    local deadline=$1 m alone=0 seeds=() var left
    for m in "${CLUSTER_MEMBERS[@]}"; do
        [[ $(member_cli "$m" CLUSTER INFO 2>/dev/null) != *cluster_known_nodes:1$'\r'* ]] ||
            alone=$((alone + 1))
        var=${m^^}_PORT
        seeds+=("127.0.0.1:${!var}")
    done
    ((alone > 0)) || return 0
    ((alone == ${#CLUSTER_MEMBERS[@]})) ||
        die "$alone of the ${#CLUSTER_MEMBERS[@]} nodes know only themselves, the others know more: a cluster half made (remove $DIR)"
    left=$(((deadline - $(now)) / 1000000 + 1))
    ((left > 0)) || die "no time left to create the cluster (start timeout ${START_TIMEOUT}s)"
    if ! timeout -k 1 "$left" "$REDIS_CLI" --cluster create \
        "${seeds[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/cluster-create.log" 2>&1; then
        echo >>"$DIR/cluster-create.log" # it may end in the middle of a line of dots
        log_tail "$DIR/cluster-create.log"
        die "redis-cli --cluster create failed, or took more than ${START_TIMEOUT}s"
    fi
}

# True when the cluster is ready: every node says cluster_state:ok and
# cluster_slots_ok:16384 (every slot served by a primary nobody suspects),
# every replica's link to its primary is up, every node's CLUSTER NODES
# tells the same map (cluster_map), and in it every primary holds slots and
# has a replica (a create cut short leaves primaries without either). Else
# false, and CLUSTER_WAITING says what is missing, on member
# CLUSTER_WAITING_ON. One redis-cli per node asks all three (each start of
# it costs up to 60 ms on a loaded machine).
cluster_ready() {
    local m first='' info state slots id flags primary _addr _epoch
    local -A map=() view=() followed=()
    for m in "${CLUSTER_MEMBERS[@]}"; do
        CLUSTER_WAITING_ON=$m
        CLUSTER_WAITING="$m does not answer"
        info=$(printf 'CLUSTER INFO\nINFO replication\nCLUSTER NODES\n' | member_cli "$m" 2>/dev/null) ||
            return 1
        if [[ $info != *cluster_state:ok$'\r'* || $info != *cluster_slots_ok:16384$'\r'* ]]; then
            state=${info#*cluster_state:} slots=${info#*cluster_slots_ok:}
            CLUSTER_WAITING="$m says cluster_state:${state%%$'\r'*} cluster_slots_ok:${slots%%$'\r'*}"
            return 1
        fi
        CLUSTER_WAITING="$m is a replica whose master_link_status is not up"
        [[ $info != *role:slave* || $info == *master_link_status:up* ]] || return 1
        CLUSTER_WAITING="$m's CLUSTER NODES does not tell the map $first's does"
        if [[ -z $first ]]; then
            first=$m
            cluster_map map <<<"$info"
            continue
        fi
        cluster_map view <<<"$info"
        ((${#view[@]} == ${#map[@]})) || return 1
        for id in "${!view[@]}"; do
            [[ ${map[$id]-} == "${view[$id]}" ]] || return 1
        done
    done
    CLUSTER_WAITING="a primary without slots or without a replica (a create cut short? remove $DIR)"
    for id in "${!map[@]}"; do
        read -r _addr flags primary _epoch slots <<<"${map[$id]}"
        followed[$primary]=1
    done
    for id in "${!map[@]}"; do
        read -r _addr flags primary _epoch slots <<<"${map[$id]}"
        [[ $flags != *master* || (-n $slots && -n ${followed[$id]-}) ]] || return 1
    done
}

# Reads the lines of one node's CLUSTER NODES (those that start with a
# node id; others are skipped) into MAP (an associative array's name) as
# every node must tell it: per node id, its address, flags (but "myself"),
# primary, config epoch and slots.
cluster_map() {
    local -n into=$1
    local id addr flags primary _ping _pong epoch _link slots
    into=()
    while read -r id addr flags primary _ping _pong epoch _link slots; do
        [[ $id =~ ^[0-9a-f]{40}$ ]] || continue
        # shellcheck disable=SC2034 # into names the caller's array
        into[$id]="$addr ${flags/myself,/} $primary $epoch $slots"
    done
}

wait_redis() {
    local deadline=$(($(now) + START_TIMEOUT * 1000000))
    while (($(now) < deadline)); do
        if [[ $(redis_cli ping 2>/dev/null) == PONG ]]; then
            return 0
        fi
        if ! starting "$REDIS_STARTED"; then
            log_tail "$REDIS_LOG"
            die "redis-server exited during start-up"
        fi
        sleep 0.05
    done
    log_tail "$REDIS_LOG"
    die "redis-server not answering on 127.0.0.1:$REDIS_PORT after ${START_TIMEOUT}s"
}

# ---------------------------------------------------------------- mysql ---

# Options shared by the template bootstrap and every start: small and fast.
# flush_log_at_trx_commit=2 still survives kill -9 of mariadbd (the log is
# written to the OS at each commit), only not a machine crash.
mysqld_common() {
    MYSQLD_OPTS=(--no-defaults
        --skip-name-resolve
        --innodb-buffer-pool-size=32M --innodb-log-file-size=8M
        --innodb-flush-log-at-trx-commit=2 --innodb-use-native-aio=0
        --performance-schema=OFF
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci)
    if ((EUID == 0)); then
        MYSQLD_OPTS+=(--user=root)
    fi
}

mysql_client() { "$MYSQL" --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root "$@"; }

# Returns the cached, initialised datadir, building it once if needed.
ensure_template() {
    local version cache tmp sock pid i lockfd=''
    version=$("$MARIADBD" --version | sed -n 's/.* Ver \([^ ]*\).*/\1/p')
    [[ -n $version ]] || die "cannot read the version of $MARIADBD"
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/idpool
    TEMPLATE=$cache/mariadb-template-$version-r$TEMPLATE_RECIPE
    [[ -d $TEMPLATE ]] && return 0
    mkdir -p "$cache"
    if command -v flock >/dev/null; then
        exec {lockfd}>"$cache/.template.lock"
        flock -w 120 "$lockfd" || die "timed out waiting for $cache/.template.lock"
    fi
    if [[ ! -d $TEMPLATE ]]; then
        say "initialising a MariaDB template datadir (once) in $TEMPLATE"
        tmp=$(mktemp -d "$cache/.template.XXXXXX")
        sock=$(mktemp -u "${TMPDIR:-/tmp}/idpool-tpl-XXXXXX.sock")
        if ! "$INSTALL_DB" "${MYSQLD_OPTS[@]}" --datadir="$tmp/data" \
            --auth-root-authentication-method=normal --skip-test-db \
            >"$tmp/install.log" 2>&1; then
            log_tail "$tmp/install.log"
            rm -rf "$tmp"
            die "mariadb-install-db failed"
        fi
        # Boot it once without networking to pin down who root may be.
        pid=$(launch "$tmp/boot.err" "$MARIADBD" "${MYSQLD_OPTS[@]}" \
            --datadir="$tmp/data" --skip-networking --socket="$sock" \
            --pid-file="$tmp/boot.pid" --log-error="$tmp/boot.err")
        for ((i = 0; i < START_TIMEOUT * 10; i++)); do
            "$MYSQL" --no-defaults -S "$sock" -u root -e 'SELECT 1' >/dev/null 2>&1 && break
            alive "$pid" mariadbd || break
            sleep 0.1
        done
        if ! "$MYSQL" --no-defaults -S "$sock" -u root >"$tmp/setup.log" 2>&1 <<'EOF'; then
-- root without a password, over the socket and over loopback TCP only.
CREATE USER IF NOT EXISTS 'root'@'localhost' IDENTIFIED BY '';
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
CREATE USER IF NOT EXISTS 'root'@'::1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'localhost' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'root'@'::1' WITH GRANT OPTION;
-- root@<hostname> only draws warnings under --skip-name-resolve.
DELETE FROM mysql.global_priv WHERE User = 'root' AND Host NOT IN ('localhost', '127.0.0.1', '::1');
DELETE FROM mysql.proxies_priv WHERE Host NOT IN ('localhost', '127.0.0.1', '::1', '');
FLUSH PRIVILEGES;
SHUTDOWN;
EOF
            cat "$tmp/setup.log" >&2
            log_tail "$tmp/boot.err"
            kill -KILL "$pid" 2>/dev/null || true
            rm -rf "$tmp"
            die "could not set up the template's users"
        fi
        for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
            alive "$pid" mariadbd || break
            sleep 0.1
        done
        if alive "$pid" mariadbd; then
            kill -KILL "$pid" 2>/dev/null || true
            rm -rf "$tmp"
            die "template server did not shut down"
        fi
        mv -T "$tmp/data" "$TEMPLATE"
        rm -rf "$tmp"
    fi
    if [[ -n $lockfd ]]; then
        exec {lockfd}>&-
    fi
}

start_mysql() {
    local pid
    pid=$(pid_of "$MYSQL_PIDFILE")
    if alive "$pid" mariadbd; then
        say "mariadbd already running (pid $pid, port $MYSQL_PORT)"
        return 0
    fi
    if [[ ! -d $DIR/mysql ]]; then
        ensure_template
        cp -a "$TEMPLATE" "$DIR/mysql.tmp"
        mv -T "$DIR/mysql.tmp" "$DIR/mysql"
    fi
    choose_port MYSQL_PORT
    pid=$(launch "$MYSQL_LOG" "$MARIADBD" "${MYSQLD_OPTS[@]}" \
        --datadir="$DIR/mysql" --port="$MYSQL_PORT" --bind-address=127.0.0.1 \
        --socket="$MYSQL_SOCKET" --pid-file="$MYSQL_PIDFILE" \
        --log-error="$MYSQL_LOG")
    echo "$pid" >"$MYSQL_PIDFILE"
    MYSQL_STARTED=$pid
}

wait_mysql() {
    local deadline=$(($(now) + START_TIMEOUT * 1000000))
    while (($(now) < deadline)); do
        if mysql_client -e 'SELECT 1' >/dev/null 2>&1; then
            return 0
        fi
        if ! starting "$MYSQL_STARTED"; then
            log_tail "$MYSQL_LOG"
            die "mariadbd exited during start-up"
        fi
        sleep 0.05
    done
    log_tail "$MYSQL_LOG"
    die "mariadbd not answering on 127.0.0.1:$MYSQL_PORT after ${START_TIMEOUT}s"
}

load_schema() {
    [[ -r $SCHEMA ]] || die "schema not found: $SCHEMA"
    mysql_client -e 'CREATE DATABASE IF NOT EXISTS idpool CHARACTER SET utf8mb4'
    mysql_client idpool <"$SCHEMA"
}

# --------------------------------------------------------------- common ---

# For each port variable VAR...: keeps the port recorded in DIR/env when
# it is free; else picks a new one (a restart of a single server must keep
# its port, so that is an error).
choose_port() {
    local var need=() p pool=()
    for var in "$@"; do
        if [[ -n ${!var} ]]; then
            port_free "${!var}" && continue
            [[ -z $ONLY ]] || die "port ${!var} ($var) is taken by another process"
            say "port ${!var} is taken, picking another"
        fi
        need+=("$var")
    done
    for var in "${need[@]}"; do
        while :; do
            if ((${#pool[@]} == 0)); then
                read -ra pool <<<"$(free_ports ${#need[@]})"
                ((${#pool[@]})) || die "no free TCP port found"
            fi
            p=${pool[0]} pool=("${pool[@]:1}")
            [[ " $REDIS_PORT $MYSQL_PORT $(member_ports) " == *" $p "* ]] || break
        done
        printf -v "$var" %s "$p"
    done
}

member_ports() {
    local var
    for var in $(member_port_vars); do
        printf '%s ' "${!var}"
    done
}

# Stops the server in PIDFILE: SIGNAL, bounded wait, then KILL.
stop_one() {
    local pidfile=$1 comm=$2 sig=$3 pid i
    pid=$(pid_of "$pidfile")
    if ! alive "$pid" "$comm"; then
        rm -f "$pidfile"
        return 0
    fi
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT * 20; i++)); do
        alive "$pid" "$comm" || break
        sleep 0.05
    done
    if alive "$pid" "$comm"; then
        say "$comm (pid $pid) ignored SIG$sig for ${STOP_TIMEOUT}s, killing it"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            alive "$pid" "$comm" || break
            sleep 0.05
        done
    fi
    alive "$pid" "$comm" && die "$comm (pid $pid) will not die"
    rm -f "$pidfile"
}

# Whether this command is for server $1. The Sentinel set's members go
# with `set`, and with `redis` when SERVERS_SENTINEL=1 (start DIR redis: the
# primary and its set); the cluster's nodes with `cluster` and `redis`.
wants() {
    [[ -z $ONLY || $ONLY == "$1" ]] && return 0
    case $1 in
    replica* | sentinel*) [[ $ONLY == set || ($ONLY == redis && ${SERVERS_SENTINEL:-0} == 1) ]] ;;
    node*) [[ $ONLY == cluster || $ONLY == redis ]] ;;
    *) return 1 ;;
    esac
}

# Those of the members NAME... this command is for, one a line.
wanted() {
    local m
    for m in "$@"; do
        if wants "$m"; then echo "$m"; fi
    done
}

cmd_start() {
    local t0 redis_up=0 mysql_up=0 m members=()
    t0=$(now)
    REDIS_SERVER=$(find_bin redis-server) || die "redis-server not found (apt-get install redis-server)"
    REDIS_CLI=$(find_bin redis-cli) || die "redis-cli not found (apt-get install redis-tools)"
    MARIADBD=$(find_bin mariadbd mysqld) || die "mariadbd not found (apt-get install mariadb-server)"
    INSTALL_DB=$(find_bin mariadb-install-db mysql_install_db) || die "mariadb-install-db not found"
    MYSQL=$(find_bin mariadb mysql) || die "mariadb client not found (apt-get install mariadb-client)"
    mysqld_common
    REDIS_STARTED='' MYSQL_STARTED='' STARTED_MEMBERS=()
    # Redis (or the cluster's nodes) and MariaDB start in parallel; then
    # wait for each.
    if wants redis && ((!CLUSTER_SET)); then start_redis; fi
    if wants mysql; then start_mysql; fi
    if ((CLUSTER_SET)); then
        mapfile -t members < <(wanted "${CLUSTER_MEMBERS[@]}")
        choose_member_ports "${members[@]}"
        for m in "${members[@]}"; do start_member "$m"; done
    fi
    write_env
    if [[ -n $REDIS_STARTED ]]; then wait_redis; redis_up=1; fi
    if [[ -n $MYSQL_STARTED ]]; then wait_mysql; mysql_up=1; fi
    if wants mysql; then load_schema; fi
    if ((SENTINEL_SET)); then
        [[ -n $REDIS_PORT ]] || die "the Sentinel set needs the primary: start DIR redis first"
        mapfile -t members < <(wanted "${SENTINEL_MEMBERS[@]}")
        choose_member_ports "${members[@]}"
        for m in "${members[@]}"; do start_member "$m"; done
        write_env
        wait_members
    fi
    if ((CLUSTER_SET)); then wait_cluster; fi
    say "ready in $((($(now) - t0) / 1000)) ms (started: redis=$redis_up mysql=$mysql_up members=${#STARTED_MEMBERS[@]}) in $DIR"
    cat "$ENV_FILE"
}

# The extra cluster nodes of cluster-add (node7 ...), one a line.
extra_nodes() {
    local d n
    for d in "$DIR"/node*/; do
        n=$(basename "$d")
        [[ $n =~ ^node([0-9]+)$ ]] && ((BASH_REMATCH[1] > ${#CLUSTER_MEMBERS[@]})) && echo "$n"
    done
    return 0
}

cmd_cluster_add() {
    local i=$((${#CLUSTER_MEMBERS[@]} + 1)) name port bus pid
    ((CLUSTER_SET)) && [[ -n $NODE1_PORT ]] || die "cluster-add: $DIR holds no Cluster"
    REDIS_SERVER=$(find_bin redis-server) || die "redis-server not found (apt-get install redis-server)"
    REDIS_CLI=$(find_bin redis-cli) || die "redis-cli not found (apt-get install redis-tools)"
    while [[ -e $DIR/node$i ]]; do i=$((i + 1)); done
    name=node$i
    read -r port bus <<<"$(free_ports 2)"
    [[ -n $port && -n $bus ]] || die "no free TCP port found"
    cluster_node_args "$port" "$name" "$bus"
    pid=$(launch "$DIR/$name.log" "$REDIS_SERVER" "${REDIS_ARGS[@]}")
    echo "$pid" >"$DIR/$name.pid"
    declare -g "${name^^}_PORT=$port" # for member_cli
    STARTED_MEMBERS=("$name:$pid")
    wait_answering $(($(now) + START_TIMEOUT * 1000000))
    echo "$name $port $bus"
}

cmd_stop() {
    local sig=$1
    local m pid extra
    mapfile -t extra < <(extra_nodes)
    # Every member is signalled first: they stop together, not one after
    # the other (a primary may wait for its replicas before it exits).
    for m in "${CLUSTER_MEMBERS[@]}" "${extra[@]}" "${SENTINEL_MEMBERS[@]}"; do
        pid=$(pid_of "$DIR/$m.pid")
        if wants "$m" && alive "$pid" redis-server; then kill "-$sig" "$pid" 2>/dev/null || true; fi
    done
    for m in "${CLUSTER_MEMBERS[@]}" "${extra[@]}" "${SENTINEL_MEMBERS[@]}"; do
        if wants "$m"; then
            stop_one "$DIR/$m.pid" redis-server "$sig" # a sentinel is redis-server --sentinel
        fi
    done
    if wants redis; then stop_one "$REDIS_PIDFILE" redis-server "$sig"; fi
    if wants mysql; then stop_one "$MYSQL_PIDFILE" mariadbd "$sig"; fi
}

cmd_status() {
    local rc=0 pid members=()
    if ((!CLUSTER_SET)); then
        pid=$(pid_of "$REDIS_PIDFILE")
        if alive "$pid" redis-server; then
            echo "redis: running, pid $pid, port $REDIS_PORT"
        else
            echo "redis: stopped"
            rc=3
        fi
    fi
    pid=$(pid_of "$MYSQL_PIDFILE")
    if alive "$pid" mariadbd; then
        echo "mysql: running, pid $pid, port $MYSQL_PORT"
    else
        echo "mysql: stopped"
        rc=3
    fi
    if ((SENTINEL_SET)); then members=("${SENTINEL_MEMBERS[@]}"); fi
    if ((CLUSTER_SET)); then members=("${CLUSTER_MEMBERS[@]}"); fi
    if ((${#members[@]})); then
        local m var
        for m in "${members[@]}"; do
            var=${m^^}_PORT
            pid=$(pid_of "$DIR/$m.pid")
            if alive "$pid" redis-server; then
                echo "$m: running, pid $pid, port ${!var}"
            else
                echo "$m: stopped"
                rc=3
            fi
        done
    fi
    return "$rc"
}

main() {
    (($# >= 2)) || usage
    local cmd=$1
    setup_paths "$2"
    ONLY=${3:-}
    case $ONLY in '' | redis | mysql | set | replica[12] | sentinel[123] | cluster | node[1-6]) ;;
    node[0-9]*) [[ $cmd == stop || $cmd == kill ]] || usage ;; # an extra node (cluster-add)
    *) usage ;;
    esac
    case $cmd in
    start) cmd_start ;;
    cluster-add) cmd_cluster_add ;;
    stop) cmd_stop TERM ;;
    kill) cmd_stop KILL ;;
    status) cmd_status ;;
    *) usage ;;
    esac
}

main "$@"
