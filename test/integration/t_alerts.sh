#!/usr/bin/env bash
# Alerts (brief §7, issue 3): each alert fires once and resolves once, and
# each transition reaches every channel exactly once: the log, Redis pub/sub
# idpool:alerts, the webhook, and idpool_alert_firing in /metrics.
#
#   a  underflow: the daemon is stopped (SIGSTOP), takes drain the pool until
#      short; pub/sub hears it at once (from idpool_take inside Redis), the
#      log and the webhook once the daemon runs again; /metrics 1 then 0
#   c  invalid_config: a broken row fires once across many reloads and
#      SIGHUPs, names the field, resolves once when fixed
#   d  stalled: MySQL is down and the leases run out under consumption;
#      resolves once MySQL is back
#   e  low: a consumer keeps the pool below low water (refill every 1000 ms
#      cannot keep up); resolves when it stops. Neither underflow nor
#      stalled fires for that application.
#   f  webhook retry: the receiver answers 500 twice, then 204: the event is
#      delivered once, after two retries with growing delays
#   b  two daemons: an underflow is announced once in total (pub/sub,
#      webhook, the two logs together), also when the daemon that announced
#      the firing is paused while the other one resolves it
#   g  an underflow firing when Redis loses its state (FLUSHALL) still
#      resolves on every channel, pub/sub included
#   h  alerts left firing in meta by an instance that stopped are adopted by
#      a fresh daemon and resolved once (the states were never resolved)
# At the end every (application, alert) that fired has exactly one firing
# and one resolved event (uf underflow: two, a and g) on pub/sub, on the
# webhook and in the logs: the three channels agree.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

PUBSUB=$DIR/pubsub.events # one JSON event per line
HOOK=$DIR/hook.events     # bodies of the accepted webhook POSTs
ATTEMPTS=$DIR/hook.attempts
echo 0 >"$DIR/hook.fail" # the receiver answers 500 while this is > 0
touch "$PUBSUB" "$HOOK" "$ATTEMPTS"
"$PYTHON" "$HARNESS_PY" webhook "$DIR/hook.port" "$HOOK" "$ATTEMPTS" "$DIR/hook.fail" 2>"$DIR/hook.err" &
"$PYTHON" "$HARNESS_PY" subscribe "$REDIS_PORT" idpool:alerts "$PUBSUB" "$DIR/pubsub.ready" 2>"$DIR/sub.err" &
wait_until 5 test -s "$DIR/hook.port" || fail "webhook receiver did not start: $(cat "$DIR/hook.err")"
wait_until 5 test -e "$DIR/pubsub.ready" || fail "subscriber did not start: $(cat "$DIR/sub.err")"
# A hook token in the query string: sent with every POST, never logged.
HOOK_URL="http://127.0.0.1:$(cat "$DIR/hook.port")/hook?token=s3cr3t-t0ken"
HTTP_PORT=$(free_port)
DFLAGS=(--tick-ms 50 --reload-ms 300 --alert-webhook "$HOOK_URL" --alert-resolve-ms 1000 --stall-ms 1500)

