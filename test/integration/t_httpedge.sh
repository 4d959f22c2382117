#!/usr/bin/env bash
# The HTTP edge (issue 13, item 10): slow clients, too many clients and a low
# file limit must not hurt the daemon.
#   0. 300 HTTP/1.0 requests back to back are each answered at once.
#   1. Who is held up (issue 18, item 9), with http-head-timeout-ms 1000,
#      http-max-connections 10, http-max-connections-per-address 4:
#      a connection that sent part of a head gets 408 about 1 s after it was
#      accepted, however it trickles; so does one that sent nothing (issue 22
#      item 8); a kept-alive connection may idle past the head
#      deadline between requests; a fifth connection from one address is
#      closed at once; at the limit a new connection closes the least
#      recently active one and is answered at once. Each is counted by
#      reason and logged with the peer's address.
#   2. Under a file limit of 64 descriptors with http-max-connections 500,
#      the daemon lowers the limit to what fits next to its own descriptors
#      (and says so); 80 slow clients then cannot starve Redis: the daemon's
#      Redis connections are killed meanwhile and come back, the pools are
#      refilled, and the log stays short (no flood of accept errors).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
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
start_daemon a --tick-ms 50 --http "127.0.0.1:$P" --http-head-timeout-ms 1000 --http-max-connections 10 \
    --http-max-connections-per-address 4
wait_until 5 eval "curl -fsS -m 2 http://127.0.0.1:$P/healthz >/dev/null" || fail "a does not answer"
# Connections closed right after the answer (HTTP/1.0), back to back:
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
"$PYTHON" - "$P" <<'EOF' || fail "the deadlines and limits of the status server"
import socket, sys, time
port = int(sys.argv[1])
fails = []
def check(cond, what):
    if not cond:
        fails.append(what)
def conn(src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s
def closed_within(s, secs):
    """(seconds until the server closed s, bytes it sent), or (None, bytes) if still open."""
    t0, data = time.monotonic(), b""
    s.settimeout(0.05)
    while time.monotonic() - t0 < secs:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.monotonic() - t0, data
        if not chunk:
            return time.monotonic() - t0, data
        data += chunk
    return None, data
def get(s):
    """The status line of a GET /healthz on s, its body read."""
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    s.settimeout(2)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return b"closed"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    n = int([l.split(b":")[1] for l in lines if l.lower().startswith(b"content-length:")][0])
    while len(body) < n:
        body += s.recv(65536)
    return lines[0]
# a: part of a head, trickled: 408 about 1 s after the accept
t0 = time.monotonic()
a = conn("127.0.0.4")
a.sendall(b"GET /healthz HTTP/1.1\r\n")
data = b""
a.settimeout(0.2)
while time.monotonic() - t0 < 5:
    try:
        chunk = a.recv(65536)
        if not chunk:
            break
        data += chunk
    except socket.timeout:
        a.sendall(b"X-Slow: 1\r\n")
    except ConnectionResetError:
        break
took = time.monotonic() - t0
check(data.startswith(b"HTTP/1.1 408 ") and b"IDPOOL_BADREQUEST" in data, "a: %r" % data[:200])
check(0.9 <= took <= 2.5, "a: closed after %.2f s (head deadline 1 s)" % took)
# b: nothing sent: 408 and closed about 1 s after the accept
b = conn("127.0.0.5")
took, data = closed_within(b, 5)
check(took is not None and 0.9 <= took <= 2.5 and data.startswith(b"HTTP/1.1 408 "),
      "b: closed after %s s with %r" % (took, data[:200]))
# c: kept alive: idles past the head deadline between requests
c = conn("127.0.0.6")
check(get(c) == b"HTTP/1.1 200 OK", "c: first request")
time.sleep(1.5)
check(get(c) == b"HTTP/1.1 200 OK", "c: second request 1.5 s later, same connection")
c.close()
# d: the fifth connection from one address is closed at once
d = [conn("127.0.0.3") for _ in range(5)]
took, data = closed_within(d[4], 1)
check(took is not None and took < 0.5 and data == b"", "d: fifth connection from one address: %s s %r" % (took, data))
for s in d[:4]:
    check(closed_within(s, 0.1)[0] is None, "d: one of the first four was closed")
    s.close()
d[4].close()
time.sleep(0.2)  # the server sees those ends
# e: at the limit (10), a new connection closes the least recently active one
e = [conn("127.0.2.%d" % (i + 1)) for i in range(10)]
time.sleep(0.1)
t0 = time.monotonic()
f = conn("127.0.0.1")
check(get(f) == b"HTTP/1.1 200 OK", "e: a request at the limit")
took = time.monotonic() - t0
check(took < 0.5, "e: a request at the limit took %.2f s" % took)
check(closed_within(e[0], 0.3)[0] is not None, "e: the oldest connection is still open")
check(closed_within(e[9], 0.1)[0] is None, "e: the newest idle connection was closed")
for s in e + [f]:
    s.close()
if fails:
    sys.exit("; ".join(fails))
EOF
for r in head_timeout per_address evicted; do
    n=$(curl -fsS -m 5 "http://127.0.0.1:$P/metrics" |
        awk -v s="idpool_http_connections_closed_total{server=\"http\",reason=\"$r\"}" '$1 == s { print $2 }')
    assert_ge "${n:-0}" 1 "connections closed for $r"
done
log_has a 'http: closed a connection from 127\.0\.0\.4 port [0-9]+: no complete request head within http-head-timeout-ms \(head_timeout\)' ||
    fail "the head deadline was not logged with the peer's address"
log_has a 'http: refused a connection from 127\.0\.0\.3 port [0-9]+: that address has 4 connections open \(http-max-connections-per-address\)' ||
    fail "the per-address limit was not logged"
log_has a 'http: closed a connection from 127\.0\.2\.1 port [0-9]+: the least recently active, closed to make room at the connection limit \(10, http-max-connections\)' ||
    fail "the eviction was not logged"
curl -fsS -m 2 "http://127.0.0.1:$P/healthz" >/dev/null || fail "/healthz not answered afterwards"
stop_daemon a
pass "408 for a trickled head after 1 s; idle closed; kept-alive idles; per-address limit; room made at the limit"

# ===================================================================== 2 ===
P=$(free_port)
IDPOOLD_WRAP=(prlimit --nofile=64:64)
"${IDPOOLD_WRAP[@]}" "$IDPOOLD" --redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" \
    --tick-ms 50 --log-level debug --http "127.0.0.1:$P" --http-timeout-ms 2000 \
    --http-max-connections 500 --http-max-connections-per-address 500 </dev/null >>"$DIR/b.log" 2>&1 &
DAEMON_PID[b]=$!
DAEMON_NAMES+=(b)
wait_until 5 eval "curl -fsS -m 2 http://127.0.0.1:$P/healthz >/dev/null" || fail "b does not answer"
log_has b 'http: the file limit \(64 descriptors\) leaves room for 32 connections; http-max-connections 500 lowered to 32' ||
    fail "b did not say it lowered http-max-connections: $(grep -m1 'file limit' "$DIR/b.log")"
slow 80 "$P" 8 "$DIR/slow2" &
SLOW=$!
sleep 1
# shellcheck disable=SC2034 # read by the eval below
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
