#!/usr/bin/env bash
# idpool-check against small hand-made pop logs: each case writes logs with
# a python3 generator (struct.pack, the format in test/tools/poplog.h), runs
# the checker and asserts its exit status and the counts of its last line.
#
#   t_check.sh                  run the cases ($IDPOOL_CHECK or build/test/idpool-check)
#   t_check.sh bench DIR [IDS] [CONSUMERS] [BATCH]
#                               write a clean monotonic log set (default 10M IDs,
#                               8 consumers, batch 100) to DIR and time the checker on it
set -euo pipefail

check=${IDPOOL_CHECK:-$(dirname "$0")/../../build/test/idpool-check}
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
# The interpreter itself, not a wrapper such as a pyenv shim: it runs ~50 times.
py=$(python3 -c 'import sys; print(sys.executable)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/gen.py" <<'EOF'
import struct
from array import array

MAGIC = b"IDPLOG1\n"


def log(path, consumer, records, magic=MAGIC, tail=b"", kind=0):
    """records: (t_send, t_recv, [ids]) or (t_send, t_recv, [ids], flags);
    kind: the client kind of the header (0 LPOP, 1 idpool_take)."""
    with open(path, "wb") as f:
        f.write(magic + struct.pack("<IIIIQ", 1, consumer, kind, 0, 0))
        for r in records:
            flags = r[3] if len(r) > 3 else 0
            f.write(struct.pack("<QQII", r[0], r[1], len(r[2]), flags))
            f.write(struct.pack("<%dQ" % len(r[2]), *r[2]))
        f.write(tail)


def clean(prefix, consumers, steps, batch, first=1000):
    """Round robin: at step k every consumer sends one request; the requests
    of a step overlap in time and get IDs in send order (monotonic)."""
    recs = [[] for _ in range(consumers)]
    nxt = first
    for k in range(steps):
        for c in range(consumers):
            t = 1_000_000 + k * 3000 + c * 10
            recs[c].append((t, t + 2000, list(range(nxt, nxt + batch))))
            nxt += batch
    for c in range(consumers):
        log("%s.%d.bin" % (prefix, c), c, recs[c])
    return nxt


def bench(prefix, total, consumers, batch):
    """Like clean(), fast enough for 10M IDs."""
    files = [open("%s.%d.bin" % (prefix, c), "wb") for c in range(consumers)]
    for c, f in enumerate(files):
        f.write(MAGIC + struct.pack("<IIQQ", 1, c, 0, 0))
    nxt, k = 1000, 0
    while nxt - 1000 < total:
        for c, f in enumerate(files):
            n = min(batch, total - (nxt - 1000))
            if n <= 0:
                break
            t = 1_000_000 + k * 30_000 + c * 10
            f.write(struct.pack("<QQII", t, t + 20_000, n, 0))
            f.write(array("Q", range(nxt, nxt + n)).tobytes())
            nxt += n
        k += 1
    for f in files:
        f.close()
EOF

gen() {
    (cd "$tmp" && "$py" -c "from gen import *; $1")
}

if [[ ${1:-} == bench ]]; then
    dir=${2:?bench DIR}
    mkdir -p "$dir"
    start=$(date +%s%N)
    (cd "$tmp" && "$py" -c "from gen import *; bench('$dir/b', ${3:-10000000}, ${4:-8}, ${5:-100})")
    echo "generated in $((($(date +%s%N) - start) / 1000000)) ms: $(du -sh "$dir" | cut -f1)"
    /usr/bin/time -v "$check" --type monotonic --start-offset 1000 "$dir"/b.*.bin 2>"$tmp/time"
    grep -E 'Elapsed|Maximum resident' "$tmp/time"
    exit 0
fi

failures=0
cases=0
out=
err=
rc=

# run ARGS...: runs the checker in $tmp, keeps stdout, stderr and status.
run() {
    rc=0
    (cd "$tmp" && "$check" "$@") >"$tmp/out" 2>"$tmp/err" || rc=$?
    out=$(cat "$tmp/out")
    err=$(cat "$tmp/err")
}

fail() {
    echo "FAIL [$name]: $*"
    echo "  stdout: ${out//$'\n'/$'\n'  stdout: }"
    echo "  stderr: ${err//$'\n'/$'\n'  stderr: }"
    failures=$((failures + 1))
}

# expect STATUS key=value...: the status and fields of the last line.
expect() {
    local want=$1 kv last
    shift
    cases=$((cases + 1))
    last=$(tail -n 1 <<<"$out")
    [[ $rc == "$want" ]] || fail "exit status $rc, expected $want"
    for kv in "$@"; do
        [[ " ${last#check: } " == *" $kv "* ]] || fail "no '$kv' in: $last"
    done
}

# contains TEXT STRING: a string appears in stdout or stderr.
contains() {
    [[ $out$err == *"$1"* ]] || fail "no '$1' in the output"
}

# jfield EXPR VALUE: python expression on the JSON object j equals VALUE.
jfield() {
    local got
    got=$("$py" -c "import json,sys; j=json.load(open(sys.argv[1])); print(($1))" "$tmp/out" \
        2>&1) || true
    [[ $got == "$2" ]] || fail "json $1 = '$got', expected '$2'"
}

name=usage
run
expect 2
run --delta 5 --remainder 5 x.bin
expect 2
run --low-water 10 x.bin
expect 2
run --type sideways x.bin
expect 2
run --help
expect 0
run missing.bin
expect 2
contains "missing.bin"

name=clean
gen "clean('c', 3, 20, 7)"
run --type monotonic --start-offset 1000 c.0.bin c.1.bin c.2.bin
expect 0 ids=420 consumers=3 duplicates=0 order=0 cross_order=0 arith=0 unleased=0 \
    lease_overlaps=0 gaps=0 empty_pops=0 below_low_ms=0 exposed=0
[[ $(tail -n 1 <<<"$out") =~ ^check:\ ids=[0-9]+\ consumers=[0-9]+\ duplicates=[0-9]+\ order=[0-9]+\ cross_order=[0-9]+\ arith=[0-9]+\ unleased=[0-9]+\ lease_overlaps=[0-9]+\ gaps=[0-9]+\ empty_pops=[0-9]+\ below_low_ms=[0-9]+\ exposed=[0-9]+\ exposed_lpop=[0-9]+\ exposed_take=[0-9]+$ ]] ||
    fail "last line format"
printf '1000 1200\n1200 1420\n' >"$tmp/leases.ok"
run --type monotonic --leases leases.ok c.0.bin c.1.bin c.2.bin
expect 0 unleased=0 lease_overlaps=0
run --type monotonic --leases leases.ok --json c.0.bin c.1.bin c.2.bin
expect 0
jfield "j['ids'], j['consumers'], j['duplicates'], j['cross_order'], j['ok']" "(420, 3, 0, 0, True)"
jfield "j['missing_leased'], j['leases'], len(j['logs'])" "(0, 2, 3)"

name=duplicate
gen "log('d0.bin', 0, [(100, 200, [1, 2, 3]), (300, 400, [4])]);
log('d1.bin', 1, [(150, 250, [10, 11]), (500, 600, [3, 12])]);
log('d2.bin', 2, [(700, 800, [3, 20])])"
run d0.bin d1.bin d2.bin
expect 1 ids=10 consumers=3 duplicates=2 exposed=0
contains "id 3 popped 3 times"
contains "d1.bin (consumer 1) byte 72"
run --json d0.bin d1.bin d2.bin
expect 1
jfield "j['duplicates'], len(j['duplicate_examples']), j['duplicate_examples'][0]['id']" "(2, 1, 3)"
jfield "j['duplicate_examples'][0]['first']['log'], j['duplicate_examples'][0]['again']['log']" \
    "('d0.bin', 'd1.bin')"
jfield "j['duplicate_examples'][0]['again']['t_send_ns'], j['duplicate_examples'][0]['again']['offset']" \
    "(500, 72)"
# Sets large enough for the radix sort: dense IDs, and IDs spread over 2^62.
gen "clean('big', 4, 50, 25); log('big.x.bin', 9, [(10**7, 10**7 + 1, [3345, 1017])])"
run --type monotonic big.0.bin big.1.bin big.2.bin big.3.bin big.x.bin
expect 1 ids=5002 duplicates=2 gaps=0
gen "import random; random.seed(7); v = random.sample(range(2**62), 5000);
log('rnd.0.bin', 0, [(100, 200, v[:2500])]); log('rnd.1.bin', 1, [(300, 400, v[2500:] + [v[10], v[4000]])])"
run rnd.0.bin rnd.1.bin
expect 1 ids=5002 duplicates=2 gaps=4999
gen "log('d3.bin', 0, [(100, 200, [7, 7])])"
run d3.bin
expect 1 duplicates=1

name=order
gen "log('o0.bin', 0, [(100, 200, [10, 11]), (300, 400, [13, 12]), (500, 600, [14]), (700, 800, [5])])"
run --type monotonic o0.bin
expect 1 order=2 cross_order=0 duplicates=0
contains "id 12 after 13"
run --type trend o0.bin
expect 0 order=0 cross_order=0
# An ID equal to an earlier one breaks the order too.
gen "log('o1.bin', 0, [(100, 200, [10]), (300, 400, [10])])"
run --type monotonic o1.bin
expect 1 order=1 cross_order=0 duplicates=1

name=cross
gen "log('x0.bin', 0, [(100, 200, [10])]); log('x1.bin', 1, [(300, 400, [5])])"
run --type monotonic x0.bin x1.bin
expect 1 order=0 cross_order=1
gen "log('x2.bin', 0, [(100, 200, [10])]); log('x3.bin', 1, [(300, 400, [10, 11])])"
run --type monotonic x2.bin x3.bin
expect 1 order=0 cross_order=1 duplicates=1
# The largest completed ID of any earlier consumer counts, not the last one.
gen "log('y0.bin', 0, [(100, 200, [50])]); log('y1.bin', 1, [(500, 600, [55])]);
log('y2.bin', 2, [(300, 400, [60])])"
run --type monotonic y0.bin y1.bin y2.bin
expect 1 order=0 cross_order=1
# The consumer holding the maximum is compared with the other consumers' best.
gen "log('z0.bin', 0, [(100, 200, [30])]); log('z1.bin', 1, [(300, 400, [40]), (500, 600, [25])])"
run --type monotonic z0.bin z1.bin
expect 1 order=1 cross_order=1

# A log whose records are not in time order is sorted before the sweep.
gen "log('u0.bin', 0, [(300, 400, [60]), (100, 200, [10])]); log('u1.bin', 1, [(250, 260, [5])])"
run --type monotonic u0.bin u1.bin
expect 1 order=1 cross_order=1

name=overlap
# Requests in flight together may be served in either order: not a violation.
gen "log('v0.bin', 0, [(100, 300, [10])]); log('v1.bin', 1, [(200, 400, [5])])"
run --type monotonic v0.bin v1.bin
expect 0 order=0 cross_order=0
# a.t_recv == b.t_send: not "completed before sent".
gen "log('w0.bin', 0, [(100, 200, [10])]); log('w1.bin', 1, [(200, 300, [5])])"
run --type monotonic w0.bin w1.bin
expect 0 cross_order=0

name=arith
gen "log('a0.bin', 0, [(100, 200, [103, 113, 93, 114, 123])])"
run --start-offset 100 --delta 10 --remainder 3 a0.bin
expect 1 arith=2
contains "id 93 (below start_offset)"
contains "id 114 (id % delta != remainder)"
run --start-offset 93 --delta 10 --remainder 3 a0.bin
expect 1 arith=1
gen "log('a1.bin', 0, [(100, 200, [2**63 - 1])]); log('a2.bin', 1, [(100, 200, [2**63])])"
run a1.bin
expect 0 arith=0
run a1.bin a2.bin
expect 1 arith=1
contains ">= 2^63"

name=leases
gen "log('l0.bin', 0, [(100, 200, [100, 199, 300]), (300, 400, [399, 200])])"
printf '# lo hi\n100 200\n300 400\n' >"$tmp/leases.1"
run --leases leases.1 l0.bin
expect 1 unleased=1 lease_overlaps=0
contains "id 200 is in no lease"
printf '100 201\n300 400\n' >"$tmp/leases.2"
run --leases leases.2 --json l0.bin
expect 0
jfield "j['unleased'], j['missing_leased']" "(0, 196)"
printf '300 400\n100 250\n200 301\n' >"$tmp/leases.3"
run --leases leases.3 l0.bin
expect 1 unleased=0 lease_overlaps=2
printf '100 x\n' >"$tmp/leases.4"
run --leases leases.4 l0.bin
expect 2
contains "leases.4:1"

name=truncated
# A record cut short at the end of the log is an error naming the file and
# the offset: it cannot be told from a corrupt count (next case).
gen "log('t0.bin', 0, [(100, 200, [1, 2]), (300, 400, [3])],
    tail=struct.pack('<QQII', 500, 600, 2, 0) + struct.pack('<Q', 4))"