take() { rcli FCALL idpool_take 2 "$(pool_key "$1")" "$(meta_key "$1")" "$2" | sed '/^$/d'; }
# n_pubsub / n_hook APP KIND STATE: events of that kind so far.
n_pubsub() { "$PYTHON" "$HARNESS_PY" events "$PUBSUB" app="$1" alert="$2" state="$3" || fail "bad event on pub/sub"; }
n_hook() { "$PYTHON" "$HARNESS_PY" events "$HOOK" app="$1" alert="$2" state="$3" || fail "bad event on the webhook"; }
# n_log APP KIND STATE: log lines of that transition, all daemons together.
n_log() {
    local n
    for n in "${DAEMON_NAMES[@]}"; do
        grep -E "alert $2 $3 app=$1: " "$DIR/$n.log" || true
    done | wc -l | tr -d ' '
}
# at_least N CMD...: CMD prints a number >= N (for wait_until).
at_least() {
    local n=$1
    shift
    (($("$@") >= n))
}
counts() { echo "pubsub=$(n_pubsub "$@") webhook=$(n_hook "$@") log=$(n_log "$@")"; }
# everywhere APP KIND STATE: the transition reached all three channels.
everywhere() { (($(n_pubsub "$@") >= 1 && $(n_hook "$@") >= 1 && $(n_log "$@") >= 1)); }
wait_everywhere() {
    local t=$1
    shift
    wait_until "$t" everywhere "$@" || fail "alert $2 $3 app=$1 did not reach every channel in ${t}s: $(counts "$@")"
}
# once APP KIND STATE: exactly once on each channel.
once() {
    local c
    c=$(counts "$@")
    [[ $c == 'pubsub=1 webhook=1 log=1' ]] || fail "alert $2 $3 app=$1: expected once on each channel, got $c"
}
never() {
    local c
    c=$(counts "$@")
    [[ $c == 'pubsub=0 webhook=0 log=0' ]] || fail "alert $2 $3 app=$1: expected none, got $c"
}
# firing_metric APP KIND: the idpool_alert_firing value in /metrics.
firing_metric() {
    curl -fsS "http://127.0.0.1:$HTTP_PORT/metrics" |
        sed -n "s/^idpool_alert_firing{app=\"$1\",alert=\"$2\"} \([0-9]*\)\$/\1/p"
}
metric_is() { [[ $(firing_metric "$1" "$2") == "$3" ]]; }

add_app uf step=400 max_pool_size=2000 max_size_per_times=1000
add_app uf2 step=400 max_pool_size=2000 max_size_per_times=1000
add_app ic step=100 max_pool_size=1000
add_app st step=40 max_pool_size=200 max_size_per_times=200
add_app lw step=100 max_pool_size=1000 interval=1000
start_daemon a "${DFLAGS[@]}" --http "127.0.0.1:$HTTP_PORT"
for k in uf uf2 ic lw; do
    wait_until 10 pool_ge "$k" 1000 || fail "$k never filled"
done
wait_until 10 pool_ge uf 2000 || fail "uf never filled"
wait_until 10 pool_ge st 200 || fail "st never filled"
wait_until 5 metric_is uf underflow 0 || fail "/metrics: no idpool_alert_firing for uf ($(firing_metric uf underflow))"
[[ ! -s $PUBSUB && ! -s $HOOK ]] || fail "alerts while everything is healthy: $(cat "$PUBSUB" "$HOOK")"

# --- a: underflow ----------------------------------------------------------------------
signal_daemon a STOP
assert_eq 1000 "$(take uf 1000 | wc -l)" "first take of 1000"
assert_eq 1000 "$(take uf 1000 | wc -l)" "second take of 1000"
assert_eq '' "$(take uf 1000)" "take from the drained pool (empty reply)"
assert_eq '' "$(take uf 5)" "another take from the drained pool"
# idpool_take published it, inside Redis; the stopped daemon has said nothing yet.
wait_until 3 at_least 1 n_pubsub uf underflow firing || fail "no underflow on pub/sub from idpool_take"
assert_eq 'pubsub=1 webhook=0 log=0' "$(counts uf underflow firing)" "underflow while the daemon is stopped"
# /metrics is sampled from before the daemon resumes: the alert resolves a
# second after the refill, which on a loaded machine can come before a look
# taken once every channel has the firing.
(while [[ ! -e $DIR/uf.samples.stop ]]; do
    firing_metric uf underflow >>"$DIR/uf.samples"
    sleep 0.05
done) &
sampler=$!
signal_daemon a CONT
wait_everywhere 5 uf underflow firing
wait_until 3 grep -qx 1 "$DIR/uf.samples" ||
    fail "/metrics: underflow of uf not 1 after firing (samples: $(sort "$DIR/uf.samples" | uniq -c | tr '\n' ' '))"
