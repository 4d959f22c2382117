#!/usr/bin/env bash
# Host names are looked up off the event loop (issue 23): hiredis 0.14's
# redisAsyncConnect would block the loop on getaddrinfo, and a slow resolver
# would stall every refill and the watchdog behind it.
#
# The daemons run in a mount namespace of their own whose /etc/resolv.conf
# names a DNS server on a loopback address that never answers
# (dns_blackhole.py):
#
#   redis://localhost:PORT   the hosts file answers: the pool fills, the log
#                            names localhost, and no query reaches the DNS
#                            server
#   redis://<a name only DNS knows>:PORT
#                            /healthz keeps answering (503 naming redis) in
#                            well under a second for longer than the
#                            resolver's timeout; the lookup is given up at
#                            the connect timeout and tried again with
#                            backoff (the log says so), and queries reached
#                            the DNS server; stopped during a lookup it
#                            exits 0 (and leaks nothing, ASan builds)
#   redis-sentinel://<a name only DNS knows>:P1,localhost:P2#master
#                            the first sentinel's lookup is given up at
#                            the attempt's timeout, the second one answers,
#                            and the pool, emptied, is filled again within
#                            a few seconds (a lookup on the loop would hold
#                            it for the resolver's 10 s)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || skip "needs root (a mount namespace, UDP port 53 on loopback)"
unshare --mount true 2>/dev/null || skip "unshare --mount is not permitted here"
SERVERS_SENTINEL=1 setup

NS=127.0.0.153
cat >"$DIR/resolv.conf" <<EOC
nameserver $NS
options timeout:5 attempts:2
EOC
"$PYTHON" "$(dirname "$0")/dns_blackhole.py" "$NS" "$DIR/dns.count" &
wait_until 5 test -s "$DIR/dns.count" || fail "the black-hole DNS server did not start on $NS:53"
queries() { cat "$DIR/dns.count"; }
# queried_since N: more than N queries reached the DNS server (for wait_until)
queried_since() { (($(queries) > $1)); }

# idpoold in a mount namespace where /etc/resolv.conf is ours
REAL_IDPOOLD=$IDPOOLD
IDPOOLD=$DIR/idpoold-ns
cat >"$IDPOOLD" <<EOC
#!/bin/sh
exec unshare --mount -- sh -c 'mount --bind "\$0" /etc/resolv.conf && exec "\$@"' \
    "$DIR/resolv.conf" "$REAL_IDPOOLD" "\$@"
EOC
chmod +x "$IDPOOLD"

add_app d1 step=100 max_pool_size=1000

# --- localhost: the hosts file, no DNS query ---------------------------------------------
start_daemon a --tick-ms 50 --redis "redis://localhost:$REDIS_PORT/0"
wait_until 10 pool_ge d1 1000 || fail "d1 never filled through redis://localhost"
log_has a "redis: connected to localhost:$REDIS_PORT" || fail "the log does not name localhost"
assert_eq 0 "$(queries)" "DNS queries for localhost (the hosts file answers it)"
stop_daemon a
pass "redis://localhost: the hosts file answers, the pool fills, no DNS query"

# --- a name only DNS knows: the loop keeps running ----------------------------------------
HTTP_PORT=$(free_port)
start_daemon b --tick-ms 50 --redis-timeout-ms 1000 --http "127.0.0.1:$HTTP_PORT" \
    --redis "redis://idpool-redis.example.invalid:$REDIS_PORT/0"
wait_until 5 log_has b "http: listening on 127.0.0.1:$HTTP_PORT" || fail "b: no HTTP server"
wait_until 5 queried_since 0 || fail "b: no query reached the DNS server"
# longer than the resolver's timeout (5 s): a lookup on the loop would stall it here
end=$(($(now_us) + 7000000))
n=0
while (($(now_us) < end)); do
    t0=$(now_us)
    code=$(curl -sS -o "$DIR/body" -w '%{http_code}' --max-time 3 "http://127.0.0.1:$HTTP_PORT/healthz") ||
        fail "/healthz did not answer within 3 s while the host name was looked up (the loop is blocked)"
    ms=$((($(now_us) - t0) / 1000))
    assert_eq 503 "$code" "/healthz while redis cannot be reached"
    assert_le "$ms" 900 "/healthz answer time (ms) while the resolver hangs"
    n=$((n + 1))
    sleep 0.2
done
grep -q redis "$DIR/body" || fail "/healthz does not name redis: $(cat "$DIR/body")"
wait_until 5 log_has b "cannot connect to idpool-redis.example.invalid:$REDIS_PORT: no answer from the resolver" ||
    fail "b: no log line of the lookup given up"
pass "a name the resolver never answers: /healthz answered $n times in 7 s, the lookup is given up at the connect timeout"
stop_daemon b 5
# stopped while a lookup is pending: exits 0 at once, nothing leaked (ASan builds)
q0=$(queries)
start_daemon b2 --tick-ms 50 --redis-timeout-ms 5000 --redis "redis://idpool-redis.example.invalid:$REDIS_PORT/0"
wait_until 5 queried_since "$q0" || fail "b2: no query reached the DNS server"
stop_daemon b2 5
pass "stopped during a lookup: exit 0"

# --- sentinels by name -------------------------------------------------------------------------
rcli DEL "$(pool_key d1)" >/dev/null
q0=$(queries)
t0=$(now_us)
start_daemon c --tick-ms 50 \
    --redis "redis-sentinel://idpool-sentinel.example.invalid:$SENTINEL1_PORT,localhost:$SENTINEL2_PORT/0#$SENTINEL_MASTER"
wait_until 8 pool_ge d1 1000 || fail "c: d1 not filled again through the second sentinel (localhost)"
ms=$((($(now_us) - t0) / 1000))
assert_gt "$(queries)" "$q0" "DNS queries for the first sentinel's name"
stop_daemon c
pass "sentinels by name: the first one's lookup given up, the second (localhost) answered, d1 filled again in $ms ms"
