#!/usr/bin/env bash
# Chaos 13 library_churn: the Redis function library changes under the
# refillers while a stale one wakes up (issue "No duplicate ever", finding 1;
# design brief §4.3: a push applies only while its refiller holds the lock).
#
# Two healthy daemons b and c (rows re-read only on SIGHUP) serve `main`,
# popped all along by two LPOP and one idpool_take consumer. Each round adds
# a fresh application that only a victim x sees at first; x is started with
# IDPOOL_FAULT=locked:stop:2, so it fills the pool once and stops itself
# holding the lock of its second refill, with IDs to draw from the lease in
# meta. b and c are told (SIGHUP), take over once x's lock expired and push
# from the same meta. Then, while b and c refill, one of:
#   older   an older release of the library (no idpool_guard, no
#           idpool_version) replaces ours (FUNCTION LOAD REPLACE, as a
#           rolling upgrade's older daemon or a rollback would);
#   delete  FUNCTION DELETE idpool;
#   flush   FUNCTION FLUSH;
#   luaerr  the application's meta becomes a string, so every script that
#           reads it fails with WRONGTYPE (and is deleted afterwards: the
#           daemons discard the pool and refill from a fresh lease);
# and x is continued at once. x's push must not apply: its transaction is
# discarded when the guard does not run or fails ("the fence did not run"),
# or fenced off when it does. The library must come back by itself (a
# daemon loads it again on "Function not found"), and the pool be served
# again (R).
# U M A L over everything popped: the stale push would have handed out IDs
# b or c pushed from the same lease, and rewound meta's next.
# Evidence that the fault landed: x stopped holding the lock, the churn was
# seen (our library gone or replaced, or meta of the wrong type), x's push
# was refused each round, and at least one refusal was a guard that did not
# run.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

TTL=500
STOPPED_S=1.5 # > 2 x TTL: the lock is gone and b or c pushed meanwhile
CHAOS_DAEMON_ARGS+=(--lock-ttl-ms "$TTL")
LUA=$IDPOOL_SOURCE_ROOT/src/idpool.lua
OURS=$(grep -c "register_function" "$LUA")

# older_library: our library as a release without idpool_guard and idpool_version.
older_library() {
    grep -vE "register_function(\('idpool_guard'|\{function_name = 'idpool_version')|^ +flags = \{'no-writes'\}\}$" "$LUA"
}
functions() { rcli FUNCTION LIST LIBRARYNAME idpool | grep -c '^idpool_' || true; }
# refusals NAME: pushes of daemon NAME that did not apply, by the reason logged.
nofence() { log_count "$1" 'the fence did not run'; }
fenced() { log_count "$1" 'push fenced off'; }
refused() { (($(nofence "$1") + $(fenced "$1") > 0)); }
# met X: errors logged by b, c and X that the churn causes.
met() {
    local re='Function not found|WRONGTYPE'
    echo $(($(log_count b "$re") + $(log_count c "$re") + $(log_count "$1" "$re")))
}

add_app main step=200 max_pool_size=$((2 * CHAOS_POOL)) min_size_percent=50 increment_max=5 \
    delta=7 remainder=3 start_offset=1000000 max_size_per_second=1000000
APPS=(main)
chaos_daemon b --reload-ms 600000
chaos_daemon c --reload-ms 600000
wait_until 10 pool_ge main $((CHAOS_POOL / 2)) || fail "main never filled"
consumers_start main 2
consumers_start main 1 --mode take

ACTIONS=()
for ((i = 0; i < CHAOS_ROUNDS; i++)); do ACTIONS+=(older delete flush luaerr); done
r=0 NOFENCE=0 FENCED=0 CHURNED=0 RELOADED=0
for action in "${ACTIONS[@]}"; do
    r=$((r + 1))
    key=$action$r
    add_app "$key" step=200 max_pool_size=4000 min_size_percent=50 increment_max=3 \
        max_size_per_second=1000000
    APPS+=("$key")
    x=x$r
    # A long Redis timeout: x's replies must not be declared lost when it
    # wakes up, it must meet the churn with its own connection.
    IDPOOL_FAULT=locked:stop:2 chaos_daemon "$x" --redis-timeout-ms 10000
    app_params "$key"
    consumers_start "$key" 1 --rate 50
    if ! wait_daemon_stopped "$x" 15; then
        failure "$action: $x never stopped itself"
        daemons_stop "$x"
        continue
    fi
    signal_daemon b HUP
    signal_daemon c HUP
    t0=$(now_ns)
    recovered "$key" "$t0"
    sleep "$STOPPED_S"
    met0=$(met "$x")
    case $action in
    older) older_library | rcli -x FUNCTION LOAD REPLACE >/dev/null ;;
    delete) rcli FUNCTION DELETE idpool >/dev/null ;;
    flush) rcli FUNCTION FLUSH >/dev/null ;;
    luaerr)
        rcli DEL "$(meta_key "$key")" >/dev/null
        rcli SET "$(meta_key "$key")" not-a-hash >/dev/null
        ;;
    esac
    signal_daemon "$x" CONT
    t_churn=$(now_ns)
    if wait_until 10 refused "$x"; then
        info "$action: $x's push did not apply: nofence=$(nofence "$x") fenced=$(fenced "$x")"
        NOFENCE=$((NOFENCE + $(nofence "$x")))
        FENCED=$((FENCED + $(fenced "$x")))
    else
        failure "$action: $x's push after the churn was neither refused nor fenced"
    fi
    # Some daemon met the churn (b and c may have loaded ours again before x
    # continued: then x's guard ran and fenced it off).
    if wait_until 5 eval '(($(met "$x") > met0))'; then
        CHURNED=$((CHURNED + 1))
    else
        failure "$action: no daemon met the churn"
    fi
    if [[ $action == luaerr ]]; then
        rcli DEL "$(meta_key "$key")" >/dev/null
    elif wait_until 10 eval '(($(functions) == OURS))'; then
        RELOADED=$((RELOADED + 1))
    else
        failure "$action: the library was not loaded again within 10 s ($(functions) functions)"
    fi
    recovered "$key" "$t_churn"
    recovered main "$t_churn"
    daemons_stop "$x"
done
fault_landed "rounds=$r,churned=$CHURNED,reloaded=$RELOADED,nofence=$NOFENCE,fenced=$FENCED" \
    "((CHURNED == r && NOFENCE > 0 && RELOADED == r - CHAOS_ROUNDS))"

consumers_wait "$(apps_csv)" "$CHAOS_IDS"
finish_apps
