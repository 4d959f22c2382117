#!/usr/bin/env bash
# The status page, GET / of the status server (issue 23), in a real browser:
# Debian's chromium, headless, loads it against a running idpoold and the
# DOM it rendered after a few polls (--dump-dom, virtual time) is checked.
#
#   GET /      200 text/html; charset=utf-8, X-Content-Type-Options nosniff,
#              a Content-Security-Policy with default-src 'self', no
#              'unsafe-inline', and the SHA-256 of the page's inline script
#              and style; HEAD: the headers only; POST: 405; /index.html 404
#   the page   a row per application (served, soft-deleted, invalid: each
#              marked so, the invalid one with its error), a fill bar and a
#              sparkline of polled rates for each pool, runway as /v1/apps
#              has it ("—" while it has none), markup in a key and in a name
#              shown as text; it polled more than once, shows its own error
#              box hidden, and chromium's console has no uncaught error and
#              no Content-Security-Policy violation
#   alert      a pool drained by takes: no alert on its row before; once
#              /v1/apps shows underflow, the page shows it on that row
#   /#app=KEY  that application's page (and "unknown application" for a
#              key that does not exist, the invalid key's page too)
#   errors     through page_proxy.py: a poll's HTTP 500 shows in the error
#              box, and the next poll that succeeds clears it (one 500, then
#              answers: the box hidden; 500s from the 3rd poll on: shown)
#   no answer  a proxy that accepts /v1/apps and never answers: the poll's
#              5 s abort gives "idpoold does not answer" (no data yet), or
#              "... data as of" over the rows shown (in real time: virtual
#              time stalls on a hung request; the proxy delays the page's
#              load event, at which chromium dumps the DOM)
#   stale      Redis stopped: once /v1/apps says stale, the rows are marked
#              stale and the health badge says unavailable
#   screenshots $DIR/page.png, $DIR/app.png (KEEP=1 keeps them)
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
if ! command -v chromium >/dev/null 2>&1; then
    [[ ${IDPOOL_CI:-0} != 1 ]] || fail "chromium is not installed (scripts/packages-test.txt; in CI nothing may be skipped)"
    skip "chromium is not installed (scripts/packages-test.txt)"
fi
setup

HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
BAD_KEY='<b>x</b>'

