#!/usr/bin/env bash
# How fast idpoolctl verify reads a large ledger (issue 24; BENCHMARKS.md,
# "idpoolctl verify on a large ledger").
#
#   test/bench/verify_ledger.sh [LEASES [APPS]]     (defaults 10000000, 100)
#
# Throwaway servers (scripts/servers.sh) in a temp dir; LEASES leases planted
# in one INSERT ... SELECT from MariaDB's sequence engine, spread evenly over
# APPS applications (delta 2, remainder 0, leases of 1000 IDs end to end, as
# idpoold writes them), plus one full pool of 100,000 IDs; then
# `idpoolctl verify` against it, timed with its peak RSS (GNU time), cold
# (the server just restarted: the table is read from disk) and warm. The
# test servers' buffer pool is 32 MB; it is raised to 2 GB first, as a
# production server's would be. Prints the numbers; changes nothing else.
# Needs a built idpoolctl (IDPOOL_BUILD, default build/).
set -euo pipefail

LEASES=${1:-10000000}
APPS=${2:-100}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IDPOOLCTL=${IDPOOLCTL:-${IDPOOL_BUILD:-$ROOT/build}/idpoolctl}
SERVERS=$ROOT/scripts/servers.sh
[[ -x $IDPOOLCTL ]] || { echo "verify_ledger: build idpoolctl first ($IDPOOLCTL)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "verify_ledger: GNU time (/usr/bin/time) is needed" >&2; exit 1; }

DIR=$(mktemp -d "${TMPDIR:-/tmp}/idpool-verify.XXXXXX")
cleanup() {
    "$SERVERS" stop "$DIR" >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap cleanup EXIT
"$SERVERS" start "$DIR" >/dev/null
# shellcheck source=/dev/null
source "$DIR/env"
sql() { mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root idpool -N -B -e "$1"; }

sql "SET GLOBAL innodb_buffer_pool_size = 2147483648"
per=$(((LEASES + APPS - 1) / APPS))
t0=$(date +%s.%N)
sql "SET SESSION unique_checks = 0;
     INSERT INTO application (entity_key, delta, remainder, step, max_pool_size)
     SELECT CONCAT('app', seq), 2, 0, 1000, 100000 FROM seq_0_to_$((APPS - 1));
     INSERT INTO application_lease (application_id, entity_key, lo, hi, instance, delta, remainder, start_offset)
     SELECT 1 + seq DIV $per, CONCAT('app', seq DIV $per), 1000 + (seq MOD $per) * 1000,
            2000 + (seq MOD $per) * 1000, 'bench', 2, 0, 1
     FROM seq_0_to_$((LEASES - 1))"
t1=$(date +%s.%N)
# One full pool: 100,000 IDs of app0's last leases.
hi=$(sql "SELECT MAX(hi) FROM application_lease WHERE entity_key = 'app0'")
seq $((hi - 200000)) 2 $((hi - 2)) | sed "s/^/RPUSH idpool:{app0}:pool /" |
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" >/dev/null
sql "ANALYZE TABLE application_lease" >/dev/null
size=$(sql "SELECT ROUND((data_length + index_length) / 1048576) FROM information_schema.tables
    WHERE table_schema = 'idpool' AND table_name = 'application_lease'")
printf 'planted %s leases over %s applications in %.1f s; application_lease is %s MB\n' \
    "$LEASES" "$APPS" "$(echo "$t1 - $t0" | bc)" "$size"

run() {
    /usr/bin/time -f '%e s, peak RSS %M KB' -o "$DIR/time" \
        "$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" verify >"$DIR/out" || {
        cat "$DIR/out"
        echo "verify_ledger: verify failed" >&2
        exit 1
    }
    printf '%s: %s\n  %s\n' "$1" "$(cat "$DIR/time")" "$(tail -n 1 "$DIR/out")"
}
"$SERVERS" stop "$DIR" mysql >/dev/null
"$SERVERS" start "$DIR" mysql >/dev/null
sql "SET GLOBAL innodb_buffer_pool_size = 2147483648"
sql "EXPLAIN SELECT id, application_id, lo, hi, delta, remainder, start_offset
     FROM application_lease WHERE entity_key = 'app0' ORDER BY lo" | cut -f 2-10
run "cold (MariaDB restarted)"
run "warm"
run "warm again"
