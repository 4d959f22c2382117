#!/usr/bin/env bash
# scripts/fuzz.sh — build and run idpool's libFuzzer targets for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     default 30
#
# Targets (sources in test/fuzz/, seed corpora in test/fuzz/corpus/TARGET/):
#   app     application row validation (app_validate, app_row_from_text,
#           app_span_for) against an independent statement of the rules of
#           the design brief §3
#   config  config_load: config files, command lines, environment, and every
#           setting given through each source
#   url     redis://, redis-sentinel://, mysql://, http:// (webhook) and
#           http[s]:// (issuer)
#           URLs and HOST:PORT: no crash, round-trips, never a password or
#           token in an error message
#   apireq  the ID API's request parts (path, count query or form body,
#           Accept, Authorization: Bearer) against their contracts, and the
#           JSON and text bodies (cJSON parses them, within apireq_body_max)
#   httpreq the ID API server's HTTP/1.x request head parser (httpreq_parse)
#           against an independent statement of its grammar: in-place
#           strings inside the head, no write on MORE, 400/411/431/505;
#           and the percent-decoded segments of its path (httpreq_path_split)
#   httpresp what libidpool reads of an issuer's answer: the response head
#           (httpresp_parse) against an independent statement of its
#           grammar, never DONE on a prefix; the text/plain IDs
#           (httpresp_ids) written back to the body; the JSON error body
#           (httpresp_error) cut to its buffers, always NUL-terminated
#   cluster RESP bytes through hiredis' reader: every reply as a CLUSTER
#           SLOTS answer (cluster_table_read: the table always whole, as it
#           was after a failed read), every error reply as a router reads
#           it (cluster_error_read: MOVED and ASK read back the same)
#   ledger  idpoolctl explain's TIME (ledger_time_sql: only the input's digits
#           reach the SQL) and lattice counts (ledger_lattice_count against a
#           loop, no overflow near 2^64)
# Each target aborts when an invariant is violated, so logic bugs show up as
# crashes, next to what ASan and UBSan catch.
#
# Builds build-fuzz/ with clang (CC=clang meson setup build-fuzz -Dfuzz=true,
# ASan + UBSan, -fsanitize=fuzzer-no-link on everything so that the core
# library's coverage guides the fuzzer); the normal gcc builds do not change.
# Needs Debian's clang and libclang-rt-14-dev; without them it exits 77 (skip).
#
# Each target runs SECONDS_PER_TARGET seconds on a temporary copy of its seed
# corpus (the repository is not modified) with -timeout=10 per input and
# -rss_limit_mb=2048. Prints one line per target on stdout:
#   fuzz: TARGET ok (N execs)
#   fuzz: TARGET FAILED: build-fuzz/fuzz-crashes/TARGET/crash-...
# and on stderr the build, coverage and speed, and for a failure the end of
# the fuzzer's log and the command that reproduces it (paths are relative to
# the repository root; crash files stay in build-fuzz/fuzz-crashes/). Exits 1
# if any target failed, 77 if clang is missing. scripts/test.sh runs it with
# FUZZ_SECONDS (default 20) per target.
#
# Environment:
#   FUZZ_TARGETS="app url"   run only these targets
#   FUZZ_MERGE=1             afterwards, merge the inputs that add coverage
#                            into test/fuzz/corpus/TARGET/ (to commit them)
#   FUZZ_ARGS="-only_ascii=1"  extra libFuzzer flags
#
# The seeds are written by test/fuzz/seeds.py; `meson test -C build-fuzz
# --suite fuzz` replays them once (no fuzzing).
#
# Reproduce or minimise a crash by hand (from the repository root):
#   build-fuzz/test/fuzz/fuzz_app CRASH_FILE
#   build-fuzz/test/fuzz/fuzz_app -minimize_crash=1 -runs=10000 CRASH_FILE
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SECS=${1:-30}
if ! [[ $SECS =~ ^[0-9]+$ ]] || ((SECS < 1)); then
    echo "usage: $0 [SECONDS_PER_TARGET]" >&2
    exit 2
