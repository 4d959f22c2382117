#!/usr/bin/env bash
# Installs the Debian packages of the lists given (one name a line, '#'
# comments) that are not installed yet, without starting or enabling their
# services. idpool runs its own servers (scripts/servers.sh, under run/ or a
# test's directory); on a fresh Debian, installing redis-server,
# mariadb-server, nginx-light or prometheus would otherwise start each as a
# system service and enable it at boot.
#
#   scripts/apt-install.sh LIST...     (as root, or through sudo)
#
# During the install a /usr/sbin/policy-rc.d answers 101 ("action
# forbidden", the policy interface invoke-rc.d and deb-systemd-invoke
# honour), so no postinst starts a service; it is removed afterwards (an
# existing one is left in place and its own policy applies). Then every
# systemd unit of the newly installed packages that their postinst enabled
# is disabled again: they were not installed before, so that is how they
# were. Packages already installed are not touched.
set -euo pipefail

(($#)) || {
    echo "usage: $0 LIST..." >&2
    exit 2
}
mapfile -t wanted < <(cat "$@" | grep -Ev '^[[:space:]]*(#|$)')
if ! command -v dpkg-query >/dev/null; then
    echo "apt-install: not a Debian system: make sure these are installed: ${wanted[*]}" >&2
    exit 0
fi
missing=()
for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
((${#missing[@]})) || exit 0

sudo=()
if ((EUID != 0)); then
    command -v sudo >/dev/null || {
        echo "apt-install: not root and no sudo; as root: $0 $*" >&2
        exit 1
    }
    sudo=(sudo)
fi
POLICY=/usr/sbin/policy-rc.d
ours=0
if [[ ! -e $POLICY ]]; then
    printf '#!/bin/sh\n# scripts/apt-install.sh: no service starts while idpool installs packages\nexit 101\n' |
        "${sudo[@]}" tee "$POLICY" >/dev/null
    "${sudo[@]}" chmod 0755 "$POLICY"
    ours=1
fi
remove_policy() { ((ours == 0)) || "${sudo[@]}" rm -f "$POLICY"; }
trap remove_policy EXIT

echo "apt-install: installing ${missing[*]} (no service is started or enabled)" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"

# The units the new packages brought and their postinst enabled: disabled
# again (systemctl edits the symlinks whether systemd runs or not).
command -v systemctl >/dev/null || exit 0
for p in "${missing[@]}"; do
    dpkg -L "$p" 2>/dev/null | grep -E '^(/usr)?/lib/systemd/system/[^/@]+\.(service|socket|timer)$' || true
done | sed 's#.*/##' | sort -u | while read -r unit; do
    if systemctl --quiet is-enabled "$unit" 2>/dev/null; then
        "${sudo[@]}" systemctl --quiet disable "$unit" 2>/dev/null &&
            echo "apt-install: $unit disabled again (a package idpool needs, not a service it uses)" >&2
    fi
done
exit 0
