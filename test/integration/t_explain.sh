#!/usr/bin/env bash
# idpoolctl explain (issue 24), against real MariaDB, Redis and idpoold in
# two environments: application ex with delta 2 (remainder 0 in A, 1 in B),
# a monotonic application with gaps (increment_max 10) and a trend one in
# A. explain answers, in JSON (parsed and checked) and text, for an ID in a
# pool, an ID popped (issued; issued or skipped with gaps), an ID the pool
# has not reached, an ID off the lattice, an ID of the other environment,
# IDs never leased (below start_offset, between leases, above every lease,
# in no application at all), and the inverse: the ranges leased in a window
# (--from/--to), merged and counted. A lease with its lattice recorded is
# judged by that lattice, not the row's.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup

add_app gap increment_max=10 max_size_per_second=100 step=100 start_offset=5000
add_app tr increasing_type=2 max_size_per_second=100 step=100
# A deleted application with a ledger written by hand (the daemon does not
# serve it): leases [100, 200) and [200, 300) taken at 10:00 and 10:30, and
# [500, 600) at 11:00 on 2026-01-01; lattice delta 3, remainder 1.
add_app old deleted_at=1 delta=3 remainder=1
sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, created_at)
     VALUES (999, 'old', 100, 200, 'h1', '2026-01-01 10:00:00.000'),
            (999, 'old', 200, 300, 'h2', '2026-01-01 10:30:00.500'),
            (999, 'old', 500, 600, 'h1', '2026-01-01 11:00:00.000')"
two_environments ex
rcli_b() { redis-cli -h 127.0.0.1 -p "$B_REDIS_PORT" "$@"; }
filled() {
    pool_ge ex 1000 && pool_ge gap 1000 && pool_ge tr 1000 &&
        (($(rcli_b LLEN "$(pool_key ex)") >= 1000))
}
wait_until 20 filled || fail "pools did not fill"
ENV_A="$IDPOOL_MYSQL_URL,$IDPOOL_REDIS_URL"
ENV_B="$B_MYSQL,$B_REDIS"

# explain ID ARGS...: idpoolctl explain --json, exit 0; the document in $DIR/out.
explain() { ctl_expect 0 explain "$@" --json; }
# v ENV APP: the verdict of application APP in environment ENV (1, 2, ...).
v() {
    jget "[a for a in d['environments'][$1 - 1]['applications'] if a['application'] == '$2'][0]['verdict']"
}
# f ENV APP PYEXPR: an expression on that application's answer a.
f() {
    jget "(lambda a: $3)([a for a in d['environments'][$1 - 1]['applications'] if a['application'] == '$2'][0])"
}

# --- an ID in the pool: which lease, when, by whom -----------------------
id=$(rcli LINDEX "$(pool_key ex)" 5)
explain "$id" --app ex --env "$ENV_A"
assert_eq in_pool "$(v 1 ex)" "ID $id of A's pool"
assert_eq True "$(f 1 ex "a['can_be_in_pool']")" "in the pool: can be in a pool"
assert_eq True "$(f 1 ex "a['on_lattice']")" "on the lattice"
row=$(sql "SELECT id, lo, hi, instance FROM application_lease WHERE entity_key = 'ex' AND lo <= $id AND hi > $id")
assert_eq "$row" "$(f 1 ex "'\t'.join([str(a['lease']['id']), a['lease']['lo'], a['lease']['hi'], a['lease']['instance']])")" \
    "the lease of $id"
# The lattice recorded with the lease when the ledger has the columns
# (issue 24's verify adds them), else the row's now.
recorded=$(sql "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application_lease' AND COLUMN_NAME IN ('delta', 'remainder', 'start_offset')")
if [[ $recorded == 3 ]]; then source=lease; else source="row now"; fi
assert_eq "$source" "$(f 1 ex "a['lattice']['source']")" "the lattice's source ($recorded lattice columns)"
jget "d['environments'][0]['applications'][0]['lease']['created_at']" | grep -qE '^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z$' ||
    fail "created_at is not UTC ISO 8601: $(head -c 2000 "$DIR/out")"
# Without --app, every application's leases are searched: IDs are per
# application, so each application holding the ID in a lease is named.
explain "$id" --env "$ENV_A"
assert_eq "$(sql "SELECT GROUP_CONCAT(DISTINCT entity_key ORDER BY entity_key) FROM application_lease WHERE lo <= $id AND hi > $id")" \
    "$(jget "','.join(sorted(a['application'] for a in d['environments'][0]['applications']))")" \
    "the applications whose leases hold $id"
assert_eq in_pool "$(v 1 ex)" "without --app"
# Text: the lease and the verdict.
ctl_expect 0 explain "$id" --env "$ENV_A"
out_has "in lease [0-9]+ \\[[0-9]+, [0-9]+\\) of row [0-9]+, taken .* by 'a'"
out_has "=> in_pool"

