#!/usr/bin/env bash
# idpoolctl verify (issue 24): passes on clean ledgers that running idpoolds
# wrote (one environment, and two that share an application with delta 2 and
# remainders 0 and 1), and finds each kind of conflict planted in real
# MariaDB and Redis: overlapping leases of one key in one environment (of
# two rows of the key), a lease off its lattice and one below its
# start_offset, one key with one remainder in two environments over
# overlapping ranges, deltas 2 and 3 whose lattices meet (the first common
# multiple of 6), and pooled IDs that no lease holds. Exit 2 names an
# environment that cannot be read.
source "$(dirname "$0")/lib.sh"
setup

KEY=shared
two_environments $KEY
add_app mono start_offset=1000 increment_max=5 step=100 max_pool_size=2000
add_app tr increasing_type=2 delta=3 remainder=2 step=50 max_pool_size=1000
wait_until 20 pool_ge $KEY 1000 || fail "$KEY: no refill in A"
wait_until 20 pool_ge mono 100 || fail "mono: no refill"
wait_until 20 pool_ge tr 100 || fail "tr: no refill"
wait_until 20 eval "[[ \$(redis-cli -h 127.0.0.1 -p $B_REDIS_PORT LLEN '$(pool_key $KEY)') -ge 1000 ]]" ||
    fail "$KEY: no refill in B"
pop mono 500 "$DIR/m" --type monotonic --start-offset 1000 || fail "taking from mono"
pop tr 500 "$DIR/t" --type trend --delta 3 --remainder 2 || fail "taking from tr"
pop $KEY 3000 "$DIR/s" --delta 2 --remainder 0 || fail "taking from $KEY in A"

# The lattice is recorded with every lease, as the daemon generates with it.
assert_eq 0 "$(sql "SELECT COUNT(*) FROM application_lease WHERE delta IS NULL OR remainder IS NULL
    OR start_offset IS NULL")" "leases of A recorded without their lattice"
assert_eq "2 0" "$(sql "SELECT DISTINCT delta, remainder FROM application_lease
    WHERE entity_key = '$KEY'" | tr '\t' ' ')" "lattice of $KEY's leases in A"
assert_eq "2 1" "$(sql_b "SELECT DISTINCT delta, remainder FROM application_lease" | tr '\t' ' ')" \
    "lattice of $KEY's leases in B"
assert_eq "1000" "$(sql "SELECT DISTINCT start_offset FROM application_lease WHERE entity_key = 'mono'")" \
    "start_offset of mono's leases"

ENV_A="$IDPOOL_MYSQL_URL,$IDPOOL_REDIS_URL"
ENV_B="$B_MYSQL,$B_REDIS"
ctl_expect 0 --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" verify
out_has '^verify: ok: 1 environment, 3 applications, [0-9,]+ leases, [0-9,]+ pooled IDs checked; 0 conflicts$'
ctl_expect 0 verify --env "$ENV_A" --env "$ENV_B"
out_has '^verify: ok: 2 environments, 3 applications, [0-9,]+ leases, [0-9,]+ pooled IDs checked; 0 conflicts$'
pass "clean ledgers of running daemons: $(cat "$DIR/out")"
stop_daemon a
stop_daemon b

# ------------------------------------------------------------ planted -----
# plant SQL_FN KEY APP_ID LO HI DELTA REMAINDER START: one lease row.
plant() {
    "$1" "INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, delta,
        remainder, start_offset) VALUES ($3, '$2', $4, $5, 'planted', $6, $7, $8);
        SELECT LAST_INSERT_ID()"
}
base=$((6 << 40)) # above every lease the daemons took; a multiple of 6
# One key, two rows (deleted and added again), overlapping leases in A.
o1=$(plant sql ov 900 $((base + 100)) $((base + 200)) 1 0 1)
o2=$(plant sql ov 901 $((base + 150)) $((base + 250)) 1 0 1)
# Off its lattice; below its start_offset.
l1=$(plant sql offl 902 100 200 2 2 1)
l2=$(plant sql below 903 50 100 1 0 60)
# One remainder in two environments, overlapping ranges.
d1=$(plant sql dup 904 $((base + 1000)) $((base + 2000)) 2 1 1)
d2=$(plant sql_b dup 904 $((base + 1500)) $((base + 2500)) 2 1 1)
# Deltas 2 and 3 (remainder 0): they meet at multiples of 6.
x1=$(plant sql mix 905 $((base + 100)) $((base + 200)) 2 0 1)
x2=$(plant sql_b mix 905 $((base + 151)) $((base + 300)) 3 0 1)
# Distinct remainders of one delta over one range: no conflict.
plant sql fine 906 $((base + 100)) $((base + 200)) 2 0 1 >/dev/null
plant sql_b fine 906 $((base + 100)) $((base + 200)) 2 1 1 >/dev/null
# Leases without a key (of a row deleted before the ledger had entity_key):
# checked by row, within their environment.
u1=$(plant sql '' 908 10 30 1 0 1)
u2=$(plant sql '' 908 20 40 1 0 1)
plant sql '' 909 20 40 1 0 1 >/dev/null
# Pooled IDs in no lease: one far above all, one off the lattice of its lease.
lo=$(sql "SELECT lo FROM application_lease WHERE entity_key = '$KEY' ORDER BY lo LIMIT 1")
odd=$((lo | 1))
far=$((base * 4))
rcli RPUSH "$(pool_key $KEY)" "$far" "$odd" >/dev/null

