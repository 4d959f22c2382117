#!/usr/bin/env bash
# idpool_take (brief §6, issue 3): the client's take with the application's
# limits enforced inside Redis.
#
#   * up to COUNT IDs, head of the pool first (what LRANGE showed), strictly
#     increasing for a monotonic application, exactly COUNT popped;
#   * COUNT > max_size_per_times -> IDPOOL_LIMIT stating the limit;
#     COUNT 0, -1, abc, 1.5, '' -> IDPOOL_BADARG; so does a wrong number of
#     keys or arguments (never a raw Lua error); none pops anything; the
#     take is FCALL idpool_take 1 <meta> COUNT, and the two-key form of
#     earlier versions (pool and meta) still takes;
#   * unknown application (no meta), soft-deleted row, invalid row ->
#     IDPOOL_NOAPP (and takes work again once the row is fixed);
#   * rate: 4 concurrent clients hammering takes never get more than
#     max_size_per_second IDs granted in one (Redis) second, the limit is
#     reached (the test can fail), IDPOOL_RATE says how long to wait;
#   * limits follow row edits; after FLUSHALL the daemon restores them and
#     takes work again (with IDs above every one handed out before);
#   * plain LPOP keeps working.
# Then prints (does not assert) the cost of idpool_take vs LPOP, same batch
# of 100, with redis-benchmark on big prefilled pools.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

# take KEY COUNT: the raw redis-cli output of idpool_take (one ID per line,
# or the error text).
take() { rcli FCALL idpool_take 1 "$(meta_key "$1")" "$2" | sed '/^$/d'; }
# take_err KEY COUNT ERE: the take fails with an error matching ERE.
take_err() {
    local out
    out=$(take "$1" "$2")
    [[ $out =~ $3 ]] || fail "take $1 '$2': expected an error matching '$3', got: $(head -c 300 <<<"$out")"
}
# take_ok KEY COUNT: the take returns exactly COUNT IDs (printed).
take_ok() {
    local out n
    out=$(take "$1" "$2")
    n=$(grep -cE '^[0-9]+$' <<<"$out" || true)
    [[ $n == "$2" && $(wc -l <<<"$out") == "$2" ]] ||
        fail "take $1 $2: expected $2 IDs, got: $(head -c 300 <<<"$out")"
    printf '%s\n' "$out"
}
# has_limits KEY: the daemon published the limits of KEY in meta.
has_limits() { [[ -n $(rcli HGET "$(meta_key "$1")" per_take) ]]; }
# take_matches KEY COUNT ERE: for wait_until.
take_matches() { [[ $(take "$1" "$2") =~ $3 ]]; }

# tk: the functional checks. rl: the rate test (S = 500 IDs/s).
add_app tk step=1000 max_pool_size=20000 max_size_per_times=100 max_size_per_second=100000
add_app rl step=500 max_pool_size=5000 max_size_per_times=50 max_size_per_second=500
add_app gone step=100 max_pool_size=1000
add_app inv step=100 max_pool_size=1000 max_size_per_times=100
start_daemon a --tick-ms 50 --reload-ms 300

wait_until 10 pool_ge tk 20000 || fail "tk never filled (pool $(llen tk))"
wait_until 10 pool_ge rl 5000 || fail "rl never filled (pool $(llen rl))"
for k in gone inv; do
    wait_until 10 pool_ge "$k" 1000 || fail "$k never filled"
    wait_until 5 has_limits "$k" || fail "no limits in $k meta"
done

# --- head first, exactly COUNT, increasing -------------------------------------
len0=$(llen tk)
head10=$(rcli LRANGE "$(pool_key tk)" 0 9)
got=$(take_ok tk 10)
assert_eq "$head10" "$got" "idpool_take 10 returns the head of the pool, in order"
printf '%s\n' "$got" >"$DIR/tk.ids"
for _ in $(seq 20); do
    take_ok tk 100 >>"$DIR/tk.ids"
done
take_ok tk 1 >>"$DIR/tk.ids"
assert_eq 2011 "$(count_ids "$DIR/tk.ids")" "IDs taken"
assert_increasing "$DIR/tk.ids"
assert_eq $((len0 - 2011)) "$(llen tk)" "pool length after taking 2011 IDs (no refill above low water)"
pass "idpool_take returns COUNT IDs from the head, strictly increasing, popping exactly those"