# --- popped: issued (increment_max 1), issued or skipped (with gaps) -----
popped=$(rcli LPOP "$(pool_key ex)" 3 | tail -n 1)
explain "$popped" --app ex --env "$ENV_A"
assert_eq issued "$(v 1 ex)" "popped ID $popped of ex"
assert_eq False "$(f 1 ex "a['can_be_in_pool']")" "popped: no longer in a pool"
mapfile -t g < <(rcli LPOP "$(pool_key gap)" 50)
explain "${g[49]}" --app gap --env "$ENV_A"
assert_eq issued_or_skipped "$(v 1 gap)" "popped ID of a monotonic application with gaps"
# A gap between two popped IDs: the ledger cannot tell it from an issued ID.
hole=''
for i in $(seq 1 49); do
    if ((g[i] - g[i - 1] > 1)); then hole=$((g[i - 1] + 1)) && break; fi
done
[[ -n $hole ]] || fail "50 IDs with increment_max 10 and no gap: ${g[*]}"
explain "$hole" --app gap --env "$ENV_A"
assert_eq issued_or_skipped "$(v 1 gap)" "skipped ID $hole"
f 1 gap "a['explanation']" | grep -q "ranges, not IDs" || fail "the gap is not explained: $(head -c 2000 "$DIR/out")"
# Below start_offset (5000): never leased.
explain 10 --app gap --env "$ENV_A"
assert_eq never_leased "$(v 1 gap)" "ID 10 of gap"
assert_eq below_start_offset "$(f 1 gap "a['reason']")" "ID 10 of gap"
# Trend: in the pool, then popped.
tid=$(rcli LINDEX "$(pool_key tr)" 0)
explain "$tid" --app tr --env "$ENV_A"
assert_eq in_pool "$(v 1 tr)" "trend ID in the pool"
rcli LPOP "$(pool_key tr)" >/dev/null
explain "$tid" --app tr --env "$ENV_A"
assert_eq issued "$(v 1 tr)" "trend ID popped"

# --- an ID the pool has not reached: in its lease above meta's next ------
read -r next hi nlo nhi <<<"$(rcli HMGET "$(meta_key ex)" next hi nlo nhi | tr '\n' ' ')"
cand=$((next + next % 2))
if ((cand < hi)) || [[ -n $nhi && $nhi != 0 ]] && ((cand >= nlo && cand < nhi)); then
    :
else
    cand=$((nlo + nlo % 2))
fi
explain "$cand" --app ex --env "$ENV_A"
assert_eq not_yet_pushed "$(v 1 ex)" "ID $cand (meta: next $next hi $hi nlo $nlo nhi $nhi)"
assert_eq True "$(f 1 ex "a['can_be_in_pool']")" "not yet pushed: can be in a pool"

# --- off the lattice, and the other environment -------------------------
odd=$((id + 1)) # ex in A has delta 2, remainder 0: every ID of A is even
explain "$odd" --app ex --env "$ENV_A"
assert_eq off_lattice "$(v 1 ex)" "odd ID $odd in A"
bid=$(rcli_b LINDEX "$(pool_key ex)" 3)
explain "$bid" --app ex --env "$ENV_A" --env "$ENV_B"
assert_eq 2 "$(jget "len(d['environments'])")" "two environments answered"
assert_eq off_lattice "$(v 1 ex)" "B's ID $bid in A"
assert_eq in_pool "$(v 2 ex)" "B's ID $bid in B"
assert_eq 1 "$(f 2 ex "a['lattice']['remainder']")" "B's lattice"
explain "$bid" --env "$ENV_A" --env "$ENV_B"
assert_eq in_pool "$(v 2 ex)" "B's ID $bid in B, every application searched"
# A MySQL only environment: the pool is not read, and it says so.
explain "$bid" --app ex --env "$B_MYSQL"
assert_eq leased "$(v 1 ex)" "no Redis given"
assert_eq None "$(f 1 ex "a['can_be_in_pool']")" "no Redis given: unknown"

# --- never leased ---------------------------------------------------------
explain 300 --app old --env "$ENV_A"
assert_eq never_leased "$(v 1 old)" "ID 300 of old"
assert_eq between_leases "$(f 1 old "a['reason']")" "ID 300 of old"
assert_eq 200 "$(f 1 old "a['lease_before']['lo']")" "the lease before 300"
assert_eq 500 "$(f 1 old "a['lease_after']['lo']")" "the lease after 300"
explain 4000000000000000000 --app ex --env "$ENV_A"
assert_eq above_leases "$(f 1 ex "a['reason']")" "a huge ID"
explain 4000000000000000000 --env "$ENV_A" --env "$ENV_B"
assert_eq True "$(jget "d['environments'][0]['never_leased'] and d['environments'][1]['never_leased']")" \
    "a huge ID in no application"
assert_eq 0 "$(jget "len(d['environments'][0]['applications'])")" "a huge ID: no application named"
explain 103 --app old --env "$ENV_A"
assert_eq issued_or_skipped "$(v 1 old)" "ID 103 of the deleted old: Redis has no progress for it"
f 1 old "a['explanation']" | grep -q "no meta" || fail "no meta is not said: $(head -c 2000 "$DIR/out")"
assert_eq deleted "$(f 1 old "a['row']['state']")" "old's row is deleted"

