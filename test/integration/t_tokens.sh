#!/usr/bin/env bash
# idpoolctl's credentials (design brief §11) against real servers:
#   tokens add/list/revoke: the token is printed once, MySQL holds its SHA-256
#   and never the token; malformed names and keys are usage errors (exit 2),
#   unknown applications and a second active token of a name are errors
#   (exit 1); list shows active and revoked tokens (--json types) and never a
#   hash; revoke, revoke again, revoke an unknown name; a revoked name refused
#   (its row stays, for audit).
#   apps grant/revoke: the Redis ACL user exists at once and may only LPOP and
#   LLEN its own pool (RPUSH, DEL, another pool, meta, FCALL, EVAL, pub/sub are
#   NOPERM); a second grant rotates the password; revoke deletes the user and
#   closes its connections; a Redis that is down or refuses (NOPERM) is a
#   warning (exit 0) and the grant is still stored.
# No idpoold is started: these commands touch MySQL and Redis only.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
require_built idpoolctl "$IDPOOLCTL"
require_redis_py
DEAD_PORT=$(free_port) # nothing listens here

sha256() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
# dump: every table of the database, as mysqldump writes it, in $DIR/dump.sql.
dump() {
    mariadb-dump --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root --skip-extended-insert \
        idpool >"$DIR/dump.sql" || fail "mariadb-dump failed"
}
# in_dump TEXT: the dump holds TEXT (fixed string).
in_dump() { grep -qF -- "$1" "$DIR/dump.sql"; }

# as_user USER PASSWORD: reads lines "COMMAND ARGS... => EXPECTED" on stdin and
# runs each on a new connection authenticated as USER (python3-redis). A reply
# is shown as text (nil, an integer, a string, a Python list of strings) or,
# for an error, as Redis sent it ("NOPERM ...", "WRONGPASS ..."); it must equal
# EXPECTED, or start with it when EXPECTED is an error code in capitals.
cat >"$DIR/as_user.py" <<'PY'
import sys
import redis

port, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]
bad = 0
for line in sys.stdin:
    if not line.strip():
        continue
    cmd, want = (s.strip() for s in line.split("=>"))
    conn = redis.Connection(host="127.0.0.1", port=port, username=user, password=password,
                            decode_responses=True, socket_timeout=5)
    try:
        conn.connect()
        conn.send_command(*cmd.split())
        r = conn.read_response()
        got = "nil" if r is None else str(r)
    except redis.exceptions.NoPermissionError as e:
        got = "NOPERM " + str(e)  # python3-redis strips the code it maps to this class
    except redis.exceptions.RedisError as e:
        got = str(e)
    finally:
        conn.disconnect()
    ok = got.startswith(want) if want.isupper() and want.isalpha() else got == want
    print("%s: as %s: %s -> %s" % ("ok" if ok else "WRONG", user, cmd, got))
    bad += not ok
sys.exit(1 if bad else 0)
PY
as_user() {
    "$PYTHON" "$DIR/as_user.py" "$REDIS_PORT" "$1" "$2" >"$DIR/as_user.out" 2>&1 ||
        fail "as $1: $(grep -v '^ok' "$DIR/as_user.out" | head -c 2000)"
}

# ----------------------------------------------------------------- help ---
ctl_expect 0 --help
out_has '^  tokens add NAME --apps KEY\[,KEY\.\.\.\]\|\*'
out_has '^  tokens list'
out_has '^  tokens revoke NAME'
out_has '^  apps grant KEY'
out_has '^  apps revoke KEY'
ctl_helps "tokens" "tokens add" "tokens list" "tokens revoke" "apps grant" "apps revoke"
ctl_expect 0 apps --help
out_has '^  grant KEY'
out_has '^  revoke KEY'
ctl_expect 2 tokens
err_has "missing command"
ctl_expect 2 tokens frob
err_has "unknown command 'tokens frob'"
pass "--help of tokens, tokens add/list/revoke, apps grant/revoke; usage listed"

# ----------------------------------------------------------- tokens add ---
ctl_expect 0 apps add user
ctl_expect 0 apps add order
ctl_expect 0 apps add old
ctl_expect 0 apps disable old

