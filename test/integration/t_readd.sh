#!/usr/bin/env bash
# The lease history of an entity_key survives its row (issue 18, item 5).
#
# A row DELETEd behind the daemon's back and added again under the same key
# gets a new id; with the Redis meta gone (FLUSHALL here; a sweep discard or
# an empty Redis do the same) nothing in Redis remembers the old leases.
# Before the fix the new row leased from start_offset again and handed out
# 1, 2, 3 ... a second time. Now every lease also records the key, and a
# reservation starts above the highest hi ever leased for the key, whatever
# the row says.
#
# Part 1, the same key three times:
#   1. `idpoolctl apps add`, IDs taken;
#   2. DELETE, FLUSHALL (daemon stopped), `idpoolctl apps add` again: it
#      says that the key starts above its history and at what, and writes
#      that as current_offset; IDs taken;
#   3. DELETE, FLUSHALL and a raw INSERT (current_offset 0) while the daemon
#      runs: the daemon keeps the higher value (offset_regression); IDs taken.
#   idpool-check over every ID taken and every lease of the three rows: no
#   ID twice (U), each in one lease (L), none below 1 (A, never 0); every
#   lease records the key.
# Part 2, an older database: application_lease without entity_key (and
# start_offset defaulting to 0). The daemon keeps working on it and says
# what it lacks; loading sql/schema.sql again adds the column, fills it in
# from `application`, sets the new default, and is idempotent; the daemon
# then records the key; a DELETE + FLUSHALL + raw INSERT after the upgrade
# starts above the history, written before it and after.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"

COMMON=(--tick-ms 50 --reload-ms 300 --lock-ttl-ms 500)
KEY=re
ROW=(step=100 max_pool_size=1000 min_size_percent=50)

# max_hi IDS: the highest hi leased by the rows with these ids (comma-separated).
max_hi() { sql "SELECT COALESCE(MAX(hi), 0) FROM application_lease WHERE application_id IN ($1)"; }
# gone KEY: the row DELETEd (not soft-deleted) and everything in Redis flushed.
gone() {
    sql "DELETE FROM application WHERE entity_key = $(sql_value "$1")"
    rcli FLUSHALL >/dev/null
    info "row $1 deleted, Redis flushed"
}
# served_pool KEY ID LOW: the row with this id is the one refilling KEY's pool,
# which holds at least LOW IDs.
served_pool() { [[ $(app_col "$1" id) == "$2" ]] && pool_ge "$1" "$3"; }

# ------------------------------------------------------------ part 1 -----
"$IDPOOLCTL" apps add $KEY --step 100 --max-pool 1000 --min-percent 50 >"$DIR/add1.out" ||
    fail "apps add $KEY: $(cat "$DIR/add1.out")"
id1=$(app_col $KEY id)
start_daemon a "${COMMON[@]}" --instance readd-a
wait_until 10 pool_ge $KEY 500 || fail "pool of row $id1 never filled"
pop $KEY 1500 "$DIR/p1" || fail "taking from row $id1"
stop_daemon a
h1=$(max_hi "$id1")
info "row $id1: leased below $h1"

gone $KEY
"$IDPOOLCTL" apps add $KEY --step 100 --max-pool 1000 --min-percent 50 >"$DIR/add2.out" ||
    fail "apps add $KEY again: $(cat "$DIR/add2.out")"
info "apps add again: $(tr '\n' ' ' <"$DIR/add2.out")"
id2=$(app_col $KEY id)
cur2=$(app_col $KEY current_offset)
assert_ne "$id1" "$id2" "id of the re-added row"
start_daemon a "${COMMON[@]}" --instance readd-a
wait_until 10 pool_ge $KEY 500 || fail "pool of row $id2 never filled"
pop $KEY 1500 "$DIR/p2" || fail "taking from row $id2"
h2=$(max_hi "$id1,$id2")

# The raw INSERT while the daemon runs (it sees the row vanish, then a new one).
gone $KEY
add_app $KEY "${ROW[@]}"
id3=$(app_col $KEY id)
wait_until 10 served_pool $KEY "$id3" 500 || fail "pool of row $id3 never filled"
pop $KEY 1500 "$DIR/p3" || fail "taking from row $id3"
stop_daemon a

# ------------------------------------------------------------ checks -----
sql "SELECT lo, hi FROM application_lease WHERE application_id IN ($id1, $id2, $id3)" \
    >"$DIR/leases1.txt"
check_pops "$DIR/check1" --start-offset 1 --leases "$DIR/leases1.txt" \
    "$DIR/p1.0.bin" "$DIR/p2.0.bin" "$DIR/p3.0.bin" ||
    fail "U/A/L over the three rows of '$KEY' (each added after the one before was deleted)"
info "three rows of $KEY: $(tail -n 1 "$DIR/check1")"
grep -qE "^'$KEY' starts above the key's lease history, at $h1:" \
    "$DIR/add2.out" || fail "apps add did not say that '$KEY' starts above its history ($h1): $(cat "$DIR/add2.out")"
assert_eq "$h1" "$cur2" "current_offset written by apps add for a key with history"
lo2=$(sql "SELECT MIN(lo) FROM application_lease WHERE application_id = $id2")
lo3=$(sql "SELECT MIN(lo) FROM application_lease WHERE application_id = $id3")
assert_ge "$lo2" "$h1" "first lease of row $id2 (re-added with apps add)"
assert_ge "$lo3" "$h2" "first lease of row $id3 (re-added with a raw INSERT)"
log_has a "app=$KEY offset_regression: current_offset 0 is below the $h2 already reserved" ||
    fail "no offset_regression for the raw row with current_offset 0 below $h2"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease
    WHERE application_id IN ($id1, $id2, $id3) AND entity_key <> $(sql_value $KEY)")" \
    "leases of '$KEY' that do not record the key"