# --- a window: --from/--to ------------------------------------------------
explain --app old --from 2026-01-01T10:00:00Z --to 2026-01-01T10:45:00Z --env "$ENV_A"
assert_eq "[('100', '300', 67, 2)]" \
    "$(jget "[(r['lo'], r['hi'], r['lattice_ids'], r['leases']) for r in d['environments'][0]['ranges']]")" \
    "old's leases 10:00..10:45, merged"
explain --app old --from 2026-01-01 --to 2026-01-02 --env "$ENV_A"
assert_eq "[('100', '300', 67), ('500', '600', 33)] 100 3" \
    "$(jget "[(r['lo'], r['hi'], r['lattice_ids']) for r in d['environments'][0]['ranges']], d['environments'][0]['lattice_ids'], d['environments'][0]['leases']" | python3 -c 'import ast, sys; print(*ast.literal_eval(sys.stdin.read()))')" \
    "old's leases of the day"
explain --app old --from 2026-01-01T10:30:00.500Z --to 2026-01-01T11:00:00Z --env "$ENV_A"
assert_eq "[('200', '300')]" "$(jget "[(r['lo'], r['hi']) for r in d['environments'][0]['ranges']]")" \
    "from is inclusive (10:30:00.500), to exclusive (11:00)"
explain --app ex --from now-1h --to 2999-01-01 --env "$ENV_A" --env "$ENV_B"
want=$(sql "SELECT COUNT(*), SUM(FLOOR((hi - 1) / 2) - FLOOR((GREATEST(lo, 1) - 1) / 2)) FROM application_lease WHERE entity_key = 'ex'" | tr '\t' ' ')
assert_eq "$want" "$(jget "d['environments'][0]['leases'], d['environments'][0]['lattice_ids']" | tr -d '(),')" \
    "A's leases of ex in the last hour and their even IDs"
assert_ge "$(jget "len(d['environments'][1]['ranges'])")" 1 "B's leases of ex in the last hour"
explain --app ex --from now-1h --to now-30m --env "$ENV_A"
assert_eq 0 "$(jget "len(d['environments'][0]['ranges'])")" "nothing leased an hour ago"
ctl_expect 0 explain --app old --from 2026-01-01 --to 2026-01-02 --env "$ENV_A"
out_has "^    \\[100, 300\\)  67 lattice IDs, 2 leases, taken 2026-01-01T10:00:00.000Z \\.\\. 2026-01-01T10:30:00.500Z"

# created_at is written in the MySQL server's time zone: a server 5 hours
# east of UTC writes a lease taken now as 5 hours ahead; explain converts it,
# so it is in [now-1h, now) (read as UTC it would be in the future).
sql "SET GLOBAL time_zone = '+05:00'"
sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance) VALUES (999, 'old', 2000, 2100, 'tz')"
explain --app old --from now-1h --to now --env "$ENV_A"
sql "SET GLOBAL time_zone = 'SYSTEM'"
assert_eq "[('2000', '2100')]" "$(jget "[(r['lo'], r['hi']) for r in d['environments'][0]['ranges']]")" \
    "a lease written by a server at +05:00, in the last hour"
taken=$(jget "d['environments'][0]['ranges'][0]['first_taken']")
now=$(date -u +%s)
(($(date -u -d "${taken%Z}" +%s) > now - 60 && $(date -u -d "${taken%Z}" +%s) <= now)) ||
    fail "created_at $taken is not UTC (now $(date -u +%FT%TZ))"

# --- the lattice recorded with a lease wins over the row's ----------------
has=$(sql "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application_lease' AND COLUMN_NAME = 'delta'")
if [[ $has == 0 ]]; then # a schema older than the columns (issue 24's verify adds them)
    sql "ALTER TABLE application_lease ADD COLUMN delta BIGINT NULL, ADD COLUMN remainder BIGINT NULL, ADD COLUMN start_offset BIGINT NULL"
fi
sql "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, delta, remainder, start_offset)
     VALUES (999, 'old', 1000, 1100, 'h3', 5, 2, 1)"
explain 1003 --app old --env "$ENV_A" # on the row's lattice (1003 % 3 = 1), not the lease's
assert_eq off_lattice "$(v 1 old)" "1003 in a lease of delta 5, remainder 2"
assert_eq lease "$(f 1 old "a['lattice']['source']")" "the lattice recorded with the lease"
explain 1002 --app old --env "$ENV_A"
assert_eq True "$(f 1 old "a['on_lattice']")" "1002 on the lease's lattice"
explain 103 --app old --env "$ENV_A"
assert_eq "row now" "$(f 1 old "a['lattice']['source']")" "a lease without its lattice: the row's now"

# --- usage ------------------------------------------------------------------
ctl_helps explain
ctl_expect 2 explain
ctl_expect 2 explain 12x
ctl_expect 2 explain 5 --from now-1h --to now --app ex
ctl_expect 2 explain --app ex --from yesterday --to now
ctl_expect 2 explain --app ex --from now-1h
ctl_expect 2 explain --app 'bad key' 5
ctl_expect 1 explain 5 --env mysql://root@127.0.0.1:1/idpool
pass "explain: pool, issued, gaps, lattice, environments, never leased, windows"
