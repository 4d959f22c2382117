#!/usr/bin/env bash
# The ID API under load and a crash (issue 11): four daemons share one Redis
# and one MySQL — "both" refills and serves the API, "refill" only refills,
# "i1" and "i2" are issuer-only (--refill off) — while 12 HTTP clients take
# 1,200,000 IDs (count=100 per request, keep-alive) from the three issuers,
# two applications (monotonic, and trend with delta 3). Midway "i1" is
# killed with SIGKILL and started again; its clients move to the others.
#
# Asserted: no ID is handed out twice (within and across applications'
# own spaces), every ID lies in a lease recorded in application_lease for
# its application and has the right remainder (so the killed issuer's
# buffered IDs were never handed out again: they are gaps), every client
# got all it asked for, the kill was felt by clients, every issuer answers
# afterwards, and the issuer-only instances reserved no lease.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

TOTAL_PER_APP=600000
add_app mono step=20000 max_pool_size=200000 max_size_per_times=1000 \
    max_size_per_second=5000000 increment_max=2
add_app trend increasing_type=2 step=20000 max_pool_size=200000 max_size_per_times=1000 \
    max_size_per_second=5000000 delta=3 remainder=2
TOKEN=$("$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --json \
    tokens add loadtest --apps mono,trend | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])') ||
    fail "tokens add failed"

declare -A PORT
for d in both i1 i2; do PORT[$d]=$(free_port); done
common=(--tick-ms 20 --reload-ms 500 --lock-ttl-ms 1000)
start_daemon both --instance both "${common[@]}" --api "127.0.0.1:${PORT[both]}"
start_daemon refill --instance refill "${common[@]}"
start_daemon i1 --instance i1 "${common[@]}" --refill off --api "127.0.0.1:${PORT[i1]}"
start_daemon i2 --instance i2 "${common[@]}" --refill off --api "127.0.0.1:${PORT[i2]}"
for d in both i1 i2; do
    wait_until 5 log_has "$d" "api: listening on 127.0.0.1:${PORT[$d]}" || fail "$d: API not listening"
    wait_until 5 log_has "$d" "access: 1 API token" || fail "$d: token not loaded"
done
wait_until 15 eval 'pool_ge mono 100000 && pool_ge trend 100000' || fail "pools did not fill"

# The clients write their IDs to $DIR/ids.<app>.<client>; a marker file
# tells the test when half of the work is done, so the kill lands mid-run.
python3 - "$DIR" "$TOKEN" "$TOTAL_PER_APP" "${PORT[both]}" "${PORT[i1]}" "${PORT[i2]}" \
    >"$DIR/clients.out" 2>&1 <<'EOF' &
import http.client, json, os, sys, threading, time

d, token, per_app, ports = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(p) for p in sys.argv[4:]]
CLIENTS_PER_APP, COUNT = 6, 100
done = [0]
lock = threading.Lock()
errors = []

def client(app, n, idx):
    want = per_app // CLIENTS_PER_APP
    got, conn, k, fails = [], None, idx, 0
    deadline = time.time() + 120
    while len(got) < want and time.time() < deadline:
        port = ports[k % len(ports)]
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/v1/ids/%s?count=%d" % (app, min(COUNT, want - len(got))),
                         headers={"Authorization": "Bearer " + token})
            r = conn.getresponse()
            body = r.read()
            if r.status == 200:
                ids = json.loads(body)["ids"]
                if not all(isinstance(i, str) for i in ids):  # a thread: report, not check()
                    errors.append("%s: IDs not strings: %s" % (app, body[:200]))
                    return
                got.extend(ids)
                with lock:
                    done[0] += len(ids)
            elif r.status in (429, 503):
                time.sleep(0.005)
            else:
                errors.append("%s: %d %s" % (app, r.status, body[:200]))
                return
        except (OSError, http.client.HTTPException):
            # the issuer died mid-request: that response's IDs are gaps
            conn, k, fails = None, k + 1, fails + 1
            time.sleep(0.01)
    with open(os.path.join(d, "ids.%s.%d" % (app, n)), "w") as f:
        f.write("\n".join(got) + "\n")
    if len(got) < want:
        errors.append("%s client %d got %d of %d IDs" % (app, n, len(got), want))
    with lock:  # one line each: threads' prints must not interleave
        print("%s client %d: %d IDs, %d connection failures" % (app, n, len(got), fails), flush=True)