# browse NAME URL [CHROMIUM ARGS...]: URL in headless chromium, a fresh
# profile, 6 s of virtual time (the page polls every 1.5 s; VT='' for real
# time: the DOM at the load event), at most 60 s of real time; the DOM it rendered in $DIR/NAME.html (unless the args ask for
# something else), its log in $DIR/NAME.err. Fails when chromium fails or
# its console shows an uncaught error or a Content-Security-Policy violation.
browse() {
    local name=$1 url=$2 st=0 pid vt=${VT-6000}
    shift 2
    # (root in a container: no sandbox; no GPU, no /dev/shm of size)
    timeout -k 5 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$DIR/chromium.$name" --no-first-run --no-default-browser-check \
        --disable-extensions --disable-background-networking --disable-component-update \
        --enable-logging=stderr --v=0 ${vt:+"--virtual-time-budget=$vt"} "${@:---dump-dom}" "$url" \
        </dev/null >"$DIR/$name.html" 2>"$DIR/$name.err" || st=$?
    # Nothing of this run may outlive it (timeout signals its process group; a helper that
    # left it would still name the profile).
    for pid in $(pgrep -f -- "--user-data-dir=$DIR/chromium.$name" || true); do
        kill -KILL "$pid" 2>/dev/null || true
    done
    ((st == 0)) || fail "chromium $url: exit status $st: $(grep -v dbus "$DIR/$name.err" | tail -n 5)"
    if grep -E 'CONSOLE.*(Uncaught|Content Security Policy|Refused to)' "$DIR/$name.err" >&2; then
        fail "chromium's console on $url shows the errors above"
    fi
}
# dom NAME PYTHON: runs PYTHON (checks with check()) with d = the DOM of
# $DIR/NAME.html, apps = the last /v1/apps (in $DIR/apps.json), BAD_KEY.
dom() {
    "$PYTHON" - "$DIR/$1.html" "$DIR/apps.json" "$BAD_KEY" <<EOF || fail "$1: the page as rendered: $DIR/$1.html"
import json, re, sys
from harness import check, parse_dom
d = parse_dom(sys.argv[1])
apps = {a["key"]: a for a in json.load(open(sys.argv[2]))}
BAD_KEY = sys.argv[3]
def row(key):
    return d.one("tr", cls="app", data_app=key)
def terms(e):  # {dt text: the dd after it} of the <dl>s in e
    out = {}
    for dl in e.all("dl"):
        kids = [c for c in dl.children if not isinstance(c, str)]
        for dt, dd in zip(kids[::2], kids[1::2]):
            out.setdefault(dt.text(), dd.text())
    return out
$2
EOF
}
# page NAME PYTHON: dom NAME PYTHON, after the checks every page passes: it
# polled more than once, no error shows.
page() {
    dom "$1" '
check(d.one("body").attrs.get("data-status") == "ok", "status %r, error box: %r" %
      (d.one("body").attrs.get("data-status"), d.one(id="error").text()))
check(d.one(id="error").hidden(), "the error box shows: %r" % d.one(id="error").text())
check(int(d.one("body").attrs.get("data-polls", 0)) >= 2, "polled %s times" % d.one("body").attrs.get("data-polls"))
'"$2"
}
apps_json() { curl -sS --max-time 5 -o "$DIR/apps.json" "$BASE/v1/apps" || fail "GET /v1/apps: no answer"; }
# app_has KEY PYTHON-EXPR: true of a = KEY's object in /v1/apps (for wait_until).
app_has() {
    apps_json
    "$PYTHON" -c 'import json, sys
a = {a["key"]: a for a in json.load(open(sys.argv[1]))}[sys.argv[2]]
sys.exit(not eval(sys.argv[3]))' "$DIR/apps.json" "$1" "$2"
}

add_app pu entity_name='Users <i>of the app</i>' step=100 max_pool_size=1000
add_app po increasing_type=2 step=500 max_pool_size=5000
# pdrain: one take may ask for the whole pool, at any rate
add_app pdrain step=100 max_pool_size=1000 max_size_per_times=1000 max_size_per_second=1000000
add_app pdel step=100 max_pool_size=1000 deleted_at=1
add_app "$BAD_KEY" step=100 max_pool_size=1000
# (an alert resolves only after 10 min: pdrain's stays firing)
start_daemon a --tick-ms 50 --reload-ms 300 --alert-resolve-ms 600000 --http "127.0.0.1:$HTTP_PORT"
for k in pu:1000 po:5000 pdrain:1000; do
    wait_until 10 pool_ge "${k%:*}" "${k#*:}" || fail "${k%:*} never filled"
done

# --- the answer --------------------------------------------------------------------------
CODE=$(curl -sS --max-time 5 -o "$DIR/served.html" -D "$DIR/headers" -w '%{http_code}' "$BASE/") ||
    fail "GET /: no answer"
assert_eq 200 "$CODE" "GET / status"
"$PYTHON" - "$DIR/headers" "$DIR/served.html" <<'EOF' || fail "GET /: $(tr -d '\r' <"$DIR/headers")"
import base64, hashlib, re, sys
from harness import check
head = open(sys.argv[1], encoding="latin-1").read().replace("\r", "")
hdr = {}
for line in head.split("\n")[1:]:
    if ":" in line:
        k, v = line.split(":", 1)
        check(k.lower() not in hdr, "two %s headers" % k)
        hdr[k.lower()] = v.strip()