# --- limit and bad arguments -------------------------------------------------------
len0=$(llen tk)
take_err tk 101 '^IDPOOL_LIMIT.*100'
take_err tk 1000000 '^IDPOOL_LIMIT.*100'
for bad in 0 -1 abc 1.5 '' ' 5' 1e2 0x10; do
    take_err tk "$bad" '^IDPOOL_BADARG'
done
# FCALL with the wrong number of keys or arguments, or keys of two applications.
bad_fcall() { # ERE ARGS...: FCALL idpool_take ARGS fails with an error matching ERE
    local want=$1 out
    shift
    out=$(rcli FCALL idpool_take "$@" 2>&1 | sed '/^$/d')
    [[ $out =~ $want ]] || fail "FCALL idpool_take $*: expected /$want/, got: $out"
}
bad_fcall '^IDPOOL_BADARG idpool_take with one key takes the meta key .*got idpool:\{tk\}:pool: FCALL idpool_take 1 ' \
    1 "$(pool_key tk)" 5
bad_fcall '^IDPOOL_BADARG idpool_take takes 1 key \(or 2\) and 1 argument, got 0 and 0' 0
bad_fcall '^IDPOOL_BADARG .*got 2 and 2' 2 "$(pool_key tk)" "$(meta_key tk)" 5 6
bad_fcall '^IDPOOL_BADARG .*got 3 and 0' 3 "$(pool_key tk)" "$(meta_key tk)" 5
assert_eq "$len0" "$(llen tk)" "pool length after refused takes"
take_ok tk 100 >/dev/null
# the long form of earlier versions (pool and meta) still takes
two=$(rcli FCALL idpool_take 2 "$(pool_key tk)" "$(meta_key tk)" 3 | sed '/^$/d' | wc -l)
assert_eq 3 "$two" "IDs of FCALL idpool_take 2 <pool> <meta> 3"
pass "COUNT above max_size_per_times -> IDPOOL_LIMIT naming 100; 0 -1 abc 1.5 '', wrong keys or arity -> IDPOOL_BADARG; nothing popped"

# --- unknown, soft-deleted, invalid -> IDPOOL_NOAPP --------------------------------
take_err nosuch 1 '^IDPOOL_NOAPP'
take_ok gone 5 >/dev/null
take_ok inv 5 >/dev/null
set_app gone deleted_at=1
set_app inv max_size_per_times=5000 # above max_pool_size: invalid
wait_until 5 take_matches gone 1 '^IDPOOL_NOAPP' || fail "soft-deleted gone: take still answers $(take gone 1 | head -n 1)"
wait_until 5 take_matches inv 1 '^IDPOOL_NOAPP' || fail "invalid inv: take still answers $(take inv 1 | head -n 1)"
# The pools are left alone: plain LPOP still sees the IDs.
[[ $(rcli LPOP "$(pool_key gone)") =~ ^[0-9]+$ ]] || fail "LPOP on the soft-deleted pool"
set_app inv max_size_per_times=100
take_count_is() { [[ $(take "$1" "$2" | grep -cE '^[0-9]+$') == "$2" ]]; }
wait_until 5 take_count_is inv 3 ||
    fail "fixed inv: take answers $(take inv 3 | head -n 1)"
pass "unknown, soft-deleted and invalid applications -> IDPOOL_NOAPP; a fixed row is served again"

# --- rate: 4 clients, never more than 500 IDs in one second ---------------------------
# Clients ask for 50, 7, 3 and 1 IDs so that the second can be filled exactly.
t0=$(now_us)
pids=()
for c in 50 7 3 1; do
    "$PYTHON" "$HARNESS_PY" hammer "$REDIS_PORT" "$(pool_key rl)" "$(meta_key rl)" "$c" 2.6 "$DIR/rate.$c" &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || fail "rate client $p failed"
