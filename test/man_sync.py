"""The man pages against the help they document (issue 23).

    man_sync.py check ROOT IDPOOLD IDPOOLCTL
        (meson test man_sync) docs/man/idpoold.8.scd against `idpoold
        --help`, which the settings table of src/core/config.c prints, and
        docs/man/idpoolctl.1.scd against `idpoolctl --help` and the help of
        each of its commands, which the command tables of src/ctl/ print.
        A setting, variable, command or option that one has and the other
        lacks fails it, and so does a difference in what both say of it:

        * every setting, in the order and (idpoold) under the headings of
          --help: a term line "*--flag* _ARG_" (or "*name* (no flag)")
          followed by "Environment: *VAR*. Config file: *key*. Default:
          TEXT." with --help's variable and default, and for idpoold
          "SIGHUP: applied." or "SIGHUP: needs a restart." as the SIGHUP
          paragraph of docs/operations.md says;
        * -h/--help, -V/--version and idpoolctl's --json as term lines of
          the options section;
        * ENVIRONMENT names exactly the settings' variables, in lines
          "- Heading: *VAR*, ..." under their settings' headings, and for
          idpoolctl those src/ctl/ reads with getenv(), which a command's
          help must name too (IDPOOL_TOKEN);
        * every command of `idpoolctl --help` has a term line under COMMANDS
          that reads as the usage line of its help ("apps show KEY
          [--json]"), and the options listed under it ("*--name* _TEXT_"
          with a paragraph below) are those its help lists;
        * EXIT STATUS gives the exit codes `idpoolctl --help` names.

    man_sync.py lint PAGE...
        (meson test man_lint) the built pages through mandoc -Tlint:
        anything it warns about, but for the empty paragraphs scdoc always
        writes, fails. Exit 77 (skip) without mandoc.

Every problem is printed (FAIL: where: what); the exit status is 1 if there
was one.
"""
import os
import re
import shutil
import subprocess
import sys

failures = []


def fail(where, msg):
    failures.append(msg)
    print(f"FAIL: {where}: {msg}", file=sys.stderr)


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    if p.returncode != 0:
        fail(" ".join(argv), f"exit status {p.returncode}: {p.stderr.strip()}")
    return p.stdout


# ------------------------------------------------------------------ help


def help_settings(text):
    """The settings of a --help (config_usage_settings()): a list of dicts
    (group, name, flag, arg, env, default), and the other options it lists
    ("-h, --help", "--json")."""
    settings, extras, group, cur = [], [], None, None
    for line in text.split("\n"):
        m = re.match(r"^(\S.*):$", line)
        if m:
            group, cur = m.group(1), None
            continue
        if group is None or not line.startswith("  "):
            cur = None
            continue
        lhs = line[2:].split("  ")[0].strip() if not line.startswith("    ") else ""
        m = re.match(r"^--([a-z][a-z-]*) (\S+)$", lhs) or re.match(r"^([a-z][a-z-]*) \(no flag\)$", lhs)
        if m:
            cur = {"group": group, "name": m.group(1), "flag": lhs.startswith("--"),
                   "arg": m.group(2) if lhs.startswith("--") else None, "env": None, "default": None}
            settings.append(cur)
        elif lhs.startswith("-"):
            extras.append(lhs)
            cur = None
        m = re.match(r"^    (IDPOOL_[A-Z0-9_]+)", line)
        if m and cur:
            cur["env"] = m.group(1)
        m = re.match(r"^.{31}default: (.*)$", line)
        if m and cur:
            cur["default"] = m.group(1)
    for s in settings:
        if not s["env"] or not s["default"]:
            fail("--help", f"cannot read the variable and default of {s['name']}: the pattern is out of date")
    return settings, extras


def help_commands(text):
    """The commands of `idpoolctl --help`'s list: ["apps add", ..., "help"]."""
    block = text.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    cmds = []
    for line in block.split("\n"):
        if line.startswith("  ") and not line.startswith("    "):
            words = []
            for w in line[2:].split("  ")[0].split():
                if not re.fullmatch(r"[a-z]+", w):
                    break
                words.append(w)
            cmds.append(" ".join(words))
    return cmds