pass "re-added key: apps add starts above the history at $h1, a raw row above $h2; $(tail -n 1 "$DIR/check1")"

# ------------------------------------------------------------ part 2 -----
# The tables as an older schema.sql created them.
UP=up
sql "DELETE FROM application;
     DROP TABLE application_lease;
     CREATE TABLE application_lease (
       id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
       application_id BIGINT UNSIGNED NOT NULL,
       lo             BIGINT       NOT NULL,
       hi             BIGINT       NOT NULL,
       instance       VARCHAR(255) NOT NULL DEFAULT '',
       created_at     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
       PRIMARY KEY (id),
       KEY ix_app_hi (application_id, hi)
     ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
     ALTER TABLE application ALTER COLUMN start_offset SET DEFAULT 0;"
rcli FLUSHALL >/dev/null
add_app $UP "${ROW[@]}" start_offset=1
up1=$(app_col $UP id)
start_daemon b "${COMMON[@]}" --instance readd-b
wait_until 10 pool_ge $UP 500 || fail "$UP: no refill on the older schema"
pop $UP 1500 "$DIR/u1" || fail "taking from $UP on the older schema"
log_has b "application_lease has no column entity_key" ||
    fail "the daemon did not say that the schema is older"
log_has b "application_lease has no columns delta, remainder, start_offset" ||
    fail "the daemon did not say that the ledger has no lattice columns"

sql_file "$IDPOOL_SOURCE_ROOT/sql/schema.sql" || fail "loading sql/schema.sql on the older schema"
sql_file "$IDPOOL_SOURCE_ROOT/sql/schema.sql" || fail "loading sql/schema.sql a second time"
assert_eq 1 "$(sql "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = 'idpool'
    AND table_name = 'application_lease' AND column_name = 'entity_key'")" "column entity_key"
assert_eq 2 "$(sql "SELECT COUNT(DISTINCT index_name) FROM information_schema.statistics
    WHERE table_schema = 'idpool' AND table_name = 'application_lease'
    AND column_name = 'entity_key'")" "indexes on entity_key"
assert_eq 1 "$(sql "SELECT column_default FROM information_schema.columns WHERE table_schema = 'idpool'
    AND table_name = 'application' AND column_name = 'start_offset'")" "default of start_offset"
assert_eq 3 "$(sql "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = 'idpool'
    AND table_name = 'application_lease' AND column_name IN ('delta', 'remainder', 'start_offset')
    AND is_nullable = 'YES'")" "lattice columns of application_lease"
n_old=$(sql "SELECT COUNT(*) FROM application_lease")
assert_gt "$n_old" 0 "leases before the upgrade"
assert_eq "$n_old" "$(sql "SELECT COUNT(*) FROM application_lease WHERE entity_key = $(sql_value $UP)")" \
    "leases filled in with their key"
pass "schema upgrade: entity_key added, indexed and filled in ($n_old leases), start_offset defaults to 1, loads twice"

# The daemon goes on, and records the key once the column is there. Its
# leases may hold a minute of IDs: discard the pool (as a sweep would) so
# that it reserves the next one now.
pop $UP 1500 "$DIR/u2" || fail "taking from $UP after the upgrade"
rcli DEL "$(pool_key $UP)" "$(meta_key $UP)" >/dev/null
wait_until 10 eval "(( \$(sql \"SELECT COUNT(*) FROM application_lease WHERE id > $n_old\") > 0 ))" ||
    fail "no lease reserved after the upgrade"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE entity_key = ''")" \
    "leases reserved after the upgrade without their key"
log_has b "application_lease.entity_key is there" || fail "the daemon did not notice the upgrade"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE id > $n_old AND delta IS NULL")" \
    "leases reserved after the upgrade without their lattice"
assert_eq "$n_old" "$(sql "SELECT COUNT(*) FROM application_lease WHERE delta IS NULL")" \
    "leases from before the upgrade (lattice unknown)"
log_has b "application_lease.delta, remainder and start_offset are there" ||
    fail "the daemon did not notice the lattice columns"

hu=$(max_hi "$up1")
gone $UP
add_app $UP "${ROW[@]}" start_offset=1
up2=$(app_col $UP id)
wait_until 10 served_pool $UP "$up2" 500 || fail "pool of row $up2 never filled"
pop $UP 1500 "$DIR/u3" || fail "taking from row $up2"
stop_daemon b
sql "SELECT lo, hi FROM application_lease WHERE application_id IN ($up1, $up2)" >"$DIR/leases2.txt"
check_pops "$DIR/check2" --start-offset 1 --leases "$DIR/leases2.txt" \
    "$DIR/u1.0.bin" "$DIR/u2.0.bin" "$DIR/u3.0.bin" ||
    fail "U/A/L over '$UP' across the upgrade and a re-add"
assert_ge "$(sql "SELECT MIN(lo) FROM application_lease WHERE application_id = $up2")" "$hu" \
    "first lease of the row re-added after the upgrade"
ctl_expect 0 verify
out_has "^verify: ok: 1 environment, .*; 0 conflicts; $n_old leases from before the ledger recorded lattices"
pass "older schema: served, upgraded in place, history from before the upgrade kept; $(tail -n 1 "$DIR/check2"); $(cat "$DIR/out")"
