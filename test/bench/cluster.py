"""The benchmark's Redis Cluster section (issue 21): scripts/bench.sh --cluster.

  scripts/bench.sh --cluster [--quick] [--build DIR] [--out DIR]

The servers are a throwaway Redis Cluster (scripts/servers.sh: node1..node6,
three primaries with one replica each, AOF everysec, AOF rewrites off) and
MariaDB, on the same 2 cores as everything else. Measured:

  C1. ceiling, section 1's method on each primary: RPUSH of 1000
      pre-formatted IDs per command for a window, then LPOP 100 from the
      list it filled (stopping at 90 % of it). One idpool-load per primary
      (a list of that primary's slots), all started together; each load's
      rate is counted over the window in which all of them ran (their
      timelines lined up on CLOCK_MONOTONIC by the summaries' t0_ns,
      results.overlap) and the rates are summed: push_all, pop_all,
      ceiling_all = 1 / (1/push_all + 1/pop_all). The same on one primary
      alone (another one each run), in the same run, the two in turn
      first: ceiling_one; scale = ceiling_all / ceiling_one.
  C2. end to end: one idpoold on the Cluster URL refilling one application
      per primary (placement checked: its pool's slot is that primary's,
      and that primary answers its LLEN) while one idpool-load per
      application drains it (LPOP 100, a third of the target rate each); a
      ramp from 0.30 x ceiling_all as section 2's (a step is held with no
      empty pop, 97 % of the target reached in the common window and every
      pool keeping up); sustained = the highest step held;
      e2e_ratio_cluster = sustained / ceiling_all (goal >= 0.8); then RUNS
      confirmation holds at that rate.
  CPU in each window of C1 and in the holds of C2: every redis-server and
  idpoold from /proc/PID/stat (utime + stime), the loads from their own
  summary (getrusage), the machine from /proc/stat; % of one core over the
  window (so at most 200 on 2 cores).

Measurements go to measure.txt (names cl.*) and info.txt (keys cl_*);
results.cluster_report writes cluster.json (median, min, max of each),
results.md, and the line
  bench: e2e_ratio_cluster=X cluster_sustained_ids_per_s=Y cluster_ceiling_ids_per_s=Z
         one_primary_ceiling_ids_per_s=W cluster_scale=V
(one line; cluster_ceiling is ceiling_all, cluster_scale scale).
The daemon's instructions per ID on the Cluster against one Redis are the
test suite's (meson test perf_cluster), not measured here.
"""
import os
import time

import results
from harness import CLK_TCK, cpu_ticks, pool_key, stop_process

# C2's drains send the requests due in the next 2 ms together (idpool-load
# --burst-us): paced one at a time, each request was a wake-up of its
# thread, and on 2 vCPUs shared with six redis-servers those wake-ups (40 %
# of a core at 1.96 M IDs/s, 20 us a request, mostly the scheduler's) came
# out of the Redis nodes' share; in bursts a load costs a quarter of that.
# The demand per second is the same; C1's pops are pipelined flat out.
DRAIN_BURST_US = 2000


class Failed(Exception):
    """The section could not be measured; the message says why."""


def machine_ticks():
    """Busy clock ticks of all CPUs together (/proc/stat: all but idle and
    iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]) - v[3] - v[4]


class Cpu:
    """The CPU used from now until stop(), % of one core: each process of
    pids ({name: pid}; /proc/PID/stat) and the machine's (all CPUs)."""

    def __init__(self, pids):
        self.pids = pids
        self.t0 = time.monotonic()
        self.ticks = {n: cpu_ticks(p) for n, p in pids.items()}
        self.busy = machine_ticks()

    def stop(self):
        """({name: %}, seconds); the machine as "machine"."""
        secs = time.monotonic() - self.t0
        pct = {n: (cpu_ticks(p) - self.ticks[n]) * 100 / CLK_TCK / secs for n, p in self.pids.items()}
        pct["machine"] = (machine_ticks() - self.busy) * 100 / CLK_TCK / secs
        return pct, secs