ctl_expect 0 tokens add t1 --apps user,order,user
out_has "^token t1 for apps: user,order$"
assert_eq 1 "$(grep -cE '^idp_[A-Za-z0-9_-]{43}$' "$DIR/out")" "token lines in the output"
tok1=$(grep -E '^idp_' "$DIR/out")
assert_eq 1 "$(grep -cF -- "$tok1" "$DIR/out")" "times the token is printed"
out_has "shown once.*Authorization: Bearer <token>"
hash1=$(sha256 "$tok1")
assert_eq "$hash1" "$(sql "SELECT token_sha256 FROM api_token WHERE name = 't1'")" "t1's stored hash"
assert_eq "user,order" "$(sql "SELECT apps FROM api_token WHERE name = 't1'")" "t1's apps (duplicate collapsed)"
assert_eq NULL "$(sql "SELECT IFNULL(revoked_at, 'NULL') FROM api_token WHERE name = 't1'")" "t1 revoked_at"

ctl_expect 0 --json tokens add t2 --apps '*'
tok2=$(jget 'd["token"]')
[[ $tok2 =~ ^idp_[A-Za-z0-9_-]{43}$ ]] || fail "--json token: '$tok2'"
assert_eq "t2 ['*'] str" "$(jget '" ".join([d["name"], str(d["apps"]), type(d["token"]).__name__])')" \
    "--json tokens add document"
assert_eq '*' "$(sql "SELECT apps FROM api_token WHERE name = 't2'")" "t2's apps"
assert_eq "$(sha256 "$tok2")" "$(sql "SELECT token_sha256 FROM api_token WHERE name = 't2'")" \
    "t2's stored hash"
ctl_expect 0 tokens add t3.disabled-app_ok --apps old
out_has "^token t3.disabled-app_ok for apps: old$"

dump
in_dump "$hash1" || fail "the dump lacks t1's hash"
! in_dump "$tok1" || fail "the database holds token t1 itself"
! in_dump "$tok2" || fail "the database holds token t2 itself"
! in_dump "${tok1#idp_}" || fail "the database holds the secret part of t1"
pass "tokens add: idp_ token printed once, MySQL holds its SHA-256 and never the token"

rows=$(sql "SELECT COUNT(*) FROM api_token")
long=$(printf 'n%.0s' {1..65})
for bad in 'a b' 'x/y' "$long" 'tök' '' '*'; do
    ctl_expect 2 tokens add "$bad" --apps user
    err_has "token '.*': NAME must be 1\\.\\.64 characters of A-Z a-z 0-9 _ \\. -"
done
ctl_expect 2 tokens add 'a b' --apps user
err_has "token 'a b': NAME"
ctl_expect 2 tokens add
err_has "missing NAME"
ctl_expect 2 tokens add t4
err_has "missing --apps"
ctl_expect 2 tokens add t4 --apps ''
err_has "--apps: empty application key"
ctl_expect 2 tokens add t4 --apps 'user,,order'
err_has "--apps: empty application key in 'user,,order'"
ctl_expect 2 tokens add t4 --apps 'user,*'
err_has "'\\*'.*stands alone"
ctl_expect 2 tokens add t4 --apps 'us er'
err_has "--apps: 'us er' is not an application key"
ctl_expect 2 tokens add t4 --apps user --apps order
err_has "--apps given twice"
ctl_expect 1 tokens add t4 --apps user,nosuch
err_has "no application 'nosuch' \\(add it with 'idpoolctl apps add nosuch'\\)"
ctl_expect 1 tokens add t4 --apps USER
err_has "no application 'USER'"
ctl_expect 1 --json tokens add t4 --apps nosuch
assert_eq 1 "$(jget 'd["exit_code"]')" "exit_code in the --json error"
ctl_expect 1 tokens add t1 --apps order
err_has "token 't1' exists; choose another name"
ctl_expect 1 tokens add T1 --apps order
err_has "token 'T1' exists as 't1'"
assert_eq "$rows" "$(sql "SELECT COUNT(*) FROM api_token")" "rows after refused adds"
assert_eq "$hash1" "$(sql "SELECT token_sha256 FROM api_token WHERE name = 't1'")" \
    "t1's hash after refused adds"
pass "tokens add: bad NAME or key exit 2, unknown application and active name exit 1, nothing written"