page = open(sys.argv[2], "rb").read()
check(hdr.get("content-type") == "text/html; charset=utf-8", "Content-Type %r" % hdr.get("content-type"))
check(hdr.get("x-content-type-options") == "nosniff", "X-Content-Type-Options %r" % hdr.get("x-content-type-options"))
check(int(hdr.get("content-length", -1)) == len(page), "Content-Length %r, %d bytes" % (hdr.get("content-length"), len(page)))
csp = {d.split()[0]: d.split()[1:] for d in hdr.get("content-security-policy", "").split(";") if d.strip()}
check(csp.get("default-src") == ["'self'"], "CSP default-src %r" % csp.get("default-src"))
check("unsafe-inline" not in hdr["content-security-policy"], "CSP allows 'unsafe-inline'")
for kind in ("script", "style"):
    inline = re.findall(rb"<%s>(.*?)</%s>" % (kind.encode(), kind.encode()), re.sub(rb"<!--.*?-->", b"", page, flags=re.S), re.S)
    check(len(inline) == 1, "%d inline <%s> elements" % (len(inline), kind))
    want = "'sha256-%s'" % base64.b64encode(hashlib.sha256(inline[0]).digest()).decode()
    check(csp.get(kind + "-src") == [want], "CSP %s-src %r, the page's is %s" % (kind, csp.get(kind + "-src"), want))
check(b"http://" not in page.split(b"<script>")[0] and b"src=\"http" not in page, "an external asset")
EOF
read -r code clen blen ctype <<<"$(curl -sS --max-time 5 -I -o /dev/null \
    -w '%{http_code} %header{content-length} %{size_download} %{content_type}' "$BASE/")"
assert_eq "200 $(wc -c <"$DIR/served.html") 0 text/html;" "$code $clen $blen ${ctype%% *}" "HEAD /"
assert_eq 405 "$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -X POST "$BASE/")" "POST /"
for p in /index.html /apps /status.html; do
    assert_eq 404 "$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$BASE$p")" "GET $p"
done
pass "GET /: HTML with a strict CSP (hashes of its inline script and style), nosniff; HEAD, 405, 404 elsewhere"

# --- the list ------------------------------------------------------------------------------
wait_until 10 app_has pu 'a["lease"] is not None' || fail "pu's lease never in /v1/apps"
browse list "$BASE/"
apps_json
page list '
check(not d.one(id="list").hidden() and d.one(id="app").hidden(), "the list is not what shows")
keys = [r.attrs["data-app"] for r in d.all("tr", cls="app")]
check(keys == sorted(apps) and len(keys) == 5, "rows %r, /v1/apps has %r" % (keys, sorted(apps)))
for k in ("pu", "po", "pdrain"):
    r = row(k)
    check(r.attrs["data-state"] == "served" and r.attrs["data-stale"] == "0", "%s: %r" % (k, r.attrs))
    check(r.one(cls="state").text() == "served", "%s badge %r" % (k, r.one(cls="state").text()))
    check(r.all(cls="alert") == [], "%s has alerts before anything was drained" % k)
    bar = r.one("div", cls="fill")
    check("width: 100%" in bar.one(cls="level").attrs.get("style", ""), "%s fill %r" % (k, bar.one(cls="level").attrs))
    check("left: 80%" in bar.one(cls="mark").attrs.get("style", ""), "%s low-water mark %r" % (k, bar.one(cls="mark").attrs))
    n = apps[k]["config"]["max_pool_size"]
    check(r.one(cls="filltext").text() == "{0:,} / {0:,} (100%)".format(n), "%s fill text %r" % (k, r.one(cls="filltext").text()))
    svg = r.one("svg", cls="spark")
    check(int(svg.attrs["data-points"]) >= 2 and len(svg.all("polyline")) == 1, "%s sparkline %r" % (k, svg.attrs))
    check(r.one("td", cls="node").text() == apps[k]["node"], "%s node %r" % (k, r.one("td", cls="node").text()))
    rw = apps[k].get("runway") or {}
    for cls, f in (("runway-pool", "pool_s"), ("runway-space", "id_space_days")):
        got = r.one("td", cls=cls).text()
        if isinstance(rw.get(f), (int, float)):
            check(re.match(r"^[0-9.]+ ?[kMGTPE]? (s|min|h|d|y)$", got), "%s %s %r for %r" % (k, f, got, rw[f]))
        else:
            check(got == "\u2014", "%s %s %r, /v1/apps has none" % (k, f, got))
