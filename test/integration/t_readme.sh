#!/usr/bin/env bash
# The README's client examples (issue 12): the C block after
# "<!-- example: client.c" is extracted, compiled against this build's
# libidpool and run against a served application, as a reader would; the
# Python block after "<!-- example: client.py" is run the same way.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
command -v cc >/dev/null || skip "no C compiler"
BUILD=$(dirname "$IDPOOLD")

awk '/<!-- example: client.c/ {on = 1; next} on && /^```c/ {code = 1; next}
     code && /^```/ {exit} code {print}' "$IDPOOL_SOURCE_ROOT/README.md" >"$DIR/client.c"
[[ -s $DIR/client.c ]] || fail "no C example in README.md"
# A sanitizer build's library needs the sanitizer runtime in the program too.
san=()
if ldd "$BUILD/libidpool.so" | grep -q libasan; then san=("-fsanitize=address,undefined"); fi
cc -Wall -Wextra -Werror -std=c11 "${san[@]}" -I "$IDPOOL_SOURCE_ROOT/include" "$DIR/client.c" \
    -L "$BUILD" -lidpool -o "$DIR/client" 2>"$DIR/cc.err" ||
    fail "the README's example does not compile: $(cat "$DIR/cc.err")"

add_app user step=1000
start_daemon a
wait_until 10 pool_ge user 1000 || fail "pool did not fill"
LD_LIBRARY_PATH=$BUILD "$DIR/client" user "$IDPOOL_REDIS_URL" >"$DIR/out" 2>&1 ||
    fail "the README's example failed: $(cat "$DIR/out")"
grep -qE '^[0-9]+ and 100 more, the last [0-9]+$' "$DIR/out" || fail "unexpected output: $(cat "$DIR/out")"
pass "README client example: compiles with -Werror and prints $(cat "$DIR/out")"
LD_LIBRARY_PATH=$BUILD "$DIR/client" nosuch "$IDPOOL_REDIS_URL" >"$DIR/out2" 2>&1 &&
    fail "an unknown application succeeded: $(cat "$DIR/out2")"
grep -q 'no IDs: no environment serves this application' "$DIR/out2" ||
    fail "unknown application: $(cat "$DIR/out2")"
pass "README client example: an unknown application fails with a clear error"

awk '/<!-- example: client.py/ {on = 1; next} on && /^```python/ {code = 1; next}
     code && /^```/ {exit} code {print}' "$IDPOOL_SOURCE_ROOT/README.md" >"$DIR/client.py"
[[ -s $DIR/client.py ]] || fail "no Python example in README.md"
PY=/usr/bin/python3
"$PY" -c 'import redis' 2>/dev/null || skip "python3-redis is not installed for $PY"
PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python "$PY" "$DIR/client.py" user "$IDPOOL_REDIS_URL" >"$DIR/pyout" 2>&1 ||
    fail "the README's Python example failed: $(cat "$DIR/pyout")"
grep -qE '^[0-9]+ and 100 more, the last [0-9]+$' "$DIR/pyout" || fail "unexpected output: $(cat "$DIR/pyout")"
PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python "$PY" "$DIR/client.py" nosuch "$IDPOOL_REDIS_URL" >"$DIR/pyout2" 2>&1 &&
    fail "an unknown application succeeded: $(cat "$DIR/pyout2")"
grep -q 'no IDs:' "$DIR/pyout2" || fail "unknown application (Python): $(cat "$DIR/pyout2")"
pass "README Python example: prints $(cat "$DIR/pyout"); an unknown application fails clearly ($(cat "$DIR/pyout2"))"
