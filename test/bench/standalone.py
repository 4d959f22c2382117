"""A section of the benchmark (api.py, client.py) run on its own, outside
bench.py: its command line, its binaries built, its own servers
(test/lib/harness.py, scripts/servers.sh), the ctx the section expects, and
everything stopped and removed at the end, failed or not.

    main(argv, name, doc, ints, bins, run, report, check=None)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))

import results  # noqa: E402
import harness  # noqa: E402


class Failed(Exception):
    """A section could not be measured; the message says why."""


class Standalone:
    """The ctx of a section for a run of its own: h (the harness), work (a
    scratch directory), out, children, measure, info, say, and one attribute
    per binary of bins ({attribute: (environment variable, ninja target)}):
    the path the variable names, else the target's in the build directory."""

    def __init__(self, name, out, build, bins):
        self.out = out
        self.work = tempfile.mkdtemp(prefix="idpool-bench-%s." % name, dir=os.environ.get("TMPDIR") or "/tmp")
        self.h = harness.Harness(self.work)
        self.children = []
        for attr, (var, target) in bins.items():
            setattr(self, attr, os.environ.get(var) or os.path.join(build, target))
        for f in ("measure.txt", "info.txt"):
            open(os.path.join(out, f), "w").close()

    def measure(self, name, value):
        results.write_measure(self.out, name, value)

    def info(self, key, value):
        results.write_info(self.out, key, value)

    def say(self, text):
        print("bench: " + text, flush=True)


def build_binaries(build, bins):
    """ninja the targets of bins not named by the environment; a missing
    build directory is set up as release first (as bench.py does)."""
    targets = [t for var, t in bins.values() if not os.environ.get(var)]
    if not os.path.isdir(build):
        subprocess.run(["meson", "setup", build, ROOT, "-Dbuildtype=release"], stdout=subprocess.DEVNULL,
                       check=True)
    if targets and subprocess.call(["ninja", "-C", build] + targets, stdout=subprocess.DEVNULL) != 0:
        raise Failed("building %s failed in %s" % (" ".join(targets), build))


def main(argv, name, doc, ints, bins, run, report, check=None):
    """The section NAME (test/bench/NAME.py) run on its own; returns the
    exit status. argv takes --OPT N for each OPT of ints ({OPT: default}),
    --build DIR, --out DIR and --no-pin; anything else prints doc. check()
    says why the section cannot run here (None: it can). run(ctx, options)
    measures, the servers up; report(out) writes results.md and returns the
    summary line, printed last."""
    o = dict(ints, pin=True, build=os.path.join(ROOT, "build"), out="")
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a.startswith("--") and a[2:] in ints and args:
            o[a[2:]] = int(args.pop(0))
        elif a in ("--build", "--out") and args:
            o[a[2:]] = args.pop(0)
        elif a == "--no-pin":
            o["pin"] = False
        else:
            sys.stderr.write(doc)
            return 0 if a in ("-h", "--help") else 64
    why = check() if check else None
    if why:
        sys.stderr.write("bench-%s: %s\n" % (name, why))
        return 1
    build = os.path.abspath(o["build"])
    out = os.path.realpath(o["out"] or os.path.join(
        ROOT, "bench-results", name + "-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())))
    os.makedirs(os.path.join(out, "raw"), exist_ok=True)
    ctx = Standalone(name, out, build, bins)
    try:
        build_binaries(build, bins)
        ctx.info("command", "python3 test/bench/%s.py %s" % (name, " ".join(argv[1:])))
        ctx.info("date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        ctx.info("machine", results.machine())
        with open("/proc/loadavg") as f:
            ctx.info("load_start", " ".join(f.read().split()[:3]))
        ctx.h.start_servers()
        run(ctx, o)
        with open("/proc/loadavg") as f:
            ctx.info("load_end", " ".join(f.read().split()[:3]))
        print(report(out), flush=True)
        return 0
    except (Failed, harness.HarnessError, subprocess.CalledProcessError) as e:
        sys.stderr.write("bench-%s: %s\n" % (name, e))
        return 1
    finally:
        for p in ctx.children:
            harness.stop_process(p, 5)
        ctx.h.stop_all(5)
        ctx.h.stop_servers()
        shutil.rmtree(ctx.work, ignore_errors=True)
