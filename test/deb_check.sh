#!/usr/bin/env bash
# The Debian packages end to end, on this machine (scripts/test.sh's deb
# stage; CI's throwaway machine): builds them with scripts/package.sh,
# checks them with lintian, installs them with `apt-get install ./*.deb`,
# checks what got installed (the unit with systemd-analyze verify, the
# programs, the conffiles, the system user, the Python module, a C program
# built against libidpool-dev through pkg-config), purges them and checks
# that nothing of theirs is left. One line per check, "deb: NAME ok (N s)"
# or "deb: NAME FAILED" followed by what it saw; exit 1 if one failed.
#
# Needs root (or sudo without a password) for apt-get and the tools of
# scripts/packages-test.txt; exits 77 (skip) without them, or when one of
# the packages is installed here already (a real deployment is not this
# test's to purge), or when a path it checks exists before it installs.
#
# Left behind on purpose: the system user _idpool. Debian does not delete
# system users on purge (files they owned would pass to the next user given
# that id); it owns no file of the packages.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PKGS=(idpoold idpoolctl libidpool0 libidpool-dev python3-idpool-client)
USER_NAME=_idpool

skip() {
    echo "deb: SKIP: $*" >&2
    exit 77
}
for t in dpkg-buildpackage dh dh_python3 lintian apt-get systemd-analyze systemctl cc pkg-config; do
    command -v "$t" >/dev/null || skip "$t not found (scripts/packages-test.txt)"
done
SUDO=()
if ((EUID != 0)); then
    sudo -n true 2>/dev/null || skip "needs root, or sudo without a password, for apt-get"
    SUDO=(sudo -n)
fi
for p in "${PKGS[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [[ -z $st || $st == not-installed ]] || skip "$p is $st here: not this test's to purge"
done
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# What must not exist before the install, and must be gone after the purge.
OURS=(/etc/idpool /usr/share/idpool /lib/systemd/system/idpoold.service
    /lib/systemd/system/idpoold.service.d /usr/lib/systemd/system/idpoold.service
    /usr/lib/sysusers.d/idpoold.conf /usr/sbin/idpoold /usr/bin/idpoolctl
    /usr/include/idpool.h /usr/lib/"$MA"/libidpool.so /usr/lib/"$MA"/libidpool.so.0
    /usr/lib/"$MA"/pkgconfig/idpool.pc /usr/lib/python3/dist-packages/idpool_client)
for f in "${OURS[@]}"; do
    [[ ! -e $f && ! -L $f ]] || skip "$f exists before the install (a meson install --prefix=/usr?)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/idpool-debcheck.XXXXXX")
