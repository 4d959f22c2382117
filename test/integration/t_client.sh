#!/usr/bin/env bash
# libidpool across two environments (issue 12, first step): two Redis +
# MariaDB pairs, each with its own idpoold, the same application "c1" with
# delta 2 and remainder 0 (A, preferred) or 1 (B). Four threads of one
# client (idpool-clientload) take IDs with idpool_next while A's Redis is
# killed (the client fails over to B) and started again, until the client
# came back to A and took at least 2,000,000 IDs (--until-failbacks 1
# --min-ids: the load stops on what is asserted; at most 12,000,000 IDs and
# 120 s). Asserted: no timeout, no ID twice (idpool-check over the recorded
# pops), at least 2,000,000 IDs, IDs from both environments, a failover and
# a fail-back.
# Then a client is created, used (100 IDs) and freed 200 times: in the
# sanitizer build LeakSanitizer checks that nothing leaks.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
[[ -x ${IDPOOL_CLIENTLOAD:-} ]] || fail "idpool-clientload not built: ${IDPOOL_CLIENTLOAD:-}"

two_environments c1
wait_until 15 pool_ge c1 300000 || fail "A's pool did not fill"

t0=$(now_us)
"$IDPOOL_CLIENTLOAD" --threads 4 --ids 3000000 --until-failbacks 1 --min-ids 2000000 \
    --max-secs 120 --mod 2 --timeout-ms 5000 \
    --record "$DIR/pops" c1 "$A_REDIS" "$B_REDIS" >"$DIR/client.out" 2>&1 &
client=$!
sleep 0.3
redis_kill
t_kill=$(now_us)
info "A's Redis killed $((($(now_us) - t0) / 1000)) ms into the run"
sleep 1
redis_start
t_back=$(now_us)
wait "$client" || fail "client failed: $(cat "$DIR/client.out")"
cat "$DIR/client.out"
info "run took $((($(now_us) - t0) / 1000)) ms; A was down $(((t_back - t_kill) / 1000)) ms"

"$IDPOOL_CHECK" "$DIR"/pops.*.bin >"$DIR/check.out" || fail "idpool-check: $(tail -n 3 "$DIR/check.out")"
tail -n 1 "$DIR/check.out"
grep -q ' duplicates=0 ' "$DIR/check.out" || fail "duplicates: $(tail -n 1 "$DIR/check.out")"
stats=$(grep '^clientload: ids=' "$DIR/client.out")
ids=$(sed -n 's/^clientload: ids=\([0-9]*\) .*/\1/p' <<<"$stats")
grep -q "^check: ids=$ids " "$DIR/check.out" || fail "not $ids IDs: $(tail -n 1 "$DIR/check.out")"
assert_ge "$ids" 2000000 "IDs taken"
[[ $stats == *" timeouts=0 "* ]] || fail "a call timed out: $stats"
fo=$(sed -n 's/.* failovers=\([0-9]*\).*/\1/p' <<<"$stats")
fb=$(sed -n 's/.* failbacks=\([0-9]*\).*/\1/p' <<<"$stats")
assert_gt "$fo" 0 "failovers"
assert_gt "$fb" 0 "failbacks"
r1=$(sed -n 's/.* r1=\([0-9]*\).*/\1/p' "$DIR/client.out")
assert_gt "$r1" 0 "IDs from environment B (remainder 1)"
pass "$ids IDs through libidpool, A's Redis killed and restarted: no duplicate, no timeout, $fo failover(s), $fb failback(s), $r1 IDs from B"

"$IDPOOL_CLIENTLOAD" --cycles 200 c1 "$A_REDIS" "$B_REDIS" >"$DIR/cycles.out" 2>&1 ||
    fail "create/use/free cycles: $(tail -n 5 "$DIR/cycles.out")"
grep -q '200 clients created, used and freed' "$DIR/cycles.out" || fail "cycles: $(cat "$DIR/cycles.out")"
pass "200 clients created, used and freed"