class ClusterBench:
    """The section. ctx is bench.py's Bench, the servers a Cluster: h (the
    harness), out, raw(), measure(), info(), load_bg(), load_wait(), kv(),
    kvi(), daemon_start() and d (the daemon), daemon_stop(), wait_settled(),
    ramp_search(), runs, win, hold. conns and pipeline
    are section 1's (each load of C1), e2e_conns, e2e_pipeline, pool_s
    (seconds of demand a pool holds), min_pct, step and id_base section
    2's."""

    def __init__(self, ctx, conns, pipeline, e2e_conns, e2e_pipeline, pool_s, min_pct, step, id_base, say):
        self.c, self.h, self.say = ctx, ctx.h, say
        self.conns, self.pipeline = conns, pipeline
        self.e2e_conns, self.e2e_pipeline = e2e_conns, e2e_pipeline
        self.pool_s, self.min_pct, self.step, self.id_base = pool_s, min_pct, step, id_base
        self.samplers = {}  # C2: app -> its llen sampler (Popen)

    # ----------------------------------------------------------- setup ---

    def nodes_setup(self):
        """The Cluster's roles (info), its pids, AOF rewrites off on every
        node (a fork copying a node's data in a window would measure the
        fork)."""
        nodes = self.nodes = self.h.cluster_nodes()
        self.primaries = sorted(n for n in nodes if nodes[n]["primary"])
        if len(self.primaries) != 3 or len(nodes) != 6:
            raise Failed("expected 3 primaries and 3 replicas, found %s" % sorted(nodes))
        self.pids = {n: self.h.redis_pid(n) for n in nodes}
        for n in nodes.values():
            self.h.rcli("CONFIG", "SET", "auto-aof-rewrite-percentage", 0, port=n["port"])
        for name in sorted(nodes):
            self.c.info("cl_role_" + name, self.role(name))
        self.say("  Cluster: %s" % ", ".join("%s %s" % (n, self.role(n)) for n in sorted(nodes)))

    def role(self, name):
        n = self.nodes[name]
        return "primary" if n["primary"] else "replica-of-" + n["of"]

    def port(self, name):
        return self.nodes[name]["port"]

    # ------------------------------------------------------- side by side

    def together(self, name, jobs):
        """idpool-loads side by side: jobs [(label, node, args)], each
        started as raw NAME.LABEL against that node with a timeline; waits
        for all. Returns (window_s, {label: IDs/s in the common window},
        {label: raw name}, CPU {process: %}): every redis-server, idpoold
        if running, "loads" (theirs, summed) and "machine"."""
        pids = dict(self.pids)
        if self.c.d is not None:
            pids["idpoold"] = self.c.d.pid
        cpu = Cpu(pids)
        started = []
        for label, node, args in jobs:
            n = "%s.%s" % (name, label)
            started.append((label, n, self.c.load_bg(n, *args, "--timeline", self.c.raw(n + ".timeline"),
                                                     port=self.port(node))))
        for label, n, p in started:
            self.c.load_wait(p, "idpool-load %s failed (see %s)" % (n, self.c.raw(n + ".txt")))
        pct, secs = cpu.stop()
        kv = self.c.kv
        pct["loads"] = sum(float(kv(n, "cpu_ms")) / 10 / secs for _, n, _ in started)
        ov = results.overlap([(int(kv(n, "t0_ns")), float(kv(n, "secs")), self.c.raw(n + ".timeline"))
                              for _, n, _ in started])
        if ov is None:
            raise Failed("the loads of %s did not run side by side for 100 ms (see raw/%s.*)" % (name, name))
        names = {label: n for label, n, _ in started}
        return ov[0], dict(zip(names, ov[1])), names, pct

    def record_cpu(self, window, pct, loaded):
        """The CPU of a window (together's) as cl.cpu.WINDOW.PROCESS: sums
        of the loaded primaries ("primaries"), of their replicas
        ("replicas") and of all nodes ("redis"); each node's own only when
        every primary was loaded (the one primary alone is another each
        run)."""
        v = dict(pct)
        v["primaries"] = sum(pct[n] for n in loaded)
        v["replicas"] = sum(pct[n] for n, d in self.nodes.items() if d["of"] in loaded)
        v["redis"] = sum(pct[n] for n in self.nodes)
        for proc, x in v.items():
            if proc not in self.nodes or len(loaded) == len(self.primaries):
                self.c.measure("cl.cpu.%s.%s" % (window, proc), "%.1f" % x)

    # ------------------------------------------------------ C1. ceiling

    def push_pop(self, kind, run, lists):
        """Section 1's push and pop100 on the lists ({node: key}) side by
        side; returns the combined ceiling."""
        c, w = self.c, self.c.win
        common = ["--batch", 1000, "--conns", self.conns, "--pipeline", self.pipeline, "--duration", w]
        name = "cl.push.%s.%d" % (kind, run)
        push_s, push, _, cpu = self.together(name, [(n, n, ["--mode", "rpush", "--key", k] + common)
                                                    for n, k in lists.items()])
        self.record_cpu("push_" + kind, cpu, list(lists))
        jobs = []
        for n, k in lists.items():
            have = int(self.h.rcli("LLEN", k, port=self.port(n)))
            # pops stop below what the list holds, so none finds it empty
            jobs.append((n, n, ["--mode", "lpop", "--key", k, "--batch", 100, "--conns", self.conns,
                                "--pipeline", self.pipeline, "--duration", w, "--count", have - have // 10]))
        name = "cl.pop.%s.%d" % (kind, run)
        pop_s, pop, raw, cpu = self.together(name, jobs)
        self.record_cpu("pop_" + kind, cpu, list(lists))
        for n, k in lists.items():
            self.h.rcli("UNLINK", k, port=self.port(n))
            if c.kvi(raw[n], "empties"):
                self.say("warning: %s empty pops in %s (list ran dry)" % (c.kv(raw[n], "empties"), raw[n]))
        p, q = sum(push.values()), sum(pop.values())
        comb = 1 / (1 / p + 1 / q)
        for m, v in (("push", p), ("pop100", q), ("ceiling", comb), ("push_window_s", push_s),
                     ("pop_window_s", pop_s)):
            c.measure("cl.%s.%s" % (kind, m), "%.6g" % v if m.endswith("_s") else "%.0f" % v)
        if kind == "all":
            for n in lists:
                c.measure("cl.all.push.%s" % n, "%.0f" % push[n])
                c.measure("cl.all.pop100.%s" % n, "%.0f" % pop[n])
        self.say("  run %d, %s: push %.0f, pop100 %.0f -> ceiling %.0f IDs/s (side by side for %.2f s and %.2f s)%s"
                 % (run, "3 primaries at once" if kind == "all" else "%s alone" % next(iter(lists)), p, q, comb,
                    push_s, pop_s, "; per primary push %s, pop %s" % (
                        "/".join("%.0f" % push[n] for n in lists), "/".join("%.0f" % pop[n] for n in lists))
                    if kind == "all" else ""))
        return comb

    def ceiling(self):
        c = self.c
        self.say("C1. ceiling: section 1's push (RPUSH 1000 IDs/command) and pop (LPOP 100) on the 3 primaries at "
                 "once, one idpool-load each (%d connections, pipeline %d), against one primary alone; %d runs of "
                 "%d s windows" % (self.conns, self.pipeline, c.runs, c.win))
        c.info("cl_conns", self.conns)
        c.info("cl_pipeline", self.pipeline)
        lists = {n: "bench:{%s}:list" % v[0] for n, v in
                 sorted(self.h.cluster_apps("cl", key=lambda t: "bench:{%s}:list" % t).items())}
        c.info("cl_lists", " ".join("%s@%s" % (lists[n], n) for n in sorted(lists)))
        for run in range(1, c.runs + 1):
            lone = self.primaries[(run - 1) % len(self.primaries)]
            got = {}
            for kind in (("all", "one") if run % 2 else ("one", "all")):
                got[kind] = self.push_pop(kind, run, lists if kind == "all" else {lone: lists[lone]})
            c.measure("cl.scale", "%.3f" % (got["all"] / got["one"]))
        self.ceiling_all = results.median_of(os.path.join(c.out, "measure.txt"), "cl.all.ceiling")[0]

    # ------------------------------------------------- C2. end to end

    def settle(self):
        """Every pool full again: above its low water and no refill in
        flight (asked of its primary)."""
        for app in self.apps:
            self.c.wait_settled(app, self.low, "the %s pool to refill" % app, port=self.port(self.owner[app]))

    def drain(self, name, target):
        """Every pool drained at target / len(apps) IDs/s for a hold, side
        by side; (achieved IDs/s in all in the common window, empty pops,
        start_ns, end_ns, raw names, CPU)."""
        per = target / len(self.apps)
        jobs = [(app, self.owner[app], ["--mode", "lpop", "--key", pool_key(app), "--batch", 100,
                                        "--conns", self.e2e_conns, "--pipeline", self.e2e_pipeline,
                                        "--burst-us", DRAIN_BURST_US,
                                        "--rate", "%.6g" % (per / 100), "--duration", self.c.hold])
                for app in self.apps]
        start = time.monotonic_ns()
        _, rates, raw, cpu = self.together(name, jobs)
        end = time.monotonic_ns()
        empties = sum(self.c.kvi(raw[a], "empties") for a in self.apps)
        self.drained += sum(self.c.kvi(raw[a], "ids") for a in self.apps)
        return sum(rates.values()), empties, start, end, cpu

    def ramp_step(self, target):
        self.step_n += 1
        got, empties, start, end, _ = self.drain("cl.ramp.%d" % self.step_n, target)
        lows = [results.pool_lows(self.llen_file(a), start, end) for a in self.apps]
        with open(os.path.join(self.c.out, "cluster-ramp.txt"), "a") as f:
            f.write("%d %.0f %d %s\n" % (target, got, empties, " ".join("%d/%d" % fl for fl in lows)))
        why = results.step_faults(target, got, empties, lows, self.pool)
        self.say("  step %d: target %d IDs/s -> %.0f IDs/s, %d empty pops, pool lows %s%s"
                 % (self.step_n, target, got, empties, ", ".join("%d -> %d" % fl for fl in lows),
                    " -> not held (%s)" % ", ".join(why) if why else ""))
        return not why

    def llen_file(self, app):
        return self.c.raw("cl.%s.llen" % app)

    def e2e(self):
        c, h = self.c, self.h
        placed = h.cluster_apps("ce")
        self.apps = sorted(a for v in placed.values() for a in v)
        self.owner = {a: n for n, v in placed.items() for a in v}
        per_app = self.ceiling_all / len(self.apps)
        pool = int(per_app * self.pool_s // self.step + 1) * self.step
        self.pool = pool = min(max(pool, 1000000), 50000000)
        self.low = pool * self.min_pct // 100
        self.say("C2. end to end: idpoold on the Cluster URL refilling %s (pool %d IDs each, step %d, refilled "
                 "below %d %%); one idpool-load per pool (LPOP 100, %d connections, pipeline %d, the requests of each "
                 "%d us sent together), a third of the target each; ramp from 0.30 x %.0f, steps held %d s"
                 % (", ".join("%s on %s" % (a, self.owner[a]) for a in self.apps), pool, self.step, self.min_pct,
                    self.e2e_conns, self.e2e_pipeline, DRAIN_BURST_US, self.ceiling_all, c.hold))
        for k, v in (("cl_e2e_pool", pool), ("cl_e2e_step", self.step), ("cl_e2e_min_pct", self.min_pct),
                     ("cl_e2e_conns", self.e2e_conns), ("cl_e2e_pipeline", self.e2e_pipeline),
                     ("cl_e2e_burst_us", DRAIN_BURST_US)):
            c.info(k, v)
        for a in self.apps:
            h.add_app(a, step=self.step, max_pool_size=pool, min_size_percent=self.min_pct,
                      max_size_per_second=100000000, max_size_per_times=1000, current_offset=self.id_base)
        c.daemon_start("cluster")
        self.settle()
        # Placement: the pool's slot is its primary's, and that primary
        # itself holds the pool (any other node would answer MOVED).
        nodes = h.cluster_nodes()
        for a in self.apps:
            n = self.owner[a]
            have = h.llen(a, port=self.port(n))
            if h.cluster_owner(pool_key(a), nodes) != n or have is None or have < self.low:
                raise Failed("%s's pool is not on %s (it answered %s)" % (a, n, have))
        c.info("cl_apps", " ".join("%s@%s:slot%s" % (a, self.owner[a], h.rcli("CLUSTER", "KEYSLOT", pool_key(a)))
                                   for a in self.apps))
        for a in self.apps:
            self.samplers[a] = c.load_bg("cl.sampler.%s" % a, "--mode", "llen", "--key", pool_key(a),
                                         "--interval-ms", 20, "--duration", 3600, "--out", self.llen_file(a),
                                         port=self.port(self.owner[a]))
        leases0 = h.leases_of("ce%")
        self.drained = 0
        open(os.path.join(c.out, "cluster-ramp.txt"), "w").close()
        self.step_n = 0
        sustained = c.ramp_search(self.ceiling_all, self.ramp_step, self.settle)
        c.measure("cl.e2e.sustained", sustained)
        self.say("  sustained: %d IDs/s held for %d s (ceiling, 3 primaries at once: %.0f) -> e2e_ratio_cluster %.2f"
                 % (sustained, c.hold, self.ceiling_all, sustained / self.ceiling_all))
        if sustained > 0:
            for run in range(1, c.runs + 1):
                self.settle()
                got, empties, _, _, cpu = self.drain("cl.confirm.%d" % run, sustained)
                c.measure("cl.e2e.confirm", "%.0f" % got)
                c.measure("cl.e2e.confirm_empties", empties)
                self.record_cpu("e2e", cpu, self.primaries)
                self.say("  confirm %d: %.0f IDs/s, %d empty pops; CPU %% of a core: %s"
                         % (run, got, empties, ", ".join("%s %.0f" % (p, v) for p, v in sorted(cpu.items()))))
        c.measure("cl.e2e.leases", h.leases_of("ce%") - leases0)
        c.measure("cl.e2e.ids", self.drained)
        c.measure("cl.e2e.fenced_off", sum(c.d.app_field(a, "fenced") or 0 for a in self.apps))

    def run(self):
        self.nodes_setup()
        try:
            self.ceiling()
            self.e2e()
        finally:
            for p in self.samplers.values():
                stop_process(p, 5)
            self.c.daemon_stop()