run t0.bin
expect 2
contains "t0.bin: byte offset 104: count 2 needs 16 bytes, 8 left"
gen "log('t1.bin', 0, [(100, 200, [1, 2])], tail=b'\x01\x02\x03')"
run t1.bin
expect 2
contains "t1.bin: byte offset 72: truncated record header (3 of 24 bytes)"
gen "open('t2.bin', 'wb').write(b'IDPL')"
run t2.bin
expect 2
contains "t2.bin: byte offset 0: truncated header"
# A bad count in the middle swallows the records after it: here one that
# repeats an ID. An error, not a pass with duplicates=0.
gen "
import io
log('t3.bin', 0, [(100, 200, [1, 2]), (300, 400, [3]), (500, 600, [1])])
b = bytearray(open('t3.bin', 'rb').read())
b[72 + 16:72 + 20] = struct.pack('<I', 1000)
open('t3.bin', 'wb').write(b)"
run t3.bin
expect 2
contains "t3.bin: byte offset 72: count 1000 needs 8000 bytes, 40 left"
# The same log with the right count: the duplicate is found.
gen "log('t4.bin', 0, [(100, 200, [1, 2]), (300, 400, [3]), (500, 600, [1])])"
run t4.bin
expect 1 ids=4 duplicates=1

name=empty
# A log without IDs proves nothing: an error unless --allow-empty says a
# test expects none.
gen "log('z0.bin', 0, []); log('z1.bin', 1, [(100, 200, [])]); log('z2.bin', 2, [(100, 200, [5])])"
run z0.bin
expect 2
contains "z0.bin: byte offset 32: no ID in the log"
run z1.bin
expect 2
contains "z1.bin: byte offset 56: no ID in the log"
run z2.bin z1.bin
expect 2
contains "z1.bin"
run --allow-empty z0.bin z1.bin
expect 0 ids=0 consumers=2 duplicates=0
run --allow-empty z2.bin z1.bin
expect 0 ids=1 duplicates=0
# Lists may be empty (a drained pool), but not everything read.
printf '' >"$tmp/empty.list"
run --list empty.list
expect 2
contains "no ID in any input"
run --list empty.list z2.bin
expect 0 ids=1
run --allow-empty --list empty.list
expect 0 ids=0

