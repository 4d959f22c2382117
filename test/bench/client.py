#!/usr/bin/env python3
"""The client libraries (libidpool, src/python/idpool_client/) against the
in-process limit of this machine, measured side by side in one run.

  python3 test/bench/client.py [--rounds N] [--duration S] [--rate R]
                               [--calls N] [--no-pin] [--build DIR] [--out DIR]
  scripts/bench.sh --client-only   the same section inside bench.py
                                   (scripts/bench.sh runs it after the rest)

One application (IDs of 18 digits, pool 2,000,000 refilled below 75 % by a
real idpoold, takes of at most 1,000 IDs). Each round runs, in this order:
  throughput  idpool-clientbench --mode throughput, 1 thread and then 2:
              the client's buffer filled with CALLS IDs first, then 20
              slices of untimed loops, atomic_fetch_add on one shared
              counter and idpool_next in turn (medians of the slices;
              the background thread refills meanwhile)
  python      idpool_client's App.next() against next() on
              itertools.count(), in one interpreter (python3 with
              redis-py), buffer filled first, 10 slices in turn (medians)
  sustained   idpool-clientbench --mode sustained: threads calling
              idpool_next continuously for DURATION s (after 1 s of
              warm-up) while the background thread refills the buffer
              from Redis and idpoold refills the pool, in five windows:
                flat        1 thread flat out, untimed: the IDs/s the
                            refill chain sustains
                flat_timed  the same, each call timed
                paced       1 thread at RATE IDs/s, default options
                paced_buf   the same with the buffer option at BUFFER IDs
                paced2_buf  2 threads, RATE IDs/s in all, BUFFER IDs
              each call timed (two clock_gettime, a log-linear histogram)
              except in flat; waits = calls that found the buffer empty
              (idpool_stats), preempted = the measuring threads'
              involuntary context switches, the pool's length sampled
              every 0.25 s
Reported: medians of the rounds; client_ratio = idpool_next / atomic (1
thread), client_ids_per_s = idpool_next calls/s (1 thread).
With 2 or more CPUs a single measuring thread runs on the last CPU and two
on the first two (the background thread, Redis and idpoold are not pinned;
the Python process is pinned whole to the last CPU); --no-pin runs all
unpinned. Defaults: 5 rounds, 5 s windows, RATE 500,000, BUFFER 200,000,
CALLS 10,000,000. Needs idpoold and test/idpool-clientbench from --build
(default build/; IDPOOLD and IDPOOL_CLIENTBENCH name the binaries instead)
and a python3 with redis-py for the Python part (IDPOOL_PYTHON, else
/usr/bin/python3 or this interpreter, the first that imports redis; the
part is left out with a warning when none does).
Standalone it starts its own servers (test/lib/harness.py, scripts/servers.sh)
and writes measure.txt, info.txt and results.md (results.client_report) to
--out (default bench-results/client-<UTC time>/); the last line printed is
  bench: client_ids_per_s=X client_ratio=Y
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
sys.path.insert(0, HERE)

import results  # noqa: E402
import harness  # noqa: E402
import standalone  # noqa: E402
from harness import cpu_pct, cpu_ticks  # noqa: E402
from standalone import Failed  # noqa: E402

APP = "cbench"  # the application
ID_BASE = 100000000000000000  # current_offset: IDs of 18 digits, as in bench.py
POOL = 2000000  # its pool: refilled below 75 %, i.e. every 500,000 IDs
MIN_PCT = 75
STEP = 10000
PER_SECOND = 100000000  # max_size_per_second: never limits
PER_TAKE = 1000  # max_size_per_times: the clients' default max_batch
ROUNDS, DURATION, RATE, CALLS = 5, 5, 500000, 10000000
BUFFER = 200000  # the buffer option of the *_buf windows (0.4 s at RATE)
WARMUP_S = 1  # each sustained window starts with this much load, not counted
PY_CALLS = 2000000  # Python: calls per round (10 slices)
PY_SLICES = 10
TOOL_LIMIT = 300  # a clientbench run is stopped this long after it started
SAMPLE_S = 0.25  # the pool's length is sampled this often during a window

# The sustained windows: (name, threads, rate (0: flat out), buffer, timed, label).
WINDOWS = [
    ("flat", 1, 0, 0, False, "1 thread flat out, untimed"),
    ("flat_timed", 1, 0, 0, True, "1 thread flat out, each call timed"),
    ("paced", 1, RATE, 0, True, "1 thread at %s IDs/s, default options" % "{:,}".format(RATE)),
    ("paced_buf", 1, RATE, BUFFER, True, "1 thread at %s IDs/s, buffer %s" % ("{:,}".format(RATE),
                                                                              "{:,}".format(BUFFER))),
    ("paced2_buf", 2, RATE, BUFFER, True, "2 threads, %s IDs/s in all, buffer %s"
     % ("{:,}".format(RATE), "{:,}".format(BUFFER))),
]

# The Python part: one interpreter, src/python on sys.path; prints one JSON line.
PY_SCRIPT = r"""
import itertools, json, os, sys, time
sys.path.insert(0, sys.argv[1])
from idpool_client import Client
url, key, n, slices = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
per = n // slices
c = Client([url], buffer=per * slices + 512, min_batch=1000, max_batch=1000, timeout=5.0)
a = c.app(key)
deadline = time.monotonic() + 120
while a.stats()["buffered"] < per * slices + 512:
    if time.monotonic() > deadline:
        print(json.dumps({"error": "the buffer never held %d IDs" % (per * slices)}))
        sys.exit(1)
    time.sleep(0.02)
