#!/usr/bin/env bash
# The test command: builds build/ and build-asan/ (ASan + UBSan), runs the
# unit, valgrind, perf and rules suites in build/, the integration suite
# and the chaos suite in build-asan/ (with TEST_ASAN=0: the integration
# suite in build/ instead), the fuzzers and the Debian packages, and ends
# with one line "N passed, M failed".
# Exits non-zero
# if anything failed. In CI a skipped test counts as failed (CI installs
# Redis and MariaDB, so nothing may skip there): CI set to anything but
# empty, 0, false, no or off (CI=true, CI=1, CI=yes...).
#
#   scripts/test.sh              everything
#   TEST_ASAN=0 scripts/test.sh  skip the sanitizer build and run
#   TEST_CHAOS=0 scripts/test.sh skip the chaos suite (scripts/chaos.sh --quick on build-asan/)
#   TEST_FUZZ=0 scripts/test.sh  skip the fuzz stage (scripts/fuzz.sh, FUZZ_SECONDS=20 per target)
#   TEST_DEB=0 scripts/test.sh   skip the deb stage (test/deb_check.sh: builds, installs and purges
#                                the Debian packages on this machine; needs root)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

PASSED=0 FAILED=0 SKIPPED=0
NOTES=()
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/idpool-test-logs.XXXXXX")
trap 'rm -rf "$LOGS"' EXIT

say() { printf '\n==> %s\n' "$*" >&2; }

# In CI, whatever true-ish value CI has; exported for the tests' partial
# skips (lib.sh: skip_part).
case ${CI:-} in
'' | 0 | [Ff]alse | FALSE | [Nn]o | NO | [Oo]ff | OFF) IDPOOL_CI=0 ;;
*) IDPOOL_CI=1 ;;
esac
export IDPOOL_CI

# build DIR [meson options]: configures DIR once, then compiles it.
build() {
    local dir=$1
    shift
    say "building $dir/"
    if [[ ! -f $dir/build.ninja ]]; then
        meson setup "$dir" "$@" || return 1
    fi
    ninja -C "$dir"
}

# count LOG FIELD: the number on meson's summary line "FIELD:   N".
count() {
    sed -n "s/^$2: *\([0-9][0-9]*\) *\$/\1/p" "$1" | tail -n 1
}

# run_suite LABEL DIR [meson test options]: runs the tests and adds meson's
# summary counts to the totals. A run that ends without a summary, or fails
# without counting a failure, counts as one failure.
run_suite() {
    local label=$1 dir=$2 log st=0 ok xfail fail xpass skip timeout
    shift 2
    log=$LOGS/$label.log
    say "meson test -C $dir $*"
    meson test -C "$dir" --print-errorlogs "$@" 2>&1 | tee "$log" || st=${PIPESTATUS[0]}
    ok=$(count "$log" Ok)
    if [[ -z $ok ]]; then
        if grep -q 'No suitable tests defined' "$log"; then
            NOTES+=("$label: no tests")
            return 0
        fi
        FAILED=$((FAILED + 1))
        NOTES+=("$label: meson test exited with status $st and no summary")
        return 0
    fi
    xfail=$(count "$log" 'Expected Fail')
    fail=$(count "$log" Fail)
    xpass=$(count "$log" 'Unexpected Pass')
    skip=$(count "$log" Skipped)
    timeout=$(count "$log" Timeout)
    local p=$((ok + ${xfail:-0}))
    local f=$((${fail:-0} + ${xpass:-0} + ${timeout:-0}))
    if ((IDPOOL_CI)); then
        f=$((f + ${skip:-0}))
    else
        SKIPPED=$((SKIPPED + ${skip:-0}))
    fi
    if ((st != 0 && f == 0)); then
        f=1
        NOTES+=("$label: meson test exited with status $st")
    fi
    PASSED=$((PASSED + p))
    FAILED=$((FAILED + f))
    NOTES+=("$label: $p passed, $f failed${skip:+, $skip skipped}")
    if ((f)); then
        failure_tails "$label" "$dir/meson-logs/testlog.json" >>"$LOGS/tails.txt" || true
    fi
}

# failure_tails LABEL JSON: for each test of meson's log that did not pass,
# its name and the last lines of its output, so that the end of the run
# (all that a CI page may keep) says what failed and why.
failure_tails() {
    python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
for line in open(path, encoding="utf-8", errors="replace"):
    t = json.loads(line)
    if t["result"] in ("OK", "EXPECTEDFAIL", "SKIP"):
        continue
    out = (t.get("stdout") or "").splitlines()[-10:]
    err = (t.get("stderr") or "").splitlines()
    # The harness dumps the servers' and daemons' logs after a FAIL line
    # ("----- a.log (last 200 lines) -----"): what failed is just before.
    cut = next((i for i, l in enumerate(err) if l.startswith("----- ")), len(err))
    print(f"--- {label}: {t['name']}: {t['result']} (exit {t.get('returncode')}), last lines:")
    for l in out + err[max(0, cut - 30):cut]:
        print("    " + l)
PY
}

