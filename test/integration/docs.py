"""The documentation as printed (issue 22 item 7): the code blocks of
README.md and docs/*.md.

    docs.py check ROOT IDPOOLD
        Without servers (meson test docs_static):
        * every fenced block says its language (```sh, ```text ...);
        * every block of commands, shell (sh, bash, shell, console) or
          Redis (redis), is run by `docs.py run` unless the line before it
          says why it cannot be:
              <!-- t_docs skips this block: REASON -->
          so a block added without that line is run, or this fails (such a
          line before a block that is never run is an error too);
        * docs/how-it-works.md names every function src/idpool.lua
          registers;
        * the SIGHUP paragraphs of docs/operations.md and
          deploy/idpoold.conf.example name every setting `idpoold --help`
          lists (each is applied at once or needs a restart).

    docs.py run ROOT WORKDIR
        Runs every command block not skipped, in document order (README.md,
        then docs/*.md by name), against the servers and the daemon
        test/integration/t_docs.sh sets up (its environment: PATH with
        idpoolctl first, IDPOOL_*, REDIS_PORT, TOKEN, API_PORT). Each block
        is read as printed, with only the example addresses of SUBSTITUTE
        replaced by the test's (each must still occur in the documents):
        * a shell block whose lines start with "$ " is a transcript: each
          "$ " line is a command (a trailing backslash continues it), the
          lines after it, up to the next "$ " line, its output. A command
          must exit 0, and print the lines shown, where any run of digits
          stands for any other (IDs, ports) and a token idp_... for any
          token (also one shown cut short as idp_ZZjo...);
        * another shell block is commands, a line each (a trailing
          backslash continues it), each of which must exit 0;
        * a Redis block is commands, a line each (after #: a comment), sent
          with redis-cli; each must answer something other than an error,
          nil or an empty array.
        Each command runs with bash in WORKDIR, at most 30 s.
        Every failure is printed (file:line, the command, what it said);
        the exit status is 1 if there was one.
"""
import os
import re
import subprocess
import sys

SHELL = {"sh", "bash", "shell", "console"}
REDIS = {"redis"}
SKIP = re.compile(r"^<!-- t_docs skips this block: (\S(?:.*\S)?) -->$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")

# The example addresses of the documents -> the test's, from the
# environment t_docs.sh exports. Each must occur somewhere: one the
# documents no longer use is taken out of this table.
SUBSTITUTE = [
    ("http://issuer:8080", "http://127.0.0.1:{API_PORT}"),  # an issuer
    ("127.0.0.1:9472", "127.0.0.1:{API_PORT}"),  # the ID API's example port
    ("redis://b:6379", "{IDPOOL_REDIS_URL}"),  # a second environment
    ("IDPOOL_TOKEN=...", 'IDPOOL_TOKEN="$TOKEN"'),  # a token in a command
]

failures = []


def fail(where, msg):
    failures.append(f"{where}: {msg}")
    print(f"FAIL: {where}: {msg}", file=sys.stderr)