name=malformed
gen "log('m0.bin', 0, [(100, 200, [1])], magic=b'IDPLOG2\n')"
run m0.bin
expect 2
contains "m0.bin: byte offset 0: bad magic"
gen "log('m1.bin', 0, [(100, 200, [1]), (300, 400, [2], 9)])"
run m1.bin
expect 2
contains "m1.bin: byte offset 64: bad flags 9"
gen "log('m2.bin', 0, [(100, 200, [1]), (300, 299, [2])])"
run m2.bin
expect 2
contains "m2.bin: byte offset 64: t_recv 299 before t_send 300"

name=exposure
gen "log('e0.bin', 0, [(100, 200, [7, 8])]); log('e1.bin', 1, [(5000, 5100, [7])]);
log('e2.bin', 2, [(8000, 8100, [8])])"
run e0.bin e1.bin e2.bin
expect 1 duplicates=2 exposed=0
run --exposure 4000:6000 e0.bin e1.bin e2.bin
expect 1 duplicates=1 exposed=1
run --exposure 4000:9000 e0.bin e1.bin e2.bin
expect 0 duplicates=0 exposed=2
run --exposure 5001:9000 e0.bin e1.bin e2.bin
expect 1 duplicates=1 exposed=1
run --exposure 4000:5000 e0.bin e1.bin e2.bin
expect 1 duplicates=1 exposed=1
run --exposure 5000:5000 e0.bin e1.bin e2.bin
expect 1 duplicates=1 exposed=1
run --exposure 100:4999 e0.bin e1.bin e2.bin
expect 1 duplicates=2 exposed=0
run --exposure 4000:6000 --json e0.bin e1.bin e2.bin
jfield "[(e['id'], e['exposed'], e['again']['log']) for e in j['duplicate_examples']]" \
    "[(8, False, 'e2.bin'), (7, True, 'e1.bin')]"