chmod 0755 "$WORK" # apt's _apt user reads the .deb files
installed=()
cleanup() {
    if ((${#installed[@]})); then
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get purge -y "${installed[@]}" >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

FAILED=0 LAST_OK=0
# check NAME FUNCTION: runs the function in a subshell with errexit on, its
# output kept; one line for it; LAST_OK says whether it passed. Never call
# it in a condition (if, ||, &&): bash would run the function, even in its
# background subshell, with errexit off.
check() {
    local name=$1 t=$SECONDS st=0
    shift
    (
        set -e
        "$@"
    ) >"$WORK/$name.log" 2>&1 &
    wait $! || st=$?
    if ((st == 0)); then
        echo "deb: $name ok ($((SECONDS - t)) s)"
        sed 's/^/      /' "$WORK/$name.log" >&2
        LAST_OK=1
    else
        echo "deb: $name FAILED (exit $st)"
        tail -n 40 "$WORK/$name.log" | sed 's/^/      /'
        FAILED=1 LAST_OK=0
    fi
}
# apt LOG ARGS...: apt-get as root, its output in $WORK/LOG, shown on failure.
apt() {
    local log=$WORK/$1
    shift
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@" >"$log" 2>&1 || {
        tail -n 30 "$log"
        return 1
    }
}
fail() {
    echo "$*"
    return 1
}
# The names of files and directories with idpool in them on the system
# directories, to compare before the install and after the purge.
named_idpool() {
    find /etc /usr /lib /var/lib -xdev -name '*idpool*' -print 2>/dev/null | sort
}

build() {
    scripts/package.sh "$WORK/out" >/dev/null 2>"$WORK/package.log" || {
        cat "$WORK/package.log"
        return 1
    }
    local v m
    v=$(dpkg-parsechangelog -S Version)
    m=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -n 1)
    [[ $v == "$m" ]] || fail "debian/changelog is at $v, meson.build at $m"
    (cd "$WORK/out" && ls -l -- *.deb)
}

# Errors and warnings fail. Until the manual pages exist (docs/man/*.scd)
# lintian's no-manual-page is expected, and only then suppressed.
run_lintian() {
    local args=(--fail-on "error,warning" --display-level ">=warning")
    if ! compgen -G 'docs/man/*.scd' >/dev/null; then
        args+=(--suppress-tags no-manual-page)
        echo "no docs/man/*.scd yet: no-manual-page suppressed"
    fi
    lintian "${args[@]}" "$WORK/out"/*.changes
}

# Every package built, the -dbgsym ones too; all purged at the end.
install_debs() {
    cd "$WORK/out"
    apt apt-install.log install -y ./*.deb
    grep -E "^(Creating|Setting up)" "$WORK/apt-install.log"
}

unit() {
    local f=/lib/systemd/system/idpoold.service
    [[ -f $f && -f /lib/systemd/system/idpoold.service.d/debian.conf ]] ||
        fail "no $f or its drop-in"
    # Loads the unit with its drop-ins from disk: no running systemd needed.
    # An unknown key or a bad value is only a warning (exit 0): each line
    # about our unit fails too (others' units it loads may warn).
    local out
    out=$(systemd-analyze verify "$f" 2>&1) || fail "systemd-analyze verify $f: $out"
    ! grep -i idpool <<<"$out" || fail "systemd-analyze verify warns about the unit"
    [[ -z $out ]] || echo "systemd-analyze verify: $out"
    grep -q "^ExecStart=/usr/sbin/idpoold --config /etc/idpool/idpoold.conf" "$f" ||
        fail "ExecStart is not /usr/sbin/idpoold --config /etc/idpool/idpoold.conf"
    # Installed, not enabled (debian/rules: dh_installsystemd --no-enable).
    local state
    state=$(systemctl is-enabled idpoold.service 2>&1 || true)
    [[ $state == disabled ]] || fail "systemctl is-enabled idpoold: $state, not disabled"
}

programs() {
    local v
    v=$(/usr/sbin/idpoold --version)
    [[ $v == "idpoold $(dpkg-query -W -f='${Version}' idpoold)" ]] || fail "idpoold --version: $v"
    local help
    help=$(/usr/bin/idpoolctl --help)
    [[ -n $help ]] || fail "idpoolctl --help printed nothing"
    echo "$v; idpoolctl --help: ${help%%$'\n'*}"
}

conffiles() {
    local got want
    got=$(dpkg-query -W -f='${Conffiles}\n' idpoold | awk 'NF {print $1}' | sort)
    want=$'/etc/idpool/idpoold.conf\n/etc/idpool/idpoold.env'
    [[ $got == "$want" ]] || fail "idpoold's conffiles: $got"
    cmp /etc/idpool/idpoold.conf /usr/share/idpool/idpoold.conf.example
    cmp /etc/idpool/idpoold.env /usr/share/idpool/idpoold.env.example
    got=$(stat -c '%a %U %G' /etc/idpool/idpoold.conf /etc/idpool/idpoold.env)
    [[ $got == $'644 root root\n600 root root' ]] || fail "modes and owners: $got"
}

# The user exists, and the package makes it (on a machine where it was
# left by an earlier install, its existence alone proves nothing).
system_user() {
    grep -qE "^u $USER_NAME " /usr/lib/sysusers.d/idpoold.conf ||
        fail "/usr/lib/sysusers.d/idpoold.conf does not declare $USER_NAME"
    dpkg-query --control-show idpoold postinst | grep -q "systemd-sysusers.* idpoold.conf" ||
        fail "idpoold's postinst does not run systemd-sysusers"
    local pw
    pw=$(getent passwd "$USER_NAME") || fail "no user $USER_NAME"
    getent group "$USER_NAME" >/dev/null || fail "no group $USER_NAME"
    local uid shell
    uid=$(cut -d: -f3 <<<"$pw")
    shell=$(cut -d: -f7 <<<"$pw")
    ((uid < 1000)) || fail "$USER_NAME has uid $uid: not a system user"
    [[ $shell == /usr/sbin/nologin ]] || fail "$USER_NAME's shell: $shell"
    echo "$pw ($USER_BEFORE before the install)"
}

# Debian's interpreter (not one first on PATH), isolated from PYTHONPATH,
# the user's site directory and the current directory.
python_module() {
    (cd / && /usr/bin/python3 -I -c '
import idpool_client as m
want = "/usr/lib/python3/dist-packages/idpool_client/__init__.py"
if m.__file__ != want:
    raise SystemExit(f"imported {m.__file__}, not {want}")
if m.redis_key("idpool", "user", "pool") != "idpool:{user}:pool":
    raise SystemExit("redis_key: wrong key")
print(f"idpool_client from {m.__file__}")')
}

libdev() {
    local lib
    lib=$(readlink -f /usr/lib/"$MA"/libidpool.so)
    objdump -p "$lib" | grep -qE 'SONAME +libidpool\.so\.0$' || fail "$lib: SONAME is not libidpool.so.0"
    dpkg-query --control-show libidpool0 shlibs | grep -qx 'libidpool 0 libidpool0 (>= 0.1.0)' ||
        fail "libidpool0's shlibs: $(dpkg-query --control-show libidpool0 shlibs)"
    cat >"$WORK/t.c" <<'EOF'
#include <idpool.h>
#include <stdio.h>

int main(void)
{
    struct idpool_options o;
    idpool_options_init(&o);
    const char *envs[] = {"nope://x"};
    struct idpool_client *c = NULL;
    char err[256] = "";
    enum idpool_rc rc = idpool_client_new(envs, 1, &o, &c, err, sizeof err);
    printf("%s: %.60s\n", idpool_strerror(rc), err);
    idpool_client_free(c);
    return rc == IDPOOL_EINVAL ? 0 : 1;
}
EOF
    # pkg-config's own search path only: the installed idpool.pc.
    # shellcheck disable=SC2046 # pkg-config prints separate words
    env -u PKG_CONFIG_PATH cc -Wall -Werror -o "$WORK/t" "$WORK/t.c" \
        $(env -u PKG_CONFIG_PATH pkg-config --cflags --libs idpool)
    local loads
    loads=$(env -u LD_LIBRARY_PATH ldd "$WORK/t" | sed -n 's/^[[:space:]]*libidpool\.so\.0 => \([^ ]*\) .*/\1/p')
    [[ -n $loads && $(readlink -f "$loads") == "$lib" ]] ||
        fail "$WORK/t loads libidpool.so.0 from '$loads', not $lib"
    env -u LD_LIBRARY_PATH "$WORK/t"
}

# idpoold(8) and idpoolctl(1) once docs/man has the pages' sources.
manpages() {
    if ! compgen -G 'docs/man/*.scd' >/dev/null; then
        echo "no docs/man/*.scd yet: no manual page expected"
        return 0
    fi
    local f
    for f in /usr/share/man/man8/idpoold.8.gz /usr/share/man/man1/idpoolctl.1.gz; do
        [[ -f $f ]] || fail "docs/man has pages, but $f is not installed"
    done
}

purge() {
    apt apt-purge.log purge -y "${installed[@]}"
    local p st left=() f
    for p in "${installed[@]}"; do
        st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [[ -z $st || $st == not-installed ]] || left+=("package $p: $st")
    done
    # Every path the packages had (and the conffiles, the __pycache__ of
    # the module) that still exists and no other package owns.
    while IFS= read -r f; do
        [[ $f != /. ]] && [[ -e $f || -L $f ]] || continue
        dpkg -S "$f" >/dev/null 2>&1 || left+=("$f")
    done < <(sort -u "$WORK/paths")
    for f in "${OURS[@]}"; do
        [[ ! -e $f && ! -L $f ]] || left+=("$f")
    done
    # And any name with idpool in it that was not there before.
    while IFS= read -r f; do
        left+=("$f")
    done < <(comm -13 "$WORK/named.before" <(named_idpool))
    if ((${#left[@]})); then
        for f in "${left[@]}"; do
            if [[ -d $f ]]; then find "$f"; else echo "$f"; fi
        done | sort -u | sed 's/^/left after the purge: /'
        return 1
    fi
    getent passwd "$USER_NAME" >/dev/null &&
        echo "left on purpose: the system user $USER_NAME (Debian keeps system users)"
    return 0
}

named_idpool >"$WORK/named.before"
USER_BEFORE=absent
getent passwd "$USER_NAME" >/dev/null && USER_BEFORE=present
check build build
((LAST_OK)) || exit 1
check lintian run_lintian
mapfile -t installed < <(cd "$WORK/out" && ls -- *.deb | sed 's/_.*//')
check install install_debs
if ((LAST_OK)); then
    for p in "${installed[@]}"; do
        dpkg -L "$p"
    done >"$WORK/paths"
    find /usr/lib/python3/dist-packages/idpool_client >>"$WORK/paths" 2>/dev/null || true
    check unit unit
    check programs programs
    check conffiles conffiles
    check user system_user
    check python python_module
    check libdev libdev
    check manpages manpages
fi
: >>"$WORK/paths"
check purge purge
((!LAST_OK)) || installed=()
exit "$FAILED"