def documents(root):
    docs = os.path.join(root, "docs")
    return [os.path.join(root, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md")
    )


def blocks(path):
    """The fenced blocks of a Markdown file: (line of the fence, language,
    lines, the skip reason or None)."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2).strip(), i
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.match(prev)
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^ {0,3}" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence), lines[i]):
            body.append(lines[i])
            i += 1
        out.append((start + 1, info.split()[0] if info else "", body, skip.group(1) if skip else None))
        i += 1
    return out


def logical_lines(body, first):
    """(line number, text) of each command: backslash continuations joined,
    blank lines dropped."""
    out, cur, at = [], None, 0
    for n, line in enumerate(body, first):
        if cur is None:
            cur, at = line, n
        else:
            cur += "\n" + line
        if line.endswith("\\"):
            continue
        if cur.strip():
            out.append((at, cur))
        cur = None
    if cur is not None and cur.strip():
        out.append((at, cur))
    return out


# ------------------------------------------------------------------ check


def check(root, idpoold):
    for path in documents(root):
        rel = os.path.relpath(path, root)
        for line, lang, _, skip in blocks(path):
            where = f"{rel}:{line}"
            if not lang:
                fail(where, "a code block without a language: label it (sh for commands, text for other text)")
            elif skip is not None and lang not in SHELL | REDIS:
                fail(where, f"a skip line before a {lang} block, which is never run: drop it")
    check_functions(root)
    check_sighup(root, idpoold)


def check_functions(root):
    lua = open(os.path.join(root, "src", "idpool.lua"), encoding="utf-8").read()
    names = re.findall(r"register_function\s*\(?\s*(?:'|\{\s*function_name\s*=\s*')(idpool_\w+)'", lua)
    if len(names) < 10:
        fail("src/idpool.lua", f"found only {names} registered: the pattern is out of date")
    text = open(os.path.join(root, "docs", "how-it-works.md"), encoding="utf-8").read()
    para = text[text.index("loads the Redis Function library") :].split("\n\n", 1)[0]
    for n in names:
        if f"`{n}`" not in para:
            fail("docs/how-it-works.md", f"the library's list does not name {n} (src/idpool.lua registers it)")


def check_sighup(root, idpoold):
    usage = subprocess.run([idpoold, "--help"], stdout=subprocess.PIPE, check=True, text=True).stdout
    settings = [s for s in re.findall(r"^  --([a-z][a-z-]*)", usage, re.M) if s != "config"]
    if len(settings) < 20:
        fail("idpoold --help", f"found only {settings}: the pattern is out of date")
    ops = open(os.path.join(root, "docs", "operations.md"), encoding="utf-8").read()
    ops = ops[ops.index("* On `SIGHUP`") :].split("\n\n", 1)[0].split("\n* ", 1)[0]
    conf = open(os.path.join(root, "deploy", "idpoold.conf.example"), encoding="utf-8").read()
    conf = conf[conf.index("# SIGHUP") :].split("\n#\n", 1)[0]
    for where, text in (("docs/operations.md", ops), ("deploy/idpoold.conf.example", conf)):
        words = set(re.findall(r"[a-z][a-z-]*[a-z]", text.replace("`", "")))
        for s in settings:
            if s not in words:
                fail(where, f"the SIGHUP paragraph does not say whether {s} changes at once or needs a restart")
        if "passwords" not in words:
            fail(where, "the SIGHUP paragraph does not say what a changed password needs")


# -------------------------------------------------------------------- run


def expected(line):
    """A documented output line as a regular expression: digits stand for
    any digits, idp_... for any token."""
    out, pos = "", 0
    for m in re.finditer(r"idp_[A-Za-z0-9_-]+(?:\.\.\.)?|[0-9]+", line):
        out += re.escape(line[pos : m.start()])
        out += "idp_[A-Za-z0-9_-]+" if m.group().startswith("idp_") else "[0-9]+"
        pos = m.end()
    return out + re.escape(line[pos:])


def substitute(cmd, used):
    for i, (old, new) in enumerate(SUBSTITUTE):
        if old in cmd:
            cmd = cmd.replace(old, new.format(**os.environ))
            used.add(i)
    return cmd


def shell(where, cmd, workdir):
    try:
        r = subprocess.run(
            ["bash", "-c", "set -o pipefail\n" + cmd],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        fail(where, f"{cmd!r} still running after 30 s")
        return None
    out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    if r.returncode != 0:
        fail(where, f"{cmd!r} exited {r.returncode}: {(err or out)[-1500:].strip()}")
        return None
    return out


def ok(where, cmd):
    print(f"ok: {where}: {cmd.splitlines()[0][:120]}")


def run_shell(where_file, first, body, workdir, used):
    transcript = any(line.startswith("$ ") for line in body)
    if not transcript:
        for n, cmd in logical_lines(body, first):
            if cmd.lstrip().startswith("#"):
                continue
            cmd = substitute(cmd, used)
            if shell(f"{where_file}:{n}", cmd, workdir) is not None:
                ok(f"{where_file}:{n}", cmd)
        return
    cmds = []  # [line, command, [output lines]]
    cont = False
    for n, line in enumerate(body, first):
        if cont:
            cmds[-1][1] += "\n" + line
        elif line.startswith("$ "):
            cmds.append([n, line[2:], []])
        elif cmds:
            cmds[-1][2].append(line)
        else:
            fail(f"{where_file}:{n}", "a transcript's first line is not a command ($ ...)")
        cont = (line.startswith("$ ") or cont) and line.endswith("\\")
    for n, cmd, want in cmds:
        where = f"{where_file}:{n}"
        cmd = substitute(cmd, used)
        out = shell(where, cmd, workdir)
        while want and not want[-1].strip():
            want.pop()
        if out is None:
            continue
        got = out.rstrip("\n").split("\n")
        if want and (len(got) != len(want) or not all(re.fullmatch(expected(w), g) for w, g in zip(want, got))):
            fail(where, f"{cmd!r} printed\n{out.rstrip()}\n  where the document shows\n" + "\n".join(want))
        else:
            ok(where, cmd + (f" (printed the {len(want)} line(s) shown)" if want else ""))


def run_redis(where_file, first, body):
    for n, line in enumerate(body, first):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{where_file}:{n}"
        r = subprocess.run(
            ["redis-cli", "--no-raw", "-h", "127.0.0.1", "-p", os.environ["REDIS_PORT"]] + words,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=30,
        )
        out = r.stdout.decode(errors="replace").strip()
        if r.returncode != 0 or out.startswith("(error)") or out in ("(nil)", "(empty array)", ""):
            fail(where, f"redis-cli {' '.join(words)} answered (status {r.returncode}): {out[:500]}")
        else:
            print(f"ok: {where}: {' '.join(words)}")


def run(root, workdir):
    used = set()
    ran = 0
    for path in documents(root):
        rel = os.path.relpath(path, root)
        for line, lang, body, skip in blocks(path):
            if skip is not None or lang not in SHELL | REDIS:
                continue
            ran += 1
            if lang in SHELL:
                run_shell(rel, line + 1, body, workdir, used)
            else:
                run_redis(rel, line + 1, body)
    for i, (old, _) in enumerate(SUBSTITUTE):
        if i not in used:
            fail("docs.py", f"no document uses {old!r} any more: take it out of SUBSTITUTE")
    print(f"{ran} blocks run, {len(failures)} failures")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: docs.py check ROOT IDPOOLD | docs.py run ROOT WORKDIR")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
