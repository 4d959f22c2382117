#!/usr/bin/env python3
"""idpool's benchmark: how close the real daemon comes to what one Redis can
do, measured side by side in one run on throwaway loopback servers.

  scripts/bench.sh [--quick] [--profile] [--build DIR] [--out DIR]
                   [--api-only | --no-api] [--client-only | --no-client]
  scripts/bench.sh --cluster [--quick] [--build DIR] [--out DIR]

  --quick      3 runs of short windows, ramp steps held 4 s (about 4 min on
               2 cores); the default is 5 runs of 10 s, steps held 10 s
  --build DIR  where idpoold and test/idpool-load are (default build/);
               a missing DIR is set up with -Dbuildtype=release; ninja runs
  --out DIR    results directory (default bench-results/<UTC timestamp>/)
  --profile    also profile (after the measured runs, not counted in them):
               perf sched of an idle and a refill latency window (how long
               redis-server and the clients waited for a CPU), Redis'
               command times and slow log in the refill window, the same
               two windows with the probe at SCHED_FIFO (chrt), perf record
               of redis-server and idpoold during an e2e hold, and
               callgrind of idpoold filling an empty pool; reports in
               profile/ of the results directory (needs perf: linux-perf)
  --api-only   only section 7 (the ID API against nginx): about 5 min
  --no-api     without section 7 (it is also left out, with a warning,
               when nginx or wrk is not installed)
  --client-only  only section 8 (the client libraries): about 6 min
  --no-client  without section 8
  --pin        also section 3b: redis-server alone on one CPU, everything
               else on the others (taskset), the latency client while a
               list is drained at half the ceiling without refill and the
               e2e pool at half the ceiling with refill, and at the
               sustained rate: p999_ratio_pinned, p999_refill_ratio
  --cluster    only the Redis Cluster section (test/bench/cluster.py), on
               a Cluster of three primaries with a replica each instead of
               the one Redis: the push+pop ceiling on all primaries at once
               and on one alone, the daemon refilling one application per
               primary on a rate ramp, CPU per process; 76 s with --quick
               here, about 5 min without (estimated)

Starts its own redis-server + mariadbd (scripts/servers.sh, AOF everysec)
and idpoold on 127.0.0.1 and measures:
  1. ceiling: RPUSH of pre-formatted IDs (1000 per command), LPOP from a
     prefilled list (batch 1 and 100), ceiling = 1 / (1/push + 1/pop100);
     idpoold's fenced push: how fast it fills an empty large pool;
  2. end to end: the daemon refilling one large pool while idpool-load
     drains it (LPOP 100) on a rate ramp; sustained = the highest step
     with zero empty pops; e2e_ratio = sustained / ceiling (goal >= 0.8);
  3. latency of single-ID LPOP at a fixed rate, idle vs. while another
     pool is drained and refilled; p999_ratio = refill / idle (<= 1.5);
     3b (--pin) the same with redis-server on a CPU of its own, and at
     half the ceiling: p999_refill_ratio = refilled / a drain without
     refill (goal <= 1.5), p999_ratio_pinned = refill / idle;
  4. scale: 10,000 idle applications (daemon CPU and RSS, goal < 5 % of a
     core); 1,000 applications drained at once (refill keeps up);
  5. MySQL writes (lease rows) per million IDs during the drain (<= 10);
  6. baselines: an INCRBY counter with the same batch size, raw LPOP;
  7. the ID API (idpoold --api) under wrk against nginx serving a body of
     the same size with 1 worker (test/bench/api.py): req/s, IDs/s,
     p50/p99/p99.9 while the pool is refilled; api_ratio = issuer req/s /
     nginx req/s (goal >= 0.7); needs nginx-light and wrk;
  8. the client libraries (test/bench/client.py): idpool_next() of
     libidpool against an in-process atomic_fetch_add counter, 1 and 2
     threads (client_ratio = next / atomic, goals >= 0.5 and >= 100M
     calls/s); its latency (p50 ... p99.9, max) and the calls that waited
     for Redis under sustained load, flat out and paced, while the pool is
     refilled; idpool_client's App.next() against next() on
     itertools.count() (needs python3-redis for that part).
Results: raw outputs, results.md (a table for BENCHMARKS.md), ramp.png and
latency.png in the results directory. The last line printed is
  bench: e2e_ratio=X p999_ratio=Y sustained_ids_per_s=Z ceiling_ids_per_s=W mysql_writes_per_million=V idle_cpu_pct=U
followed on the same line by api_rps=R api_ratio=A when section 7 ran,
client_ids_per_s=C client_ratio=Q when section 8 ran and
p999_ratio_pinned=P p999_refill_ratio=F with --pin (with --api-only:
"bench: api_rps=R api_ratio=A"; with --client-only: "bench:
client_ids_per_s=C client_ratio=Q"; with --cluster: the line of
test/bench/cluster.py).
Exit status: 0 measured (whether or not the goals hold), 1 error, 64 usage.
Environment: IDPOOLD, IDPOOL_LOAD (binaries; default from --build);
BENCH_RUNS, BENCH_WINDOW_S, BENCH_HOLD_S, BENCH_SCALE_APPS, BENCH_LOAD_APPS;
BENCH_HOG_RATE (IDs/s of the latency phase's drain; default the sustained rate);
IDPOOLCTL (section 7's token; default from --build), BENCH_API_CONNS (wrk's
connections, default 64), BENCH_API_PIN=0 (section 7 unpinned);
IDPOOL_CLIENTBENCH (section 8's tool; default from --build), IDPOOL_PYTHON
(its Python part's interpreter), BENCH_CLIENT_RATE (its paced windows'
IDs/s, default 500000), BENCH_CLIENT_PIN=0 (section 8 unpinned).

Orchestration in this file; numbers, plot data and results.md in
results.py; servers, applications and daemons through the test harness'
helpers (test/lib/harness.py, which calls scripts/servers.sh).
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
sys.path.insert(0, HERE)

import api  # noqa: E402
import results  # noqa: E402
import client  # noqa: E402
import cluster  # noqa: E402
import harness  # noqa: E402
from harness import cpu_pct, cpu_ticks, pool_key, meta_key, rss_mib  # noqa: E402

# ------------------------------------------------------------- profile ---

PROFILES = {  # RUNS WIN HOLD RAMP_STEP REFINE FENCED_POOL LOAD_WIN LAT_FLAT
    "quick": dict(runs=3, win=3, hold=4, ramp_step=0.15, refine=1, fenced_pool=3000000,
                  load_win=8, lat_flat=False),
    "default": dict(runs=5, win=10, hold=10, ramp_step=0.10, refine=2, fenced_pool=3000000,
                    load_win=10, lat_flat=True),
}
CEIL_CONNS = 4  # connections of the ceiling and baseline clients
CEIL_PIPELINE = 8  # requests in flight per connection there
E2E_CONNS = 4  # connections draining the end-to-end pool ...
E2E_PIPELINE = 8  # ... with this many requests in flight each (open loop)
E2E_POOL_S = 3  # end-to-end pool: this many seconds of the ceiling
E2E_MIN_PCT = 90  # ... refilled below this % (a refill is >= 0.3 s of demand,
#                   well inside the daemon's 1 s lock TTL)
E2E_STEP = 10000  # ... in steps of this many IDs
ID_BASE = 100000000000000000  # current_offset of the pushed applications: IDs
#                   of 18 digits, as long as the ceiling's (16..19 digits;
#                   Redis' cost per ID grows with its length)
RAMP_START = 0.30  # first ramp step, as a fraction of the ceiling
RAMP_MAX = 1.20  # the ramp never asks for more than this x ceiling
LAT_RATE = 5000  # single-ID LPOP requests/s of the latency client (one
LAT_PIPELINE = 64  # connection; sent on schedule even while replies are late)
HOG_CONNS = 4  # latency phase: connections draining the other list, one
#                request in flight each
SCALE_POOL = 1000  # the scale phase's applications: pool, step, min %
SCALE_STEP = 100
SCALE_MIN_PCT = 50
LOAD_COUNT = 20  # 1,000 apps under load: IDs per app per call ...
LOAD_INTERVAL = 0.1  # ... one call every this many seconds (200 IDs/s each,
#                      nominal); a window (load_win) lasts long enough for
#                      every pool to need several refills
LOAD_LIMIT = 120  # idpool-load is stopped this long after it started
WAIT_POLL = 0.05  # every wait polls this often

# Bench helpers inside Redis (not part of idpool): count the pools holding
# at least N IDs; pop COUNT IDs from each of N pools in one call.
SCALE_LUA = """#!lua name=idpool_bench
local function key(i) return string.format('idpool:{s%06d}:pool', i) end
redis.register_function('bench_full', function(_, a)
  local n, want, full = tonumber(a[1]), tonumber(a[2]), 0
  for i = 0, n - 1 do
    if redis.call('LLEN', key(i)) >= want then full = full + 1 end
  end
  return full
end)
redis.register_function('bench_popmany', function(_, a)
  local n, count, ids, empties, minlen = tonumber(a[1]), a[2], 0, 0, -1
  for i = 0, n - 1 do
    local r = redis.call('LPOP', key(i), count)
    if r then ids = ids + #r else empties = empties + 1 end
    local l = redis.call('LLEN', key(i))
    if minlen < 0 or l < minlen then minlen = l end
  end
  return {ids, empties, minlen}
end)"""


class Fatal(Exception):
    """bench: error: MESSAGE, exit 1."""


class Interrupted(Exception):
    """SIGINT or SIGTERM: exit 130."""


def say(*words):
    print("bench: " + " ".join(str(w) for w in words), flush=True)


def calc(x):
    """A number as awk's %.6g (rates handed to idpool-load, fractions)."""
    return "%.6g" % x