threads = []
for app in ("mono", "trend"):
    for n in range(CLIENTS_PER_APP):
        t = threading.Thread(target=client, args=(app, n, n))
        t.start()
        threads.append(t)
half = False
while any(t.is_alive() for t in threads):
    time.sleep(0.05)
    if not half and done[0] >= per_app:
        half = True
        open(os.path.join(d, "half"), "w").close()
for t in threads:
    t.join()
for e in errors:
    print("ERROR:", e)
sys.exit(1 if errors else 0)
EOF
clients=$!
t0=$(now_us)
wait_until 90 test -e "$DIR/half" || fail "clients did not get half of the IDs in 90 s: $(cat "$DIR/clients.out")"
kill_daemon i1 KILL
info "i1 killed with SIGKILL after $((($(now_us) - t0) / 1000)) ms"
start_daemon i1 --instance i1 "${common[@]}" --refill off --api "127.0.0.1:${PORT[i1]}"
wait "$clients" || fail "clients failed: $(cat "$DIR/clients.out")"
ms=$((($(now_us) - t0) / 1000))
cat "$DIR/clients.out"
info "$((2 * TOTAL_PER_APP)) IDs over HTTP in $ms ms"

# The checks: unique per application, inside a lease of it, right remainder.
leases mono >"$DIR/leases.mono"
leases trend >"$DIR/leases.trend"
python3 - "$DIR" "$TOTAL_PER_APP" <<'EOF' || fail "uniqueness or lease check failed"
import bisect, glob, os, sys
from harness import check
d, per_app = sys.argv[1], int(sys.argv[2])
for app, delta, rem in (("mono", 1, 0), ("trend", 3, 2)):
    ids = []
    for f in glob.glob(os.path.join(d, "ids.%s.*" % app)):
        ids += [int(x) for x in open(f).read().split()]
    check(len(ids) == per_app, "%s: %d IDs, expected %d" % (app, len(ids), per_app))
    dup = len(ids) - len(set(ids))
    check(dup == 0, "%s: %d duplicate IDs" % (app, dup))
    leases = sorted(tuple(map(int, l.split())) for l in open(os.path.join(d, "leases." + app)) if l.strip())
    los = [lo for lo, hi in leases]
    outside = 0
    for i in ids:
        k = bisect.bisect_right(los, i) - 1
        if k < 0 or not (leases[k][0] <= i < leases[k][1]):
            outside += 1
    check(outside == 0, "%s: %d IDs outside every lease" % (app, outside))
    wrong = sum(1 for i in ids if i % delta != rem)
    check(wrong == 0, "%s: %d IDs with the wrong remainder" % (app, wrong))
    print("%s: %d IDs, unique, all in %d leases" % (app, len(ids), len(leases)))
EOF
pass "$((2 * TOTAL_PER_APP)) IDs from 3 issuers (one killed with SIGKILL and restarted) to 12 HTTP clients: no duplicate, all leased"

# Every issuer answers after the run.
for d in both i1 i2; do
    n=$(curl -sS -H "Authorization: Bearer $TOKEN" -o /dev/null -w '%{http_code}' \
        "http://127.0.0.1:${PORT[$d]}/v1/ids/mono") || fail "$d: no answer"
    assert_eq 200 "$n" "$d answers after the run"
done
grep -q 'connection failures' "$DIR/clients.out" || fail "no client report"
fails=$(grep -o '[0-9]* connection failures' "$DIR/clients.out" | awk '{s += $1} END {print s + 0}')
assert_gt "$fails" 0 "connection failures seen by clients when i1 was killed (the kill landed)"
# The issuer-only instances never reserved a lease.
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE instance IN ('i1', 'i2')")" \
    "leases reserved by issuer-only instances"
pass "the kill landed ($fails client connection failures); issuer-only instances reserved no lease"
