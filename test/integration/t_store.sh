#!/usr/bin/env bash
# The MySQL side of a reservation (brief §4.1, invariant L), and the session
# of a daemon that stops running.
#
# 1. No ABA on the compare-and-set: while a SQL session holds the
#    application row (SELECT ... FOR UPDATE), the daemon starts its first
#    reservation and blocks inside it (its UPDATE waits for the row). The session then plays another
#    reserver and an operator: it records the lease [0, 1000000), moves
#    current_offset to 1000000 (version + 1), writes the old current_offset
#    (0) back, and commits. The daemon's reservation must see that lease:
#    its range lies above 1000000, no two leases overlap, and every pooled
#    ID is >= 1000000. (A compare-and-set on current_offset alone matched
#    the old value and reserved [0, ...) again: overlapping leases.)
# 2. A daemon that stops running (SIGSTOP, a frozen VM) must not hold its
#    MySQL session, and so a row lock, for the server's default
#    wait_timeout (8 hours; MySQL 8 has no idle_write_transaction_timeout):
#    a running daemon keeps its idle session alive across the session
#    timeout; a stopped one's session is ended by the server within
#    seconds; continued, it reconnects and reserves without an error.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

KEY=aba
add_app $KEY step=100 max_pool_size=1000 min_size_percent=50
ID=$(app_col $KEY id)
OTHER_HI=1000000

# The daemon's session runs a statement of its reservation (blocked on the row).
daemon_in_reservation() {
    [[ $(sql "SELECT COUNT(*) FROM information_schema.processlist
              WHERE id <> CONNECTION_ID() AND db = 'idpool'
                AND info LIKE 'UPDATE application SET current_offset%'") -ge 1 ]]
}

# ===================================================================== 1 ===
sql "BEGIN;
     SELECT id FROM application WHERE id = $ID FOR UPDATE;
     DO SLEEP(3);
     INSERT INTO application_lease (application_id, lo, hi, instance)
         VALUES ($ID, 0, $OTHER_HI, 'other-reserver');
     UPDATE application SET current_offset = $OTHER_HI, version = version + 1 WHERE id = $ID;
     UPDATE application SET current_offset = 0 WHERE id = $ID;
     COMMIT;" >"$DIR/holder.out" 2>&1 &
HOLDER=$!
wait_until 5 eval "[[ \$(sql \"SELECT COUNT(*) FROM information_schema.processlist
                              WHERE info LIKE 'DO SLEEP(%'\") -ge 1 ]]" ||
    fail "the row-holding session never started"
start_daemon a --tick-ms 100 --lock-ttl-ms 1000 --reload-ms 500 --mysql-timeout-ms 5000
wait_until 3 daemon_in_reservation ||
    fail "the daemon did not block inside its reservation while the row was held"
info "the daemon waits inside its reservation while another session holds the row"
wait "$HOLDER" || fail "the row-holding session failed: $(cat "$DIR/holder.out")"
wait_until 10 pool_ge $KEY 1000 || fail "pool never filled after the row was released"

sql "SELECT lo, hi, instance FROM application_lease WHERE application_id = $ID ORDER BY lo, hi" \
    >"$DIR/leases.tsv"
info "leases: $(tr '\t\n' ' ;' <"$DIR/leases.tsv")"
overlaps=$(awk -F'\t' 'NR > 1 && $1 < prev { n++ } { if ($2 > prev) prev = $2 } END { print n + 0 }' \
    "$DIR/leases.tsv")
assert_eq 0 "$overlaps" "overlapping leases in application_lease"
daemon_lo=$(awk -F'\t' '$3 != "other-reserver" { print $1; exit }' "$DIR/leases.tsv")
assert_ge "${daemon_lo:-0}" "$OTHER_HI" "the daemon's lease starts above the other reserver's"
min_id=$(rcli LRANGE "$(pool_key $KEY)" 0 -1 | sort -n | awk 'NR == 1')
assert_ge "$min_id" "$OTHER_HI" "lowest pooled ID"
assert_ge "$(app_col $KEY current_offset)" "$OTHER_HI" "current_offset after the reservation"
pass "a reservation blocked on the row sees what was leased meanwhile: no overlapping leases"

# ===================================================================== 2 ===
# The daemon's one session (the holder is gone; sql's own sessions are short).
daemon_session() {
    sql "SELECT id FROM information_schema.processlist
         WHERE id <> CONNECTION_ID() AND db = 'idpool' AND command = 'Sleep'"
}
sid=$(daemon_session)
[[ $sid =~ ^[0-9]+$ ]] || fail "cannot tell the daemon's MySQL session: '$sid'"
server_timeout=$(sql "SELECT VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES
                      WHERE VARIABLE_NAME = 'WAIT_TIMEOUT'")
info "daemon session $sid; this server's default wait_timeout is ${server_timeout} s"
# Idle for longer than the session timeout: a running daemon keeps its session.
sleep 12
assert_eq "$sid" "$(daemon_session)" "the running daemon's session after 12 s idle"
signal_daemon a STOP
t0=$(now_us)
session_gone() { [[ $(daemon_session) != "$sid" ]]; }
wait_until 20 session_gone || fail "the server kept the stopped daemon's session $sid for 20 s"
gone_ms=$((($(now_us) - t0) / 1000))
info "the stopped daemon's session was ended after $gone_ms ms"
assert_le "$gone_ms" 15000 "ms until the stopped daemon's session ended"
signal_daemon a CONT
# A fresh lease is needed now: the next reservation must reconnect quietly.
rcli DEL "$(pool_key $KEY)" "$(meta_key $KEY)" >/dev/null
wait_until 5 pool_ge $KEY 500 || fail "pool not refilled after SIGCONT"
log_has a 'cannot reserve a lease' && fail "a reservation failed after SIGCONT: $(grep 'cannot reserve' "$DIR/a.log" | head -n 2)"
log_has a 'idle connection was closed by the server' ||
    fail "the daemon did not notice its ended session"
pass "a stopped daemon's session ends within ${gone_ms} ms; continued, it reconnects and reserves"
stop_daemon a