# Both pops inside the window: the earlier one is the legitimate pop.
gen "log('f0.bin', 0, [(4500, 4600, [7])]); log('f1.bin', 1, [(5000, 5100, [7])])"
run --exposure 4000:6000 f0.bin f1.bin
expect 0 duplicates=0 exposed=1
run --exposure 4000:x f0.bin
expect 2
# Per client kind: an extra pop is charged to the kind of the log that made
# it; the legitimate (earliest) pop to none, whichever its kind.
gen "log('k0.bin', 0, [(100, 200, [7, 8, 9])], kind=1); log('k1.bin', 1, [(5000, 5100, [7])]);
log('k2.bin', 2, [(5200, 5300, [8])], kind=1); log('k3.bin', 3, [(4500, 4600, [9, 10])], kind=1);
log('k4.bin', 4, [(5500, 5600, [9, 10])])"
run --exposure 4000:6000 k0.bin k1.bin k2.bin k3.bin k4.bin
expect 0 duplicates=0 exposed=5 exposed_lpop=3 exposed_take=2
contains "k2.bin (consumer 2) byte 32, take"
run --exposure 4000:6000 --json k0.bin k1.bin k2.bin k3.bin k4.bin
jfield "j['exposed'], j['exposed_lpop'], j['exposed_take']" "(5, 3, 2)"
run --exposure 5000:6000 k0.bin k1.bin k2.bin k3.bin k4.bin
expect 1 duplicates=1 exposed=4 exposed_lpop=3 exposed_take=1
gen "log('k5.bin', 0, [(100, 200, [1])], kind=2)"
run k5.bin
expect 2
contains "k5.bin: byte offset 16: unknown client kind 2"