# ---------------------------------------------------------- tokens list ---
ctl_expect 0 tokens list
out_has '^NAME +APPS +CREATED +STATUS$'
out_has '^t1 +user,order +[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ +active$'
out_has '^t2 +\* +[0-9-]+ [0-9:.]+ +active$'
out_lacks '[0-9a-f]{64}'
out_lacks 'idp_'
ctl_expect 0 --json tokens list
assert_eq "t1 t2 t3.disabled-app_ok" "$(jget '" ".join(t["name"] for t in d)')" "--json list names"
assert_eq "['user', 'order']" "$(jget 'd[0]["apps"]')" "--json list: t1's apps"
assert_eq "list dict str list str NoneType bool True" \
    "$(jget '" ".join([type(d).__name__, type(d[0]).__name__] + [type(d[0][k]).__name__ for k in ("name", "apps", "created_at", "revoked_at", "active")] + [str(d[0]["active"])])')" \
    "--json list types"
out_lacks '[0-9a-f]{64}'
out_lacks 'hash|sha256'

# -------------------------------------------------------- tokens revoke ---
ctl_expect 0 tokens revoke t1
out_has "^revoked token 't1' \\(at [0-9-]+ [0-9:.]+\\).*reload interval.*SIGHUP"
assert_eq 1 "$(sql "SELECT revoked_at IS NOT NULL FROM api_token WHERE name = 't1'")" "t1 revoked"
revoked_at=$(sql "SELECT revoked_at FROM api_token WHERE name = 't1'")
ctl_expect 0 tokens revoke t1
out_has "^token 't1' is already revoked"
assert_eq "$revoked_at" "$(sql "SELECT revoked_at FROM api_token WHERE name = 't1'")" \
    "revoked_at after a second revoke"
ctl_expect 0 --json tokens revoke t1
assert_eq "unchanged t1 str" "$(jget '" ".join([d["result"], d["name"], type(d["revoked_at"]).__name__])')" \
    "--json revoke again"
ctl_expect 1 tokens revoke nosuch
err_has "no token 'nosuch'"
ctl_expect 2 tokens revoke 'a b'
err_has "token 'a b': NAME"
ctl_expect 2 tokens revoke
err_has "missing NAME"
ctl_expect 0 tokens list
out_has "^t1 +user,order +[0-9-]+ [0-9:.]+ +revoked at [0-9-]+ [0-9:.]+$"
out_has '^t2 .* active$'
ctl_expect 0 --json tokens list
assert_eq "False str True NoneType" \
    "$(jget '" ".join(str(x) for x in (d[0]["active"], type(d[0]["revoked_at"]).__name__, d[1]["active"], type(d[1]["revoked_at"]).__name__))')" \
    "--json list: t1 revoked, t2 active"
pass "tokens list (active / revoked at, --json types, never a hash); revoke, again, unknown"

# A revoked token's name is not given to another token: its row stays as it
# was, for audit (under any case of the name).
row1=$(sql "SELECT id, apps, created_at, revoked_at, token_sha256 FROM api_token WHERE name = 't1'")
for name in t1 T1; do
    ctl_expect 1 tokens add "$name" --apps order
    err_has "token '$name' exists.*, revoked at [0-9-]+ [0-9:.]+; its row stays for audit and its name is not given to another token: choose another name"
done
err_has "exists as 't1' \\(names are unique regardless of case\\)"
assert_eq "$row1" "$(sql "SELECT id, apps, created_at, revoked_at, token_sha256 FROM api_token WHERE name = 't1'")" \
    "t1's revoked row after tokens add t1"
assert_eq 1 "$(sql "SELECT COUNT(*) FROM api_token WHERE name = 't1'")" "rows named t1"
pass "tokens add: the name of a revoked token is refused (exit 1), its row kept as it was"

# ------------------------------------------------------------ apps grant ---
rcli RPUSH 'idpool:{user}:pool' 1 2 3 4 5 6 >/dev/null
rcli RPUSH 'idpool:{order}:pool' 7 8 9 >/dev/null
rcli HSET 'idpool:{user}:meta' next 7 >/dev/null

ctl_expect 0 apps grant user
out_has "^granted Redis user 'idpool:user' for application 'user'$"
pw1=$(sed -n 's/^password: //p' "$DIR/out")
[[ $pw1 =~ ^idp_[A-Za-z0-9_-]{43}$ ]] || fail "grant: password '$pw1'"
out_has "^example: +redis-cli -h 127\\.0\\.0\\.1 -p $REDIS_PORT --user idpool:user --pass $pw1 LPOP idpool:\\{user\\}:pool 10$"
assert_eq "$(sha256 "$pw1") NULL" \
    "$(sql "SELECT password_sha256, IFNULL(revoked_at, 'NULL') FROM redis_user WHERE entity_key = 'user'" | tr '\t' ' ')" \
    "user's redis_user row"
