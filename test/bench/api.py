#!/usr/bin/env python3
"""The ID API (idpoold --api, GET /v1/ids/{key}) against the HTTP ceiling of
this machine, measured side by side in one run.

  python3 test/bench/api.py [--rounds N] [--duration S] [--conns C]
                            [--no-pin] [--build DIR] [--out DIR]
  scripts/bench.sh --api-only      the same section inside bench.py
                                   (scripts/bench.sh runs it after the rest)

The load is wrk (keep-alive, 1 thread, C connections, --latency, a Lua done()
for p99.9). The ceiling is nginx (nginx-light) with 1 worker process (the
daemon is one thread), access_log off, answering `return 200` with a body
byte-identical to the issuer's (taken from the issuer with curl first, same
Content-Type and Cache-Control). The issuer is a real idpoold with --api and
its default api-buffer, serving one application whose pool is refilled while
it is measured (refills counted from its /metrics). Each round runs, in this
order, each window DURATION s with the same wrk parameters:
  nginx             the ceiling, 1 ID-sized body
  issuer            GET /v1/ids/bench, 1 ID, the pool refilled meanwhile
  issuer, no refill the same with the pool's low water lowered for the
                    window (min_size_percent 1): nothing refilled in it
  nginx, batch      a body of the size of 100 IDs
  issuer, batch     GET /v1/ids/bench?count=100
Reported: medians of the rounds; api_ratio = issuer req/s / nginx req/s.
With 2 or more CPUs the servers run on the first CPU (taskset) and wrk on
the second (Redis and MariaDB are not pinned); --no-pin runs all unpinned.
Defaults: 3 rounds, 10 s windows, 64 connections. Needs nginx and wrk
(apt-get install nginx-light wrk); idpoold and idpoolctl from --build
(default build/; IDPOOLD and IDPOOLCTL name the binaries instead).
Standalone it starts its own servers (test/lib/harness.py, scripts/servers.sh)
and writes measure.txt, info.txt and results.md (results.api_report) to
--out (default bench-results/api-<UTC time>/); the last line printed is
  bench: api_rps=X api_ratio=Y
"""
import json
import os
import re
import resource
import shutil
import signal
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

APP = "bench"  # the application (its key is in every answer's body)
ID_BASE = 100000000000000000  # current_offset: IDs of 18 digits, as in bench.py
POOL = 1000000  # its pool: refilled below 90 %, i.e. every 100,000 IDs
MIN_PCT = 90
STEP = 10000
PER_SECOND = 100000000  # max_size_per_second: the most a row may have (never limits)
PER_TAKE = 1000  # max_size_per_times: >= the issuer's buffer (api-buffer 1000)
BATCH = 100  # the batch variant's count
WRK_THREADS = 1  # wrk needs a CPU too: one thread on 2 cores
ROUNDS, DURATION, CONNS = 3, 10, 64
WARMUP_S = 2  # one unmeasured wrk run against each server first
WRK_LIMIT = 60  # wrk is stopped this long after the window should have ended

# wrk's done(): the numbers its --latency table lacks (p99.9), on one line.
DONE_LUA = r"""done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("wrk-lua: requests=%d duration_us=%d bytes=%d p50_us=%d p99_us=%d " ..
    "p999_us=%d max_us=%d mean_us=%.1f connect_errors=%d read_errors=%d write_errors=%d " ..
    "status_errors=%d timeouts=%d\n", summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max,
    latency.mean, e.connect, e.read, e.write, e.status, e.timeout))
end
"""

# The windows of a round: (name, server, path, IDs per answer, label).
WINDOWS = [
    ("nginx", "nginx", "/v1/ids/" + APP, 1, "nginx (static body)"),
    ("issuer", "issuer", "/v1/ids/" + APP, 1, "**issuer** (pool refilled)"),
    ("norefill", "issuer", "/v1/ids/" + APP, 1, "issuer, no refill in the window"),
    ("nginx_batch", "nginx", "/batch", BATCH, "nginx, batch-sized body"),
    ("batch", "issuer", "/v1/ids/%s?count=%d" % (APP, BATCH), BATCH, "issuer, count=%d" % BATCH),
]


def nginx_bin():
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                          if os.access(p, os.X_OK)), None)


