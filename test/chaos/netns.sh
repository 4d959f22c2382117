#!/usr/bin/env bash
# Sourced by the chaos scenarios that cut network traffic (08, 16):
#
#   source "$(dirname "$0")/netns.sh"
#   chaos_netns NN NAME "$0" "$@"
#
# Outside a namespace, chaos_netns creates one (idpool-chaosNN-PID), brings
# up its loopback, runs the script again inside it (CHAOS_NETNS set), deletes
# the namespace however that ends (a TERM to the inner run first), and exits
# with the inner run's status. Without ip, nft or the right to create a
# namespace it prints the scenario's FAIL row. Inside, it returns at once.
# Servers, daemons and clients then talk over the namespace's loopback, where
# nftables can cut one TCP port without touching the host.

chaos_netns() {
    local nn=$1 name=$2 script=$3 ns rc=0
    shift 3
    [[ -z ${CHAOS_NETNS:-} ]] || return 0
    ns=idpool-chaos$nn-$$
    netns_fail_row() {
        printf 'chaos: %s %s ids=0 duplicates=0 order=0 arith=0 unleased=0 gaps=0' "$nn" "$name"
        printf ' empty_pops=0 exposed=0 recovery_ms=- fault=none result=FAIL\n'
        printf 'chaos:   %s FAIL: %s\n' "$nn" "$1"
        exit 1
    }
    command -v ip >/dev/null || netns_fail_row "ip (iproute2) is not installed"
    command -v nft >/dev/null || netns_fail_row "nft (nftables) is not installed"
    ip netns add "$ns" 2>/dev/null || netns_fail_row "cannot create a network namespace (root needed)"
    NETNS_NAME=$ns
    NETNS_INNER=''
    trap netns_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    ip -n "$ns" link set lo up || netns_fail_row "cannot bring up lo in $ns"
    CHAOS_NETNS=$ns ip netns exec "$ns" bash "$script" "$@" &
    NETNS_INNER=$!
    wait "$NETNS_INNER" || rc=$?
    NETNS_INNER=''
    exit "$rc"
}

# shellcheck disable=SC2317 # the trap
netns_exit() {
    local rc=$? i
    trap - EXIT INT TERM
    if [[ -n $NETNS_INNER ]] && kill -0 "$NETNS_INNER" 2>/dev/null; then
        kill -TERM "$NETNS_INNER" 2>/dev/null
        for ((i = 0; i < 300; i++)); do
            kill -0 "$NETNS_INNER" 2>/dev/null || break
            sleep 0.1
        done
    fi
    ip netns delete "$NETNS_NAME" 2>/dev/null
    exit "$rc"
}

# Inside the namespace: one nftables table, and `partition PORT` (drop the
# port's traffic both ways, counted), `heal` (remove the rules), `dropped`
# (the packets counted so far).
netns_nft() {
    nft add table inet chaos
    nft add chain inet chaos out '{ type filter hook output priority 0; policy accept; }'
}
partition() {
    nft add rule inet chaos out tcp dport "$1" counter drop
    nft add rule inet chaos out tcp sport "$1" counter drop
}
heal() { nft flush chain inet chaos out; }
dropped() {
    nft list chain inet chaos out | sed -n 's/.*counter packets \([0-9]*\).*/\1/p' |
        awk '{ s += $1 } END { print s + 0 }'
}