def calc0(x):
    return "%.0f" % x


def usage(status=64):
    sys.stderr.write(__doc__.split("\nOrchestration in")[0])
    sys.exit(status)


def parse_args(argv):
    o = dict(profile="default", prof=False, build=os.path.join(ROOT, "build"), out="", api="on", client="on",
             cluster=False, pin=False)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--quick":
            o["profile"] = "quick"
        elif a == "--profile":
            o["prof"] = True
        elif a == "--api-only":
            o["api"] = "only"
        elif a == "--no-api":
            o["api"] = "off"
        elif a == "--client-only":
            o["client"] = "only"
        elif a == "--no-client":
            o["client"] = "off"
        elif a == "--cluster":
            o["cluster"] = True
        elif a == "--pin":
            o["pin"] = True
        elif a in ("--build", "--out"):
            if i + 1 >= len(argv):
                usage()
            o[a[2:]] = argv[i + 1]
            i += 1
        elif a.startswith("--build=") or a.startswith("--out="):
            k, _, v = a[2:].partition("=")
            o[k] = v
        elif a in ("-h", "--help"):
            usage(0)
        else:
            sys.stderr.write("bench: unknown argument '%s'\n" % a)
            usage()
        i += 1
    if o["pin"] and (o["cluster"] or "only" in (o["api"], o["client"])):
        sys.stderr.write("bench: --pin adds a phase to the full run: not with --cluster, --api-only or "
                         "--client-only\n")
        usage()
    if o["cluster"] and (o["prof"] or "only" in (o["api"], o["client"])):
        sys.stderr.write("bench: --cluster runs the Cluster section alone: not with --profile, --api-only or "
                         "--client-only\n")
        usage()
    return o


def output(argv):
    """What argv prints on stdout (stderr discarded; "" if it cannot run)."""
    try:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return ""
    return r.stdout.decode(errors="replace")


def first_line_of(argv, pattern):
    """The first group of pattern in the output of argv, or None."""
    m = re.search(pattern, output(argv))
    return m.group(1) if m else None