done
info "rate clients ran $((($(now_us) - t0) / 1000)) ms"
python3 - "$DIR"/rate.* <<'EOF' || fail "rate limit"
import collections, re, sys
S = 500
per_sec = collections.Counter()
ambiguous = errors = calls = 0
ids = []
bad = []
for path in sys.argv[1:]:
    count = int(path.rsplit(".", 1)[1])
    for line in open(path):
        t1, t2, kind, rest = (line.rstrip("\n").split(" ", 3) + [""])[:4]
        calls += 1
        if kind == "granted":
            n, _, idlist = rest.partition(" ")
            got = idlist.split(",") if idlist else []
            if int(n) != count or len(got) != count:
                bad.append("a take of %d got %s IDs" % (count, n))
            ids += got
            if t1 == t2:
                per_sec[int(t1)] += int(n)
            else:
                ambiguous += 1
        else:
            errors += 1
            m = re.match(r"IDPOOL_RATE .*?(\d+) ?ms", rest)
            if not m:
                bad.append("unexpected error: " + rest)
            elif not 0 <= int(m.group(1)) <= 1000:
                bad.append("wait out of range: " + rest)
            elif str(S) not in rest:
                bad.append("IDPOOL_RATE does not name the limit %d: %s" % (S, rest))
secs = sorted(per_sec)
print("# rate: %d calls, %d refused, %d straddling a second; IDs granted per second: %s"
      % (calls, errors, ambiguous, " ".join("%d" % per_sec[s] for s in secs)), file=sys.stderr)
for s in secs:
    if per_sec[s] > S:
        bad.append("%d IDs granted in second %d (limit %d)" % (per_sec[s], s, S))
# The seconds wholly inside the run must be (nearly) full: the clients did push
# against the limit, so the check above could fail.
inner = secs[1:-1]
if not inner or max(per_sec[s] for s in inner) < S - 50:
    bad.append("the limit was never reached: %s" % [per_sec[s] for s in inner])
if errors < 10:
    bad.append("only %d takes refused: the clients did not hammer" % errors)
if len(set(ids)) != len(ids):
    bad.append("duplicate IDs across clients")