dump
! in_dump "$pw1" || fail "the database holds the password itself"
rcli ACL GETUSER idpool:user >"$DIR/getuser"
grep -qxF '~idpool:{user}:pool' "$DIR/getuser" || fail "ACL GETUSER idpool:user: $(tr '\n' ' ' <"$DIR/getuser")"
# The rules of the user (Redis lists the commands in no fixed order).
assert_eq "+llen +lpop -@all" "$(sed -n '/^commands$/{n;p;}' "$DIR/getuser" | tr ' ' '\n' | LC_ALL=C sort | xargs)" \
    "ACL GETUSER idpool:user: commands"

as_user idpool:user "$pw1" <<'EOF'
LPOP idpool:{user}:pool => 1
LPOP idpool:{user}:pool 2 => ['2', '3']
LLEN idpool:{user}:pool => 3
RPUSH idpool:{user}:pool 9 => NOPERM
LPUSH idpool:{user}:pool 9 => NOPERM
DEL idpool:{user}:pool => NOPERM
LRANGE idpool:{user}:pool 0 -1 => NOPERM
LPOP idpool:{order}:pool => NOPERM
LLEN idpool:{order}:pool => NOPERM
GET idpool:{user}:meta => NOPERM
HGETALL idpool:{user}:meta => NOPERM
FCALL idpool_push 0 => NOPERM
FCALL idpool_take 2 idpool:{user}:pool idpool:{user}:meta 1 => NOPERM
EVAL return 1 0 => NOPERM
PUBLISH idpool:alerts x => NOPERM
SUBSCRIBE idpool:alerts => NOPERM
SET x 1 => NOPERM
KEYS * => NOPERM
CONFIG GET maxmemory => NOPERM
ACL LIST => NOPERM
EOF
assert_eq 3 "$(llen user)" "user's pool after the refused writes"
assert_eq 3 "$(llen order)" "order's pool, untouched"
pass "apps grant: ACL user idpool:user exists; it may LPOP and LLEN its pool, nothing else (NOPERM)"

# The printed example works as it is.
read -ra example <<<"$(sed -n 's/^example: *//p' "$DIR/out")"
assert_eq redis-cli "${example[0]}" "the example's command"
assert_eq "4 5 6" "$("${example[@]}" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')" "the example's LPOP"

# A second grant rotates the password.
ctl_expect 0 --json apps grant user
assert_eq "idpool:user user str True True" \
    "$(jget '" ".join(str(x) for x in (d["user"], d["key"], type(d["password"]).__name__, d["applied"], d["rotated"]))')" \
    "--json grant document"
pw2=$(jget 'd["password"]')
assert_ne "$pw1" "$pw2" "the rotated password"
assert_eq "$(sha256 "$pw2")" "$(sql "SELECT password_sha256 FROM redis_user WHERE entity_key = 'user'")" \
    "user's hash after rotation"
as_user idpool:user "$pw1" <<<'LLEN idpool:{user}:pool => WRONGPASS'
as_user idpool:user "$pw2" <<<'LLEN idpool:{user}:pool => 0'
ctl_expect 0 apps grant order
out_has "^granted Redis user 'idpool:order'"
pw_order=$(sed -n 's/^password: //p' "$DIR/out")
as_user idpool:order "$pw_order" <<'EOF'
LPOP idpool:{order}:pool => 7
LPOP idpool:{user}:pool => NOPERM
EOF
as_user idpool:order "$pw2" <<<'LLEN idpool:{order}:pool => WRONGPASS'
pass "apps grant again: the old password fails AUTH, the new one works; users are per application"

ctl_expect 1 apps grant nosuch
err_has "no application 'nosuch'"
ctl_expect 2 apps grant 'a*'
err_has "KEY: 'a\\*' is not an application key"
ctl_expect 2 apps grant
err_has "missing KEY"
assert_eq 0 "$(sql "SELECT COUNT(*) FROM redis_user WHERE entity_key NOT IN ('user', 'order')")" \
    "redis_user rows of refused grants"

# ----------------------------------------------------------- apps revoke ---
# A connection authenticated as the user is closed by the revoke.
"$PYTHON" - "$REDIS_PORT" "$pw2" "$IDPOOLCTL" <<'PY' || fail "a connection of the revoked user survived"
import subprocess, sys
import redis
conn = redis.Connection(host="127.0.0.1", port=int(sys.argv[1]), username="idpool:user",
                        password=sys.argv[2], socket_timeout=5)