check(row("pu").one(cls="name").text() == "Users <i>of the app</i>", "pu name %r" % row("pu").one(cls="name").text())
check(d.all("i") == [] and d.all("b") == [], "markup from the data became elements")
r = row("pdel")
check(r.attrs["data-state"] == "deleted" and "deleted" in r.classes(), "pdel %r" % r.attrs)
check(r.one(cls="state").text() == "deleted", "pdel badge %r" % r.one(cls="state").text())
r = row(BAD_KEY)
check(r.attrs["data-state"] == "invalid" and r.one("a", cls="key").text() == BAD_KEY, "bad row %r" % r.attrs)
check(r.one(cls="state").text() == "invalid", "bad row badge")
check([a.text() for a in r.all(cls="alert")] == ["invalid_config"], "bad row alerts")
detail = d.one("tr", cls="detail")
check(detail.text() == "invalid row: " + apps[BAD_KEY]["invalid"], "bad row detail %r" % detail.text())
check(d.one(id="health").text() == "healthy", "health %r" % d.one(id="health").text())
check(d.one(id="instance").text().startswith("instance "), "instance %r" % d.one(id="instance").text())
'
pass "the list: a row per application, served/deleted/invalid marked, fill, low water, sparkline, runway, node; text stays text"

# --- an alert when a pool is drained ------------------------------------------------------
# Takes of the whole pool until one comes up short (the daemon refills within a tick).
drained() {
    rcli FCALL idpool_take 2 "$(pool_key pdrain)" "$(meta_key pdrain)" 1000 >/dev/null
    app_has pdrain '"underflow" in a["alerts"]'
}
wait_until 15 drained || fail "pdrain drained: no underflow alert in /v1/apps: $(cat "$DIR/apps.json")"
browse alert "$BASE/"
apps_json
page alert '
shown = [a.text() for a in row("pdrain").all(cls="alert")]
check(set(shown) <= set(apps["pdrain"]["alerts"]), "pdrain alerts %r, /v1/apps %r" % (shown, apps["pdrain"]["alerts"]))
check(row("pdrain").one(cls="alert", data_alert="underflow").text() == "underflow", "no underflow badge")
check("alerting" in row("pdrain").classes(), "pdrain row not marked alerting")
check(row("pu").all(cls="alert") == [], "pu has alerts")
'
pass "a drained pool: its underflow alert, once in /v1/apps, shows on its row"

