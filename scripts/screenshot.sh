#!/usr/bin/env bash
# The README's screenshot of the status page (docs/img/status-page.png):
#
#   scripts/screenshot.sh [OUT.png]     (after `meson setup build && ninja -C build`)
#
# Throwaway servers (scripts/servers.sh, loopback, a temporary directory),
# four applications (user and order consumed at changing rates by
# idpool-load, invoice drained faster than it is refilled, with its
# underflow alert, legacy soft-deleted), an idpoold with its status server, and Debian's chromium,
# headless, showing the page for SECONDS (default 40) of real time, so that
# the sparklines hold that much history, then saving what it shows. Chromium
# is driven over its DevTools pipe (--remote-debugging-pipe) from Python's
# standard library: --screenshot would take the picture after a few polls of
# virtual time, all within a second of real time, and flat sparklines.
# Everything it started is stopped at the end.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$(realpath -m "${1:-$ROOT/docs/img/status-page.png}")
SECONDS_SHOWN=${SECONDS_SHOWN:-40}
BUILD=${IDPOOL_BUILD:-$ROOT/build}
IDPOOLD=$BUILD/idpoold
LOAD=$BUILD/test/idpool-load
for f in "$IDPOOLD" "$LOAD"; do
    [[ -x $f ]] || {
        echo "screenshot: $f is not built (meson setup build && ninja -C build)" >&2
        exit 1
    }
done
command -v chromium >/dev/null || {
    echo "screenshot: chromium is not installed (apt-get install chromium)" >&2
    exit 1
}

DIR=$(mktemp -d "${TMPDIR:-/tmp}/idpool-screenshot.XXXXXX")
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    "$ROOT/scripts/servers.sh" stop "$DIR" >/dev/null 2>&1 || true
    rm -rf "$DIR"
}
trap cleanup EXIT
say() { printf 'screenshot: %s\n' "$*" >&2; }

"$ROOT/scripts/servers.sh" start "$DIR" >/dev/null
# shellcheck source=/dev/null
source "$DIR/env"
sql() { mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root idpool -e "$1"; }
sql "INSERT INTO application (entity_key, entity_name, increasing_type, step, max_pool_size,
        max_size_per_times, max_size_per_second, deleted_at) VALUES
    ('user', 'User accounts', 1, 2000, 40000, 1000, 100000, 0),
    ('order', 'Orders (shuffled blocks)', 2, 1000, 20000, 1000, 100000, 0),
    ('invoice', 'Invoices', 1, 100, 1000, 1000, 100000, 0),
    ('legacy', 'Retired in 2025', 1, 100, 1000, 0, 0, 1)"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE=http://127.0.0.1:$PORT
"$IDPOOLD" --redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" --http "127.0.0.1:$PORT" \
    --instance idpool-1 --tick-ms 50 --alert-resolve-ms 600000 >"$DIR/idpoold.log" 2>&1 &
PIDS+=($!)

# wait_for SECONDS PYTHON-EXPR: true of apps = {key: /v1/apps object}, within SECONDS.
wait_for() {
    local end=$((SECONDS + $1))
    while ((SECONDS < end)); do
        if curl -fsS --max-time 2 "$BASE/v1/apps" 2>/dev/null | python3 -c 'import json, sys
apps = {a["key"]: a for a in json.load(sys.stdin)}
sys.exit(not eval(sys.argv[1]))' "$2" 2>/dev/null; then
            return 0
        fi
        sleep 0.2
    done
    say "timed out waiting for $2; idpoold's log:"
    tail -n 20 "$DIR/idpoold.log" >&2
    exit 1
}
wait_for 20 'all(apps[k]["pool"]["length"] == apps[k]["config"]["max_pool_size"] for k in ("user", "order", "invoice"))'
# Consumers: invoice drained by takes of its whole pool, faster than it is refilled (until
# its underflow alert fires), order at a steady 1,500 IDs/s, user at rates that change every 8 s.
"$LOAD" --port "$REDIS_PORT" --mode take --key 'idpool:{invoice}:pool' --batch 1000 --rate 40 \
    --duration $((SECONDS_SHOWN + 30)) --reconnect >/dev/null 2>&1 &
PIDS+=($!)
wait_for 10 '"underflow" in apps["invoice"]["alerts"]'
"$LOAD" --port "$REDIS_PORT" --mode lpop --key 'idpool:{order}:pool' --batch 10 --rate 150 \
    --duration $((SECONDS_SHOWN + 30)) --reconnect >/dev/null 2>&1 &
PIDS+=($!)
(
    for r in 100 400 900 300 600 1200 200 700 500 1000; do
        "$LOAD" --port "$REDIS_PORT" --mode lpop --key 'idpool:{user}:pool' --batch 10 --rate "$r" \
            --duration 8 --reconnect >/dev/null 2>&1 || true
    done
) &
PIDS+=($!)

say "chromium shows $BASE/ for $SECONDS_SHOWN s"
python3 - "$BASE/" "$OUT" "$SECONDS_SHOWN" "$DIR/chromium" <<'EOF'
import base64, fcntl, json, os, select, subprocess, sys, time

url, out, shown, profile = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
# The DevTools pipe: chromium reads commands on its fd 3 and writes on its fd 4, each a JSON
# message ended by a NUL byte.
to_r, to_w = os.pipe()
from_r, from_w = os.pipe()
# (the child's ends above any fd the child sets up, moved to 3 and 4 in the child)
hi_r, hi_w = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)


def child():
    os.dup2(hi_r, 3)
    os.dup2(hi_w, 4)


proc = subprocess.Popen(
    ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
     "--user-data-dir=" + profile, "--no-first-run", "--disable-extensions",
     "--remote-debugging-pipe", "--window-size=1400,600", "--hide-scrollbars", "about:blank"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(profile + ".log", "w"),
    preexec_fn=child, pass_fds=(3, 4))
for fd in (to_r, from_w, hi_r, hi_w):
    os.close(fd)
buf, next_id = b"", 0


def call(method, session=None, timeout=30, **params):
    """One command; its result (events in between are dropped)."""
    global buf, next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params}
    if session:
        msg["sessionId"] = session
    os.write(to_w, json.dumps(msg).encode() + b"\0")
    end = time.time() + timeout
    while True:
        while b"\0" in buf:
            raw, buf = buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == next_id:
                if "error" in reply:
                    sys.exit("chromium: %s: %s" % (method, reply["error"]))
                return reply["result"]
        left = end - time.time()
        if left <= 0 or not select.select([from_r], [], [], left)[0]:
            sys.exit("chromium: no answer to %s within %d s" % (method, timeout))
        chunk = os.read(from_r, 1 << 20)
        if not chunk:
            sys.exit("chromium exited (see %s.log)" % profile)
        buf += chunk


try:
    target = call("Target.createTarget", url=url)["targetId"]
    session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    time.sleep(shown)
    status = call("Runtime.evaluate", session, expression="document.body.dataset.status")
    if status["result"].get("value") != "ok":
        sys.exit("the page's status is %r, not ok" % status["result"].get("value"))
    # the whole page, at its own height
    height = call("Runtime.evaluate", session,
                  expression="Math.ceil(document.querySelector('main').getBoundingClientRect().bottom)")
    call("Emulation.setDeviceMetricsOverride", session, width=1400,
         height=int(height["result"]["value"]), deviceScaleFactor=1, mobile=False)
    png = call("Page.captureScreenshot", session, format="png")["data"]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        f.write(base64.b64decode(png))
    call("Browser.close")
finally:
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
EOF
say "wrote $OUT ($(wc -c <"$OUT") bytes)"
