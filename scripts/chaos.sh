#!/usr/bin/env bash
# The chaos suite (issue 4): every scenario test/chaos/sNN_<name>.sh runs
# several idpoold instances and recorded consumers against a real
# redis-server + mariadbd of its own (scripts/servers.sh), injects its fault,
# lets it heal and checks invariants U M A L R with idpool-check.
#
#   scripts/chaos.sh [--quick|--long] [--only LIST] [--build DIR] [--keep]
#
#   --quick      small and fast, for CI (default): ~30 s a scenario
#   --long       >= 10M IDs per scenario, more fault rounds
#   --only LIST  comma-separated scenario numbers or names (1,3,nolock)
#   --build DIR  build directory with idpoold, test/idpool-load,
#                test/idpool-check and test/idpool-clientload (default
#                build/); IDPOOLD, IDPOOL_LOAD, IDPOOL_CHECK, IDPOOLCTL and
#                IDPOOL_CLIENTLOAD in the environment win
#   --keep       keep every scenario's work dir (servers' data, daemon logs,
#                consumer logs) and the suite's log dir
#
# Each scenario runs in its own process (one failure does not stop the
# rest) and prints one row:
#   chaos: 01 sigstop ids=N duplicates=0 order=0 arith=0 unleased=0 gaps=N
#          empty_pops=N exposed=N exposed_lpop=N exposed_take=0 recovery_ms=N ...
#          secs=N fault=<evidence> result=ok
# (exposed: IDs popped again inside a measured Redis-rollback window, split
# by client kind; exposed_take > 0 fails the scenario.)
# The last line sums them up:
#   chaos: N scenarios, ids=..., duplicates=0, order=0, arith=0, unleased=0, gaps=..., exposed=..., exposed_lpop=..., exposed_take=0, empty_pops=..., failed=0, secs=...
# Exit status: 0 if every scenario passed, 1 otherwise, 64 on bad usage.
# A scenario's full log (stderr) is kept in the log dir printed at the end
# when it failed. CHAOS_SCENARIO_TIMEOUT (seconds) bounds one scenario
# (default 240 quick, 7200 long). All traffic stays on loopback (or in
# network namespaces a scenario creates and deletes).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROFILE=quick
ONLY=''
BUILD=build
KEEP=0

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 64
}

while (($#)); do
    case $1 in
    --quick) PROFILE=quick ;;
    --long) PROFILE=long ;;
    --only)
        (($# >= 2)) || usage
        ONLY=$2
        shift
        ;;
    --only=*) ONLY=${1#*=} ;;
    --build)
        (($# >= 2)) || usage
        BUILD=$2
        shift
        ;;
    --build=*) BUILD=${1#*=} ;;
    --keep) KEEP=1 ;;
    -h | --help) usage ;;
    *) usage ;;
    esac
    shift
done

[[ $BUILD == /* ]] || BUILD=$(cd "$ROOT" && cd "$BUILD" 2>/dev/null && pwd) || {
    printf 'chaos: no build directory %s\n' "$BUILD" >&2
    exit 64
}
export CHAOS_BUILD=$BUILD CHAOS_PROFILE=$PROFILE CHAOS_KEEP=$KEEP
if [[ $PROFILE == long ]]; then
    TIMEOUT=${CHAOS_SCENARIO_TIMEOUT:-7200}
else
    TIMEOUT=${CHAOS_SCENARIO_TIMEOUT:-240}
fi
# Sanitizer builds: stop at the first report; leaks and UB fail the daemon
# (the harness greps the logs). Same defaults as scripts/test.sh.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
if [[ -f $ROOT/test/lsan.supp && -z ${LSAN_OPTIONS:-} ]]; then
    export LSAN_OPTIONS=suppressions=$ROOT/test/lsan.supp:print_suppressions=0
fi

# selected FILE: the scenario is in --only (by number or name), or no --only.
selected() {
    local base num name item
    [[ -z $ONLY ]] && return 0
    base=$(basename "$1" .sh)
    num=${base#s}
    num=${num%%_*}
    name=${base#s"$num"_}
    for item in ${ONLY//,/ }; do
        [[ $item =~ ^[0-9]+$ ]] && ((10#$item == 10#$num)) && return 0
        [[ $item == "$name" || $item == "$base" ]] && return 0
    done
    return 1
}

SCENARIOS=()
for f in "$ROOT"/test/chaos/s[0-9][0-9]_*.sh; do
    [[ -e $f ]] || continue
    selected "$f" && SCENARIOS+=("$f")
done
((${#SCENARIOS[@]})) || {
    printf 'chaos: no scenario selected (--only %s)\n' "$ONLY" >&2
    exit 64
}

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/idpool-chaos.XXXXXX")
printf 'chaos: profile %s, build %s, %d scenarios, logs in %s\n' "$PROFILE" "$BUILD" \
    "${#SCENARIOS[@]}" "$LOGS"

declare -A SUM=()
KEYS=(ids duplicates order arith unleased gaps exposed exposed_lpop exposed_take empty_pops)
FAILED=0
T0=$SECONDS
STOP=0
trap 'STOP=1' INT TERM

for f in "${SCENARIOS[@]}"; do
    ((STOP == 0)) || break
    base=$(basename "$f" .sh)
    num=${base#s}
    num=${num%%_*}
    name=${base#s"$num"_}
    out=$LOGS/$base.out
    st=0
    timeout --kill-after=20 "$TIMEOUT" bash "$f" >"$out" 2>"$LOGS/$base.log" || st=$?
    rowline=$(grep -E "^chaos: $num " "$out" | tail -n 1 || true)
    if [[ -z $rowline ]]; then
        rowline="chaos: $num $name ids=0 result=FAIL"
        if ((st == 124 || st == 137)); then
            rowline+=" (timed out after ${TIMEOUT}s)"
        else
            rowline+=" (no row, exit status $st)"
        fi
    elif [[ $rowline == *result=ok && $st != 0 ]]; then
        # e.g. a leak report at a daemon's exit, after the row.
        rowline="${rowline%result=ok}result=FAIL (exit status $st)"
    fi
    printf '%s\n' "$rowline"
    grep -E "^chaos:   $num FAIL: " "$out" || true
    if [[ $rowline != *result=ok ]]; then
        FAILED=$((FAILED + 1))
        printf 'chaos:   %s log: %s\n' "$num" "$LOGS/$base.log"
    fi
    for k in "${KEYS[@]}"; do
        v=$(grep -oE " $k=[0-9]+" <<<"$rowline" | head -n 1 | cut -d= -f2 || true)
        SUM[$k]=$((${SUM[$k]:-0} + ${v:-0}))
    done
done

n=${#SCENARIOS[@]}
if ((STOP)); then
    FAILED=$((FAILED + 1))
    printf 'chaos: interrupted\n'
fi
if ((FAILED == 0 && KEEP == 0)); then
    rm -rf "$LOGS"
fi
printf 'chaos: %d scenarios, ids=%d, duplicates=%d, order=%d, arith=%d, unleased=%d, gaps=%d, exposed=%d, exposed_lpop=%d, exposed_take=%d, empty_pops=%d, failed=%d, secs=%d\n' \
    "$n" "${SUM[ids]}" "${SUM[duplicates]}" "${SUM[order]}" "${SUM[arith]}" "${SUM[unleased]}" \
    "${SUM[gaps]}" "${SUM[exposed]}" "${SUM[exposed_lpop]}" "${SUM[exposed_take]}" \
    "${SUM[empty_pops]}" "$FAILED" "$((SECONDS - T0))"
((FAILED == 0))
