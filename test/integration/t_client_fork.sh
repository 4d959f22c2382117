#!/usr/bin/env bash
# The client libraries across fork() (issue 18, item 1): a forked child
# never hands out an ID its parent holds.
#
# libidpool (documented choice: the child starts empty and works), through
# a Redis and through an https issuer: one client takes an ID (the
# thread's block and the shared buffer now hold IDs), forks a child at
# once, then forks five more, 20 ms apart, while a second thread of the
# parent takes IDs as fast as it can (the background thread is busy taking
# at the forks, on the connection the children inherit). Every child takes 3,000
# IDs with idpool_next and 3,000 with idpool_next_n through the inherited
# client; the parent 3,000 more. Asserted: idpool-check over every
# process' pop log finds no ID twice and counts every ID, every child got
# all its IDs (none timed out), the background thread took IDs while the
# parent forked (the busy case happened; not in an ASan build, whose
# allocator is not fork-safe: there the client is idle at the forks).
#
# The Python client (documented choice: in a child every inherited client
# is closed): the parent holds buffered IDs at the fork (positive control:
# stats' buffered > 0), and forks while a thread of its own holds the
# application's lock (as the background thread does while it books a
# take) and again while the client's lock is held. In each child, next(),
# take(), stats(), last_error(), app() and close() answer at once (closed,
# no ID, no hang on a lock the parent held); the parent goes on taking.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
setup
[[ -x ${IDPOOL_CLIENTEDGE:-} ]] || fail "idpool-clientedge not built: ${IDPOOL_CLIENTEDGE:-}"

add_app fk step=20000 max_pool_size=400000 max_size_per_times=1000 max_size_per_second=50000000
start_daemon a --tick-ms 10
wait_until 15 pool_ge fk 100000 || fail "fk's pool did not fill"

# --- libidpool ---------------------------------------------------------------
# fork_case NAME ENV [--ca-file PEM]: idpool-clientedge fork against ENV, its
# pop logs checked by idpool-check.
fork_case() {
    local name=$1 env=$2 st=0 res parent children busy
    shift 2
    "$IDPOOL_CLIENTEDGE" fork --children 6 --ids 3000 "$@" "$DIR/$name" fk "$env" \
        >"$DIR/$name.out" 2>&1 || st=$?
    cat "$DIR/$name.out"
    res=$(grep '^clientedge: children=' "$DIR/$name.out") ||
        fail "$name: idpool-clientedge fork (status $st) printed no summary"
    # (p1, the parent's second thread, takes nothing when an ASan build forks only idle:
    # the exact count is asserted below)
    check_pops "$DIR/$name.check" --allow-empty "$DIR/$name".*.bin ||
        fail "$name: idpool-check: an ID in two processes (or another violation)"
    tail -n 1 "$DIR/$name.check"
    grep -q ' duplicates=0 ' "$DIR/$name.check" || fail "$name: duplicates: $(tail -n 1 "$DIR/$name.check")"
    ((st == 0)) || fail "$name: a process did not get all its IDs (status $st): $res"
    parent=$(sed -n 's/.* parent_ids=\([0-9]*\).*/\1/p' <<<"$res")
    children=$(sed -n 's/.* child_ids=\([0-9]*\).*/\1/p' <<<"$res")
    assert_eq "$children" $((6 * 6000)) "$name: IDs taken by the children"
    grep -q "^check: ids=$((parent + children)) " "$DIR/$name.check" ||
        fail "$name: idpool-check did not count $((parent + children)) IDs: $(tail -n 1 "$DIR/$name.check")"
    busy=$(sed -n 's/.* takes_during_forks=\([0-9]*\).*/\1/p' <<<"$res")
    if [[ $res == *" forks=idle" ]]; then # ASan: see IDLE_FORKS in test/tools/clientedge.c
        info "$name: an ASan build forks while the client is idle (its allocator is not fork-safe)"
    else
        assert_gt "$busy" 0 "$name: takes while the parent forked"
    fi
    pass "libidpool ($name): 6 forked children took $children IDs through the inherited client, the parent $parent, $busy takes during the forks: no ID in two processes"
}
fork_case redis "$IDPOOL_REDIS_URL"