def tools_missing():
    """The tools this section needs that are not installed (names)."""
    return [t for t, found in (("nginx", nginx_bin()), ("wrk", shutil.which("wrk")),
                               ("curl", shutil.which("curl"))) if not found]


def tools_problem():
    """Why the section cannot run here (None: it can)."""
    missing = tools_missing()
    return "%s not found (apt-get install nginx-light wrk)" % ", ".join(missing) if missing else None


def us(text):
    """A wrk duration ("281.00us", "0.94ms", "1.02s", "1.5m") in µs."""
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text)
    if not m:
        raise Failed("cannot read wrk's duration '%s'" % text)
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6, "m": 6e7}[m.group(2)]


def parse_wrk(out):
    """wrk's output with --latency and DONE_LUA -> dict."""
    r = {}
    m = re.search(r"^Requests/sec:\s*([0-9.]+)", out, re.M)
    if not m:
        raise Failed("no Requests/sec in wrk's output")
    r["rps"] = float(m.group(1))
    for pct, key in (("50", "p50_us"), ("99", "p99_us")):
        m = re.search(r"^\s+%s%%\s+(\S+)" % pct, out, re.M)
        if not m:
            raise Failed("no %s%% in wrk's latency distribution" % pct)
        r[key] = us(m.group(1))
    m = re.search(r"^wrk-lua: (.*)$", out, re.M)
    if not m:
        raise Failed("no line of the done() script in wrk's output")
    lua = dict(w.split("=", 1) for w in m.group(1).split())
    r["p999_us"] = float(lua["p999_us"])
    r["max_us"] = float(lua["max_us"])
    r["requests"] = int(lua["requests"])
    r["bytes"] = int(lua["bytes"])
    r["errors"] = sum(int(lua[k]) for k in ("connect_errors", "read_errors", "write_errors", "timeouts"))
    r["non2xx"] = int(lua["status_errors"])
    return r


def metrics(d):
    """The daemon's /metrics as {"name{labels}": value}."""
    body = d.get("/metrics", 5)
    if body is None:
        raise Failed("no /metrics from idpoold")
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def nginx_escape(body):
    """body as the inside of a single-quoted nginx string."""
    return body.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