name=reports
gen "log('r0.bin', 0, [(1000000, 2000000, []), (3000000, 4000000, []), (5000000, 6000000, [1, 2]),
    (7000000, 8000000, []), (9000000, 9500000, [3, 5, 9])])"
# Below 50 from 1 ms to 4 ms; a length equal to the mark is not below it.
printf '0 100\n1000000 10\n3000000 10\n4000000 50\n6000000 100\n7000000 5\n' >"$tmp/llen"
printf '%s\n' '2000000 {"alert":"low","app":"demo","state":"firing"}' \
    '4500000 {"alert":"low","app":"demo","state":"resolved"}' >"$tmp/alerts"
run --low-water 50 --llen llen --alerts alerts r0.bin
expect 0 ids=5 empty_pops=3 gaps=2 below_low_ms=3
contains "longest run 3.000 ms (r0.bin)"
contains "+1.000 ms  low"
run --low-water 50 --llen llen --alerts alerts --t0-ns 0 --json r0.bin
jfield "float(j['longest_empty_ms']), float(j['below_low_longest_ms']), j['below_low_stretches']" \
    "(3.0, 3.0, 1)"
jfield "[(a['kind'], a['state'], float(a['t_ms'])) for a in j['alerts']]" \
    "[('low', 'firing', 2.0), ('low', 'resolved', 4.5)]"

name=count
gen "log('n0.bin', 0, [(100, 200, [1, 2]), (300, 400, []), (500, 600, [3])]);
log('n1.bin', 1, [(100, 200, [4, 5])])"
run --count 3 n0.bin
expect 0 ids=3 count_mismatch=0
run --count 3 n0.bin n1.bin
expect 1 count_mismatch=1
contains "n1.bin: 2 IDs, expected 3 (--count)"
run --count 0 n1.bin
expect 1 count_mismatch=1
run --count 3 --json n0.bin n1.bin
jfield "j['count_mismatch'], j['ok']" "(1, False)"
# Without the option the last line has no such field.
run n0.bin
expect 0
[[ $out != *count_mismatch* ]] || fail "count_mismatch printed without --count"
run --count x n0.bin
expect 2

name=current_offset
gen "log('k0.bin', 0, [(100, 200, [10, 20, 29])])"
printf '10 20\n20 30\n' >"$tmp/leases.k"
run --current-offset 30 --leases leases.k k0.bin
expect 0 above_offset=0
run --current-offset 29 k0.bin
expect 1 above_offset=1
contains "id 29 is not below current_offset 29"
# A lease ending above it fails even if no ID is above.
run --current-offset 29 --leases leases.k --list <(echo 10)
expect 1 above_offset=1
contains "lease [20, 30) ends above current_offset 29"