# run_chaos DIR: the chaos suite's quick profile with the binaries of DIR;
# each scenario row counts as one test (result=ok passed, result=FAIL
# failed); a run without its summary line, or failing without a FAIL row,
# counts as one failure.
run_chaos() {
    local log=$LOGS/chaos.log st=0 ok fail
    say "scripts/chaos.sh --quick --build $1"
    scripts/chaos.sh --quick --build "$1" 2>&1 | tee "$log" || st=${PIPESTATUS[0]}
    ok=$(grep -cE '^chaos: [0-9]+ .* result=ok$' "$log" || true)
    fail=$(grep -cE '^chaos: [0-9]+ .* result=FAIL' "$log" || true)
    if ! grep -qE '^chaos: [0-9]+ scenarios, ' "$log"; then
        fail=$((fail + 1))
        NOTES+=("chaos: scripts/chaos.sh exited with status $st and no summary")
    elif ((st != 0 && fail == 0)); then
        fail=1
        NOTES+=("chaos: scripts/chaos.sh exited with status $st")
    fi
    PASSED=$((PASSED + ok))
    FAILED=$((FAILED + fail))
    NOTES+=("chaos: $ok passed, $fail failed")
}

# run_checks LABEL SKIP_NOTE COMMAND...: runs a script that prints a line
# "LABEL: NAME ok (...)" per check passed and "LABEL: NAME FAILED..." per
# check failed, and exits 77 when it cannot run here (a skip, which CI
# counts as a failure); a failure without a FAILED line counts as one.
run_checks() {
    local label=$1 note=$2 log=$LOGS/$1.log st=0 ok failed
    shift 2
    say "$*"
    "$@" | tee "$log" || st=${PIPESTATUS[0]}
    ok=$(grep -c "^$label: .* ok (" "$log" || true)
    failed=$(grep -c "^$label: .* FAILED" "$log" || true)
    if ((st == 77)) && ((!IDPOOL_CI)); then
        SKIPPED=$((SKIPPED + 1))
        NOTES+=("$label: skipped ($note)")
    elif ((st != 0 && failed == 0)); then
        failed=1
        NOTES+=("$label: $1 exited with status $st")
    fi
    PASSED=$((PASSED + ok))
    FAILED=$((FAILED + failed))
    NOTES+=("$label: $ok passed, $failed failed")
}

t0=$SECONDS

# The integration suite runs once: in build-asan/, where each test's
# daemons and clients also run under the sanitizers (the stricter of the two
# builds, and twice the suite would be 20 minutes more of CI); in build/
# when the sanitizer build is skipped. Uninitialised reads, which ASan does
# not see, are valgrind's suite's in build/.
normal_args=()
if [[ ${TEST_ASAN:-1} != 0 ]]; then
    normal_args=(--no-suite integration)
fi
if build build; then
    run_suite normal build "${normal_args[@]}"
else
    FAILED=$((FAILED + 1))
    NOTES+=("build/: build failed")
fi

if [[ ${TEST_ASAN:-1} != 0 ]]; then
    # Stop at the first report; leaks and UB fail the daemon's exit status,
    # which the integration harness checks (and greps the logs for).
    export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    # Leaks inside system libraries we cannot fix go in test/lsan.supp.
    if [[ -f test/lsan.supp && -z ${LSAN_OPTIONS:-} ]]; then
        export LSAN_OPTIONS=suppressions=$ROOT/test/lsan.supp:print_suppressions=0
    fi
    if build build-asan -Db_sanitize=address,undefined -Db_lundef=false; then
        run_suite asan build-asan --suite integration --timeout-multiplier 2
        # The chaos suite (issue 4) under the sanitizers; TEST_CHAOS=0 skips it.
        if [[ ${TEST_CHAOS:-1} != 0 ]]; then
            run_chaos build-asan
        fi
    else
        FAILED=$((FAILED + 1))
        NOTES+=("build-asan/: build failed")
    fi
fi

if [[ ${TEST_FUZZ:-1} != 0 ]]; then
    # libFuzzer targets in build-fuzz/ (clang), FUZZ_SECONDS each; one test per target.
    run_checks fuzz "clang or libclang-rt-14-dev not installed" scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi

if [[ ${TEST_DEB:-1} != 0 ]]; then
    # The Debian packages built, linted, installed on this machine, checked
    # and purged; one test per check. Needs root (CI runs as root).
    run_checks deb "not root, a packaging tool missing, or idpool installed here: see 'deb: SKIP' above" \
        test/deb_check.sh
fi

if [[ -s $LOGS/tails.txt ]]; then
    say "what failed"
    cat "$LOGS/tails.txt"
fi
say "summary ($((SECONDS - t0)) s)"
for n in "${NOTES[@]}"; do
    printf '  %s\n' "$n"
done
if ((SKIPPED)); then
    printf '  %d skipped (Redis or MariaDB not installed?)\n' "$SKIPPED"
fi
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