fi
BUILD=build-fuzz
# shellcheck disable=SC2206 # a list of names
TARGETS=(${FUZZ_TARGETS:-app config url apireq httpreq httpresp cluster sqlerr ledger})
CRASHES=$BUILD/fuzz-crashes

if ! command -v clang >/dev/null; then
    echo "fuzz: SKIP: clang is not installed (Debian: clang libclang-rt-14-dev)" >&2
    exit 77
fi
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
    clang -x c -fsanitize=fuzzer,address,undefined -o /dev/null - 2>/dev/null; then
    echo "fuzz: SKIP: clang cannot link -fsanitize=fuzzer (Debian: libclang-rt-14-dev)" >&2
    exit 77
fi

echo "==> building $BUILD/" >&2
if [[ ! -f $BUILD/build.ninja ]]; then
    CC=clang meson setup "$BUILD" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
        '-Dc_args=-fsanitize=fuzzer-no-link -fno-sanitize-recover=all' >&2
fi
ninja -C "$BUILD" "${TARGETS[@]/#/test/fuzz/fuzz_}" >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/idpool-fuzz.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Stop at the first error; libFuzzer checks leaks after each input.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

failed=0
for t in "${TARGETS[@]}"; do
    exe=$BUILD/test/fuzz/fuzz_$t
    corpus=$WORK/corpus-$t
    log=$WORK/$t.log
    # A fixed seed (FUZZ_SEED, default 1): a bounded run in CI then replays the
    # same inputs, so it turns red on a regression, not on a lucky draw; run
    # with FUZZ_SEED=0 (random) or longer to search for new bugs.
    args=(-max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -seed="${FUZZ_SEED:-1}" -artifact_prefix="$CRASHES/$t/")
    mkdir -p "$corpus" "$CRASHES/$t"
    if [[ -d test/fuzz/corpus/$t ]]; then
        cp -R test/fuzz/corpus/"$t"/. "$corpus"/
    fi
    if [[ -f test/fuzz/$t.dict ]]; then
        args+=(-dict="test/fuzz/$t.dict")
    fi
    # shellcheck disable=SC2206 # FUZZ_ARGS is a list of flags
    args+=(${FUZZ_ARGS:-})
    echo "==> $exe ${args[*]} (corpus: $(find "$corpus" -type f | wc -l) seeds)" >&2
    st=0
    # The outer timeout only guards against a fuzzer that ignores its own limits.
    timeout -k 10 $((SECS + 300)) "$exe" "${args[@]}" "$corpus" >"$log" 2>&1 || st=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1 || true)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    if ((st == 0)); then
        echo "fuzz: $t ok (${execs:-0} execs)"
        echo "      ${cov:-no coverage line}, ${rate:-?} execs/s" >&2
        if [[ ${FUZZ_MERGE:-0} == 1 ]]; then
            mkdir -p test/fuzz/corpus/"$t"
            "$exe" -merge=1 test/fuzz/corpus/"$t" "$corpus" >"$WORK/$t.merge.log" 2>&1 ||
                echo "      merge failed: see $WORK/$t.merge.log" >&2
            echo "      merged: test/fuzz/corpus/$t has $(find test/fuzz/corpus/"$t" -type f |
                wc -l) inputs" >&2
        fi
        continue
    fi
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [[ -n $artifact ]]; then
        echo "fuzz: $t FAILED: $artifact"
    else
        echo "fuzz: $t FAILED: exit status $st, no crash file"
    fi
    {
        echo "---- end of the log of fuzz_$t (${execs:-?} execs) ----"
        grep -v -E '^#[0-9]+.*(NEW|REDUCE|pulse)' "$log" | tail -n 40
        echo "----"
        if [[ -n $artifact ]]; then
            echo "reproduce: $exe $artifact"
        fi
    } >&2
done
exit "$failed"
