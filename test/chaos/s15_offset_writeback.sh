#!/usr/bin/env bash
# Chaos 15 offset_writeback: the application row's current_offset is written
# back to an old value while daemons are inside their reservations (design
# brief §4 L: leases never overlap; U and M across operator edits).
#
# Three daemons refill one monotonic application `wb`, popped at the
# profile's rate by two LPOP and one idpool_take consumer all along. Each
# round:
#   1. a SQL session (the "racer") takes the row (SELECT ... FOR UPDATE)
#      and reads current_offset;
#   2. the application's pool and meta are deleted, so the lock holder
#      reserves a lease at once: its reads see the row, its UPDATE waits
#      for the racer's lock (seen in the processlist: the daemon is inside
#      its reservation, between its reads and its compare-and-set);
#   3. the racer plays another reserver and an operator in one transaction:
#      it records a lease of its own above everything leased, moves
#      current_offset past it (version + 1), writes the old current_offset
#      back, and commits;
#   4. the daemon's compare-and-set runs: current_offset has the value it
#      read, version does not. It must re-read and reserve above the
#      racer's lease. (Comparing current_offset alone matched the old
#      value and reserved the racer's range again: overlapping leases.)
#   Between rounds, an operator writes current_offset back to the value of
#   the round before (a plain regression, no version change).
# Checked after every round: no two leases overlap, the daemon's new lease
# starts above the racer's. At the end: U M A L over everything popped (the
# racer's leases are in application_lease, never served: their IDs are
# gaps, and an ID of theirs would be a lease overlap elsewhere).
# Evidence that the fault landed: in every round a daemon was blocked
# inside its reservation when the old value was written back (and the
# racer's write-back changed the row and committed).
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

APP=wb
RACER_SPAN=1000000
ROUNDS=$((CHAOS_ROUNDS < 3 ? 3 : 2 * CHAOS_ROUNDS))
add_app $APP step=1000 max_pool_size="$CHAOS_POOL" min_size_percent=50 increment_max=3 \
    max_size_per_second=1000000
ID=$(app_col $APP id)
chaos_daemon a
chaos_daemon b
chaos_daemon c
app_params $APP
wait_until 20 pool_ge $APP "$P_LOW" || fail "$APP never filled"
consumers_start $APP 2
consumers_start $APP 1 --mode take
popped_wait $APP $((CHAOS_IDS / 10)) "$APP: consumers starved before the first round"

