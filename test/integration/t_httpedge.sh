#!/usr/bin/env bash
# The HTTP edge (issue 13, item 10): slow clients, too many clients and a low
# file limit must not hurt the daemon.
#   0. 300 HTTP/1.0 requests back to back are each answered at once.
#   1. 30 clients that send a request line and then one header line every
#      200 ms, never finishing (slowloris): with http-timeout-ms 1000 each
#      is closed about 1 s after it was accepted, however it trickles;
#      http-max-connections 10: at most 10 are served at once, the rest wait
#      in the listen backlog (said once in the log), and /healthz answers
#      again once the slow ones are gone.
#   2. Under a file limit of 64 descriptors with http-max-connections 500,
#      the daemon lowers the limit to what fits next to its own descriptors
#      (and says so); 80 slow clients then cannot starve Redis: the daemon's
#      Redis connections are killed meanwhile and come back, the pools are
#      refilled, and the log stays short (no flood of accept errors).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_fault.sh"
setup

# slow N PORT SECONDS OUT: N slowloris clients for at most SECONDS; OUT gets
# one line per client: "connect_ok lifetime_ms" (lifetime: until the server
# closed it; SECONDS*1000 if it never did).
slow() {
    "$PYTHON" - "$@" <<'EOF'
import socket, sys, threading, time
n, port, secs, out = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
res = [None] * n
def client(i):
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=secs)
    except OSError:
        res[i] = (0, 0)
        return
    s.settimeout(0.2)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        k = 0
        while time.monotonic() - t0 < secs:
            try:
                if s.recv(4096) == b"":
                    break  # closed by the server
            except socket.timeout:
                pass
            s.sendall(b"X-Slow-%d: %d\r\n" % (k, k))
            k += 1
    except OSError:
        pass  # reset by the server
    res[i] = (1, int((time.monotonic() - t0) * 1000))
    s.close()
ts = [threading.Thread(target=client, args=(i,)) for i in range(n)]
for t in ts:
    t.start()
    time.sleep(0.005)
for t in ts:
    t.join()
with open(out, "w") as f:
    for r in res:
        f.write("%d %d\n" % r)
EOF
}

add_app e1 step=100 max_pool_size=1000 min_size_percent=50

# ===================================================================== 1 ===
P=$(free_port)
start_daemon a --tick-ms 50 --http "127.0.0.1:$P" --http-timeout-ms 1000 --http-max-connections 10
wait_until 5 eval "curl -fsS -m 2 http://127.0.0.1:$P/healthz >/dev/null" || fail "a does not answer"
# Connections evhttp closes right after the answer (HTTP/1.0), back to back:
# each is answered at once (a closed connection's descriptor, reused by the
# next one, must not stay registered).
"$PYTHON" - "$P" <<'EOF' || fail "HTTP/1.0 requests back to back were not all answered at once"
import socket, sys, time
port, slow = int(sys.argv[1]), 0
for i in range(300):
    t = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    if not data.startswith(b"HTTP/1.0 200") and not data.startswith(b"HTTP/1.1 200"):
        sys.exit("request %d: %r" % (i, data[:80]))
    if time.monotonic() - t > 0.5:
        slow += 1
sys.exit("%d of 300 requests took more than 0.5 s" % slow if slow else 0)
EOF
t0=$(now_us)
slow 30 "$P" 15 "$DIR/slow1" &
SLOW=$!
sleep 0.5
# Meanwhile a normal request waits for a free connection, and is answered.
curl -fsS -m 10 "http://127.0.0.1:$P/healthz" >"$DIR/h1" || fail "/healthz not answered while slow clients held the connections"
wait "$SLOW" || fail "the slow clients failed"
info "slow clients closed after (ms): $(awk '{print $2}' "$DIR/slow1" | sort -n | uniq -c | tr '\n' ' ' | head -c 400)"
n_open=$(awk '$1 == 1' "$DIR/slow1" | wc -l)
assert_eq 30 "$n_open" "slow clients that connected"
# Accepted ones are closed ~1 s after acceptance; queued ones wait for a slot first: 3 rounds.
late=$(awk '$2 > 4500' "$DIR/slow1" | wc -l)
assert_eq 0 "$late" "slow clients still open after 4.5 s (deadline 1 s, 10 at a time)"
((($(now_us) - t0) / 1000 < 10000)) || fail "the slow clients took $((($(now_us) - t0) / 1000)) ms in all"
log_has a 'http: closed [0-9]+ connection\(s\) that sent no complete request within 1000 ms' ||
    fail "the deadline closures were not logged"
log_has a 'http: 10 connections open \(http-max-connections\)' || fail "the connection limit was not logged"
assert_eq 1 "$(log_count a 'connections open \(http-max-connections\)')" "limit messages (once per burst)"
curl -fsS -m 2 "http://127.0.0.1:$P/healthz" >/dev/null || fail "/healthz not answered after the slow clients"
stop_daemon a
pass "slow clients are closed 1 s after acceptance however they trickle; 10 at a time; /healthz still answered"

# ===================================================================== 2 ===
P=$(free_port)
IDPOOLD_WRAP=(prlimit --nofile=64:64)
"${IDPOOLD_WRAP[@]}" "$IDPOOLD" --redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" \
    --tick-ms 50 --log-level debug --http "127.0.0.1:$P" --http-timeout-ms 2000 \
    --http-max-connections 500 </dev/null >>"$DIR/b.log" 2>&1 &
DAEMON_PID[b]=$!
DAEMON_NAMES+=(b)
wait_until 5 eval "curl -fsS -m 2 http://127.0.0.1:$P/healthz >/dev/null" || fail "b does not answer"
log_has b 'http: the file limit \(64 descriptors\) leaves room for 32 connections; http-max-connections 500 lowered to 32' ||
    fail "b did not say it lowered http-max-connections: $(grep -m1 'file limit' "$DIR/b.log")"
slow 80 "$P" 8 "$DIR/slow2" &
SLOW=$!
sleep 1
n_rec=$(log_count b 'redis: connected to .*, recovered')
rcli CLIENT KILL TYPE normal >/dev/null # the daemon's connections (and ours)
wait_until 5 eval '(($(log_count b "redis: connected to .*, recovered") > n_rec))' ||
    fail "b did not reconnect to Redis while slow clients held its HTTP connections"
rcli DEL "$(pool_key e1)" >/dev/null
wait_until 5 pool_ge e1 500 || fail "e1 not refilled while slow clients held the HTTP connections"
wait "$SLOW" || true
curl -fsS -m 5 "http://127.0.0.1:$P/healthz" >/dev/null || fail "/healthz not answered after the slow clients"
lines=$(wc -l <"$DIR/b.log")
info "b logged $lines lines; accept errors: $(log_count b 'cannot accept'), libevent: $(log_count b 'libevent:')"
((lines < 200)) || fail "b logged $lines lines (a flood?): $(sort "$DIR/b.log" | cut -c 26- | uniq -c | sort -rn | head -n 3)"
log_has b 'Too many open files' && fail "b ran out of descriptors: $(grep -m1 'Too many open files' "$DIR/b.log")"
kill_daemon b TERM
assert_eq 0 "${DAEMON_STATUS[b]}" "b's exit status"
pass "a file limit of 64: http-max-connections lowered to fit, Redis reconnects and refills go on under 80 slow clients"
pass "httpedge"