class Bench:
    def __init__(self, opts):
        self.o = opts
        p = PROFILES[opts["profile"]]
        env = os.environ
        self.runs = int(env.get("BENCH_RUNS") or p["runs"])
        self.win = int(env.get("BENCH_WINDOW_S") or p["win"])
        self.hold = int(env.get("BENCH_HOLD_S") or p["hold"])
        self.ramp_inc = p["ramp_step"]
        self.refine = p["refine"]
        self.fenced_pool = p["fenced_pool"]
        self.load_win = p["load_win"]
        self.lat_flat = p["lat_flat"]
        self.scale_apps = int(env.get("BENCH_SCALE_APPS") or 10000)
        self.load_apps = int(env.get("BENCH_LOAD_APPS") or 1000)
        self.t_start = time.monotonic()
        self.children = []  # background Popens, stopped by cleanup
        self.h = None  # the harness (servers, daemons)
        self.d = None  # the daemon under test; one at a time
        self.work = None
        self.out = None
        self.e2e_ids = 0  # IDs drained from the e2e pool (MySQL writes per million)
        self.sampler = None  # the llen sampler running, if any

    # ------------------------------------------------------ helpers ---

    def die(self, msg):
        raise Fatal(msg)

    def measure(self, name, value):
        results.write_measure(self.out, name, value)

    def info(self, key, value):
        results.write_info(self.out, key, value)

    def raw(self, name):
        return os.path.join(self.out, "raw", name)

    def wait_until(self, limit, what, pred):
        if not harness.wait_until(limit, pred, WAIT_POLL):
            self.die("timed out after %s s waiting for %s" % (limit, what))

    def R(self, *args):
        return self.h.rcli(*args)

    def load_argv(self, args, binary=None, port=None):
        """idpool-load ARGS against the Redis on PORT (default: the
        harness' one; a cluster node's)."""
        return [binary or self.idpool_load, "--port", str(port or self.h.redis_port)] + [str(a) for a in args]

    def load(self, name, *args, binary=None, port=None):
        """idpool-load (bounded by LOAD_LIMIT), output in raw/NAME.txt;
        dies if it fails."""
        out = self.raw(name + ".txt")
        with open(out, "w") as f:
            rc = harness.run_bounded(self.load_argv(args, binary, port), LOAD_LIMIT,
                                     stdout=f, stderr=subprocess.STDOUT)
        if rc != 0:
            with open(out) as f:
                sys.stderr.write("".join(f.readlines()[-5:]))
            self.die("idpool-load %s failed (see %s)" % (" ".join(str(a) for a in args), out))

    def load_bg(self, name, *args, port=None):
        """idpool-load in the background, output in raw/NAME.txt; finish
        with load_wait."""
        with open(self.raw(name + ".txt"), "w") as f:
            p = subprocess.Popen(self.load_argv(args, port=port), stdout=f, stderr=subprocess.STDOUT)
        p.started = time.monotonic()
        self.children.append(p)
        return p

    def load_wait(self, p, what):
        try:
            rc = p.wait(max(0.0, LOAD_LIMIT - (time.monotonic() - p.started)))
        except subprocess.TimeoutExpired:
            rc = harness.stop_process(p, 5) or 124
        if rc != 0:
            self.die(what)

    def kv(self, name, field):
        """A field of idpool-load's summary line in raw/NAME.txt."""
        path = self.raw(name + ".txt")
        line = ""
        with open(path) as f:
            for ln in f:
                if ln.startswith("load:"):
                    line = ln
        for w in line.split():
            k, _, v = w.partition("=")
            if k == field and v:
                return v
        self.die("no %s= in %s" % (field, path))

    def kvi(self, name, field):
        return int(self.kv(name, field))

    def sampler_start(self, app, path, interval_ms=20):
        """An llen sampler of one pool in the background."""
        with open(self.raw("sampler.txt"), "a") as f:
            self.sampler = subprocess.Popen(
                self.load_argv(["--mode", "llen", "--key", pool_key(app), "--interval-ms",
                                interval_ms, "--duration", 3600, "--out", path]),
                stdout=f, stderr=subprocess.STDOUT)
        self.children.append(self.sampler)

    def sampler_stop(self):
        if self.sampler is not None:
            harness.stop_process(self.sampler, 5)
        self.sampler = None

    def llen(self, app, port=None):
        return self.h.llen(app, port=port)

    def pool_settled(self, app, low, port=None):
        """The pool holds >= low IDs and did not change in 300 ms (no
        refill in flight); asked of the Redis on port (a cluster node)."""
        a = self.llen(app, port)
        if a is None or a < low:
            return False
        time.sleep(0.3)
        return self.llen(app, port) == a

    def wait_settled(self, app, low, what="the e2e pool to refill", port=None):
        self.wait_until(120, what, lambda: self.pool_settled(app, low, port))

    def daemon_start(self, name, args=(), wrap=()):
        """The daemon under test, log in OUT/idpoold-NAME.log."""
        try:
            self.d = self.h.start_daemon(name, self.idpoold, os.path.join(self.out, "idpoold-%s.log" % name),
                                         args=args, http=True, wrap=wrap, log_level="warn",
                                         instance="bench-" + name)
        except harness.HarnessError as e:
            self.die(str(e))

    def daemon_stop(self):
        if self.d is not None:
            self.h.stop_daemon(self.d, 10)
        self.d = None

    def reload_until(self, served, app):
        """SIGHUP: the daemon re-reads the rows now; waits until it serves
        app (served) or no longer does."""
        self.d.signal(signal.SIGHUP)
        self.wait_until(20, "idpoold to see the change of %s" % app,
                        lambda: self.d.app_served(app) == served)

    def app_fenced(self, app, save):
        """The app's "fenced" counter from the daemon (its JSON saved)."""
        body = self.d.app_status(app, 5)
        with open(save, "w") as f:
            f.write(body or "")
        m = body and re.search(r'"fenced": *([0-9]*)', body)
        return m.group(1) if m and m.group(1) else None

    def cpu(self):
        """CPU ticks of the daemon and redis-server, and the time."""
        return cpu_ticks(self.d.pid), cpu_ticks(self.redis_pid), time.monotonic()

    # -------------------------------------------------------- setup ---

    def setup(self):
        tools = ["redis-cli", "redis-server", "mariadb", "gnuplot", "meson", "ninja"]
        for t in tools:
            if not shutil.which(t):
                self.die("%s not found (see scripts/packages.txt)" % t)
        if self.o["client"] == "only":
            self.o["api"] = "off"
        missing = api.tools_missing()
        if missing and self.o["api"] == "only":
            self.die("--api-only: %s not found (apt-get install nginx-light wrk)" % ", ".join(missing))
        if missing and self.o["api"] == "on":
            say("warning: %s not found: no section 7 (the ID API; apt-get install nginx-light wrk)"
                % ", ".join(missing))
            self.o["api"] = "off"
        if self.o["prof"]:
            if not shutil.which("perf"):
                self.die("--profile needs perf (apt-get install linux-perf)")
            if not shutil.which("valgrind"):
                self.die("--profile needs valgrind")
        build = os.path.abspath(self.o["build"])
        if not os.path.isdir(build):
            say("setting up %s (release)" % build)
            if subprocess.call(["meson", "setup", build, ROOT, "-Dbuildtype=release"],
                               stdout=subprocess.DEVNULL) != 0:
                self.die("meson setup failed in %s" % build)
        # IDPOOLD / IDPOOL_LOAD in the environment name the binaries instead.
        targets = [t for t, v in (("idpoold", "IDPOOLD"), ("test/idpool-load", "IDPOOL_LOAD"))
                   if not os.environ.get(v)]
        if targets and subprocess.call(["ninja", "-C", build] + targets, stdout=subprocess.DEVNULL) != 0:
            self.die("build failed in %s" % build)
        self.idpoold = os.environ.get("IDPOOLD") or os.path.join(build, "idpoold")
        self.idpool_load = os.environ.get("IDPOOL_LOAD") or os.path.join(build, "test", "idpool-load")
        if not (os.access(self.idpoold, os.X_OK) and os.access(self.idpool_load, os.X_OK)):
            self.die("idpoold or test/idpool-load missing in %s" % build)
        buildtype = None
        try:
            with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
                buildtype = next((x["value"] for x in json.load(f) if x.get("name") == "buildtype"), None)
        except (OSError, ValueError):
            pass

        out = self.o["out"] or os.path.join(ROOT, "bench-results",
                                            time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
        os.makedirs(os.path.join(out, "raw"), exist_ok=True)
        self.out = os.path.realpath(out)
        for f in ("measure.txt", "info.txt"):
            open(os.path.join(self.out, f), "w").close()
        self.tee_start()
        self.work = tempfile.mkdtemp(prefix="idpool-bench.", dir=os.environ.get("TMPDIR") or "/tmp")
        self.h = harness.Harness(self.work)

        machine = results.machine()
        redis_v = first_line_of(["redis-server", "--version"], r" v=(\S+)")
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        maria_v = first_line_of([mariadbd, "--version"], r" Ver ([^ -]+)")
        commit = first_line_of(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], r"(\S+)") or "?"
        dirty = first_line_of(["git", "-C", ROOT, "status", "--porcelain", "--", "src", "include"], r"(\S)")
        versions = ("Redis %s (AOF everysec), MariaDB %s, idpool %s%s, build %s. Clients, Redis, "
                    "MariaDB and idpoold share the machine." % (redis_v, maria_v, commit,
                                                                " (src modified)" if dirty else "",
                                                                buildtype or "?"))
        with open("/proc/loadavg") as f:
            load_start = " ".join(f.read().split()[:3])
        quick = self.o["profile"] == "quick"
        say("profile %s: %d runs, %d s windows, ramp steps held %d s; results in %s"
            % (self.o["profile"], self.runs, self.win, self.hold, self.out))
        say("machine: " + machine)
        say("load average at start: %s (other work on the machine skews every number)" % load_start)
        self.info("load_start", load_start)
        say("versions: " + versions)
        self.info("profile", self.o["profile"])
        self.info("command", "scripts/bench.sh" + (" --quick" if quick else "")
                  + (" --cluster" if self.o["cluster"] else
                     ({"only": " --api-only", "off": " --no-api"}.get(self.o["api"], "")
                      if self.o["client"] != "only" else "")
                     + {"only": " --client-only", "off": " --no-client"}.get(self.o["client"], "")))
        self.info("machine", machine)
        self.info("versions", versions)
        self.info("date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        self.info("runs", self.runs)
        self.info("window_s", self.win)
        self.info("hold_s", self.hold)
        self.info("ceil_conns", CEIL_CONNS)
        self.info("ceil_pipeline", CEIL_PIPELINE)
        if quick:
            self.info("hold_note", " (--quick: shorter than the 10 s of the full run)")
            self.info("note", "--quick profile: short windows and ramp steps held only %d s; run "
                      "without --quick for numbers to publish." % self.hold)

        try:
            self.h.start_servers(out=self.raw("servers.txt"), cluster=self.o["cluster"])
        except harness.HarnessError:
            with open(self.raw("servers.txt")) as f:
                sys.stderr.write(f.read())
            self.die("servers did not start")
        if self.o["cluster"]:
            say("servers up: a Redis Cluster (node1..node6 on 127.0.0.1:%s), mariadb 127.0.0.1:%d"
                % (",".join(self.h.env["NODE%d_PORT" % n] for n in range(1, 7)), self.h.mysql_port))
            return
        self.redis_pid = self.h.redis_pid()
        # An AOF rewrite (a fork copying the whole data set) in the middle
        # of a window would measure the fork, not idpool: rewrites are off.
        self.R("CONFIG", "SET", "auto-aof-rewrite-percentage", 0)
        say("servers up: redis 127.0.0.1:%d, mariadb 127.0.0.1:%d" % (self.h.redis_port, self.h.mysql_port))

    def tee_start(self):
        """Everything from here on (ours and the children's stdout and
        stderr) also goes to OUT/bench.log; tee ignores SIGINT and SIGTERM,
        so the last lines of an interrupted run reach the log."""
        sys.stdout.flush()
        sys.stderr.flush()

        def ignore():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        self.tee = subprocess.Popen(["tee", os.path.join(self.out, "bench.log")],
                                    stdin=subprocess.PIPE, preexec_fn=ignore)
        os.dup2(self.tee.stdin.fileno(), 1)
        os.dup2(self.tee.stdin.fileno(), 2)
        self.tee.stdin.close()
        sys.stdout.reconfigure(line_buffering=True)
        sys.stderr.reconfigure(line_buffering=True)

    def tee_stop(self):
        if getattr(self, "tee", None) is None:
            return
        sys.stdout.flush()
        sys.stderr.flush()
        os.close(1)
        os.close(2)
        try:
            self.tee.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def cleanup(self, failed):
        """Stops every child still running, the servers, removes WORK."""
        for p in self.children:
            harness.stop_process(p, 5)
        if self.h is not None:
            self.h.stop_all(5)
            self.h.stop_servers()
        if self.work:
            shutil.rmtree(self.work, ignore_errors=True)

    # ------------------------------------------- 1. ceiling, baselines

    def ceiling(self):
        say("1. ceiling: RPUSH 1000 IDs/command (shaped as the daemon's; random 16..19 digits for "
            "comparison), LPOP batch 1 and 100, INCRBY; %d connections, "
            "pipeline %d" % (CEIL_CONNS, CEIL_PIPELINE))
        ck, cc = "bench:{ceiling}:list", "bench:{ceiling}:counter"
        c_args = ["--conns", CEIL_CONNS, "--pipeline", CEIL_PIPELINE]
        self.c_args = c_args
        for run in range(1, self.runs + 1):
            self.R("UNLINK", ck, cc)
            # IDs of 16..19 random digits, for comparison with earlier runs ...
            self.load("push-random.%d" % run, "--mode", "rpush", "--key", ck, "--batch", 1000, *c_args,
                      "--duration", self.win)
            self.measure("ceiling.push_random", self.kv("push-random.%d" % run, "ids_per_s"))
            self.R("UNLINK", ck)
            # ... and the ceiling: IDs shaped as the daemon's of the e2e application
            # (18 digits, consecutive: increment_max 1 from ID_BASE), what the pops then read
            self.load("push.%d" % run, "--mode", "rpush", "--key", ck, "--batch", 1000, *c_args,
                      "--push-base", ID_BASE, "--duration", self.win)
            push = self.kv("push.%d" % run, "ids_per_s")
            have = int(self.R("LLEN", ck))
            # Pops stop at a count below what the list holds, so none finds it empty.
            self.load("pop1.%d" % run, "--mode", "lpop", "--key", ck, "--batch", 1, *c_args,
                      "--duration", self.win, "--count", have // 4)
            have = int(self.R("LLEN", ck))
            self.load("pop100.%d" % run, "--mode", "lpop", "--key", ck, "--batch", 100, *c_args,
                      "--duration", self.win, "--count", have - have // 10)
            self.R("UNLINK", ck)
            self.load("incrby1.%d" % run, "--mode", "incrby", "--key", cc, "--batch", 1, *c_args,
                      "--duration", self.win)
            self.load("incrby100.%d" % run, "--mode", "incrby", "--key", cc, "--batch", 100, *c_args,
                      "--duration", self.win)
            pop1 = self.kv("pop1.%d" % run, "ids_per_s")
            pop100 = self.kv("pop100.%d" % run, "ids_per_s")
            for n in ("pop1", "pop100"):
                e = self.kvi("%s.%d" % (n, run), "empties")
                if e != 0:
                    say("warning: %d empty pops in the %s ceiling run %d (list ran dry)" % (e, n, run))
            comb = calc0(1 / (1 / float(push) + 1 / float(pop100)))
            i1, i100 = self.kv("incrby1.%d" % run, "ids_per_s"), self.kv("incrby100.%d" % run, "ids_per_s")
            self.measure("ceiling.push", push)
            self.measure("ceiling.pop1", pop1)
            self.measure("ceiling.pop100", pop100)
            self.measure("ceiling.combined", comb)
            self.measure("base.incrby1", i1)
            self.measure("base.incrby100", i100)
            say("  run %d: push %s, pop1 %s, pop100 %s -> ceiling %s IDs/s; INCRBY 1 %s, INCRBY 100 %s IDs/s"
                % (run, push, pop1, pop100, comb, i1, i100))
        self.R("UNLINK", ck, cc)
        med = results.median_of(os.path.join(self.out, "measure.txt"), "ceiling.combined")
        self.ceiling_ids = int(float("%.2f" % med[0]))

    # ---------------------------------------- 1b. the fenced push path

    def fenced(self):
        pool = self.fenced_pool
        say("1b. idpoold's fenced push: fill of an empty %d-ID pool" % pool)
        self.info("fenced_pool", pool)
        self.daemon_start("main")
        for run in range(1, self.runs + 1):
            app = "fenced%d" % run
            self.h.add_app(app, step=1000, max_pool_size=pool, min_size_percent=80,
                           max_size_per_second=100000000, max_size_per_times=1000, current_offset=ID_BASE)
            llen_file = self.raw("fenced.%d.llen" % run)
            self.sampler_start(app, llen_file, 10)
            self.d.signal(signal.SIGHUP)
            # Filled: above low water and no longer growing (a refill fenced
            # off midway leaves it short of full until the pool next drops
            # below low water).
            self.wait_settled(app, pool * 80 // 100, "the %s pool to fill" % app)
            self.sampler_stop()
            have = self.llen(app)
            fenced = self.app_fenced(app, self.raw("fenced.%d.json" % run))
            fr = results.fillrate(llen_file, have)
            if fr is None:
                self.die("no fill rate from %s" % llen_file)
            rate, ms = calc0(fr[0]), calc0(fr[1])
            self.measure("fenced.fill", rate)
            self.measure("fenced.fenced_off", fenced or 0)
            say("  run %d: %d IDs in %s ms = %s IDs/s%s" % (run, have, ms, rate,
                                                           "; pushes fenced off: %s" % fenced if fenced else ""))
            self.h.set_app(app, deleted_at=1)
            self.reload_until(False, app)
            self.R("UNLINK", pool_key(app), meta_key(app))

    # ------------------------------------------------ 2. end to end

    def ramp_step(self, target):
        """Holds target IDs/s for HOLD s; True if held: zero empty pops,
        97 % of the target reached, and the pool kept up (its lowest point
        in the last third of the step no more than 5 % of the pool below its
        lowest point in the first third; a pool of several seconds of demand
        could otherwise hide a refill falling behind)."""
        self.step_n += 1
        name = "ramp.%d" % self.step_n
        start = time.monotonic_ns()
        timeline = self.raw(name + ".timeline")
        self.load(name, "--mode", "lpop", "--key", pool_key("e2e"), "--batch", 100, "--conns", E2E_CONNS,
                  "--pipeline", E2E_PIPELINE, "--rate", calc(target / 100), "--duration", self.hold,
                  "--timeline", timeline)
        end = time.monotonic_ns()
        with open(self.raw("ramp.steps"), "a") as f:
            f.write("%d %d %s\n" % (start, target, timeline))
        got = self.kv(name, "ids_per_s")
        e = self.kvi(name, "empties")
        self.e2e_ids += self.kvi(name, "ids")
        first, last = results.pool_lows(self.raw("ramp.llen"), start, end)
        with open(os.path.join(self.out, "ramp.txt"), "a") as f:
            f.write("%d %s %d %d %d\n" % (target, got, e, first, last))
        why = results.step_faults(target, float(got), e, [(first, last)], self.e2e_pool)
        say("  step %d: target %d IDs/s -> %s IDs/s, %d empty pops, pool low %d -> %d%s"
            % (self.step_n, target, got, e, first, last, " -> not held (%s)" % ", ".join(why) if why else ""))
        return not why

    def ramp_search(self, ceiling, held, settle):
        """The ramp of an end-to-end phase: held(target) holds target IDs/s
        for a step and says whether it was held; from RAMP_START x ceiling
        up in steps of ramp_inc to RAMP_MAX x ceiling, until a step is not
        held; then bisects refine times between the last step held and that
        one, each try after settle() (the pools full again). Returns the
        highest rate held (0: none)."""
        good, bad = 0, None
        frac = RAMP_START
        while frac <= RAMP_MAX + 1e-9:
            target = int(calc0(frac * ceiling))
            if held(target):
                good = target
            else:
                bad = target
                break
            frac = float(calc(frac + self.ramp_inc))
        if bad is not None:
            for _ in range(self.refine):
                settle()
                try_ = int(calc0((good + bad) / 2))
                if held(try_):
                    good = try_
                else:
                    bad = try_
        return good

    def e2e(self):
        pool = (self.ceiling_ids * E2E_POOL_S // E2E_STEP + 1) * E2E_STEP
        pool = min(max(pool, 1000000), 50000000)
        self.e2e_pool = pool
        self.e2e_low = pool * E2E_MIN_PCT // 100
        say("2. end to end: pool of %d IDs (step %d, IDs from %d, refilled below %d %%), LPOP 100 on %d "
            "connections, ramp from %s x ceiling in steps of %s, each held %d s"
            % (pool, E2E_STEP, ID_BASE, E2E_MIN_PCT, E2E_CONNS, "%.2f" % RAMP_START, "%.2f" % self.ramp_inc,
               self.hold))
        if self.hold < 10:
            say("  (--quick: steps held %d s, not the 10 s of the full run)" % self.hold)
        self.info("e2e_pool", pool)
        self.info("e2e_step", E2E_STEP)
        self.info("e2e_min_pct", E2E_MIN_PCT)
        self.info("e2e_conns", E2E_CONNS)
        self.info("e2e_pipeline", E2E_PIPELINE)
        self.h.add_app("e2e", step=E2E_STEP, max_pool_size=pool, min_size_percent=E2E_MIN_PCT,
                       max_size_per_second=100000000, max_size_per_times=1000, current_offset=ID_BASE)
        self.reload_until(True, "e2e")
        self.wait_settled("e2e", self.e2e_low, "the e2e pool to fill")
        self.leases0 = self.h.leases_of("e2e")
        self.e2e_ids = 0

        t0 = time.monotonic_ns()
        self.sampler_start("e2e", self.raw("ramp.llen"), 20)
        open(os.path.join(self.out, "ramp.txt"), "w").close()
        open(self.raw("ramp.steps"), "w").close()
        self.step_n = 0
        sustained = self.sustained = self.ramp_search(self.ceiling_ids, self.ramp_step,
                                                      lambda: self.wait_settled("e2e", self.e2e_low))
        self.measure("e2e.sustained", sustained)
        say("  sustained: %d IDs/s held for %d s (ceiling %d) -> e2e_ratio %.2f"
            % (sustained, self.hold, self.ceiling_ids, sustained / self.ceiling_ids))

        # Confirmation: the sustained rate, held RUNS more times, with CPU readings.
        if sustained > 0:
            for run in range(1, self.runs + 1):
                self.wait_settled("e2e", self.e2e_low)
                d0, r0, u0 = self.cpu()
                name = "confirm.%d" % run
                with open(self.raw("ramp.steps"), "a") as f:
                    f.write("%d %d %s\n" % (time.monotonic_ns(), sustained, self.raw(name + ".timeline")))
                self.load(name, "--mode", "lpop", "--key", pool_key("e2e"), "--batch", 100,
                          "--conns", E2E_CONNS, "--pipeline", E2E_PIPELINE, "--rate", calc(sustained / 100),
                          "--duration", self.hold, "--timeline", self.raw(name + ".timeline"))
                d1, r1, u1 = self.cpu()
                dc, rc = "%.2f" % cpu_pct(d0, d1, u1 - u0), "%.2f" % cpu_pct(r0, r1, u1 - u0)
                self.e2e_ids += self.kvi(name, "ids")
                self.measure("e2e.confirm", self.kv(name, "ids_per_s"))
                self.measure("e2e.confirm_empties", self.kv(name, "empties"))
                self.measure("e2e.daemon_cpu_pct", dc)
                self.measure("e2e.redis_cpu_pct", rc)
                self.measure("e2e.client_cpu_pct", "%.2f" % (float(self.kv(name, "cpu_ms")) / 10
                                                             / float(self.kv(name, "secs"))))
                say("  confirm %d: %s IDs/s, %s empty pops; CPU idpoold %s %%, redis %s %%"
                    % (run, self.kv(name, "ids_per_s"), self.kv(name, "empties"), dc, rc))
        self.sampler_stop()
        results.ramp(self.out, t0, self.raw("ramp.llen"), self.raw("ramp.steps"))

    # -------------------------------------------- 3. latency under refill

    def latency(self):
        hog_rate = int(os.environ.get("BENCH_HOG_RATE") or self.sustained)
        if hog_rate <= 0:
            hog_rate = int(calc0(self.ceiling_ids * RAMP_START))
        self.hog_rate = hog_rate
        say("3. latency: LPOP (1 ID) at %d/s, open loop, %d s windows: idle; another list drained at %d "
            "IDs/s without refill; the e2e pool drained at that rate and refilled%s"
            % (LAT_RATE, self.win, hog_rate, "; drained flat out" if self.lat_flat else ""))
        if not self.lat_flat:
            say("  (--quick: no 'drained flat out' condition)")
        self.info("lat_rate", LAT_RATE)
        self.info("lat_pipeline", LAT_PIPELINE)
        self.info("lat_hog_rate", hog_rate)
        self.info("e2e_sustained", self.sustained)
        self.info("hog_conns", HOG_CONNS)
        # The latency client pops from a plain list that nothing refills,
        # prefilled with what all its windows need (and a margin).
        lat_key, hog_key = "bench:{lat}:list", "bench:{drain}:list"
        self.load("lat-fill", "--mode", "rpush", "--key", lat_key, "--batch", 1000, "--conns", 1,
                  "--pipeline", 8, "--count", LAT_RATE * (self.win + 2) * 4 * self.runs * 5 // 4,
                  "--duration", 60)
        self.lat_args = ["--mode", "lpop", "--key", lat_key, "--batch", 1, "--pipeline", LAT_PIPELINE,
                         "--rate", LAT_RATE, "--duration", self.win]

        self.hog_key = hog_key
        for run in range(1, self.runs + 1):
            self.lat_idle("idle", run)
            self.lat_drain("drain", run, hog_rate)
            self.lat_refill("refill", run, hog_rate)
            if self.lat_flat:
                self.wait_settled("e2e", self.e2e_low)
                self.lat_during("flat", run, pool_key("e2e"))
        for cond in ("idle", "drain", "refill", "flat"):
            results.ccdf(os.path.join(self.out, "lat-%s.ccdf" % cond),
                          sorted(glob.glob(self.raw("lat.%s.*.hist" % cond))))
        if self.o["pin"]:
            self.latency_pinned(hog_rate)
        leases1 = self.h.leases_of("e2e")
        fenced = self.app_fenced("e2e", self.raw("e2e-app.json"))
        self.measure("e2e.fenced_off", fenced or 0)
        self.measure("mysql.leases", leases1 - self.leases0)
        self.measure("mysql.ids", self.e2e_ids)
        say("5. MySQL: %d lease reservations for %d IDs drained from e2e = %s per million"
            % (leases1 - self.leases0, self.e2e_ids,
               calc((leases1 - self.leases0) * 1e6 / self.e2e_ids) if self.e2e_ids else "n/a"))

    def lat_record(self, cond, run, extra=""):
        n = "lat.%s.%d" % (cond, run)
        for f in ("p50_us", "p99_us", "p999_us", "max_us"):
            self.measure("lat.%s.%s" % (cond, f), self.kv(n, f))
        if self.kvi(n, "empties") != 0:
            say("warning: the latency list ran dry in " + n)
        say("  run %d %s: p50 %s p99 %s p99.9 %s µs%s" % (run, cond, self.kv(n, "p50_us"),
                                                         self.kv(n, "p99_us"), self.kv(n, "p999_us"), extra))

    def lat_during(self, cond, run, key, *drain):
        """The latency window while key is drained (one request in flight
        per connection, like application servers)."""
        hog_name = "hog.%s.%d" % (cond, run)
        hog = self.load_bg(hog_name, "--mode", "lpop", "--key", key, "--batch", 100,
                           "--conns", HOG_CONNS, *drain, "--duration", self.win + 1)
        time.sleep(0.5)
        lat = "lat.%s.%d" % (cond, run)
        self.load(lat, *self.lat_args, "--hist", self.raw(lat + ".hist"))
        self.load_wait(hog, "the drain of %s failed (see %s)" % (key, self.raw(hog_name + ".txt")))
        if key == pool_key("e2e"):
            self.e2e_ids += self.kvi(hog_name, "ids")
        self.measure("lat.%s.drain_ids_per_s" % cond, self.kv(hog_name, "ids_per_s"))
        self.lat_record(cond, run, " (drain: %s IDs/s, %s empty pops)" % (self.kv(hog_name, "ids_per_s"),
                                                                         self.kv(hog_name, "empties")))

    def lat_idle(self, cond, run):
        """No refill running anywhere (the e2e pool settled above low water)."""
        self.wait_settled("e2e", self.e2e_low)
        self.load("lat.%s.%d" % (cond, run), *self.lat_args,
                  "--hist", self.raw("lat.%s.%d.hist" % (cond, run)))
        self.lat_record(cond, run)

    def lat_drain(self, cond, run, rate):
        """The drain at rate IDs/s from a prefilled list that nothing refills."""
        self.load("drain-fill.%s.%d" % (cond, run), "--mode", "rpush", "--key", self.hog_key,
                  "--batch", 1000, "--push-base", ID_BASE, *self.c_args,
                  "--count", calc0(rate * (self.win + 1) * 1.2 / 1000 * 1000), "--duration", 120)
        self.lat_during(cond, run, self.hog_key, "--rate", calc(rate / 100))
        self.R("UNLINK", self.hog_key)

    def lat_refill(self, cond, run, rate):
        """The same drain of the e2e pool, which idpoold refills."""
        self.wait_settled("e2e", self.e2e_low)
        self.lat_during(cond, run, pool_key("e2e"), "--rate", calc(rate / 100))

    # ------------------------------------ 3b. latency pinned (--pin)

    def pin(self, cpus_redis, cpus_rest):
        """redis-server's threads on cpus_redis; mariadbd, idpoold, this
        process and what it starts from now on (the load generators) on
        cpus_rest. None, None: every CPU again."""
        # every CPU this process had before the first pin (its own affinity is
        # the pinned set by the time the pins are undone)
        if not hasattr(self, "cpus_before_pin"):
            self.cpus_before_pin = sorted(os.sched_getaffinity(0))
        every = self.cpus_before_pin
        redis = self.h.redis_pid()
        others = [self.d.pid]
        for f in glob.glob(os.path.join(self.h.dir, "*.pid")):
            if os.path.basename(f) != "redis.pid":
                with open(f) as fh:
                    others.append(int(fh.read().split()[0]))

        def cpus(c):
            return ",".join(str(x) for x in (c or every))

        for pid, c in [(redis, cpus_redis)] + [(p, cpus_rest) for p in others]:
            if subprocess.call(["taskset", "-a", "-p", "-c", cpus(c), str(pid)],
                               stdout=subprocess.DEVNULL) != 0:
                self.die("taskset -a -p -c %s %d failed" % (cpus(c), pid))
        os.sched_setaffinity(0, set(cpus_rest or every))

    def latency_pinned(self, hog_rate):
        """--pin: Redis alone on one CPU, everything else on the others (as in
        production, where Redis has its own core); the latency client at
        half the ceiling's drain, with and without refill, and at the
        sustained rate refilled (p999_ratio as above, pinned)."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            say("3b. --pin: needs 2 CPUs, this process may use %d: skipped" % len(cpus))
            return
        half = int(calc0(self.ceiling_ids / 2))
        self.info("pin_redis_cpu", cpus[0])
        self.info("pin_rest_cpus", ",".join(str(c) for c in cpus[1:]))
        self.info("pin_half_rate", half)
        say("3b. latency pinned: redis-server on CPU %d, everything else on %s; the drain at half "
            "the ceiling (%d IDs/s) without and with refill, and at %d IDs/s refilled"
            % (cpus[0], ",".join(str(c) for c in cpus[1:]), half, hog_rate))
        self.pin([cpus[0]], cpus[1:])
        try:
            for run in range(1, self.runs + 1):
                self.lat_idle("pin_idle", run)
                self.lat_drain("pin_drain", run, half)
                self.lat_refill("pin_refill", run, half)
                self.lat_refill("pin_sustained", run, hog_rate)
        finally:
            self.pin(None, None)
        for cond in ("pin_idle", "pin_drain", "pin_refill", "pin_sustained"):
            results.ccdf(os.path.join(self.out, "lat-%s.ccdf" % cond),
                          sorted(glob.glob(self.raw("lat.%s.*.hist" % cond))))

    # ----------------------------------------- profiles (--profile only)

    @staticmethod
    def sched_delays(data):
        """Per task kind, how long its wakeups waited for a CPU (perf sched
        timehist's "sch delay"): count, p50, p99, p99.9, max, sum (ms)."""
        d = {}
        for line in output(["perf", "sched", "timehist", "-i", data]).splitlines():
            f = line.split()
            if (len(f) >= 5 and re.match(r"(redis-server|idpoold|idpool-load|idpool-lat)\[", f[2])
                    and re.fullmatch(r"[0-9.]+", f[4])):
                d.setdefault(f[2].split("[")[0], []).append(float(f[4]))
        lines = []
        for t, v in d.items():
            v.sort()
            m = len(v)
            lines.append("%-13s wakeups %7d  sch delay ms: p50 %.3f p99 %.3f p99.9 %.3f max %.3f sum %.1f"
                         % (t, m, v[int(m * 0.5)], v[int(m * 0.99)], v[int(m * 0.999)], v[-1], sum(v)))
        return sorted(lines)

    def prof_window(self, cond, probe):
        """One latency window (idle*: nothing else runs; refill*: the e2e
        pool drained at HOG_RATE and refilled) with the probe binary probe;
        the plain windows under perf sched, the refill ones with Redis'
        command times and slow log."""
        pd = self.pd
        self.wait_settled("e2e", self.e2e_low)
        perf = None
        if probe == self.probe_lat:
            data = os.path.join(pd, "sched-%s.data" % cond)
            with open(os.path.join(pd, "sched-%s.log" % cond), "w") as f:
                perf = subprocess.Popen(["perf", "sched", "record", "-o", data, "--", "sleep", str(self.win + 1)],
                                        stdout=f, stderr=subprocess.STDOUT)
            self.children.append(perf)
            time.sleep(0.5)
        self.R("CONFIG", "RESETSTAT")
        self.R("SLOWLOG", "RESET")
        hog = None
        if cond.startswith("refill"):
            hog = self.load_bg("prof.hog." + cond, "--mode", "lpop", "--key", pool_key("e2e"), "--batch", 100,
                               "--conns", HOG_CONNS, "--rate", calc(self.hog_rate / 100), "--duration", self.win)
        name = "prof.lat." + cond
        self.load(name, *self.lat_args, binary=probe)
        if hog is not None:
            self.load_wait(hog, "the drain of e2e failed (see %s)" % self.raw("prof.hog.%s.txt" % cond))
        say("  %s: LPOP p50 %s p99 %s p99.9 %s µs" % (cond, self.kv(name, "p50_us"), self.kv(name, "p99_us"),
                                                     self.kv(name, "p999_us")))
        if cond.startswith("refill"):
            stats = self.R("INFO", "commandstats").replace("\r", "")
            with open(os.path.join(pd, "redis-%s.txt" % cond), "w") as f:
                f.write(stats + "\nslowlog (> 500 µs):\n" + self.R("SLOWLOG", "GET", 20) + "\n")
            per_call = [m.group(1) + " " + m.group(2) for m in re.finditer(
                r"^cmdstat_(exec|rpush|lpop|fcall):.*usec_per_call=([0-9.]*)", stats, re.M)]
            say("    Redis, µs per call: %s; commands over 500 µs: %s" % (", ".join(per_call),
                                                                        self.R("SLOWLOG", "LEN")))
        if perf is not None:
            if perf.wait() != 0:
                self.die("perf sched record failed (see %s)" % os.path.join(pd, "sched-%s.log" % cond))
            delays = self.sched_delays(data)
            lat = output(["perf", "sched", "latency", "-i", data, "--sort", "max"])
            with open(os.path.join(pd, "sched-%s.txt" % cond), "w") as f:
                f.write("".join(ln + "\n" for ln in delays + lat.splitlines()[:20]))
            say("    waiting for a CPU (idpool-lat: this probe, idpool-load: the drain):")
            for ln in delays:
                say("    " + ln)
            os.remove(data)

    def profile_windows(self):
        pd = self.pd = os.path.join(self.out, "profile")
        os.makedirs(pd, exist_ok=True)
        # the latency client under a name of its own (perf sched tells tasks by name)
        self.probe_lat = os.path.join(self.work, "idpool-lat")
        os.symlink(self.idpool_load, self.probe_lat)
        # the same probe at SCHED_FIFO priority: its own wait for a CPU taken out
        fifo = os.path.join(self.work, "idpool-lat-fifo")
        with open(fifo, "w") as f:
            f.write('#!/bin/sh\nexec chrt -f 10 "%s" "$@"\n' % self.idpool_load)
        os.chmod(fifo, 0o755)
        say("profile: latency windows (not measured above): idle and refill under perf sched; the same with "
            "the probe at SCHED_FIFO")
        self.R("CONFIG", "SET", "slowlog-log-slower-than", 500)
        self.prof_window("idle", self.probe_lat)
        self.prof_window("refill", self.probe_lat)
        if subprocess.call(["chrt", "-f", "10", "true"], stderr=subprocess.DEVNULL) == 0:
            self.prof_window("idle-fifo", fifo)
            self.prof_window("refill-fifo", fifo)
        else:
            say("  (chrt -f not permitted here: no SCHED_FIFO windows)")
        say("profile: perf record -g of redis-server and idpoold over one e2e hold at %d IDs/s" % self.sustained)
        self.wait_settled("e2e", self.e2e_low)
        data = os.path.join(pd, "e2e.perf.data")
        pids = "%d,%d" % (self.redis_pid, self.d.pid)
        with open(os.path.join(pd, "e2e-perf.log"), "w") as f:
            perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", pids, "-o", data, "--", "sleep",
                                     str(self.hold)], stdout=f, stderr=subprocess.STDOUT)
        self.children.append(perf)
        self.load("prof.e2e", "--mode", "lpop", "--key", pool_key("e2e"), "--batch", 100, "--conns", E2E_CONNS,
                  "--pipeline", E2E_PIPELINE, "--rate", calc(self.sustained / 100), "--duration", self.hold)
        if perf.wait() != 0:
            self.die("perf record failed (see %s)" % os.path.join(pd, "e2e-perf.log"))
        for comm in ("redis-server", "idpoold"):
            rep = output(["perf", "report", "-i", data, "--stdio", "--no-children", "--comms", comm,
                          "--percentage", "relative", "--sort", "dso,symbol", "-g", "none",
                          "--percent-limit", "0.5"])
            lines = [ln for ln in rep.splitlines() if ln]
            with open(os.path.join(pd, "e2e-%s.txt" % comm), "w") as f:
                f.write("".join(ln + "\n" for ln in lines))
            top = [ln.split() for ln in lines if re.match(r" +[0-9.]+%", ln)][:8]
            say("  %s, top symbols (%% of its samples): %s"
                % (comm, ", ".join("%s %s" % (f[3] if len(f) > 3 else "", f[0]) for f in top)))
        os.remove(data)

    def profile_callgrind(self):
        pd = self.pd
        say("profile: callgrind of idpoold filling an empty pool of 500,000 IDs")
        self.h.sql("DELETE FROM application")
        self.R("FLUSHALL")
        self.h.add_app("cg", step=10000, max_pool_size=500000, min_size_percent=90,
                       max_size_per_second=100000000, max_size_per_times=1000, current_offset=ID_BASE)
        out = os.path.join(pd, "callgrind.out")
        # valgrind slows it down ~50x: a lock TTL that outlasts the whole fill
        self.daemon_start("callgrind", args=["--lock-ttl-ms", "120000"],
                          wrap=["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out])
        self.wait_until(300, "the cg pool to fill under callgrind", lambda: self.h.pool_ge("cg", 500000))
        self.daemon_stop()
        ann = output(["callgrind_annotate", "--inclusive=no", out]).splitlines()[:40]
        with open(os.path.join(pd, "callgrind.txt"), "w") as f:
            f.write("".join(ln + "\n" for ln in ann))
        total = next((m.group(1).replace(",", "") for m in (re.match(r"([0-9,]*) .*PROGRAM TOTALS", ln)
                                                           for ln in ann) if m), "") or "0"
        say("  %s instructions per ID pushed (start-up and checks included); top functions in %s:"
            % (calc0(int(total) / 500000), os.path.join(pd, "callgrind.txt")))
        for ln in [ln for ln in ann if re.match(r" *[0-9,]+ .*\(", ln)][:8]:
            say("    " + ln)

    # ------------------------------------------------------ 4. scale

    def scale(self):
        n, load_apps = self.scale_apps, self.load_apps
        say("4. scale: %d applications (pool %d, step %d) idle; then %d of them drained at %s IDs/s each"
            % (n, SCALE_POOL, SCALE_STEP, load_apps, calc0(LOAD_COUNT / LOAD_INTERVAL)))
        self.info("scale_apps", n)
        self.info("scale_pool", SCALE_POOL)
        self.info("scale_step", SCALE_STEP)
        self.info("load_apps", load_apps)
        self.info("load_count", LOAD_COUNT)
        self.info("load_calls_per_s", calc0(1 / LOAD_INTERVAL))
        self.h.sql("DELETE FROM application")
        self.R("FLUSHALL")
        # One multi-row INSERT: s000000, s000001, ...
        apps_sql = os.path.join(self.work, "apps.sql")
        with open(apps_sql, "w") as f:
            f.write("INSERT INTO application (entity_key, step, max_pool_size, min_size_percent, "
                    "max_size_per_second, max_size_per_times) VALUES ")
            f.write(",".join('("s%06d", %d, %d, %d, 1000, %d)' % (i, SCALE_STEP, SCALE_POOL, SCALE_MIN_PCT,
                                                                  SCALE_STEP) for i in range(n)))
            f.write("\n")
        self.h.sql_file(apps_sql)
        self.R("FUNCTION", "LOAD", "REPLACE", SCALE_LUA)

        def full(apps, want):
            return (self.h.rcli_int("FCALL", "bench_full", 0, apps, want) or 0) >= apps

        u0 = time.monotonic()
        self.daemon_start("scale")
        self.wait_until(600, "%d pools to fill" % n, lambda: full(n, SCALE_POOL))
        fill_s = calc(time.monotonic() - u0)
        self.measure("scale.fill_s", fill_s)
        with open(os.path.join(self.out, "idpoold-scale.log"), errors="replace") as f:
            fenced = sum(1 for ln in f if "push fenced off" in ln)
        self.measure("scale.fill_fenced", fenced)
        say("  %d pools full after %s s (daemon start included); refills fenced off meanwhile: %d"
            % (n, fill_s, fenced))
        time.sleep(2)
        for run in range(1, self.runs + 1):
            d0, r0, u0 = self.cpu()
            time.sleep(self.win)
            d1, r1, u1 = self.cpu()
            dc, rc = "%.2f" % cpu_pct(d0, d1, u1 - u0), "%.2f" % cpu_pct(r0, r1, u1 - u0)
            rss = "%.1f" % rss_mib(self.d.pid)
            self.measure("scale.idle_cpu_pct", dc)
            self.measure("scale.idle_redis_cpu_pct", rc)
            self.measure("scale.rss_mib", rss)
            say("  idle %d: idpoold CPU %s %% of a core, RSS %s MiB; redis CPU %s %%" % (run, dc, rss, rc))
        # Run 0 warms up (not measured): each application's first lease was
        # one pool, so the load starts with a lease reservation for every one.
        calls = calc0(self.load_win / LOAD_INTERVAL)
        for run in range(0, self.runs + 1):
            self.wait_until(60, "the loaded pools to refill",
                            lambda: full(load_apps, SCALE_POOL * SCALE_MIN_PCT // 100))
            l0 = self.h.leases_of("s%")
            d0 = cpu_ticks(self.d.pid)
            u0 = time.monotonic()
            out = self.raw("scale-load.%d.txt" % run)
            with open(out, "w") as f:
                rc = harness.run_bounded(["redis-cli", "-h", "127.0.0.1", "-p", str(self.h.redis_port),
                                          "-r", calls, "-i", str(LOAD_INTERVAL), "FCALL", "bench_popmany", "0",
                                          str(load_apps), str(LOAD_COUNT)], self.load_win * 3 + 30, stdout=f)
            if rc != 0:
                self.die("the load on %d pools failed" % load_apps)
            d1 = cpu_ticks(self.d.pid)
            u1 = time.monotonic()
            l1 = self.h.leases_of("s%")
            with open(out) as f:
                vals = [int(x) for x in f.read().split()]
            triples = [vals[i:i + 3] for i in range(0, len(vals) - len(vals) % 3, 3)]
            ids = sum(t[0] for t in triples)
            empties = sum(t[1] for t in triples)
            minlen = min((t[2] for t in triples), default=0)
            ncalls = len(triples)
            rate = calc0(ids / (u1 - u0))
            cpu = "%.2f" % cpu_pct(d0, d1, u1 - u0)
            if run > 0:
                self.measure("scale.load_pops", ncalls * load_apps)
                self.measure("scale.load_ids_per_s", rate)
                self.measure("scale.load_empties", empties)
                self.measure("scale.load_minlen", minlen)
                self.measure("scale.load_cpu_pct", cpu)
                self.measure("scale.load_leases", l1 - l0)
                self.measure("scale.load_ids", ids)
            say("  load %s: %d IDs at %s IDs/s from %d pools, %d empty pops of %d, smallest pool %d; "
                "idpoold CPU %s %%; %d leases" % ("warm-up" if run == 0 else run, ids, rate, load_apps, empties,
                                                   ncalls * load_apps, minlen, cpu, l1 - l0))
        self.daemon_stop()

    # ------------------------------------------------------ 7. the ID API

    def api_section(self):
        """Section 7 (test/bench/api.py): a daemon of its own with --api,
        nginx beside it, wrk against both."""
        say("7. the ID API: wrk against idpoold --api and against nginx (1 worker) serving a body of the same "
            "size")
        # the applications of the earlier sections would be checked (and some refilled) alongside
        self.h.sql("DELETE FROM application")
        self.R("FLUSHALL")
        self.idpoolctl = os.environ.get("IDPOOLCTL") or os.path.join(os.path.abspath(self.o["build"]), "idpoolctl")
        if not os.environ.get("IDPOOLCTL"):
            with open(self.raw("ninja-idpoolctl.txt"), "w") as f:
                if subprocess.call(["ninja", "-C", os.path.abspath(self.o["build"]), "idpoolctl"], stdout=f,
                                   stderr=subprocess.STDOUT) != 0:
                    self.die("building idpoolctl failed (see %s; IDPOOLCTL names a built one)"
                             % self.raw("ninja-idpoolctl.txt"))
        try:
            api.ApiBench(self, rounds=self.runs, duration=self.win,
                         conns=int(os.environ.get("BENCH_API_CONNS") or api.CONNS),
                         pin=os.environ.get("BENCH_API_PIN", "1") != "0", say=say).run()
        except api.Failed as e:
            self.die("section 7: %s" % e)
        r = results.Report(self.out)
        rps, rat = results.api_values(r)
        say("  medians: issuer %s req/s, nginx %s req/s -> api_ratio %s; count=%d: %s IDs/s"
            % (results.f0(rps), results.f0(r.med("api.nginx.rps")), results.f2(rat), api.BATCH,
               results.f0(r.med("api.batch.ids_per_s"))))

    # ------------------------------------------ 8. the client libraries

    def client_section(self):
        """Section 8 (test/bench/client.py): a daemon of its own refilling
        one application, idpool-clientbench and the Python client against
        it."""
        say("8. the client libraries: idpool_next() against an atomic counter, its latency under sustained "
            "load; the Python client's next() against itertools.count()")
        self.h.sql("DELETE FROM application")
        self.R("FLUSHALL")
        build = os.path.abspath(self.o["build"])
        self.clientbench = os.environ.get("IDPOOL_CLIENTBENCH") or os.path.join(build, "test", "idpool-clientbench")
        if not os.environ.get("IDPOOL_CLIENTBENCH"):
            with open(self.raw("ninja-clientbench.txt"), "w") as f:
                if subprocess.call(["ninja", "-C", build, "test/idpool-clientbench"], stdout=f,
                                   stderr=subprocess.STDOUT) != 0:
                    self.die("building test/idpool-clientbench failed (see %s; IDPOOL_CLIENTBENCH names a built "
                             "one)" % self.raw("ninja-clientbench.txt"))
        try:
            client.ClientBench(self, rounds=self.runs, duration=min(self.win, client.DURATION),
                               rate=int(os.environ.get("BENCH_CLIENT_RATE") or client.RATE),
                               pin=os.environ.get("BENCH_CLIENT_PIN", "1") != "0", say=say).run()
        except client.Failed as e:
            self.die("section 8: %s" % e)
        r = results.Report(self.out)
        ids, rat = results.client_values(r)
        say("  medians: idpool_next %s calls/s, atomic %s -> client_ratio %s; 2 threads %s calls/s; Python %s "
            "calls/s (ratio %s); paced %s IDs/s with buffer: %s calls waited"
            % (results.f0(ids), results.f0(r.med("client.t1.atomic_per_s")), results.f2(rat),
               results.f0(r.med("client.t2.next_per_s")), results.f0(r.med("client.py.next_per_s")),
               results.f2(r.med("client.py.ratio")), os.environ.get("BENCH_CLIENT_RATE") or client.RATE,
               results.f0(r.total("client.paced_buf.waits"))))

    # --------------------------------------------- the Redis Cluster

    def cluster_section(self):
        """--cluster (test/bench/cluster.py): the Cluster's ceiling and end
        to end, the servers a Cluster."""
        try:
            cluster.ClusterBench(self, conns=CEIL_CONNS, pipeline=CEIL_PIPELINE, e2e_conns=E2E_CONNS,
                                 e2e_pipeline=E2E_PIPELINE, pool_s=E2E_POOL_S, min_pct=E2E_MIN_PCT, step=E2E_STEP,
                                 id_base=ID_BASE, say=say).run()
        except cluster.Failed as e:
            self.die("the Cluster section: %s" % e)

    # ------------------------------------------------- plots, report

    def report(self):
        with open(self.raw("gnuplot.txt"), "w") as err:
            for gp, png in (("ramp.gp", "ramp.png"), ("latency.gp", "latency.png")):
                if subprocess.call(["gnuplot", "-e", "dir='%s'" % self.out, os.path.join(HERE, gp)],
                                   stderr=err) != 0:
                    say("warning: %s failed (see raw/gnuplot.txt)" % png)
        elapsed = int(time.monotonic() - self.t_start)
        self.info("elapsed_s", elapsed)
        with open("/proc/loadavg") as f:
            self.info("load_end", " ".join(f.read().split()[:3]))
        say("done in %d s; results: %s/results.md, ramp.png, latency.png" % (elapsed, self.out))
        print(results.report(self.out), flush=True)

    def report_section(self, report):
        """--client-only, --api-only, --cluster: results.md of that section
        alone, by report(OUT) (results.client_report ...), which returns the
        summary line, printed last."""
        elapsed = int(time.monotonic() - self.t_start)
        self.info("elapsed_s", elapsed)
        with open("/proc/loadavg") as f:
            self.info("load_end", " ".join(f.read().split()[:3]))
        say("done in %d s; results: %s/results.md" % (elapsed, self.out))
        print(report(self.out), flush=True)

    def run(self):
        self.setup()
        if self.o["cluster"]:
            self.cluster_section()
            self.report_section(results.cluster_report)
            return
        if self.o["client"] == "only":
            self.client_section()
            self.report_section(results.client_report)
            return
        if self.o["api"] == "only":
            self.api_section()
            self.report_section(results.api_report)
            return
        self.ceiling()
        self.fenced()
        self.e2e()
        self.latency()
        if self.o["prof"]:
            self.profile_windows()
        self.daemon_stop()
        if self.o["prof"]:
            self.profile_callgrind()
        self.scale()
        if self.o["api"] == "on":
            self.api_section()
        if self.o["client"] == "on":
            self.client_section()
        self.report()


def main(argv):
    opts = parse_args(argv[1:])

    def interrupted(signum, frame):
        raise Interrupted()

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    b = Bench(opts)
    rc = 0
    try:
        b.run()
    except Fatal as e:
        sys.stderr.write("bench: error: %s\n" % e)
        rc = 1
    except Interrupted:
        rc = 130
    except Exception:
        import traceback
        traceback.print_exc()
        rc = 1
    finally:
        # a second Ctrl-C must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        b.cleanup(rc != 0)
        if rc != 0:
            sys.stderr.write("bench: failed (exit %d); partial results in %s\n" % (rc, b.out or "?"))
        b.tee_stop()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