# A daemon's session waits inside its reservation: its UPDATE of the row.
daemon_inside() {
    [[ $(sql "SELECT COUNT(*) FROM information_schema.processlist
              WHERE id <> CONNECTION_ID() AND db = 'idpool'
                AND info LIKE 'UPDATE application SET current_offset = % WHERE id = $ID %'") -ge 1 ]]
}

# Leases of APP that overlap one with a lower start (0 = L holds).
overlaps() {
    sql "SELECT lo, hi FROM application_lease WHERE application_id = $ID ORDER BY lo, hi" |
        awk -F'\t' 'NR > 1 && $1 < prev { n++ } { if ($2 > prev) prev = $2 } END { print n + 0 }'
}

# racer_send SQL: one statement to the racer's session.
racer_send() { printf '%s\n' "$1" >&"${RACER[1]}"; }
# racer_read: one line of the racer's output (bounded).
racer_read() {
    local line
    IFS= read -r -t 10 line <&"${RACER[0]}" || return 1
    printf '%s\n' "$line"
}

# lost_and_inside: a daemon waits inside its reservation; until then the pool
# stays lost. A chunk in flight when the pool and meta were deleted (its
# guard ran before, its EXEC after: WATCH covers the lock, not meta, which
# every take writes) writes meta back with the holder's lease, and a lease
# spans seconds of consumption: the holder would not reserve for that long.
# Those IDs are fresh (the lease is the holder's alone), so it is safe; the
# meta is deleted again (counted: AGAIN).
lost_and_inside() {
    daemon_inside && return 0
    if [[ $(rcli EXISTS "$(meta_key $APP)") == 1 ]]; then
        rcli DEL "$(pool_key $APP)" "$(meta_key $APP)" >/dev/null
        AGAIN=$((AGAIN + 1))
    fi
    return 1
}

INSIDE=0 WRITEBACKS=0 PREV_OFFSET='' AGAIN=0
for ((r = 1; r <= ROUNDS; r++)); do
    coproc RACER {
        exec mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root idpool -N -B -r \
            --unbuffered 2>&1
    }
    racer_send "BEGIN;"
    racer_send "SELECT current_offset, version FROM application WHERE id = $ID FOR UPDATE;"
    read -r cur0 ver0 < <(racer_read) || fail "round $r: the racer could not take the row"
    [[ $cur0 =~ ^[0-9]+$ ]] || fail "round $r: the racer read '$cur0'"
    # The lock holder must reserve now: a lost pool has no lease.
    rcli DEL "$(pool_key $APP)" "$(meta_key $APP)" >/dev/null
    if wait_until 10 lost_and_inside; then
        INSIDE=$((INSIDE + 1))
    else
        failure "round $r: no daemon reserved within 10 s of losing the pool"
    fi
    maxhi=$(sql "SELECT COALESCE(MAX(hi), 0) FROM application_lease WHERE application_id = $ID")
    rlo=$((cur0 > maxhi ? cur0 : maxhi))
    rhi=$((rlo + RACER_SPAN))
    racer_send "INSERT INTO application_lease (application_id, lo, hi, instance)
                VALUES ($ID, $rlo, $rhi, 'racer');"
    racer_send "UPDATE application SET current_offset = $rhi, version = version + 1 WHERE id = $ID;"
    racer_send "UPDATE application SET current_offset = $cur0 WHERE id = $ID;"
    racer_send "SELECT ROW_COUNT();"
    changed=$(racer_read) || changed=
    racer_send "COMMIT;"
    racer_send "SELECT 'committed';"
    committed=$(racer_read) || committed=
    racer_send "quit"
    wait "$RACER_PID" 2>/dev/null || true
    expect "[[ $changed == 1 && $committed == committed ]]" \
        "round $r: the racer's write-back did not commit (changed '$changed', '$committed')"
    WRITEBACKS=$((WRITEBACKS + 1))
    info "round $r: racer lease [$rlo, $rhi), current_offset $cur0 (version $ver0) written back"
    t0=$(now_ns)
    recovered $APP "$t0"
    first=$(sql "SELECT MIN(lo) FROM application_lease WHERE application_id = $ID AND lo >= $rlo
                 AND instance <> 'racer'")
    expect "[[ -n '$first' && '$first' != NULL ]] && ((first >= rhi))" \
        "round $r: the next daemon lease starts at ${first:-none}, inside the racer's [$rlo, $rhi)"
    n=$(overlaps)
    expect "((n == 0))" "round $r: $n overlapping leases after the write-back"
    # An operator writes the previous round's value back (a regression).
    if [[ -n $PREV_OFFSET ]]; then
        sql "UPDATE application SET current_offset = $PREV_OFFSET WHERE id = $ID"
        WRITEBACKS=$((WRITEBACKS + 1))
    fi
    PREV_OFFSET=$cur0
    sleep 1
done
# A chunk in flight writes meta back once (the holder's next guard finds
# meta gone: IDPOOL_STALE, and its next cycle reserves); more than twice a
# round would be something rewriting meta over and over.
expect "((AGAIN <= 2 * ROUNDS))" "meta was written back $AGAIN times in $ROUNDS rounds after its deletion"
fault_landed "rounds=$ROUNDS,inside=$INSIDE,writebacks=$WRITEBACKS,deleted_again=$AGAIN" "((INSIDE == ROUNDS))"

consumers_wait $APP "$CHAOS_IDS"
consumers_stop $APP
daemons_stop
drain $APP
check_app $APP
row "leases=$(sql "SELECT COUNT(*) FROM application_lease WHERE application_id = $ID")"