conn.connect()
conn.send_command("LLEN", "idpool:{user}:pool")
conn.read_response()
subprocess.run([sys.argv[3], "apps", "revoke", "user"], check=True, stdout=subprocess.DEVNULL)
try:
    conn.send_command("LLEN", "idpool:{user}:pool")
    print("still answered:", conn.read_response())
    sys.exit(1)
except redis.exceptions.ConnectionError as e:
    print("closed:", e)
PY
assert_eq "" "$(rcli ACL GETUSER idpool:user)" "ACL GETUSER idpool:user after revoke"
as_user idpool:user "$pw2" <<<'LLEN idpool:{user}:pool => WRONGPASS'
assert_eq 1 "$(sql "SELECT revoked_at IS NOT NULL FROM redis_user WHERE entity_key = 'user'")" \
    "user's redis_user row revoked"
ctl_expect 1 apps revoke user
err_has "application 'user' has no Redis user \\(grant one with 'idpoolctl apps grant user'\\)"
ctl_expect 1 apps revoke old
err_has "application 'old' has no Redis user"
ctl_expect 0 --json apps revoke order
assert_eq "idpool:order order True" "$(jget '" ".join(str(x) for x in (d["user"], d["key"], d["applied"]))')" \
    "--json revoke document"
as_user idpool:order "$pw_order" <<<'LLEN idpool:{order}:pool => WRONGPASS'
pass "apps revoke: user deleted (GETUSER nil, AUTH fails, connection closed); without a grant exit 1"

# ------------------------------------------------- Redis down or refusing ---
ctl_expect 0 --redis "redis://127.0.0.1:$DEAD_PORT/0" apps grant old
err_has "warning: .*stored in MySQL.*idpoold applies it"
err_has "cannot connect to Redis at 127\\.0\\.0\\.1:$DEAD_PORT"
pw_old=$(sed -n 's/^password: //p' "$DIR/out")
assert_eq "$(sha256 "$pw_old") NULL" \
    "$(sql "SELECT password_sha256, IFNULL(revoked_at, 'NULL') FROM redis_user WHERE entity_key = 'old'" | tr '\t' ' ')" \
    "old's row stored with Redis down"
assert_eq "" "$(rcli ACL GETUSER idpool:old)" "idpool:old in Redis"
ctl_expect 0 --json --redis "redis://127.0.0.1:$DEAD_PORT/0" apps grant old
assert_eq "False True" "$(jget '" ".join(str(x) for x in (d["applied"], "Connection refused" in d["redis_error"]))')" \
    "--json grant with Redis down"
ctl_expect 0 --redis "redis://127.0.0.1:$DEAD_PORT/0" apps revoke old
err_has "warning: .*revoked in MySQL.*idpoold deletes it"
assert_eq 1 "$(sql "SELECT revoked_at IS NOT NULL FROM redis_user WHERE entity_key = 'old'")" \
    "old's row revoked with Redis down"

# A Redis login without ACL rights: the grant is stored, Redis refuses (NOPERM).
rcli ACL SETUSER limited on '>limitedpw' '~*' '&*' +@all -@admin >/dev/null
ctl_expect 0 --redis "redis://limited:limitedpw@127.0.0.1:$REDIS_PORT/0" apps grant order
err_has "warning: Redis at 127\\.0\\.0\\.1:$REDIS_PORT: ACL SETUSER refused: NOPERM.*stored in MySQL"
err_lacks limitedpw
out_has "not yet in Redis"
pw_order2=$(sed -n 's/^password: //p' "$DIR/out")
assert_eq "$(sha256 "$pw_order2") NULL" \
    "$(sql "SELECT password_sha256, IFNULL(revoked_at, 'NULL') FROM redis_user WHERE entity_key = 'order'" | tr '\t' ' ')" \
    "order's row stored though Redis refused"
assert_eq "" "$(rcli ACL GETUSER idpool:order)" "idpool:order in Redis after the refused grant"

# Redis stopped: the same.
redis_stop
ctl_expect 0 apps grant user
err_has "warning: .*idpoold applies it"
assert_eq "$(sha256 "$(sed -n 's/^password: //p' "$DIR/out")")" \
    "$(sql "SELECT password_sha256 FROM redis_user WHERE entity_key = 'user' AND revoked_at IS NULL")" \
    "user's row stored with Redis stopped"
redis_start
pass "apps grant/revoke with Redis down or refusing (NOPERM): warning, exit 0, rows stored"