for b in bad[:10]:
    print("rate: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
rate_msg=$(grep -h -m1 ' error IDPOOL_RATE' "$DIR"/rate.* | head -n 1 | cut -d' ' -f4-)
info "example: $rate_msg"
pass "rate: 4 clients never got more than 500 IDs in one second; IDPOOL_RATE says how long to wait"

# --- limits follow row edits -------------------------------------------------------------
set_app tk max_size_per_times=20
wait_until 5 take_matches tk 21 '^IDPOOL_LIMIT.*20' || fail "after the edit: take 21 answers $(take tk 21 | head -n 1)"
take_ok tk 20 >/dev/null
set_app tk max_size_per_times=25 max_size_per_second=30
wait_until 5 take_matches tk 26 '^IDPOOL_LIMIT.*25' || fail "after the second edit: take 26 answers $(take tk 26 | head -n 1)"
# two takes of 20 in the same second: the second is refused
two_takes_rate() {
    take tk 20 >/dev/null
    [[ $(take tk 20) =~ ^IDPOOL_RATE.*30 ]]
}
wait_until 5 two_takes_rate || fail "per-second limit 30 not enforced"
pass "limits follow row edits within a reload (max_size_per_times 100 -> 20 -> 25, per second 100000 -> 30)"

# --- FLUSHALL: limits restored ------------------------------------------------------------
maxid=$(rcli LRANGE "$(pool_key tk)" -1 -1)
rcli FLUSHALL >/dev/null
t0=$(now_us)
wait_until 5 take_count_is tk 5 || fail "takes do not work after FLUSHALL: $(take tk 5 | head -n 1)"
info "takes worked again $((($(now_us) - t0) / 1000)) ms after FLUSHALL"
take_err tk 26 '^IDPOOL_LIMIT.*25'
sleep 1.1 # a fresh second
ids=$(take_ok tk 5)
(($(head -n 1 <<<"$ids") > maxid)) || fail "ID $(head -n 1 <<<"$ids") after FLUSHALL is not above $maxid, the last one pushed before"
pass "after FLUSHALL the daemon restores the limits (take works, limit 25 in force) and IDs keep increasing"
stop_daemon a

# --- a pool discarded by the epoch sweep is refused with IDPOOL_EPOCH, not IDPOOL_NOAPP --------
# Between the sweep's discard and the next refill a take must say "retry": clients take
# IDPOOL_NOAPP for "not served here" and give up (the Python client did, under ASan).
rcli HSET "$(meta_key tk)" epoch "an-older-process" >/dev/null
assert_eq 1 "$(rcli FCALL idpool_epoch 2 "$(pool_key tk)" "$(meta_key tk)" "$(redis_epoch)")" \
    "idpool_epoch discards a pool written under another process"
assert_eq 0 "$(llen tk)" "tk's pool after the discard"
assert_eq 25 "$(rcli HGET "$(meta_key tk)" per_take)" "per_take kept by the discard"
assert_eq '' "$(rcli HGET "$(meta_key tk)" epoch)" "epoch after the discard"
take_err tk 5 '^IDPOOL_EPOCH'
take_err tk 26 '^IDPOOL_EPOCH'
pass "a discarded pool keeps its limits: takes get IDPOOL_EPOCH (retry) until it is refilled"

# --- cost of idpool_take vs LPOP (printed, not asserted) --------------------------------------
# Two pools the daemon does not know, each with 2,000,000 IDs + a margin; the
# take's meta allows 100 per take and any rate.
N=20000 B=100 FILL=$((N * B + 1000))
fill='local base = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
for i = 0, n - 1, 1000 do
  local t = {}
  for j = 1, math.min(1000, n - i) do t[j] = string.format("%d", base + i + j) end
  redis.call("RPUSH", KEYS[1], unpack(t))
end
return redis.call("LLEN", KEYS[1])'
for k in benchpop benchtake; do
    for ((off = 0; off < FILL; off += 250000)); do
        chunk=$((FILL - off < 250000 ? FILL - off : 250000))
        rcli EVAL "$fill" 1 "$(pool_key "$k")" $((1000000000000000 + off)) "$chunk" >/dev/null
    done
    assert_eq "$FILL" "$(llen "$k")" "$k prefilled"
done
# Written under this Redis process's validated epoch, as the daemon's pools are.
rcli HSET "$(meta_key benchtake)" per_take "$B" per_second 100000000000 epoch "$(redis_epoch)" \
    >/dev/null
rcli FCALL idpool_epoch 2 "$(pool_key benchtake)" "$(meta_key benchtake)" "$(redis_epoch)" >/dev/null
bench() { redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -n "$N" -q --csv "$@" | tail -n 1 | cut -d, -f2 | tr -d '"'; }
# usec_per_call CMD: Redis' own CPU time per call (INFO commandstats) since CONFIG RESETSTAT.
usec_per_call() { rcli INFO commandstats | tr -d '\r' | sed -n "s/^cmdstat_$1:.*usec_per_call=\([0-9.]*\).*/\1/p"; }
rcli CONFIG RESETSTAT >/dev/null
rps_lpop=$(bench LPOP "$(pool_key benchpop)" "$B")
us_lpop=$(usec_per_call lpop)
rcli CONFIG RESETSTAT >/dev/null
rps_take=$(bench FCALL idpool_take 2 "$(pool_key benchtake)" "$(meta_key benchtake)" "$B")
us_take=$(usec_per_call fcall)
# Every request really popped 100 IDs (no errors measured by mistake).
assert_eq 1000 "$(llen benchpop)" "benchpop left after $N x LPOP $B"
assert_eq 1000 "$(llen benchtake)" "benchtake left after $N x idpool_take $B"
python3 - "$rps_lpop" "$rps_take" "$B" "$N" "$us_lpop" "$us_take" <<'EOF'
import sys
lpop, take, b, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
us_lpop, us_take = float(sys.argv[5]), float(sys.argv[6])
print("BENCH: redis-benchmark -n %d -c 50, batch %d: LPOP %.0f req/s = %.0f IDs/s; "
      "idpool_take %.0f req/s = %.0f IDs/s (LPOP is %.2fx as fast)"
      % (n, b, lpop, lpop * b, take, take * b, lpop / take))
print("BENCH: Redis CPU per call (INFO commandstats): LPOP %d %.2f us, FCALL idpool_take %d %.2f us (%.2fx)"
      % (b, us_lpop, b, us_take, us_take / us_lpop))
EOF
pass "take"