class ApiBench:
    """The section. ctx provides: h (the harness, servers up), idpoold,
    idpoolctl, work (a scratch directory), out (results directory),
    measure(name, value), info(key, value), children (a list of Popens
    stopped on cleanup) and, unless say is given, say(text). Raises Failed."""

    def __init__(self, ctx, rounds=ROUNDS, duration=DURATION, conns=CONNS, pin=True, say=None):
        self.c = ctx
        self.say = say or ctx.say
        self.h = ctx.h
        self.rounds, self.duration, self.conns = rounds, duration, conns
        cpus = sorted(os.sched_getaffinity(0))
        self.pin = pin and len(cpus) >= 2
        self.server_cpu, self.wrk_cpu = (str(cpus[0]), str(cpus[1])) if self.pin else (None, None)
        self.d = None
        self.nginx = None
        self.dir = os.path.join(ctx.work, "api")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(os.path.join(ctx.out, "raw"), exist_ok=True)
        self.lua = os.path.join(self.dir, "done.lua")
        with open(self.lua, "w") as f:
            f.write(DONE_LUA)

    def raw(self, name):
        return os.path.join(self.c.out, "raw", name)

    def wrap(self):
        return ["taskset", "-c", self.server_cpu] if self.pin else []

    # ------------------------------------------------------ servers ---

    def start_issuer(self):
        h = self.h
        h.add_app(APP, step=STEP, max_pool_size=POOL, min_size_percent=MIN_PCT, max_size_per_second=PER_SECOND,
                  max_size_per_times=PER_TAKE, current_offset=ID_BASE)
        env = dict(os.environ, IDPOOL_MYSQL_URL=h.env["IDPOOL_MYSQL_URL"],
                   IDPOOL_REDIS_URL=h.env["IDPOOL_REDIS_URL"])
        r = subprocess.run([self.c.idpoolctl, "--json", "tokens", "add", "api-bench", "--apps", APP], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise Failed("idpoolctl tokens add failed: %s" % r.stderr.decode(errors="replace").strip())
        self.token = json.loads(r.stdout)["token"]
        self.api_addr = "127.0.0.1:%d" % harness.free_port()
        try:
            self.d = h.start_daemon("api", self.c.idpoold, os.path.join(self.c.out, "idpoold-api.log"),
                                    args=["--api", self.api_addr], http=True, wrap=self.wrap(),
                                    log_level="warn", instance="bench-api")
        except harness.HarnessError as e:
            raise Failed(str(e))
        if not harness.wait_until(60, lambda: self.settled(), 0.1):
            raise Failed("the %s pool did not fill within 60 s" % APP)
        if not harness.wait_until(20, lambda: self.curl("/v1/ids/" + APP)[0] == 200, 0.2):
            raise Failed("the issuer did not answer 200 within 20 s (token or application not loaded)")

    def settled(self):
        """The pool holds at least its low water and did not change in
        300 ms (no refill in flight)."""
        a = self.h.llen(APP)
        if a is None or a < POOL * MIN_PCT // 100:
            return False
        time.sleep(0.3)
        return self.h.llen(APP) == a

    def curl(self, path, issuer=True):
        """(status, body bytes, Content-Type, header bytes) of one GET."""
        body = os.path.join(self.dir, "body")
        url = "http://%s%s" % (self.api_addr if issuer else self.nginx_addr, path)
        argv = ["curl", "-s", "--noproxy", "*", "-m", "5", "-o", body, "-w",
                "%{http_code} %{size_header} %{content_type}", url]
        if issuer:
            argv[1:1] = ["-H", "Authorization: Bearer " + self.token]
        if os.path.exists(body):
            os.remove(body)
        r = subprocess.run(argv, stdout=subprocess.PIPE)
        w = r.stdout.decode().split(" ", 2) + ["", "", ""]
        data = b""
        if os.path.exists(body):
            with open(body, "rb") as f:
                data = f.read()
        try:
            return int(w[0]), data, w[2], int(w[1])
        except ValueError:
            return 0, data, "", 0

    def start_nginx(self):
        """nginx with 1 worker answering the issuer's bodies, byte for byte."""
        code, one, ctype, self.issuer_hdr = self.curl("/v1/ids/" + APP)
        code_b, batch, _, _ = self.curl("/v1/ids/%s?count=%d" % (APP, BATCH))
        if code != 200 or code_b != 200:
            raise Failed("the issuer answered %d and %d" % (code, code_b))
        self.body, self.batch_body, self.ctype = one, batch, ctype
        self.nginx_addr = "127.0.0.1:%d" % harness.free_port()
        nd = os.path.join(self.dir, "nginx")
        os.makedirs(nd, exist_ok=True)
        locs = []
        for loc, body in (("/v1/ids/" + APP, one), ("/batch", batch)):
            locs.append("    location = %s {\n      default_type %s;\n      add_header Cache-Control no-store;\n"
                        "      return 200 '%s';\n    }" % (loc, ctype, nginx_escape(body.decode())))
        conf = os.path.join(nd, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""worker_processes 1;
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  server_tokens off;
  keepalive_timeout 75s;
  keepalive_requests 1000000000;
  client_body_temp_path %(d)s/body;
  proxy_temp_path %(d)s/proxy;
  fastcgi_temp_path %(d)s/fastcgi;
  uwsgi_temp_path %(d)s/uwsgi;
  scgi_temp_path %(d)s/scgi;
  server {
    listen %(addr)s;
%(locs)s
  }
}
""" % dict(d=nd, addr=self.nginx_addr, locs="\n".join(locs)))
        with open(os.path.join(self.c.out, "nginx.log"), "a") as f:
            self.nginx = subprocess.Popen(self.wrap() + [nginx_bin(), "-p", nd, "-e", os.path.join(nd, "error.log"),
                                                         "-c", conf], stdin=subprocess.DEVNULL, stdout=f,
                                          stderr=subprocess.STDOUT)
        self.c.children.append(self.nginx)
        if not harness.wait_until(10, lambda: self.curl("/v1/ids/" + APP, issuer=False)[0] == 200, 0.1):
            raise Failed("nginx did not answer within 10 s (see %s/error.log)" % nd)
        for path, want in (("/v1/ids/" + APP, one), ("/batch", batch)):
            code, got, ct, hdr = self.curl(path, issuer=False)
            if got != want or ct != ctype:
                raise Failed("nginx's %s body is not the issuer's (%d vs %d bytes, %s vs %s)"
                             % (path, len(got), len(want), ct, ctype))
        self.nginx_hdr = self.curl("/v1/ids/" + APP, issuer=False)[3]
        try:
            with open("/proc/%d/task/%d/children" % (self.nginx.pid, self.nginx.pid)) as f:
                self.nginx_pids = [self.nginx.pid] + [int(p) for p in f.read().split()]
        except OSError:
            self.nginx_pids = [self.nginx.pid]

    def stop(self):
        if self.nginx is not None:
            harness.stop_process(self.nginx, 10)
            self.nginx = None
        if self.d is not None:
            self.h.stop_daemon(self.d, 10)
            self.d = None

    # ------------------------------------------------------ windows ---

    def wrk(self, name, server, path, secs):
        """One wrk run; its output in raw/api.NAME.txt; (parsed, wrk CPU s)."""
        addr = self.api_addr if server == "issuer" else self.nginx_addr
        argv = (["taskset", "-c", self.wrk_cpu] if self.pin else []) + [
            "wrk", "-t%d" % WRK_THREADS, "-c%d" % self.conns, "-d%ds" % secs, "--latency", "-s", self.lua]
        if server == "issuer":
            argv += ["-H", "Authorization: Bearer " + self.token]
        argv.append("http://%s%s" % (addr, path))
        out = self.raw("api.%s.txt" % name)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(out, "w") as f:
            rc = harness.run_bounded(argv, secs + WRK_LIMIT, stdout=f, stderr=subprocess.STDOUT)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if rc != 0:
            raise Failed("wrk failed (exit %d, see %s)" % (rc, out))
        with open(out) as f:
            text = f.read()
        return parse_wrk(text), (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)

    def low_water(self, pct):
        """The row's min_size_percent, applied by the daemon (SIGHUP)."""
        self.h.set_app(APP, min_size_percent=pct)
        self.d.signal(signal.SIGHUP)
        if not harness.wait_until(20, lambda: self.d.app_field(APP, "min_size_percent") == pct, 0.1):
            raise Failed("idpoold did not apply min_size_percent %d" % pct)

    def window(self, rnd, name, server, path, per_answer):
        if server == "issuer":
            if not harness.wait_until(60, self.settled, 0.1):
                raise Failed("the %s pool did not refill within 60 s" % APP)
            if name == "norefill":
                self.low_water(1)
            pids = [self.d.pid]
            m0 = metrics(self.d)
        else:
            pids = self.nginx_pids
        redis = self.h.redis_pid()
        s0 = sum(cpu_ticks(p) for p in pids)
        r0 = cpu_ticks(redis)
        t0 = time.monotonic()
        w, wrk_cpu = self.wrk("%s.%d" % (name, rnd), server, path, self.duration)
        secs = time.monotonic() - t0
        s1 = sum(cpu_ticks(p) for p in pids)
        r1 = cpu_ticks(redis)
        key = "api.%s." % name
        M = self.c.measure
        extra = ""
        ids_per_answer = per_answer
        if server == "issuer":
            m1 = metrics(self.d)

            def delta(k):
                return int(m1.get(k, 0) - m0.get(k, 0))
            ok = delta('idpool_api_requests_total{code="200"}')
            ids = delta("idpool_api_ids_total")
            refills = delta('idpool_refills_total{app="%s"}' % APP)
            pushed = delta('idpool_ids_pushed_total{app="%s"}' % APP)
            takes = delta("idpool_api_takes_total")
            refused = sum(delta('idpool_api_requests_total{code="%d"}' % c) for c in (429, 503))
            ids_per_answer = ids / ok if ok else 0
            M(key + "refills", refills)
            M(key + "pushed", pushed)
            M(key + "takes", takes)
            M(key + "takes_per_s", "%.0f" % (takes / secs))
            M(key + "refused", refused)
            M(key + "redis_cpu_pct", "%.1f" % cpu_pct(r0, r1, secs))
            extra = "; %d refills (%d IDs pushed), %d takes, %d answered 429/503; redis CPU %.0f %%" % (
                refills, pushed, takes, refused, cpu_pct(r0, r1, secs))
            if name == "norefill":
                self.low_water(MIN_PCT)
        M(key + "rps", "%.0f" % w["rps"])
        if server == "issuer":
            M(key + "ids_per_s", "%.0f" % (w["rps"] * ids_per_answer))
        for k in ("p50_us", "p99_us", "p999_us", "max_us"):
            M(key + k, "%.0f" % w[k])
        M(key + "server_cpu_pct", "%.1f" % cpu_pct(s0, s1, secs))
        M(key + "wrk_cpu_pct", "%.1f" % (wrk_cpu * 100 / secs))
        M(key + "errors", w["errors"] + w["non2xx"])
        M(key + "resp_bytes", "%.0f" % (w["bytes"] / w["requests"] if w["requests"] else 0))
        self.say("  round %d %s: %.0f req/s%s, p50 %.0f p99 %.0f p99.9 %.0f µs, max %.0f µs; "
                 "server CPU %.0f %%, wrk CPU %.0f %%; errors %d, non-2xx %d%s"
                 % (rnd, name, w["rps"], ", %.0f IDs/s" % (w["rps"] * ids_per_answer) if server == "issuer" else "",
                    w["p50_us"], w["p99_us"], w["p999_us"],
                    w["max_us"], cpu_pct(s0, s1, secs), wrk_cpu * 100 / secs, w["errors"], w["non2xx"], extra))
        return w["rps"]

    def run(self):
        why = tools_problem()
        if why:
            raise Failed(why)
        I = self.c.info
        try:
            self.start_issuer()
            self.start_nginx()
            wrk_v = re.search(r"wrk (\S+)", subprocess.run(["wrk", "-v"], stdout=subprocess.PIPE,
                                                            stderr=subprocess.STDOUT).stdout.decode())
            ngx_v = re.search(r"nginx/(\S+)", subprocess.run([nginx_bin(), "-v"], stdout=subprocess.PIPE,
                                                              stderr=subprocess.STDOUT).stdout.decode())
            I("api_rounds", self.rounds)
            I("api_duration_s", self.duration)
            I("api_conns", self.conns)
            I("api_threads", WRK_THREADS)
            I("api_pin", "server CPU %s, wrk CPU %s" % (self.server_cpu, self.wrk_cpu) if self.pin else "none")
            I("api_body_bytes", len(self.body))
            I("api_batch_body_bytes", len(self.batch_body))
            I("api_issuer_header_bytes", self.issuer_hdr)
            I("api_nginx_header_bytes", self.nginx_hdr)
            I("api_pool", POOL)
            I("api_step", STEP)
            I("api_min_pct", MIN_PCT)
            I("api_batch", BATCH)
            I("api_per_take", PER_TAKE)
            I("api_wrk", wrk_v.group(1) if wrk_v else "?")
            I("api_nginx", ngx_v.group(1) if ngx_v else "?")
            I("api_body", self.body.decode().rstrip("\n"))
            self.say("API: wrk -t%d -c%d -d%ds --latency, %d rounds of: %s; bodies %d and %d bytes "
                     "(%s); pinned: %s"
                     % (WRK_THREADS, self.conns, self.duration, self.rounds, ", ".join(w[0] for w in WINDOWS),
                        len(self.body), len(self.batch_body), self.ctype,
                        "servers on CPU %s, wrk on CPU %s" % (self.server_cpu, self.wrk_cpu) if self.pin
                        else "no"))
            for server, path in (("nginx", WINDOWS[0][2]), ("issuer", WINDOWS[1][2])):
                self.wrk("warmup.%s" % server, server, path, WARMUP_S)
            for rnd in range(1, self.rounds + 1):
                rps = {}
                for name, server, path, per_answer, _ in WINDOWS:
                    rps[name] = self.window(rnd, name, server, path, per_answer)
                self.c.measure("api.round_ratio", "%.3f" % (rps["issuer"] / rps["nginx"]))
                self.say("  round %d: issuer / nginx %.2f (%.0f / %.0f req/s)"
                         % (rnd, rps["issuer"] / rps["nginx"], rps["issuer"], rps["nginx"]))
        finally:
            self.stop()


# ------------------------------------------------------------ standalone ---


def main(argv):
    return standalone.main(
        argv, "api", __doc__, dict(rounds=ROUNDS, duration=DURATION, conns=CONNS),
        {"idpoold": ("IDPOOLD", "idpoold"), "idpoolctl": ("IDPOOLCTL", "idpoolctl")},
        lambda ctx, o: ApiBench(ctx, o["rounds"], o["duration"], o["conns"], o["pin"]).run(), results.api_report,
        check=tools_problem)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