wait_everywhere 8 uf underflow resolved
wait_until 3 metric_is uf underflow 0 || fail "/metrics: underflow of uf not back to 0 ($(firing_metric uf underflow))"
touch "$DIR/uf.samples.stop"
wait "$sampler" || true
sleep 1.5 # nothing more may come
once uf underflow firing
once uf underflow resolved
grep -q '"requested":1000' <(grep '"app":"uf"' "$PUBSUB") || fail "the take's event lacks requested=1000: $(cat "$PUBSUB")"
log_has a 'alert underflow firing app=uf: ' || fail "no underflow log line"
pass "underflow: fired once and resolved once on pub/sub, webhook and log; /metrics 1 then 0"

# --- c: invalid_config --------------------------------------------------------------------
set_app ic step=-5
wait_everywhere 5 ic invalid_config firing
for _ in 1 2 3; do
    signal_daemon a HUP
    sleep 0.5
done
sleep 0.5 # several reloads (every 300 ms) and three SIGHUPs with the row still broken
once ic invalid_config firing
grep -q 'step' <(grep '"app":"ic"' "$PUBSUB") || fail "invalid_config message does not name the field: $(grep '"app":"ic"' "$PUBSUB")"
assert_eq 1 "$(firing_metric ic invalid_config)" "/metrics invalid_config of ic"
assert_eq 0 "$(n_log ic invalid_config resolved)" "invalid_config resolved before the fix"
set_app ic step=100
wait_everywhere 6 ic invalid_config resolved
sleep 1
once ic invalid_config firing
once ic invalid_config resolved
assert_eq 0 "$(firing_metric ic invalid_config)" "/metrics invalid_config of ic after the fix"
pass "invalid_config: fired once across reloads and SIGHUPs (naming the field), resolved once when fixed"

# --- d: stalled (MySQL down, leases run out) ------------------------------------------------
mysql_stop
t0=$(now_us)
(while :; do rcli LPOP "$(pool_key st)" 200 >/dev/null; sleep 0.05; done) &
consumer=$!
wait_everywhere 20 st stalled firing
info "stalled fired $((($(now_us) - t0) / 1000)) ms after MySQL stopped"
kill "$consumer"
wait "$consumer" 2>/dev/null || true
assert_eq 0 "$(n_log st stalled resolved)" "stalled resolved while MySQL is down"
mysql_start
t0=$(now_us)
wait_everywhere 20 st stalled resolved
info "stalled resolved $((($(now_us) - t0) / 1000)) ms after MySQL started"
wait_until 5 pool_ge st 200 || fail "st not refilled after MySQL came back"
sleep 1
once st stalled firing
once st stalled resolved
pass "stalled: fired once while MySQL was down and the pool drained, resolved once when it came back"

# --- e: low (refill every 1000 ms cannot keep up) --------------------------------------------
wait_until 5 pool_ge lw 1000 || fail "lw not full"
t0=$(now_us)
(while :; do
    n=$(llen lw)
    ((n > 100)) && rcli LPOP "$(pool_key lw)" $((n - 100)) >/dev/null
    sleep 0.01
done) &
consumer=$!
wait_everywhere 15 lw low firing
info "low fired $((($(now_us) - t0) / 1000)) ms after the consumer started"
kill "$consumer"
wait "$consumer" 2>/dev/null || true
t0=$(now_us)
wait_everywhere 10 lw low resolved
info "low resolved $((($(now_us) - t0) / 1000)) ms after the consumer stopped"
sleep 1
once lw low firing
once lw low resolved
never lw underflow firing
never lw stalled firing
pass "low: fired once while the consumer outpaced the refill, resolved once after; no underflow, no stalled"