w0 = a.stats()["waits"]
cnt, nxt, rng, clock = [], [], range(per), time.perf_counter
for _ in range(slices):
    it = itertools.count()
    t0 = clock()
    for _ in rng:
        next(it)
    t1 = clock()
    f = a.next
    for _ in rng:
        f()
    t2 = clock()
    cnt.append(per / (t1 - t0))
    nxt.append(per / (t2 - t1))
st = a.stats()
c.close()
med = lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2
print(json.dumps({"next_per_s": med(nxt), "count_per_s": med(cnt),
                  "ratio": med([x / y for x, y in zip(nxt, cnt)]), "next_best_per_s": max(nxt),
                  "count_best_per_s": max(cnt), "waits": st["waits"] - w0, "calls": per * slices,
                  "python": sys.version.split()[0]}))
"""


def python_with_redis():
    """An interpreter that imports redis (for idpool_client), or None."""
    cands = [os.environ.get("IDPOOL_PYTHON"), "/usr/bin/python3", sys.executable]
    for p in [c for c in cands if c]:
        if os.access(p, os.X_OK) and subprocess.call([p, "-c", "import redis"], stdout=subprocess.DEVNULL,
                                                     stderr=subprocess.DEVNULL) == 0:
            return p
    return None


def kv_line(text, prefix):
    """The last line starting with prefix, as a dict of its key=value words."""
    line = None
    for ln in text.splitlines():
        if ln.startswith(prefix):
            line = ln
    if line is None:
        return None
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


class ClientBench:
    """The section. ctx provides: h (the harness, servers up), idpoold,
    clientbench, work (a scratch directory), out (results directory),
    measure(name, value), info(key, value), children (a list of Popens
    stopped on cleanup) and, unless say is given, say(text). Raises Failed."""

    def __init__(self, ctx, rounds=ROUNDS, duration=DURATION, rate=RATE, calls=CALLS, pin=True, say=None):
        self.c = ctx
        self.say = say or ctx.say
        self.h = ctx.h
        self.rounds, self.duration, self.rate, self.calls = rounds, duration, rate, calls
        cpus = sorted(os.sched_getaffinity(0))
        self.pin = pin and len(cpus) >= 2
        self.one_cpu = str(cpus[-1]) if self.pin else None  # a single measuring thread
        self.two_cpus = "%d,%d" % (cpus[0], cpus[1]) if self.pin else None
        self.windows = [(n, t, rate if r else 0, b, tm, lbl.replace("{:,}".format(RATE), "{:,}".format(rate)))
                        for n, t, r, b, tm, lbl in WINDOWS]
        self.d = None
        self.python = python_with_redis()
        self.dir = os.path.join(ctx.work, "client")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(os.path.join(ctx.out, "raw"), exist_ok=True)
        self.py = os.path.join(self.dir, "pybench.py")
        with open(self.py, "w") as f:
            f.write(PY_SCRIPT)

    def raw(self, name):
        return os.path.join(self.c.out, "raw", name)

    @property
    def url(self):
        return self.h.env["IDPOOL_REDIS_URL"]

    # ------------------------------------------------------ servers ---

    def start(self):
        h = self.h
        # An AOF rewrite (a fork copying the data set) inside a window would
        # measure the fork: off, as in bench.py.
        h.rcli("CONFIG", "SET", "auto-aof-rewrite-percentage", 0)
        h.add_app(APP, step=STEP, max_pool_size=POOL, min_size_percent=MIN_PCT, max_size_per_second=PER_SECOND,
                  max_size_per_times=PER_TAKE, current_offset=ID_BASE)
        try:
            self.d = h.start_daemon("client", self.c.idpoold, os.path.join(self.c.out, "idpoold-client.log"),
                                    http=True, log_level="warn", instance="bench-client")
        except harness.HarnessError as e:
            raise Failed(str(e))
        if not harness.wait_until(60, self.settled, 0.1):
            raise Failed("the %s pool did not fill within 60 s" % APP)

    def settled(self):
        """The pool holds at least its low water and did not change in
        300 ms (no refill in flight)."""
        a = self.h.llen(APP)
        if a is None or a < POOL * MIN_PCT // 100:
            return False
        time.sleep(0.3)
        return self.h.llen(APP) == a

    def stop(self):
        if self.d is not None:
            self.h.stop_daemon(self.d, 10)
            self.d = None

    def refills(self):
        """idpoold's refills of the application so far (its /metrics)."""
        body = self.d.get("/metrics", 5) or ""
        key = 'idpool_refills_total{app="%s"}' % APP
        for line in body.splitlines():
            if line.startswith(key + " "):
                return int(float(line.split()[1]))
        return 0

    # ------------------------------------------------------- runs ---

    def tool(self, name, args):
        """idpool-clientbench ARGS APP URL, its output in raw/client.NAME.txt,
        the pool's length sampled meanwhile; (its summary dict, smallest
        pool length seen, CPU % of one core of the tool and of redis-server
        over the tool's life, refills of the pool meanwhile)."""
        out = self.raw("client.%s.txt" % name)
        argv = [self.c.clientbench] + [str(a) for a in args] + [APP, self.url]
        redis = self.h.redis_pid()
        r0, f0, t0 = cpu_ticks(redis), self.refills(), time.monotonic()
        lows = []
        with open(out, "w") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        self.c.children.append(p)
        while True:  # wait4: the tool's own CPU time when it ends
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                p.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - t0 > TOOL_LIMIT:
                harness.stop_process(p, 5)
                raise Failed("idpool-clientbench %s ran longer than %d s" % (name, TOOL_LIMIT))
            n = self.h.llen(APP)
            if n is not None:
                lows.append(n)
            time.sleep(SAMPLE_S)
        self.c.children.remove(p)
        secs = time.monotonic() - t0
        r1, f1 = cpu_ticks(redis), self.refills()
        with open(out) as f:
            text = f.read()
        if p.returncode != 0:
            raise Failed("idpool-clientbench %s failed (exit %d, see %s)" % (name, p.returncode, out))
        kv = kv_line(text, "clientbench: mode=")
        if kv is None:
            raise Failed("no summary line in %s" % out)
        return (kv, min(lows) if lows else None, (ru.ru_utime + ru.ru_stime) * 100 / secs, cpu_pct(r0, r1, secs),
                f1 - f0)

    def throughput(self, rnd, threads):
        cpus = self.one_cpu if threads == 1 else self.two_cpus
        args = ["--mode", "throughput", "--threads", threads, "--calls", self.calls // threads]
        if cpus:
            args += ["--cpus", cpus]
        kv = self.tool("throughput.t%d.%d" % (threads, rnd), args)[0]
        M = self.c.measure
        key = "client.t%d." % threads
        for k in ("next_per_s", "atomic_per_s", "next_best_per_s", "atomic_best_per_s"):
            M(key + k, kv[k])
        M(key + "ratio", kv["ratio"])
        M(key + "waits", kv["waits"])
        self.say("  round %d, %d thread%s: idpool_next %s/s, atomic %s/s, ratio %s (best slices: %s and %s); "
                 "waits %s" % (rnd, threads, "s" if threads > 1 else "", big(kv["next_per_s"]),
                               big(kv["atomic_per_s"]), kv["ratio"], big(kv["next_best_per_s"]),
                               big(kv["atomic_best_per_s"]), kv["waits"]))
        return float(kv["next_per_s"]), float(kv["ratio"])

    def python_part(self, rnd):
        out = self.raw("client.python.%d.txt" % rnd)
        argv = ([ "taskset", "-c", self.one_cpu] if self.pin else []) + [
            self.python, self.py, os.path.join(ROOT, "src", "python"), self.url, APP, str(PY_CALLS),
            str(PY_SLICES)]
        with open(out, "w") as f:
            rc = harness.run_bounded(argv, TOOL_LIMIT, stdout=f, stderr=subprocess.STDOUT)
        with open(out) as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
        if rc != 0 or not lines:
            raise Failed("the Python part failed (exit %d, see %s)" % (rc, out))
        r = json.loads(lines[-1])
        M = self.c.measure
        for k in ("next_per_s", "count_per_s", "next_best_per_s", "count_best_per_s"):
            M("client.py." + k, "%.0f" % r[k])
        M("client.py.ratio", "%.3f" % r["ratio"])
        M("client.py.waits", r["waits"])
        self.py_version = r["python"]
        self.say("  round %d, Python: App.next() %s/s, next(itertools.count()) %s/s, ratio %.3f; waits %d"
                 % (rnd, big(r["next_per_s"]), big(r["count_per_s"]), r["ratio"], r["waits"]))

    def sustained(self, rnd, name, threads, rate, buffer, timed):
        cpus = self.one_cpu if threads == 1 else self.two_cpus
        args = ["--mode", "sustained", "--threads", threads, "--secs", self.duration, "--warmup", WARMUP_S,
                "--rate", rate]
        if buffer:
            args += ["--buffer", buffer]
        if not timed:
            args.append("--untimed")
        else:
            args += ["--hist", self.raw("client.%s.%d.hist" % (name, rnd))]
        if cpus:
            args += ["--cpus", cpus]
        if not harness.wait_until(60, self.settled, 0.1):
            raise Failed("the %s pool did not refill within 60 s" % APP)
        kv, low, tool_cpu, redis_cpu, refills = self.tool("%s.%d" % (name, rnd), args)
        M = self.c.measure
        key = "client.%s." % name
        for k in ("ids_per_s", "waits", "timeouts", "takes", "errors", "preempted"):
            M(key + k, kv[k])
        M(key + "pool_min", low if low is not None else 0)
        M(key + "refills", refills)
        M(key + "tool_cpu_pct", "%.1f" % tool_cpu)
        M(key + "redis_cpu_pct", "%.1f" % redis_cpu)
        lat = ""
        if timed:
            for k in ("p50_ns", "p99_ns", "p999_ns", "p9999_ns", "max_ns", "over_100us", "timer_p50_ns"):
                M(key + k, kv[k])
            lat = "; p50 %s p99 %s p99.9 %s p99.99 %s ns, max %.0f µs; %s calls over 100 µs" % (
                kv["p50_ns"], kv["p99_ns"], kv["p999_ns"], kv["p9999_ns"], int(kv["max_ns"]) / 1000,
                kv["over_100us"])
        self.say("  round %d %s: %s IDs/s, %s of %s calls waited%s; preempted %s times; pool >= %s, %d refills; "
                 "CPU: client %.0f %%, redis %.0f %%"
                 % (rnd, name, big(kv["ids_per_s"]), kv["waits"], big(kv["calls"]), lat, kv["preempted"],
                    "{:,}".format(low) if low is not None else "?", refills, tool_cpu, redis_cpu))

    def run(self):
        I = self.c.info
        try:
            self.start()
            I("client_rounds", self.rounds)
            I("client_duration_s", self.duration)
            I("client_warmup_s", WARMUP_S)
            I("client_rate", self.rate)
            I("client_buffer", BUFFER)
            I("client_calls", self.calls)
            I("client_py_calls", PY_CALLS)
            I("client_pool", POOL)
            I("client_step", STEP)
            I("client_min_pct", MIN_PCT)
            I("client_per_take", PER_TAKE)
            I("client_pin", "1 thread on CPU %s, 2 threads on CPUs %s, Python on CPU %s"
              % (self.one_cpu, self.two_cpus, self.one_cpu) if self.pin else "none")
            self.say("client: %d rounds of: throughput (1 and 2 threads, %s IDs buffered), Python, sustained "
                     "windows of %d s (%s); pinned: %s"
                     % (self.rounds, big(self.calls), self.duration, ", ".join(w[0] for w in self.windows),
                        "1 thread on CPU %s, 2 on %s" % (self.one_cpu, self.two_cpus) if self.pin else "no"))
            if self.python is None:
                self.say("warning: no python3 with redis-py (python3-redis): no Python part")
            for rnd in range(1, self.rounds + 1):
                self.throughput(rnd, 1)
                self.throughput(rnd, 2)
                if self.python:
                    self.python_part(rnd)
                for name, threads, rate, buffer, timed, _ in self.windows:
                    self.sustained(rnd, name, threads, rate, buffer, timed)
            if self.python:
                I("client_python", "%s (%s)" % (self.py_version, self.python))
        finally:
            self.stop()


def big(x):
    """A rate for a progress line: 123.4M, 56.7k."""
    x = float(x)
    return "%.1fM" % (x / 1e6) if x >= 1e6 else "%.1fk" % (x / 1e3) if x >= 1e3 else "%.0f" % x


# ------------------------------------------------------------ standalone ---


def main(argv):
    return standalone.main(
        argv, "client", __doc__, dict(rounds=ROUNDS, duration=DURATION, rate=RATE, calls=CALLS),
        {"idpoold": ("IDPOOLD", "idpoold"), "clientbench": ("IDPOOL_CLIENTBENCH", "test/idpool-clientbench")},
        lambda ctx, o: ClientBench(ctx, o["rounds"], o["duration"], o["rate"], o["calls"], o["pin"]).run(),
        results.client_report)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