browse screenshot "$BASE/" --screenshot="$DIR/page.png" --window-size=1400,420 --hide-scrollbars
[[ $(head -c 8 "$DIR/page.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
    fail "no PNG screenshot in $DIR/page.png"
pass "screenshot $DIR/page.png ($(wc -c <"$DIR/page.png") bytes)"

# --- one application's page --------------------------------------------------------------
browse app_pu "$BASE/#app=pu"
page app_pu '
s = d.one(id="app")
check(not s.hidden() and d.one(id="list").hidden(), "the app page is not what shows")
check(s.attrs.get("data-app") == "pu" and s.one("h2").one(cls="key").text() == "pu", "app page %r" % s.attrs)
check(s.one("dd", data_field="state").text() == "served", "state")
check(s.one("dd", data_field="node").text() == apps["pu"]["node"], "node")
check(s.one("dd", data_field="instance").text().startswith("instance "), "instance")
t = terms(s)
want = {"step": "100", "max_pool_size": "1000", "low_water": "800", "taken": "0",
        "next ID": apps["pu"]["lease"]["next"], "name": "Users <i>of the app</i>"}
for f, v in want.items():
    check(t.get(f) == v, "the app page: %s %r, expected %r" % (f, t.get(f), v))
check(int(s.one("svg", cls="spark").attrs["data-points"]) >= 2, "sparkline")
'
browse app_shot "$BASE/#app=pu" --screenshot="$DIR/app.png" --window-size=1200,700 --hide-scrollbars
browse app_none "$BASE/#app=nosuch"
page app_none '
check(d.one(id="app").text().endswith("unknown application nosuch"), "nosuch: %r" % d.one(id="app").text())
'
browse app_bad "$BASE/#app=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$BAD_KEY")"
page app_bad '
s = d.one(id="app")
check(s.attrs.get("data-app") == BAD_KEY and s.one("h2").one(cls="key").text() == BAD_KEY, "bad key page %r" % s.attrs)
check(s.one("p", cls="bad").text() == "invalid row: " + apps[BAD_KEY]["invalid"], "bad key error")
check(d.all("b") == [], "markup from the data became elements")
'
pass "/#app=KEY: that application (state, node, instance, config, counters, leases, sparkline); unknown key said so"

# --- a poll's HTTP error; no answer at all (page_proxy.py in front of the daemon) ----------
# proxy MODE [HOLD_MS]: page_proxy.py on $PROXY (a new port) in front of the daemon
proxy() {
    [[ -z ${PROXY_PID:-} ]] || { kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true; }
    PROXY=http://127.0.0.1:$(free_port)
    "$PYTHON" "$(dirname "$0")/page_proxy.py" "${PROXY##*:}" "$HTTP_PORT" "$@" 2>>"$DIR/proxy.err" &
    PROXY_PID=$!
    wait_until 5 curl -sSf -o /dev/null "$PROXY/healthz" || fail "page_proxy.py did not start: $(cat "$DIR/proxy.err")"
}
apps_json
proxy 500from:3
browse err500 "$PROXY/"
dom err500 '
e = d.one(id="error")
check(not e.hidden() and e.text() == "page error: GET /v1/apps: HTTP 500", "the error box: %r" % e.text())
check(d.one("body").attrs.get("data-status") == "error", "status %r" % d.one("body").attrs.get("data-status"))
'
proxy 500:1
browse err500once "$PROXY/"
page err500once 'check(row("pu").attrs["data-stale"] == "0", "pu stale after the error")'
pass "a poll's HTTP 500 shows in the error box; the next poll that succeeds clears it"

proxy hang:1 10000
VT='' browse hang_first "$PROXY/"
dom hang_first '
b = d.one(id="banner")
check(not b.hidden() and b.text() == "idpoold does not answer", "the banner: %r" % b.text())
check(d.one(id="error").hidden(), "the error box shows: %r" % d.one(id="error").text())
'
proxy hang:2 10000
VT='' browse hang_later "$PROXY/"
dom hang_later '
b = d.one(id="banner")
check(not b.hidden() and b.text().startswith("idpoold does not answer: data as of "), "the banner: %r" % b.text())
check(d.one("body").attrs.get("data-stale") == "1" and len(d.all("tr", cls="app")) == 5, "the rows shown, stale")
check(d.one(id="error").hidden(), "the error box shows: %r" % d.one(id="error").text())
'
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true
PROXY_PID=
pass "a daemon that never answers: after the poll's 5 s abort, 'idpoold does not answer' (and 'data as of' over the rows shown)"

# --- stale while Redis is down -------------------------------------------------------------
redis_stop
wait_until 10 app_has pu 'a["pool"]["stale"] is True' || fail "pu never stale in /v1/apps with Redis stopped"
browse stale "$BASE/"
page stale '
for k in ("pu", "po", "pdrain"):
    check(row(k).attrs["data-stale"] == "1" and "stale" in row(k).classes(), "%s not marked stale" % k)
    check("stale" in [b.text() for b in row(k).all(cls="badge")], "%s has no stale badge" % k)
    check(row(k).one("td", cls="rate").text() == "?", "%s rate %r" % (k, row(k).one("td", cls="rate").text()))
check(d.one(id="health").text() == "unavailable" and d.one("body").attrs.get("data-health") == "unavailable", "health")
check("redis down" in d.one(id="backends").text(), "backends %r" % d.one(id="backends").text())
'
pass "Redis stopped: rows marked stale, rate '?', health unavailable"
redis_start
stop_daemon a
pass "page"