def help_command(text):
    """A command's help: its usage (the Usage paragraph after the command
    name) and the options it lists ("  --name TEXT  ...")."""
    para = text.split("\n\n", 1)[0]
    usage = " ".join(para.split())
    usage = re.sub(r"^Usage: \S+ \[global options\] ", "", usage)
    listed = re.findall(r"^  (--[a-z][a-z-]*)\b", text, re.M)
    return usage, set(re.findall(r"--[a-z][a-z-]*", usage)) | set(listed)


# ------------------------------------------------------------------- man


def plain(s):
    """scdoc text as it reads: no *bold*, _underline_ or escapes."""
    s = s.replace("\\*", "\0").replace("\\_", "\1")
    s = s.replace("*", "")
    s = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", "", s)
    return " ".join(s.replace("\0", "*").replace("\1", "_").replace("\\\\", "\\").split())


def sections(path):
    """{section: [(line number, text)]} of an scdoc page, comments dropped,
    lines continued with "++" joined."""
    out, cur = {}, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    joined, n = [], 0
    while n < len(lines):
        line, at = lines[n], n + 1
        while line.endswith(" ++") and n + 1 < len(lines):
            n += 1
            line = line[:-3] + " " + lines[n].lstrip("\t")
        joined.append((at, line))
        n += 1
    for at, line in joined:
        if line.startswith("; ") or line == ";":
            continue
        m = re.match(r"^# (.+)$", line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif cur:
            out[cur].append((at, line))
    return out


SETTING_TERM = re.compile(r"^\*(--)?([a-z][a-z-]*)\*(?: _(\S+)_| \(no flag\))$")
SETTING_LINE = re.compile(
    r"^\tEnvironment: \*(IDPOOL_[A-Z0-9_]+)\*\. Config file: (.+?)\. Default: (.+?)\."
    r"(?: SIGHUP: (applied|needs a restart)\.)?$"
)


def man_settings(where, lines):
    """The settings of an options section: dicts like help_settings()'s,
    plus key (config file), sighup and line; and the other options' term
    lines ("-h, --help")."""
    settings, extras, group = [], [], None
    for i, (at, line) in enumerate(lines):
        m = re.match(r"^## (.+)$", line)
        if m:
            group = m.group(1)
            continue
        nxt = lines[i + 1][1] if i + 1 < len(lines) else ""
        if not nxt.startswith("\t") or not (line.startswith("*-") or SETTING_TERM.match(line)):
            continue  # not a term line: those have their paragraph indented below
        m = SETTING_TERM.match(line)
        if not m:
            extras.append(plain(line))
            continue
        d = SETTING_LINE.match(nxt)
        if not d:
            fail(f"{where}:{at + 1}", f"{m.group(2)}: the line after the term must be "
                 "'\tEnvironment: *VAR*. Config file: *key*. Default: TEXT.[ SIGHUP: applied|needs a restart.]'")
            continue
        settings.append({"group": group, "name": m.group(2), "flag": bool(m.group(1)), "arg": m.group(3),
                         "env": d.group(1), "key": plain(d.group(2)), "default": plain(d.group(3)),
                         "sighup": d.group(4), "line": at})
    return settings, extras


def one_sided(where, what, helped, manned, source="--help"):
    """Fail for each of helped the page lacks and each of manned the help lacks."""
    for x in helped:
        if x not in manned:
            fail(where, f"{what} {x} is in {source} but not in the page")
    for x in manned:
        if x not in helped:
            fail(where, f"{what} {x} is in the page but not in {source}")


def compare_settings(where, helped, extras, manned, man_extras, groups):
    names = [s["name"] for s in helped]
    mnames = [s["name"] for s in manned]
    one_sided(where, "setting", names, mnames)
    common = [n for n in names if n in mnames]
    if [n for n in mnames if n in names] != common:
        fail(where, f"the settings are not in the order of --help: {common}")
    by = {s["name"]: s for s in manned}
    for h in helped:
        m = by.get(h["name"])
        if not m:
            continue
        at = f"{where}:{m['line']}"
        for field in ("flag", "arg", "env", "default") + (("group",) if groups else ()):
            if h[field] != m[field]:
                fail(at, f"{h['name']}: {field} is {m[field]!r}, --help says {h[field]!r}")
        # The key is the name (an alias may follow: "api or api-addr"); --config has none.
        want = "none" if h["name"] == "config" else h["name"]
        if m["key"].split(" or ")[0] != want:
            fail(at, f"{h['name']}: config file key is {m['key']!r}, want {want!r}")
    one_sided(where, "option", extras, man_extras)


def compare_environment(where, lines, helped, more=()):
    """ENVIRONMENT names the variables of the help, those of the settings
    in lines "- Heading: *VAR*, ..." under their settings' headings."""
    envs = {s["env"]: s["group"] for s in helped}
    named = set()
    for at, line in lines:
        found = re.findall(r"\*(IDPOOL_[A-Z0-9_]+)\*", line)
        named |= set(found)
        m = re.match(r"^- (.+?): ", line)
        for v in found if m else ():
            if v in envs and envs[v] != m.group(1):
                fail(f"{where}:{at}", f"{v} is under {m.group(1)!r}, its setting under {envs[v]!r}")
    one_sided(f"{where}: ENVIRONMENT", "variable", sorted(set(envs) | set(more)), sorted(named), "the help")


def sighup_lists(root):
    """(applied, restart): the settings the SIGHUP paragraph of
    docs/operations.md says change at once, and need a restart."""
    ops = open(os.path.join(root, "docs", "operations.md"), encoding="utf-8").read()
    para = ops[ops.index("* On `SIGHUP`") :].split("\n\n", 1)[0].split("\n* ", 1)[0]
    at_once, rest = para.split("change at once", 1)
    restart = set(re.findall(r"`([a-z][a-z-]*)`", rest))
    if "the passwords" in rest:
        restart |= {"redis-password", "mysql-password"}
    return set(re.findall(r"`([a-z][a-z-]*)`", at_once)), restart


# ----------------------------------------------------------------- pages


def check_idpoold(root, idpoold):
    where = "docs/man/idpoold.8.scd"
    helped, extras = help_settings(run([idpoold, "--help"]))
    if len(helped) < 20:
        fail("idpoold --help", f"found only {[s['name'] for s in helped]}: the pattern is out of date")
    secs = sections(os.path.join(root, where))
    for s in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SIGNALS", "ENVIRONMENT", "FILES",
              "EXIT STATUS", "SEE ALSO"):
        if s not in secs:
            fail(where, f"no section {s}")
    manned, man_extras = man_settings(where, secs.get("OPTIONS", []))
    compare_settings(where, helped, extras, manned, man_extras, groups=True)
    compare_environment(where, secs.get("ENVIRONMENT", []), helped)
    applied, restart = sighup_lists(root)
    for m in manned:
        want = "applied" if m["name"] in applied else "needs a restart" if m["name"] in restart else None
        if m["sighup"] is None:
            fail(f"{where}:{m['line']}", f"{m['name']}: does not say what SIGHUP does with it")
        elif want is None and m["name"] != "config":
            fail("docs/operations.md", f"the SIGHUP paragraph does not name {m['name']}")
        elif want and m["sighup"] != want:
            fail(f"{where}:{m['line']}", f"{m['name']}: SIGHUP {m['sighup']}, docs/operations.md: {want}")
    return len(manned)


