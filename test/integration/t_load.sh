#!/usr/bin/env bash
# The load generator idpool-load as a chaos consumer (test/tools/load.c):
# (a) a list of known IDs popped by 4 connections with --record: the logs
#     hold exactly those IDs, each once; summary, --timeline and --hist agree;
#     the summary's t0_ns is the run's start on CLOCK_MONOTONIC (the
#     benchmark lines up the timelines of loads run side by side with it);
# (b) pops of an empty list are counted and logged as count=0 records;
# (c) strict IDs: a non-canonical ID is exit 2; a bad flag is exit 64;
# (d) --reconnect: a consumer survives a Redis restart (stop + start, AOF
#     kept), resumes, stops on --stop-file with exit 0 and never logs an ID
#     twice or one that was not in the list.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
require_built idpool-load "$IDPOOL_LOAD"
setup

load() { "$IDPOOL_LOAD" --port "$REDIS_PORT" "$@"; }
list_len() { rcli LLEN "$1"; } # a plain list (lib.sh's llen takes an app)
mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; } # CLOCK_MONOTONIC
# field SUMMARY NAME: the value of NAME=... in a summary line.
field() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<"$1"; }
# fill KEY N MUL: RPUSH the IDs MUL*i + 1 for i = 1..N.
fill() {
    rcli EVAL "for i = 1, tonumber(ARGV[1]) do
        redis.call('RPUSH', KEYS[1], tostring(i * tonumber(ARGV[2]) + 1)) end
        return redis.call('LLEN', KEYS[1])" 1 "$1" "$2" "$3"
}
# logs_check PREFIX CONNS EXPECTED_FILE|- : reads PREFIX.<i>.bin; prints
# "ids empties"; fails on a bad header or record, a duplicate, an ID not in
# EXPECTED_FILE (one per line; '-' skips that check), or with EXPECTED_FILE
# given, an ID of it missing.
logs_check() {
    python3 - "$@" <<'EOF'
import struct, sys
prefix, conns, expected = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seen, empties = {}, 0
for i in range(conns):
    b = open('%s.%d.bin' % (prefix, i), 'rb').read()
    if b[:8] != b'IDPLOG1\n' or struct.unpack_from('<IIQQ', b, 8) != (1, i, 0, 0):
        sys.exit('bad header in %s.%d.bin' % (prefix, i))
    off, last = 32, 0
    while off < len(b):
        if off + 24 > len(b):
            sys.exit('truncated record in %s.%d.bin' % (prefix, i))
        ts, tr, n, flags = struct.unpack_from('<QQII', b, off)
        off += 24
        if flags != 0 or tr < ts or ts < last or off + 8 * n > len(b):
            sys.exit('bad record at %d in %s.%d.bin' % (off - 24, prefix, i))
        last = ts
        empties += n == 0
        for v in struct.unpack_from('<%dQ' % n, b, off):
            if v in seen:
                sys.exit('ID %d popped twice (logs %d and %d)' % (v, seen[v], i))
            seen[v] = i
        off += 8 * n
if expected != '-':
    want = set(int(x) for x in open(expected))
    extra, missing = set(seen) - want, want - set(seen)
    if extra:
        sys.exit('%d IDs logged that were never in the list, e.g. %d' % (len(extra), min(extra)))
    if missing:
        sys.exit('%d IDs missing from the logs, e.g. %d' % (len(missing), min(missing)))
print(len(seen), empties)
EOF
}

# ============================================ (a) known IDs, 4 consumers ===
N=20000
assert_eq $N "$(fill a $N 3)" "prefill"
rcli LRANGE a 0 -1 >"$DIR/a.ids"
before=$(mono_ns)
out=$(load --mode lpop --key a --batch 7 --conns 4 --count $N --record "$DIR/a" \
    --timeline "$DIR/a.tl" --hist "$DIR/a.hist" --timeout-ms 5000) ||
    fail "lpop batch 7: exit $?"
after=$(mono_ns)
info "$out"
[[ $out =~ ^load:\ mode=lpop\ batch=7\ conns=4\ pipeline=1\ secs=[0-9]+\.[0-9]{2}\ requests=[0-9]+\ ids=$N\ ids_per_s=[0-9]+\ empties=0\ errors=0\ p50_us=[0-9]+\ p99_us=[0-9]+\ p999_us=[0-9]+\ max_us=[0-9]+ ]] ||
    fail "summary line: $out"
assert_eq 0 "$(list_len a)" "list drained"
assert_eq "$N 0" "$(logs_check "$DIR/a" 4 "$DIR/a.ids")" "logs of batch 7"
assert_eq $N "$(awk '{s += $2} END {print s}' "$DIR/a.tl")" "timeline ids"
assert_eq "$(field "$out" requests)" "$(awk '{s += $2} END {print s}' "$DIR/a.hist")" "hist count"
t0=$(field "$out" t0_ns)
[[ $t0 =~ ^[0-9]+$ ]] && ((before < t0 && t0 < after)) ||
    fail "t0_ns '$t0' is not between $before and $after (CLOCK_MONOTONIC before and after the run)"
