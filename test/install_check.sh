#!/usr/bin/env bash
# What `meson install` installs, into a temporary DESTDIR: every module of
# the Python client's package (src/python/idpool_client/) lands in the
# interpreter's site directory and the package imports from there alone and
# works; the Prometheus alert rules, their promtool tests and their README
# land in <datadir>/idpool/prometheus (and pass there when promtool is
# installed); the man pages idpoold(8) and idpoolctl(1) land in
# <mandir>/man8 and <mandir>/man1 (when scdoc built them: in CI always).
# Set by meson: MESON, IDPOOL_BUILD_ROOT, IDPOOL_PYTHON (the interpreter
# meson installs for), IDPOOL_PYTHON_DIR (its site directory),
# IDPOOL_DATA_DIR, IDPOOL_MAN_DIR, IDPOOL_MAN_PAGES (1: built). Exit 77
# (skip) when meson's command was not found.
set -euo pipefail
root=${IDPOOL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
[[ -n ${MESON:-} ]] || { echo "SKIP: meson's command was not found"; exit 77; }
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT

DESTDIR=$dest/root "$MESON" install -C "$IDPOOL_BUILD_ROOT" --no-rebuild >"$dest/install.log" 2>&1 || {
    cat "$dest/install.log"
    echo "FAIL: meson install into a DESTDIR"
    exit 1
}

site=$dest/root$IDPOOL_PYTHON_DIR
want=$(cd "$root/src/python/idpool_client" && ls -- *.py)
got=$(cd "$site/idpool_client" && ls -- *.py) || got=
if [[ $want != "$got" ]]; then
    echo "FAIL: installed modules differ from src/python/idpool_client/:"
    diff <(echo "$want") <(echo "$got") || true
    exit 1
fi
for f in $want; do
    cmp "$root/src/python/idpool_client/$f" "$site/idpool_client/$f"
done

# From the installed site directory alone (never the source tree): pure
# calls, no server, no redis-py needed.
(cd "$dest" && PYTHONPATH=$site "$IDPOOL_PYTHON" - "$site" <<'PY')
import sys

import idpool_client as m

site = sys.argv[1]
assert m.__file__.startswith(site), f"imported {m.__file__}, not from {site}"
assert m.redis_key("idpool", "user", "pool") == "idpool:{user}:pool"
assert m.parse_env("https://t@h:8443/p") == (
    "http", {"host": "h", "port": 8443, "tls": True, "token": "t", "prefix": "/p"})
assert m.batch_next(100, 1000.0, 0.5, 100, 1000, False) == 500
assert m.classify_refusal("IDPOOL_RATE retry in 5 ms", 10) == (m.RATE, 0.005)
print(f"idpool_client imports from {m.__file__}")
PY

rules=$dest/root$IDPOOL_DATA_DIR/idpool/prometheus
for f in idpool-alerts.yml idpool-alerts.test.yml README.md; do
    cmp "$root/deploy/prometheus/$f" "$rules/$f"
done
cmp "$root/deploy/grafana/idpool.json" "$dest/root$IDPOOL_DATA_DIR/idpool/grafana/idpool.json"
if command -v promtool >/dev/null; then
    (cd "$rules" && promtool test rules idpool-alerts.test.yml >/dev/null)
    echo "the installed rules pass their installed tests"
fi

if [[ ${IDPOOL_MAN_PAGES:-0} == 1 ]]; then
    for page in man8/idpoold.8 man1/idpoolctl.1; do
        f=$dest/root$IDPOOL_MAN_DIR/$page
        if [[ ! -f $f ]]; then
            echo "FAIL: $IDPOOL_MAN_DIR/$page is not installed"
            exit 1
        fi
        name=${page#*/}
        cmp "$IDPOOL_BUILD_ROOT/docs/man/$name" "$f"
        # A page of that name and section, as scdoc writes its title line.
        if ! grep -q "^\.TH \"${name%.*}\" \"${name##*.}\"" "$f"; then
            echo "FAIL: $IDPOOL_MAN_DIR/$page: no title line .TH \"${name%.*}\" \"${name##*.}\""
            exit 1
        fi
    done
    pages="the man pages idpoold(8) and idpoolctl(1)"
elif [[ ${IDPOOL_CI:-0} == 1 ]]; then
    echo "FAIL: the man pages were not built: scdoc not found (scripts/packages-test.txt)"
    exit 1
else
    pages="no man pages (scdoc is not installed)"
fi
echo "installed: the Python package ($(echo "$want" | wc -l) modules), the Prometheus rules, the Grafana dashboard and $pages"
