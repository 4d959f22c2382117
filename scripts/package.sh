#!/usr/bin/env bash
# Builds idpool's Debian packages (debian/) with dpkg-buildpackage -b -us -uc
# in a copy of the source tree, so that the tree stays as it was (no
# obj-*/, debian/tmp or debian/<package>/ left, nothing written beside
# it), and puts the .deb, .buildinfo and .changes files in OUTDIR
# (build-deb/ by default, emptied first), whose path it prints last.
#
#   scripts/package.sh [OUTDIR]
#
# The copy holds the files git knows of, tracked or not (uncommitted
# changes are packaged; ignored files such as build*/ and run/ are not), or,
# outside a git checkout, the tree without build*/, run/ and .git/.
# Building needs the packages of scripts/packages.txt and the packaging
# tools of scripts/packages-test.txt (debhelper, dh-python, build-essential);
# dpkg-buildpackage names any Build-Depends missing. DEB_BUILD_OPTIONS
# passes through (nocheck skips the unit suite the build runs). Check the
# result with: lintian OUTDIR/*.changes
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/build-deb}

command -v dpkg-buildpackage >/dev/null || {
    echo "package: dpkg-buildpackage not found (Debian: dpkg-dev debhelper dh-python build-essential)" >&2
    exit 1
}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
case $OUT/ in
"$ROOT"/debian/* | "$ROOT"/src/*)
    echo "package: OUTDIR $OUT is inside the packaged sources" >&2
    exit 2
    ;;
esac
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idpool-deb.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

version=$(cd "$ROOT" && dpkg-parsechangelog -S Version)
src=$WORK/idpool-$version
mkdir "$src"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Tracked and untracked files, not ignored ones; deleted files skipped.
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
        tar --null --files-from=- -cf -) | tar -xf - -C "$src"
else
    tar -C "$ROOT" --exclude='./build*' --exclude=./run --exclude=./.git -cf - . | tar -xf - -C "$src"
fi

echo "==> dpkg-buildpackage -b -us -uc in $src (log: $OUT/build.log)" >&2
find "$OUT" -mindepth 1 -maxdepth 1 \
    \( -name '*.deb' -o -name '*.buildinfo' -o -name '*.changes' -o -name build.log \) -delete
st=0
(cd "$src" && dpkg-buildpackage -b -us -uc --jobs-try=auto) >"$OUT/build.log" 2>&1 || st=$?
if ((st != 0)); then
    tail -n 60 "$OUT/build.log" >&2
    echo "package: dpkg-buildpackage failed (exit $st); the whole log: $OUT/build.log" >&2
    exit 1
fi
mv "$WORK"/*.deb "$WORK"/*.buildinfo "$WORK"/*.changes "$OUT"/
(cd "$OUT" && ls -l -- *.deb) >&2
echo "$OUT"
