#!/usr/bin/env bash
# The systemd unit as built (deploy/idpoold.service from .in): systemd-analyze
# verify accepts it, also with its commented-out LoadCredential= and
# Environment= lines turned on, and systemd-analyze security --offline rates
# its exposure at most MAX_EXPOSURE (the sandbox may get stricter, never
# looser). ExecStart points at the built idpoold (verify wants an executable);
# --man=no: the Documentation= pages are not installed here (man_sync and
# man_lint check them; test/deb_check.sh verifies with them installed).
# No systemd needs to run. Exit 77 (skip) without systemd-analyze (Debian's
# package 'systemd').
set -euo pipefail
MAX_EXPOSURE=1.1
build=${IDPOOL_BUILD_ROOT:?meson sets IDPOOL_BUILD_ROOT}
unit=$build/deploy/idpoold.service
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze is not installed"; exit 77; }
[[ -f $unit ]] || { echo "FAIL: $unit not generated"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# verify: the unit, then with every optional line on
sed -E "s|^ExecStart=[^ ]+|ExecStart=${IDPOOLD:-$build/idpoold}|" "$unit" >"$dir/idpoold.service"
systemd-analyze verify --man=no "$dir/idpoold.service" 2>&1 | tee "$dir/verify.out"
[[ ! -s $dir/verify.out ]] || { echo "FAIL: systemd-analyze verify complained (above)"; exit 1; }
mkdir "$dir/on"
sed -E 's/^#(LoadCredential|Environment)=/\1=/' "$dir/idpoold.service" >"$dir/on/idpoold.service"
grep -q '^LoadCredential=redis-password:' "$dir/on/idpoold.service" ||
    { echo "FAIL: no LoadCredential=redis-password line to turn on"; exit 1; }
systemd-analyze verify --man=no "$dir/on/idpoold.service" 2>&1 | tee "$dir/verify.out"
[[ ! -s $dir/verify.out ]] || { echo "FAIL: systemd-analyze verify complained with the credentials on (above)"; exit 1; }
grep -q '^Type=notify$' "$unit" && grep -q '^WatchdogSec=' "$unit" ||
    { echo "FAIL: the unit is not Type=notify with WatchdogSec="; exit 1; }

# security: the overall exposure
systemd-analyze security --offline=true --no-pager "$dir/idpoold.service" >"$dir/security.out" 2>&1 || true
level=$(sed -n 's/^→ Overall exposure level for idpoold.service: \([0-9.]*\) .*/\1/p' "$dir/security.out")
[[ -n $level ]] || { cat "$dir/security.out"; echo "FAIL: no overall exposure level"; exit 1; }
grep '✗' "$dir/security.out" || true
if awk -v l="$level" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(l > m) }'; then
    echo "FAIL: systemd-analyze security: exposure $level, above $MAX_EXPOSURE (the sandbox was loosened?)"
    exit 1
fi
echo "PASS: systemd-analyze verify clean; security exposure $level (at most $MAX_EXPOSURE)"