pass "4 connections popped $N known IDs, each logged exactly once"

# Single LPOPs (no count), and take-sized pipelining without --record.
fill b 3000 5 >/dev/null
rcli LRANGE b 0 -1 >"$DIR/b.ids"
out=$(load --mode lpop --key b --conns 4 --count 3000 --record "$DIR/b") || fail "lpop 1: exit $?"
assert_eq "3000 0" "$(logs_check "$DIR/b" 4 "$DIR/b.ids")" "logs of single LPOPs"
fill c 5000 1 >/dev/null
out=$(load --mode lpop --key c --batch 10 --conns 2 --pipeline 8 --count 5000) ||
    fail "pipelined lpop: exit $?"
assert_eq 5000 "$(field "$out" ids)" "pipelined ids"
assert_eq 0 "$(list_len c)" "pipelined drain"
pass "single LPOPs logged once each; pipelined pops exact"

# ================================================= (b) empty pops counted ===
out=$(load --mode lpop --key a --batch 10 --conns 2 --duration 0.5 --record "$DIR/e") ||
    fail "empty pops: exit $?"
info "$out"
empties=$(field "$out" empties)
assert_gt "$empties" 0 "empty pops counted"
assert_eq 0 "$(field "$out" ids)" "no IDs from an empty list"
assert_eq 0 "$(field "$out" errors)" "empty pops are no errors"
assert_eq "0 $empties" "$(logs_check "$DIR/e" 2 -)" "empty pops logged as count=0"
pass "$empties empty pops counted and logged"

# ====================================================== (c) strictness ===
rcli RPUSH bad 1 2 007 4 >/dev/null
st=0
load --mode lpop --key bad --batch 2 --count 4 2>"$DIR/bad.err" >/dev/null || st=$?
assert_eq 2 "$st" "exit status on ID '007'"
grep -q "not an ID: '007'" "$DIR/bad.err" || fail "no message naming '007': $(cat "$DIR/bad.err")"
st=0
load --mode lpop --key a --record "$DIR/x" --pipeline 2 2>"$DIR/usage.err" || st=$?
assert_eq 64 "$st" "exit status on --record with --pipeline 2"
grep -q -- '--record' "$DIR/usage.err" || fail "usage error does not name the flag"
pass "non-canonical ID is exit 2, bad usage is exit 64"

# ================================================ (d) Redis restart ===
N=100000
fill r $N 2 >/dev/null
rcli LRANGE r 0 -1 >"$DIR/r.ids"
load --mode lpop --key r --batch 10 --conns 2 --rate 400 --reconnect --timeout-ms 500 \
    --record "$DIR/r" --stop-file "$DIR/r.stop" --duration 60 >"$DIR/r.out" 2>"$DIR/r.err" &
consumer=$!
llen_below() { local n; n=$(list_len r 2>/dev/null) && [[ $n =~ ^[0-9]+$ ]] && ((n < $1)); }
wait_until 10 llen_below $((N - 1000)) || fail "consumer does not pop"
redis_stop
sleep 1
proc_alive $consumer || fail "consumer died while Redis was down: $(cat "$DIR/r.err")"
redis_start
after=$(list_len r)
info "Redis back with $after IDs"
wait_until 15 llen_below $((after - 1000)) || fail "consumer did not resume: $(cat "$DIR/r.err")"
touch "$DIR/r.stop"
st=0
wait_until 10 eval "! proc_alive $consumer" || fail "consumer ignores --stop-file"
wait $consumer || st=$?
assert_eq 0 "$st" "consumer exit status"
out=$(cat "$DIR/r.out")
info "$out"
assert_gt "$(field "$out" errors)" 0 "the restart was seen as errors"
read -r got empties < <(logs_check "$DIR/r" 2 -) || fail "restart logs"
assert_eq "$got" "$(field "$out" ids)" "logged IDs = summary ids"
# Every logged ID was in the list and is not there any more; IDs lost with
# a request in flight (popped, reply never received) are gaps, at most one
# batch per connection and restart.
python3 - "$DIR/r.ids" "$DIR/r" <<EOF || fail "restart: logged IDs not a subset of the list"
import struct, sys
want = set(int(x) for x in open(sys.argv[1]))
for i in range(2):
    b = open('%s.%d.bin' % (sys.argv[2], i), 'rb').read()
    off = 32
    while off < len(b):
        n = struct.unpack_from('<I', b, off + 16)[0]
        off += 24
        for v in struct.unpack_from('<%dQ' % n, b, off):
            if v not in want:
                sys.exit('ID %d was never in the list' % v)
        off += 8 * n
EOF
left=$(list_len r)
assert_le $((got + left)) $N "popped + left"
assert_ge $((got + left)) $((N - 2 * 10)) "popped + left (gaps of at most one batch per connection)"
pass "consumer survived a Redis restart: $got IDs logged once each, $((N - got - left)) lost in flight"