name=gap
# Leases [100, 200) and [200, 300), delta 3 remainder 1: steps of 1..2 x 3
# inside a lease; 187 -> 202 crosses into the next lease (not judged).
printf '100 200\n200 300\n' >"$tmp/leases.g"
gen "log('g0.bin', 0, [(100, 200, [100, 103, 109, 112, 118])]);
log('g1.bin', 1, [(300, 400, [181, 187, 202, 205])])"
run --gap 1:2 --leases leases.g --delta 3 --remainder 1 g0.bin g1.bin
expect 1 bad_gaps=1
contains "gap 118 -> 181"
run --gap 1:21 --leases leases.g --delta 3 --remainder 1 g0.bin g1.bin
expect 0 bad_gaps=0
run --gap 2:21 --leases leases.g --delta 3 --remainder 1 g0.bin g1.bin
expect 1 bad_gaps=3
# --gap-all: every multiple in the range occurs inside a lease.
run --gap 1:2 --gap-all --leases leases.g --delta 3 --remainder 1 g1.bin
expect 0 bad_gaps=0 gap_missing=0
run --gap 1:3 --gap-all --leases leases.g --delta 3 --remainder 1 g1.bin
expect 1 bad_gaps=0 gap_missing=1
contains "never occur inside a lease, e.g. 3"
run --gap 1:2 g0.bin
expect 2
run --gap-all --leases leases.g g0.bin
expect 2
run --gap 0:2 --leases leases.g g0.bin
expect 2

name=blocks
# Groups of 8 in pop order, split across records: shuffled runs, each above
# the one before.
gen "a = [13, 10, 17, 11, 16, 12, 15, 14]; b = [25, 20, 27, 21, 26, 22, 24, 23]
log('b0.bin', 0, [(100, 200, a[:5]), (300, 400, []), (500, 600, a[5:] + b[:2]), (700, 800, b[2:])])
log('b1.bin', 1, [(100, 200, sorted(a))])
log('b2.bin', 1, [(100, 200, sorted(a, reverse=True))])
log('b3.bin', 2, [(100, 200, a[:7] + [18])])
log('b4.bin', 3, [(100, 200, b + a)])
log('b5.bin', 4, [(100, 200, a + b[:3])])
log('b6.bin', 5, [(100, 200, [13, 10, 13, 11, 16, 12, 15, 14])])
log('b7.bin', 6, [(100, 200, [3, 1, 2, 6, 4, 5])])"
run --blocks 8 --count 16 b0.bin
expect 0 bad_blocks=0 count_mismatch=0
run --blocks 8 b1.bin
expect 1 bad_blocks=1
contains "is not shuffled"
run --blocks 8 b2.bin
expect 1 bad_blocks=1
run --blocks 8 b3.bin
expect 1 bad_blocks=1
contains "is not a run with stride delta"
run --blocks 8 b4.bin
expect 1 bad_blocks=1
contains "is not above the group before"
run --blocks 8 b5.bin
expect 1 bad_blocks=1
contains "11 IDs is not a whole number of groups of 8"
run --blocks 8 b6.bin
expect 1 bad_blocks=1 duplicates=1
contains "repeats an ID"
# Stride delta; below 8 IDs a group may come out sorted.
gen "log('b8.bin', 0, [(100, 200, [17, 11, 14, 20, 26, 23])])"
run --blocks 3 --delta 3 --remainder 2 b8.bin
expect 0 bad_blocks=0
run --blocks 3 b8.bin
expect 1 bad_blocks=2
run --blocks 3 b7.bin
expect 0 bad_blocks=0
run --blocks 0 b7.bin
expect 2

name=list
# A pool snapshot (LRANGE): one more stream, without times.
gen "log('s0.bin', 0, [(100, 200, [1, 2, 3])])"
printf '4\n\n5\n7\n' >"$tmp/pool.1"
printf '3\n8\n' >"$tmp/pool.2"
printf '9\n6\n' >"$tmp/pool.3"
printf '9\n1x\n' >"$tmp/pool.4"
run --type monotonic --count 3 s0.bin --list pool.1
expect 0 ids=6 consumers=2 duplicates=0 order=0 cross_order=0 count_mismatch=0
run s0.bin --list pool.2
expect 1 duplicates=1
contains "pool.2 (consumer 0) line 1"
run --type monotonic --list pool.3
expect 1 order=1 cross_order=0
contains "pool.3 line 1: id 6 after 9"
run --list pool.4
expect 2
contains "pool.4:2"
printf '8\n7\n' >"$tmp/pool.5"
run --blocks 2 --list pool.5 --list pool.3
expect 1 bad_blocks=1
contains "pool.3: group of 2 at ID #0 (6..9) is not a run with stride delta"

name=dump
run --dump ids.txt s0.bin --list pool.3 s0.bin
expect 1 duplicates=3
[[ $(tr '\n' ' ' <"$tmp/ids.txt") == "1 2 3 9 6 1 2 3 " ]] || fail "dump: $(cat "$tmp/ids.txt" 2>&1)"
run --dump /nonexistent/ids.txt s0.bin
expect 2

echo "$cases cases, $failures failed assertions"
[[ $failures == 0 ]]