# --- f: webhook retried with backoff -----------------------------------------------------------
echo 2 >"$DIR/hook.fail"
add_app rt step=-1 # invalid from the start
wait_until 10 at_least 1 n_hook rt invalid_config firing || fail "rt invalid_config never delivered: $(grep '"app":"rt"' "$ATTEMPTS")"
sleep 1
grep '"app":"rt"' "$ATTEMPTS" >"$DIR/rt.attempts" || true
assert_eq '500 500 204' "$(awk '{print $2}' "$DIR/rt.attempts" | tr '\n' ' ' | sed 's/ $//')" "webhook attempts for rt"
python3 - "$DIR/rt.attempts" <<'EOF' || fail "retry delays: $(cat "$DIR/rt.attempts")"
import sys
t = [float(l.split()[0]) for l in open(sys.argv[1])]
d = [b - a for a, b in zip(t, t[1:])]
print("# webhook retry delays: %s s" % " ".join("%.3f" % x for x in d), file=sys.stderr)
# backoff: the first retry after >= ~0.5 s, the second later than that
sys.exit(0 if d[0] >= 0.4 and d[1] >= 0.8 and d[1] > d[0] else 1)
EOF
assert_eq 1 "$(n_hook rt invalid_config firing)" "rt invalid_config on the webhook"
once rt invalid_config firing
log_has a 'alert webhook .*failed.*500' || fail "no log line about the failed webhook"
set_app rt step=100
wait_everywhere 6 rt invalid_config resolved
sleep 1
once rt invalid_config resolved
log_has a 'alert webhook http://127\.0\.0\.1:[0-9]+/hook\?\*\*\* failed \(HTTP 500\)' ||
    fail "the webhook failure was not logged with its query hidden"
grep -q 's3cr3t-t0ken' "$DIR/a.log" && fail "the webhook's token is in the log: $(grep -m1 s3cr3t "$DIR/a.log")"
pass "webhook: two HTTP 500 answers, retried with growing delays, delivered once; its token never logged"

# --- b: two daemons announce an alert once in total ----------------------------------------------
start_daemon b "${DFLAGS[@]}"
wait_until 10 log_has b 'app=uf2 serving' || fail "b does not serve uf2"
sleep 0.5
signal_daemon a STOP
signal_daemon b STOP
while [[ $(take uf2 1000 | wc -l) == 1000 ]]; do :; done
assert_eq '' "$(take uf2 1000)" "take from the drained uf2 pool"
signal_daemon a CONT
signal_daemon b CONT
wait_everywhere 5 uf2 underflow firing
# The daemon that announced the firing is paused while the other one sees the
# pool healthy again and resolves the alert in Redis: the resolution must
# still be announced once in total, not once by each.
announcer=a other=b
grep -q 'alert underflow firing app=uf2:' "$DIR/b.log" && announcer=b other=a
info "$announcer announced the firing; pausing it until $other resolves the alert"
signal_daemon "$announcer" STOP
# (the other daemon reads alert states of a pool above its low water with
# idpool_status every 5 s, and resolves after --alert-resolve-ms: 12 s of margin)
wait_until 12 at_least 1 n_pubsub uf2 underflow resolved || fail "$other did not resolve uf2 underflow"
sleep 0.3
signal_daemon "$announcer" CONT
wait_everywhere 12 uf2 underflow resolved
sleep 2
for s in firing resolved; do
    c=$(counts uf2 underflow $s)
    info "uf2 underflow $s: $c (a.log $(grep -c "alert underflow $s app=uf2:" "$DIR/a.log"), b.log $(grep -c "alert underflow $s app=uf2:" "$DIR/b.log"))"
    [[ $c == 'pubsub=1 webhook=1 log=1' ]] || fail "two daemons: underflow $s of uf2 announced more or less than once in total: $c"
done
pass "two daemons: the underflow was announced once in total"
stop_daemon b

# --- g: Redis forgets a firing alert (FLUSHALL): the resolution still reaches pub/sub ----------------
signal_daemon a STOP
while [[ $(take uf 1000 | wc -l) == 1000 ]]; do :; done
signal_daemon a CONT
wait_until 5 at_least 2 n_log uf underflow firing ||
    fail "second underflow of uf not announced: $(counts uf underflow firing)"
rcli FLUSHALL >/dev/null
wait_until 8 at_least 2 n_log uf underflow resolved || fail "second underflow of uf never resolved in the log"
sleep 1
for s in firing resolved; do
    c=$(counts uf underflow $s)
    [[ $c == 'pubsub=2 webhook=2 log=2' ]] ||
        fail "underflow of uf fired before a FLUSHALL: $s expected twice on each channel (once per episode), got $c"
done
pass "an alert firing when Redis lost its state (FLUSHALL) resolves on pub/sub too"