ctl_expect 1 verify --env "$ENV_A" --env "$ENV_B"
env1="environment 1 \(MySQL 127.0.0.1:$MYSQL_PORT/idpool\)"
env2="environment 2 \(MySQL 127.0.0.1:$B_MYSQL_PORT/idpool\)"
out_has "^conflict: application 'ov', $env1: leases overlap: lease $o1 \[$((base + 100)), $((base + 200))\) of row 900 by 'planted' at [-0-9: .]+ and lease $o2 \[$((base + 150)), $((base + 250))\) of row 901 .*; first ID in both: $((base + 150))$"
out_has "^conflict: application 'offl', $env1: lease $l1 \[100, 200\) .* is off its lattice: remainder not in \[0, delta\) \(delta 2, remainder 2, start_offset 1\)$"
out_has "^conflict: application 'below', $env1: lease $l2 \[50, 100\) .* is off its lattice: lo below start_offset"
out_has "^conflict: application 'dup', $env1 and $env2: IDs shared: lease $d1 \[$((base + 1000)), $((base + 2000))\) .* and lease $d2 \[$((base + 1500)), $((base + 2500))\) .*; first ID in both: $((base + 1501))$"
out_has "^conflict: application 'mix', $env1 and $env2: IDs shared: lease $x1 .* and lease $x2 .*; first ID in both: $((base + 156))$"
out_has "^conflict: application '$KEY', $env1: pooled ID $far lies in no lease of the application on its lattice$"
out_has "^conflict: application '$KEY', $env1: pooled ID $odd lies in no lease"
out_has "^conflict: application row 908 \\(no key\\), $env1: leases overlap: lease $u1 \\[10, 30\\) .* and lease $u2 \\[20, 40\\) .*; first ID in both: 20$"
out_lacks "'fine'|row 909"
out_has "^verify: FAILED: 2 environments, 9 applications, .* 8 conflicts; 3 leases without a key checked by row only$"
assert_eq 9 "$(wc -l <"$DIR/out")" "lines of the report"
pass "planted conflicts found: overlap, off lattice, below start_offset, shared remainder, deltas 2 and 3, pooled IDs, unkeyed overlap"

ctl_expect 1 --json verify --env "$ENV_A" --env "$ENV_B"
assert_eq "8 False" "$(jget 'str(d["conflicts"]) + " " + str(d["ok"])')" "JSON: conflicts"
assert_eq "$((base + 156))" "$(jget '[c["first_id"] for c in d["listed"] if c["application"] == "mix"][0]')" \
    "JSON: first ID of mix"
assert_eq "1 2" "$(jget '" ".join(str(l["environment"]) for l in [c for c in d["listed"] if c["application"] == "dup"][0]["leases"])')" \
    "JSON: environments of dup"
pass "--json lists the conflicts"

# The other environment alone: its own conflicts only (none).
ctl_expect 0 verify --env "$ENV_B"
out_has '^verify: ok: 1 environment'

# Older leases (no lattice recorded) are counted, not judged.
sql "DELETE FROM application_lease WHERE instance = 'planted';
     INSERT INTO application_lease (application_id, entity_key, lo, hi, instance)
     VALUES (907, 'old', 10, 20, 'old')"
sql_b "DELETE FROM application_lease WHERE instance = 'planted';
       INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, delta, remainder, start_offset)
       VALUES (907, 'old', 15, 30, 'new', 2, 1, 1)"
rcli LREM "$(pool_key $KEY)" 0 "$far" >/dev/null
rcli LREM "$(pool_key $KEY)" 0 "$odd" >/dev/null
ctl_expect 0 verify --env "$ENV_A" --env "$ENV_B"
out_has "; 1 leases from before the ledger recorded lattices \\(their lattice not checked\\); 1 overlaps of such a lease with another environment's unchecked$"
pass "clean again once the planted rows are gone; a lease without its lattice is counted"

# Exit 2: an environment that cannot be read, named; usage.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ctl_expect 2 verify --env "$ENV_A" --env "mysql://root@127.0.0.1:$port/idpool"
[[ $ERR == *"verify: environment 2: cannot connect to MySQL at 127.0.0.1:$port/idpool"* ]] ||
    fail "the unreachable environment is not named: $ERR"
ctl_expect 2 verify --env "$IDPOOL_MYSQL_URL,redis://127.0.0.1:$port/0"
[[ $ERR == *"environment 1"*"cannot connect to Redis at 127.0.0.1:$port"* ]] ||
    fail "the unreachable Redis is not named: $ERR"
ctl_expect 2 verify extra
ctl_expect 2 verify --env ''
ctl_expect 2 verify --env "$ENV_A" --env "mysql://root@127.0.0.1/idpool,redis://127.0.0.1:99999"
[[ $ERR == *"--env (environment 2): port must be an integer in 1..65535"* ]] ||
    fail "a bad --env is not named: $ERR"
ctl_expect 2 --json verify --env "$ENV_A" --env "mysql://root@127.0.0.1:$port/idpool"
[[ $(jget 'd["error"]') == "environment 2: cannot connect to MySQL"* ]] ||
    fail "the JSON error does not name the environment: $(cat "$DIR/out")"
pass "exit 2 names the environment that cannot be read; usage errors"