# The same through an https issuer: the child never uses the parent's TLS session.
if command -v openssl >/dev/null 2>&1; then
    tls_cert
    TOKEN=$("$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --json tokens add fork --apps fk |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])') || fail "tokens add fork"
    TLS_PORT=$(free_port)
    start_daemon tls --instance tls --refill off \
        --api "127.0.0.1:$TLS_PORT" --api-tls-cert "$DIR/tls.crt" --api-tls-key "$DIR/tls.key"
    wait_until 5 log_has tls "api: listening on https://127\\.0\\.0\\.1:$TLS_PORT" || fail "tls: not listening"
    wait_until 5 log_has tls "access: 1 API token" || fail "tls: tokens not loaded"
    wait_until 15 pool_ge fk 100000 || fail "fk's pool did not fill again"
    fork_case https "https://$TOKEN@127.0.0.1:$TLS_PORT" --ca-file "$DIR/tls.crt"
else
    info "openssl is not installed: no https case"
fi

# --- the Python client -------------------------------------------------------
export PYTHONPATH=$IDPOOL_SOURCE_ROOT/src/python
"$PYTHON" -c 'import redis, idpool_client' 2>/dev/null ||
    skip "$PYTHON cannot import redis (python3-redis) and idpool_client"
"$PYTHON" - "$IDPOOL_REDIS_URL" <<'PY' >"$DIR/pyfork.out" 2>&1 || fail "Python client across fork(): $(cat "$DIR/pyfork.out")"
import os, sys, threading, time
import idpool_client as m

c = m.Client([sys.argv[1]], timeout=5.0)
app = c.app("fk")
seen = {app.next()}
t0 = time.monotonic()
while app.stats()["buffered"] == 0 and time.monotonic() - t0 < 5:  # the thread asks ahead
    time.sleep(0.01)
st = app.stats()
if st["buffered"] <= 0:
    sys.exit(f"no buffered IDs at the fork (the exposure did not happen): {st}")
print(f"buffered at the fork: {st['buffered']} in the shared buffer, the rest of a block in this thread")


def child(w):
    """In the child: every call answers at once, none with an ID; 0 or 1."""
    out = []
    for name, call in (
        ("next", app.next),
        ("next_n", lambda: app.next_n(5)),
        ("app", lambda: c.app("fk")),
    ):
        try:
            out.append(f"{name} returned {call()!r}")
        except m.IdpoolClosed:
            pass
        except Exception as e:  # noqa: BLE001 - reported
            out.append(f"{name} raised {type(e).__name__}: {e}")
    app.stats()
    app.last_error()
    c.close()
    os.write(w, "\n".join(out).encode())
    return 1 if out else 0


def fork_holding(lock, what):
    """Fork while another thread holds lock; the child must answer within 10 s."""
    held, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            held.set()
            release.wait()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    held.wait()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 1
        try:
            code = child(w)
        finally:
            os._exit(code)
    os.close(w)
    release.set()
    t.join()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        sys.exit(f"forked while {what} was held: the child hung (killed after 10 s)")
    msg = os.read(r, 4096).decode()
    os.close(r)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"forked while {what} was held: the child got {msg or 'an error'} "
                 f"(status {os.waitstatus_to_exitcode(status)})")
    print(f"forked while {what} was held: the child's client is closed, no ID, no hang "
          f"({(time.monotonic() - t0) * 1000:.0f} ms)")


# The background thread keeps taking meanwhile: a second thread drains.
stop = threading.Event()
drained = []


def drain():
    while not stop.is_set():
        drained.extend(app.next_n(100))


d = threading.Thread(target=drain, daemon=True)  # a failed check exits at once
d.start()
fork_holding(app._cv, "the application's lock")
fork_holding(c._cv, "the client's lock")
stop.set()
d.join()
more = app.next_n(500)
ids = [*seen, *drained, *more]
if len(set(ids)) != len(ids):
    sys.exit("the parent got an ID twice")
print(f"the parent went on: {len(ids)} IDs after the forks")
c.close()
PY
cat "$DIR/pyfork.out"
pass "Python client: in a forked child the inherited client is closed (no ID, no hang on a lock held at the fork); the parent goes on"