def man_commands(where, lines):
    """{command: (line, usage as it reads, options)} of COMMANDS: a term
    line "*apps add* _KEY_ ..." and the option terms "\t*--name* _TEXT_"
    that have a paragraph indented below them."""
    out, cur = {}, None
    for i, (at, line) in enumerate(lines):
        m = re.match(r"^\*([a-z]+(?: [a-z]+)?)\*", line)
        if m:
            cur = m.group(1)
            if cur in out:
                fail(f"{where}:{at}", f"command {cur} twice")
            out[cur] = (at, plain(line), set(re.findall(r"\*(--[a-z][a-z-]*)\*", line)))
            continue
        if line.startswith("#"):
            cur = None
            continue
        m = re.match(r"^\t\*(--[a-z][a-z-]*)\*(?: _\S+_)?$", line)
        nxt = lines[i + 1][1] if i + 1 < len(lines) else ""
        if m and cur and nxt.startswith("\t\t"):
            out[cur][2].add(m.group(1))
    return out


def check_idpoolctl(root, idpoolctl):
    where = "docs/man/idpoolctl.1.scd"
    top = run([idpoolctl, "--help"])
    helped, extras = help_settings(top)
    if len(helped) < 5:
        fail("idpoolctl --help", f"found only {[s['name'] for s in helped]}: the pattern is out of date")
    secs = sections(os.path.join(root, where))
    for s in ("NAME", "SYNOPSIS", "DESCRIPTION", "GLOBAL OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT",
              "SEE ALSO"):
        if s not in secs:
            fail(where, f"no section {s}")
    manned, man_extras = man_settings(where, secs.get("GLOBAL OPTIONS", []))
    compare_settings(where, helped, extras, manned, man_extras, groups=False)

    cmds = help_commands(top)
    if len(cmds) < 10:
        fail("idpoolctl --help", f"found only the commands {cmds}: the pattern is out of date")
    manned_cmds = man_commands(where, secs.get("COMMANDS", []))
    helps = ""
    for c in cmds:
        text = run([idpoolctl, "help"] + c.split())
        helps += text
        usage, opts = help_command(text)
        if c not in manned_cmds:
            continue
        at, musage, mopts = manned_cmds[c]
        if musage != usage:
            fail(f"{where}:{at}", f"{c}: the term reads {musage!r}, its help's usage {usage!r}")
        one_sided(f"{where}:{at}", f"{c}: option", sorted(opts), sorted(mopts), "its help")
    one_sided(where, "command", cmds, list(manned_cmds), "idpoolctl --help")
    # The variables idpoolctl reads besides its settings' (getenv() in
    # src/ctl/): each is named in a command's help, and in the page.
    envs = set()
    for f in sorted(os.listdir(os.path.join(root, "src", "ctl"))):
        with open(os.path.join(root, "src", "ctl", f), encoding="utf-8") as src:
            envs |= set(re.findall(r"\bgetenv\(\"([A-Z0-9_]+)\"\)", src.read()))
    for v in sorted(envs):
        if not re.search(rf"\b{v}\b", helps):
            fail("idpoolctl help", f"no command's help names {v}, which src/ctl/ reads")
    compare_environment(where, secs.get("ENVIRONMENT", []), helped, envs)

    codes = set(re.findall(r"\b([0-9]) (?:ok|error|usage)\b", top))
    man_codes = {m.group(1) for _, line in secs.get("EXIT STATUS", []) for m in [re.match(r"^\*([0-9]+)\*$", line)] if m}
    if not codes or codes != man_codes:
        fail(where, f"EXIT STATUS gives {sorted(man_codes)}, idpoolctl --help {sorted(codes)}")
    return len(manned), len(manned_cmds)


def check(root, idpoold, idpoolctl):
    n = check_idpoold(root, idpoold)
    g, c = check_idpoolctl(root, idpoolctl)
    if failures:
        sys.exit(1)
    print(f"idpoold.8: {n} settings; idpoolctl.1: {g} global settings, {c} commands: as --help has them")


def lint(pages):
    mandoc = shutil.which("mandoc")
    if not mandoc:
        print("SKIP: mandoc is not installed (scripts/packages-test.txt)")
        sys.exit(77)
    for page in pages:
        p = subprocess.run([mandoc, "-Tlint", "-W", "warning", page], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        # scdoc writes .P after each heading and item: the empty paragraphs mandoc skips.
        for line in p.stdout.splitlines():
            if "skipping paragraph macro" not in line:
                fail(os.path.basename(page), line)
    if failures:
        sys.exit(1)
    print(f"mandoc -Tlint: {len(pages)} pages clean")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "check":
        check(*sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "lint":
        lint(sys.argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