# --- every alert that fired: once firing, once resolved, on every channel ------------------------
sleep 1
"$PYTHON" "$HARNESS_PY" summary "$PUBSUB" >"$DIR/sum.pubsub"
"$PYTHON" "$HARNESS_PY" summary "$HOOK" >"$DIR/sum.hook"
for n in "${DAEMON_NAMES[@]}"; do
    sed -nE 's/^.*alert ([a-z_]+) (firing|resolved) app=([^:]+): .*$/\3 \1 \2/p' "$DIR/$n.log"
done | sort | uniq -c | awk '{print $2, $3, $4, $1}' >"$DIR/sum.log"
info "alerts seen (app alert state count):"$'\n'"$(cat "$DIR/sum.pubsub")"
diff "$DIR/sum.pubsub" "$DIR/sum.hook" >&2 || fail "pub/sub and webhook events differ"
diff "$DIR/sum.pubsub" "$DIR/sum.log" >&2 || fail "pub/sub events and log lines differ"
# Each episode: one firing, one resolution (the per-part checks above pin the
# exact counts; the FLUSHALL of part g also empties every other pool, which is
# an underflow episode of its own for each of them).
awk '{ n[$1 " " $2 " " $3] = $4 }
     END { for (k in n) { split(k, f, " ")
                          if (f[3] == "firing" && n[f[1] " " f[2] " resolved"] != n[k]) bad = 1 }
           exit bad }' "$DIR/sum.pubsub" ||
    fail "an alert fired a different number of times than it resolved"
awk '{ n[$1 " " $2]++ } END { for (k in n) if (n[k] != 2) exit 1 }' "$DIR/sum.pubsub" ||
    fail "an alert fired without resolving (or the reverse)"
stop_daemon a

# --- h: alerts another instance fired and left in meta are adopted and resolved -------------------
# As after a daemon fired `stalled` (a CLIENT PAUSE) and was stopped: the states stay in meta, no
# running daemon has them. A fresh daemon adopts them and resolves each once its condition is clear.
wait_until 5 pool_ge lw 1000 || fail "lw is not full"
declare -A BEFORE=()
for kind in stalled low invalid_config; do
    rcli HSET "$(meta_key lw)" "alert:$kind" firing "alert:$kind:notified" 1 >/dev/null
    BEFORE[$kind]="$(n_pubsub lw "$kind" resolved) $(n_hook lw "$kind" resolved) $(n_log lw "$kind" resolved)"
done
uf_before=$(counts lw underflow firing)
start_daemon c "${DFLAGS[@]}" --http "127.0.0.1:$HTTP_PORT"
# one_more KIND: one more resolution of lw's KIND on each channel than before c started.
one_more() {
    local p h l
    read -r p h l <<<"${BEFORE[$1]}"
    [[ $(counts lw "$1" resolved) == "pubsub=$((p + 1)) webhook=$((h + 1)) log=$((l + 1))" ]]
}
for kind in stalled low invalid_config; do
    wait_until 8 one_more "$kind" ||
        fail "lw $kind: not resolved once more on every channel: $(counts lw "$kind" resolved), before ${BEFORE[$kind]}"
done
sleep 1.5 # > alert-resolve-ms: nothing more
for kind in stalled low invalid_config; do
    one_more "$kind" || fail "lw $kind: resolved more than once: $(counts lw "$kind" resolved), before ${BEFORE[$kind]}"
    assert_eq resolved "$(rcli HGET "$(meta_key lw)" "alert:$kind")" "meta alert:$kind of lw"
    log_has c "app=lw alert $kind found firing in meta .*adopted" || fail "c did not say it adopted $kind"
done
assert_eq "$uf_before" "$(counts lw underflow firing)" "underflow firings of lw"
curl -fsS "http://127.0.0.1:$HTTP_PORT/v1/apps/lw" >"$DIR/lw.json"
"$PYTHON" -c 'import json, sys; a = json.load(open(sys.argv[1]))["alerts"]; sys.exit("firing: %s" % a if a else 0)' \
    "$DIR/lw.json" || fail "lw still shows firing alerts"
stop_daemon c
pass "alerts left firing in meta by another instance are adopted and resolved once, on every channel"
pass "alerts"
