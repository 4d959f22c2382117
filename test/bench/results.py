#!/usr/bin/env python3
"""The benchmark's results (test/bench/bench.py and its sections; standard
library only): what was measured into numbers, plot data and the report.
Only the benchmark's own: servers, daemons, waits, processes and key names
come from the tests' one Python library, test/lib/harness.py.
Measurements are lines "NAME VALUE" in a file (measure.txt), one line per
run of a repeated measurement; facts about the run are "key value..." lines
in info.txt.

    median_of(path, name)             -> (median, min, max, n) or None
    fillrate(llen_path, target)       -> (ids_per_s, ms) or None
    ramp(outdir, t0_ns, llen, steps)  -> ramp-llen.dat, ramp-cons.dat
    ccdf(out, hists)                  -> a latency CCDF for latency.gp
    report(outdir)                    -> results.md; returns the summary line
    api_report(outdir)                -> results.md of the ID API section alone
    client_report(outdir)             -> results.md of the client section alone
    cluster_report(outdir)            -> results.md and cluster.json of the Cluster section
    overlap(loads)                    -> loads run side by side: their rates in the common window
    machine()                         -> "2 x CPU model, 24 GiB, Linux ..., OS"
    cpu_model()                       -> the CPU model

Run by hand, it renders results.md of a results directory again:

    results.py report OUTDIR
    results.py api-report OUTDIR     (a run of the ID API section alone)
    results.py client-report OUTDIR  (a run of the client section alone)
    results.py cluster-report OUTDIR (a run of bench.py --cluster)
"""
import json
import math
import os
import platform
import re
import sys
from collections import OrderedDict


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def read_measure(path):
    m = OrderedDict()
    if not os.path.exists(path):
        return m
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                continue
            try:
                m.setdefault(parts[0], []).append(float(parts[1]))
            except ValueError:
                pass
    return m


def write_measure(outdir, name, value):
    """One value of NAME, appended to OUTDIR/measure.txt (read by read_measure)."""
    with open(os.path.join(outdir, "measure.txt"), "a") as f:
        f.write("%s %s\n" % (name, value))


def write_info(outdir, key, value):
    """A KEY VALUE line, appended to OUTDIR/info.txt (read by read_info)."""
    with open(os.path.join(outdir, "info.txt"), "a") as f:
        f.write("%s %s\n" % (key, value))


def read_info(path):
    info = OrderedDict()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition(" ")
                if k:
                    info[k] = v
    return info


def median_of(path, name):
    """(median, min, max, n) of NAME's values in the file; None if none."""
    v = read_measure(path).get(name)
    if not v:
        return None
    return median(v), min(v), max(v), len(v)


def read_pairs(path):
    out = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 2:
                try:
                    out.append((int(p[0]), int(p[1])))
                except ValueError:
                    pass
    return out


def fillrate(path, target):
    """IDs/s at which a pool grew, from an llen sampler file ("t_ns len"):
    from the last sample at 0 to the first sample >= target. Returns
    (ids_per_s, ms), None if the pool never reached target."""
    target = int(target)
    s = read_pairs(path)
    t_end = None
    for i, (t, n) in enumerate(s):
        if n >= target:
            t_end, n_end, i_end = t, n, i
            break
    if t_end is None:
        return None
    t_start, n_start = s[0]
    for t, n in s[:i_end]:
        if n == 0:
            t_start, n_start = t, n
    dt = (t_end - t_start) / 1e9
    if dt <= 0:
        return None
    return (n_end - n_start) / dt, dt * 1000


def overlap(loads):
    """Loads run side by side, counted over the window in which all of them
    ran. loads: (t0_ns, secs, timeline) of each idpool-load (its summary's
    t0_ns and secs; its --timeline file, "t_s ids empties errors" per 100
    ms from t0). The window runs from the latest start to the earliest end
    (less 10 ms, the precision of secs). Returns (window_s, [IDs/s of each
    load]), each rate from that load's 100-ms buckets wholly inside the
    window; None if some load has no such bucket."""
    bucket = 100000000
    start = max(t0 for t0, _, _ in loads)
    end = min(t0 + int((secs - 0.01) * 1e9) for t0, secs, _ in loads)
    rates = []
    for t0, _, timeline in loads:
        ids = n = 0
        with open(timeline) as f:
            for line in f:
                p = line.split()
                if len(p) < 2:
                    continue
                b0 = t0 + round(float(p[0]) * 10) * bucket
                if b0 >= start and b0 + bucket <= end:
                    ids += int(p[1])
                    n += 1
        if n == 0:
            return None
        rates.append(ids / (n * 0.1))
    return (end - start) / 1e9, rates


def pool_lows(llen, start, end):
    """A pool's lowest length in the first and in the last third of a ramp
    step from start to end (ns), from an llen sampler's file ("t_ns len");
    0 for a third without a sample."""
    first = last = None
    third = (end - start) / 3
    for t, n in read_pairs(llen):
        if start <= t <= end:
            if t < start + third and (first is None or n < first):
                first = n
            if t > end - third and (last is None or n < last):
                last = n
    return first or 0, last or 0


def step_faults(target, got, empties, lows, pool):
    """Why a ramp step at target IDs/s was not held ([] if it was): empty
    pops, less than 97 % of the target achieved (got), or a pool not keeping
    up: its low point in the last third more than 5 % of the pool (its
    size) below its low point in the first third (lows: (first, last) of
    each pool; a pool of several seconds of demand could otherwise hide a
    refill falling behind)."""
    why = []
    if empties != 0:
        why.append("empty pops")
    if not got >= 0.97 * target:
        why.append("rate not reached")
    if any(last + pool // 20 < first for first, last in lows):
        why.append("pool shrinking")
    return why


def ramp(outdir, t0, llen, steps):
    """Plot data of the end-to-end ramp. steps lists one step a line:
    "start_ns target_ids_per_s timeline_file". Writes OUTDIR/ramp-llen.dat
    ("t_s len") and OUTDIR/ramp-cons.dat ("t_s ids_per_s empties_per_s
    target"), times in seconds from t0 (ns)."""
    t0 = int(t0)
    with open(os.path.join(outdir, "ramp-llen.dat"), "w") as out:
        for t, n in read_pairs(llen):
            out.write("%.3f %d\n" % ((t - t0) / 1e9, n))
    with open(steps) as f, open(os.path.join(outdir, "ramp-cons.dat"), "w") as out:
        for line in f:
            p = line.split()
            if len(p) != 3 or not os.path.exists(p[2]):
                continue
            start, target = int(p[0]), float(p[1])
            with open(p[2]) as tl:
                rows = tl.readlines()[:-1]  # the last 100 ms may be cut short
                for row in rows:
                    r = row.split()
                    if len(r) < 3:
                        continue
                    t, ids, empties = float(r[0]), int(r[1]), int(r[2])
                    out.write("%.3f %.0f %.0f %.0f\n" % (
                        (start - t0) / 1e9 + t, ids * 10, empties * 10, target))
            out.write("\n")


def ccdf(out, hists):
    """Sums --hist files ("latency_us count") and writes out: "latency_us
    fraction_of_requests_slower" (the complementary CDF); empty if none."""
    counts = {}
    for h in hists:
        if not os.path.exists(h):
            continue
        with open(h) as f:
            for line in f:
                p = line.split()
                if len(p) >= 2:
                    try:
                        lat, c = float(p[0]), int(p[1])
                    except ValueError:
                        continue
                    counts[lat] = counts.get(lat, 0) + c
    total = sum(counts.values())
    with open(out, "w") as f:
        if total == 0:
            return
        seen = 0
        for lat in sorted(counts):
            seen += counts[lat]
            rest = (total - seen) / total
            # gnuplot's log scale cannot show 0: stop at 1 / total
            f.write("%g %.9g\n" % (lat, max(rest, 0.5 / total)))


def cpu_model():
    """The CPU model of this machine (/proc/cpuinfo's first "model name")."""
    with open("/proc/cpuinfo") as f:
        return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")


def machine():
    """CPUs, model, memory, kernel and OS of this machine, on one line."""
    with open("/proc/meminfo") as f:
        mem_gib = "%.0f" % (int(next(ln for ln in f if ln.startswith("MemTotal:")).split()[1]) / 1048576)
    m = "%d x %s, %s GiB, %s %s" % (len(os.sched_getaffinity(0)), cpu_model(), mem_gib, platform.system(),
                                    platform.release())
    try:
        with open("/etc/os-release") as f:
            pretty = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', f.read(), re.M)
        if pretty:
            m += ", " + pretty.group(1)
    except OSError:
        pass
    return m


# ------------------------------------------------------------- report ---


def fmt_num(x, whole=False):
    """x for a table: thousands separators from 100 on, else 2 or 1 decimals;
    no decimals when whole (a count)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) >= 100 or whole:
        return "{:,.0f}".format(x)
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.2f" % x


class Report:
    def __init__(self, outdir):
        self.m = read_measure(os.path.join(outdir, "measure.txt"))
        self.info = read_info(os.path.join(outdir, "info.txt"))
        self.outdir = outdir

    def med(self, name):
        v = self.m.get(name)
        return median(v) if v else None

    def cell(self, name, unit=""):
        v = self.m.get(name)
        if not v:
            return "n/a"
        whole = all(float(x).is_integer() for x in v)  # counts stay counts
        s = fmt_num(median(v), whole) + unit
        if len(v) > 1:
            s += " (%s–%s)" % (fmt_num(min(v), whole), fmt_num(max(v), whole))
        return s

    def n(self, name):
        return len(self.m.get(name, []))

    def total(self, name):
        v = self.m.get(name)
        return sum(v) if v else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def inum(s):
    """An integer from info.txt with thousands separators; '?' if missing."""
    try:
        return "{:,}".format(int(s))
    except (TypeError, ValueError):
        return "?"


def f2(x):
    return "n/a" if x is None else "%.2f" % x


def f0(x):
    return "n/a" if x is None else "%.0f" % x


def sustained_rows(r, sustained, prefix):
    """The first lines of an end-to-end table: the sustained rate and the
    confirmation holds at it (measures PREFIX.confirm and
    PREFIX.confirm_empties)."""
    return ["| measurement | value |", "| --- | --- |",
            "| sustained (highest step held) | %s IDs/s |" % fmt_num(sustained),
            "| confirmation holds at that rate, achieved | %s IDs/s |" % r.cell(prefix + ".confirm"),
            "| confirmation holds, empty pops (total of %d) | %s |"
            % (r.n(prefix + ".confirm_empties"), f0(r.total(prefix + ".confirm_empties")))]


def report(outdir):
    """Reads OUTDIR/measure.txt and info.txt, writes OUTDIR/results.md and
    returns the summary line."""
    r = Report(outdir)
    i = r.info
    push, pop100 = r.med("ceiling.push"), r.med("ceiling.pop100")
    ceiling = r.med("ceiling.combined")
    sustained = r.med("e2e.sustained")
    e2e_ratio = ratio(sustained, ceiling)
    p999_ratio = ratio(r.med("lat.refill.p999_us"), r.med("lat.idle.p999_us"))
    # --pin: the same, Redis on a CPU of its own; and what the refill adds to a drain at half the ceiling
    p999_pinned = ratio(r.med("lat.pin_sustained.p999_us"), r.med("lat.pin_idle.p999_us"))
    p999_refill = ratio(r.med("lat.pin_refill.p999_us"), r.med("lat.pin_drain.p999_us"))
    leases, ids = r.total("mysql.leases"), r.total("mysql.ids")
    writes = None if leases is None or not ids else leases * 1e6 / ids
    idle_cpu = r.med("scale.idle_cpu_pct")
    fenced = r.med("fenced.fill")

    L = []
    L.append("## bench.sh results (%s profile)" % i.get("profile", "?"))
    L.append("")
    L.append("```sh\n%s\n```" % i.get("command", "scripts/bench.sh"))
    L.append("")
    L.append("**Machine:** %s. %s" % (i.get("machine", "?"), i.get("versions", "")))
    L.append("Measured %s; the run took %s s. Values are medians of %s runs, "
             "(min–max) in parentheses; %s-second windows."
             % (i.get("date", "?"), i.get("elapsed_s", "?"), i.get("runs", "?"),
                i.get("window_s", "?")))
    L.append("Load average (1, 5, 15 min) at the start: %s; at the end: %s (other work on "
             "the machine skews every number)." % (i.get("load_start", "?"), i.get("load_end", "?")))
    if i.get("note"):
        L.append("")
        L.append("*%s*" % i["note"])
    L.append("")
    L.append("| goal | measured | target | met |")
    L.append("| --- | --- | --- | --- |")

    def goal(name, val, target, ok):
        L.append("| %s | %s | %s | %s |" % (name, val, target,
                                            "n/a" if ok is None else ("yes" if ok else "**no**")))

    goal("e2e_ratio = sustained / ceiling", f2(e2e_ratio), ">= 0.8",
         None if e2e_ratio is None else e2e_ratio >= 0.8)
    goal("p999_ratio = p99.9 under refill / idle", f2(p999_ratio), "<= 1.5",
         None if p999_ratio is None else p999_ratio <= 1.5)
    if p999_refill is not None:
        goal("p999_refill_ratio = p99.9 pinned, drain at half the ceiling: refilled / not refilled",
             f2(p999_refill), "<= 1.5", p999_refill <= 1.5)
    goal("MySQL writes per million IDs (steady state)", f2(writes), "<= 10",
         None if writes is None else writes <= 10)
    goal("idle CPU, %s applications (%% of one core)" % inum(i.get("scale_apps")),
         f2(idle_cpu), "< 5", None if idle_cpu is None else idle_cpu < 5)
    empt = r.total("scale.load_empties")
    goal("%s applications under load: empty pops" % inum(i.get("load_apps")),
         fmt_num(empt, True), "0", None if empt is None else empt == 0)
    L.append("")

    L.append("### Ceiling and baselines (Redis alone, no daemon)")
    L.append("")
    L.append("%s connections, pipeline %s. Push: RPUSH of 1000 pre-formatted IDs per "
             "command; pops from a prefilled list; INCRBY: a counter generator, the reply "
             "stands for the batch." % (i.get("ceil_conns", "?"), i.get("ceil_pipeline", "?")))
    L.append("")
    L.append("| measurement | IDs/s |")
    L.append("| --- | --- |")
    rows = [
        ("push: RPUSH, 1000 IDs per command, shaped as the daemon's (18 digits, consecutive)",
         "ceiling.push"),
        ("push of random IDs of 16..19 digits (earlier runs' ceiling; not in it)", "ceiling.push_random"),
        ("pop: LPOP, batch 1", "ceiling.pop1"),
        ("pop: LPOP, batch 100", "ceiling.pop100"),
        ("**ceiling** = 1 / (1/push + 1/pop batch 100)", "ceiling.combined"),
        ("baseline: INCRBY counter, batch 1", "base.incrby1"),
        ("baseline: INCRBY counter, batch 100", "base.incrby100"),
        ("idpoold fenced push: fill of an empty %s-ID pool" % inum(i.get("fenced_pool")),
         "fenced.fill"),
    ]
    for label, name in rows:
        L.append("| %s | %s |" % (label, r.cell(name)))
    L.append("")
    L.append("Pushes fenced off during those fills: %s in all." % f0(r.total("fenced.fenced_off")))
    L.append("")
    L.append("fenced push / plain RPUSH = %s; pop batch 100 / INCRBY batch 100 = %s"
             % (f2(ratio(fenced, push)), f2(ratio(pop100, r.med("base.incrby100")))))
    L.append("")

    L.append("### End to end: idpoold refilling while clients drain (LPOP batch 100)")
    L.append("")
    L.append("Pool %s IDs (step %s, min_size_percent %s); %s connections, pipeline %s; each ramp step "
             "held %s s%s." % (inum(i.get("e2e_pool")), inum(i.get("e2e_step")),
                               i.get("e2e_min_pct", "?"), i.get("e2e_conns", "?"), i.get("e2e_pipeline", "?"),
                               i.get("hold_s", "?"), i.get("hold_note", "")))
    L.append("")
    L.append("A step is held with zero empty pops, 97 % of the target reached and the pool "
             "keeping up (its low point in the last third of the step at most 5 % of the pool "
             "below its low point in the first third).")
    L.append("")
    L.append("| ramp step: target IDs/s | achieved IDs/s | empty pops | pool low, first third "
             "| pool low, last third |")
    L.append("| --- | --- | --- | --- | --- |")
    ramp = os.path.join(outdir, "ramp.txt")
    if os.path.exists(ramp):
        with open(ramp) as f:
            for line in f:
                p = line.split()
                if len(p) >= 5:
                    L.append("| %s | %s | %s | %s | %s |" % (
                        fmt_num(float(p[0])), fmt_num(float(p[1])), p[2],
                        fmt_num(float(p[3])), fmt_num(float(p[4]))))
    L.append("")
    L += sustained_rows(r, sustained, "e2e")
    L.append("| idpoold CPU during the holds (%% of one core) | %s |" % r.cell("e2e.daemon_cpu_pct"))
    L.append("| redis-server CPU during the holds (%% of one core) | %s |"
             % r.cell("e2e.redis_cpu_pct"))
    L.append("| idpool-load (the clients) CPU during the holds (%% of one core) | %s |"
             % r.cell("e2e.client_cpu_pct"))
    L.append("| pushes fenced off (e2e application, whole run) | %s |" % f0(r.total("e2e.fenced_off")))
    L.append("| **e2e_ratio** = sustained / ceiling | **%s** |" % f2(e2e_ratio))
    L.append("| lease reservations during the drain | %s for %s IDs = **%s per million** |"
             % (f0(leases), fmt_num(ids), f2(writes)))
    L.append("")

    L.append("### Latency of single-ID LPOP under refill")
    L.append("")
    L.append("One client sends `LPOP list` (1 ID) %s times a second on one connection, open "
             "loop (up to %s requests in flight; latency counts from the scheduled send time) "
             "from a list nothing refills. *Idle*: nothing else runs. *Drain only*: %s "
             "connections (one request in flight each) pop batches of 100 from another "
             "prefilled list at %s IDs/s (%s), nothing is refilled. "
             "*Refill*: the same drain on the e2e pool while idpoold refills it.%s"
             % (inum(i.get("lat_rate")), i.get("lat_pipeline", "?"), i.get("hog_conns", "?"),
                inum(i.get("lat_hog_rate")),
                "the sustained rate" if i.get("e2e_sustained") in (None, i.get("lat_hog_rate"))
                else "BENCH_HOG_RATE; the sustained rate: %s" % inum(i.get("e2e_sustained")),
                " *Flat out*: that pool drained as fast as those connections can (it runs "
                "dry; idpoold refills it continuously)." if r.n("lat.flat.p50_us") else ""))
    L.append("")
    L.append("| condition | p50 µs | p99 µs | p99.9 µs | max µs | drain achieved, IDs/s |")
    L.append("| --- | --- | --- | --- | --- | --- |")
    for cond, label in (("idle", "idle"), ("drain", "drain only, no refill"),
                        ("refill", "**drained and refilled**"),
                        ("flat", "drained flat out and refilled")):
        if r.n("lat.%s.p50_us" % cond):
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                label, r.cell("lat.%s.p50_us" % cond), r.cell("lat.%s.p99_us" % cond),
                r.cell("lat.%s.p999_us" % cond), r.cell("lat.%s.max_us" % cond),
                r.cell("lat.%s.drain_ids_per_s" % cond) if cond != "idle" else "–"))
    L.append("")
    idle999 = r.med("lat.idle.p999_us")
    L.append("**p999_ratio** = p99.9 refill / idle = **%s**; refill / drain only = %s "
             "(what the refill adds to the drain)%s."
             % (f2(p999_ratio), f2(ratio(r.med("lat.refill.p999_us"), r.med("lat.drain.p999_us"))),
                "; flat out / idle = %s" % f2(ratio(r.med("lat.flat.p999_us"), idle999))
                if r.n("lat.flat.p50_us") else ""))
    L.append("")
    if r.n("lat.pin_idle.p50_us"):
        L.append("Pinned (`--pin`): redis-server alone on CPU %s, mariadbd, idpoold and the clients on %s; "
                 "the drain at half the ceiling (%s IDs/s) and at the rate above."
                 % (i.get("pin_redis_cpu", "?"), i.get("pin_rest_cpus", "?"), i.get("pin_half_rate", "?")))
        L.append("")
        L.append("| condition (pinned) | p50 µs | p99 µs | p99.9 µs | max µs | drain IDs/s |")
        L.append("| --- | --- | --- | --- | --- | --- |")
        for cond, label in (("pin_idle", "idle"), ("pin_drain", "another list drained at half the ceiling, "
                                                   "no refill"),
                            ("pin_refill", "the pool drained at half the ceiling and refilled"),
                            ("pin_sustained", "the pool drained at the rate above and refilled")):
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                label, r.cell("lat.%s.p50_us" % cond), r.cell("lat.%s.p99_us" % cond),
                r.cell("lat.%s.p999_us" % cond), r.cell("lat.%s.max_us" % cond),
                r.cell("lat.%s.drain_ids_per_s" % cond) if cond != "pin_idle" else "–"))
        L.append("")
        L.append("**p999_ratio_pinned** = p99.9 refill / idle, pinned = **%s**; **p999_refill_ratio** = "
                 "p99.9 at half the ceiling, refilled / not refilled = **%s** (goal <= 1.5)."
                 % (f2(p999_pinned), f2(p999_refill)))
        L.append("")

    L.append("### Scale")
    L.append("")
    L.append("| measurement | value |")
    L.append("| --- | --- |")
    L.append("| %s applications (pool %s, step %s): all pools filled after | %s s |"
             % (inum(i.get("scale_apps")), inum(i.get("scale_pool")), inum(i.get("scale_step")),
                r.cell("scale.fill_s")))
    L.append("| refills fenced off during that fill (lock TTL passed before the push) | %s |"
             % f0(r.total("scale.fill_fenced")))
    L.append("| idle: idpoold CPU (%% of one core) | **%s** |" % r.cell("scale.idle_cpu_pct"))
    L.append("| idle: idpoold RSS | %s MiB |" % r.cell("scale.rss_mib"))
    L.append("| idle: redis-server CPU (%% of one core) | %s |" % r.cell("scale.idle_redis_cpu_pct"))
    L.append("| %s applications drained at once (LPOP %s from each, %s times a second, "
             "nominal; after a warm-up window): consumed in all | %s IDs/s |"
             % (inum(i.get("load_apps")), i.get("load_count", "?"), i.get("load_calls_per_s", "?"),
                r.cell("scale.load_ids_per_s")))
    L.append("| under load: empty pops (total of %d windows) | %s of %s pops |"
             % (r.n("scale.load_empties"), fmt_num(empt, True),
                fmt_num(r.total("scale.load_pops"), True)))
    L.append("| under load: smallest pool seen (IDs) | %s |" % r.cell("scale.load_minlen"))
    L.append("| under load: idpoold CPU (%% of one core) | %s |" % r.cell("scale.load_cpu_pct"))
    sl, si = r.total("scale.load_leases"), r.total("scale.load_ids")
    L.append("| under load: lease reservations per million IDs (short windows, not steady state) | %s |"
             % f2(None if sl is None or not si else sl * 1e6 / si))
    L.append("")
    L.append("Plots: `ramp.png` (pool length and consumption during the ramp), "
             "`latency.png` (latency distribution idle vs. under refill).")
    L.append("")

    L += api_lines(r)
    L += client_lines(r)
    summary = ("bench: e2e_ratio=%s p999_ratio=%s sustained_ids_per_s=%s ceiling_ids_per_s=%s "
               "mysql_writes_per_million=%s idle_cpu_pct=%s"
               % (f2(e2e_ratio), f2(p999_ratio), f0(sustained), f0(ceiling), f2(writes),
                  f2(idle_cpu))) + api_summary(r) + client_summary(r)
    if p999_refill is not None:
        summary += " p999_ratio_pinned=%s p999_refill_ratio=%s" % (f2(p999_pinned), f2(p999_refill))
    L.append("```\n%s\n```" % summary)
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    return summary


def section_report(outdir, title, command, lines, summary):
    """results.md of a run of one section alone: a header (TITLE, the
    command, else COMMAND, the machine, date and load), lines(Report) and
    the summary line "bench:" + summary(Report), which it returns."""
    r = Report(outdir)
    i = r.info
    L = ["## " + title, "", "```sh\n%s\n```" % i.get("command", command), ""]
    if i.get("machine"):
        L.append("**Machine:** %s. %s" % (i["machine"], i.get("versions", "")))
    L.append("Measured %s. Load average (1, 5, 15 min) at the start: %s; at the end: %s (other work on the "
             "machine skews every number)." % (i.get("date", "?"), i.get("load_start", "?"), i.get("load_end", "?")))
    L.append("")
    L += lines(r)
    line = "bench:" + summary(r)
    L.append("```\n%s\n```" % line)
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    return line


# ------------------------------------------------- the ID API (api.py) ---

API_GOAL_RATIO = 0.7  # issuer req/s / nginx req/s
LEAF_QPS = 50000  # Meituan Leaf's published figure (segment mode, a 4C8G VM)
API_ROWS = (  # measure prefix, label, IDs/s shown
    ("nginx", "nginx, static body of the same size", False),
    ("issuer", "**issuer, pool refilled meanwhile**", True),
    ("norefill", "issuer, no refill in the window", True),
    ("nginx_batch", "nginx, static body of the size of the batch", False),
    ("batch", "issuer, count=100 (batch)", True),
)


def api_values(r):
    """(issuer req/s, api_ratio) medians from a Report; None if not measured."""
    rps, ngx = r.med("api.issuer.rps"), r.med("api.nginx.rps")
    return rps, ratio(rps, ngx)


def api_summary(r):
    """" api_rps=X api_ratio=Y" for the summary line; "" if not measured."""
    rps, rat = api_values(r)
    if rps is None:
        return ""
    return " api_rps=%s api_ratio=%s" % (f0(rps), f2(rat))


def api_lines(r):
    """The ID API section of results.md (lines); [] if not measured."""
    i = r.info
    if not r.n("api.issuer.rps"):
        return []
    rps, rat = api_values(r)
    L = ["### The ID API (idpoold --api) against nginx", ""]
    L.append("wrk %s, 1 thread x %s connections (keep-alive) per window, %s s windows, %s rounds in the order "
             "of the table; values are medians of the rounds, (min–max) in parentheses. Pinned: %s. nginx "
             "(%s): 1 worker process, access_log off, `return 200` of the issuer's own body (%s bytes: `%s`; "
             "batch %s bytes), the same Content-Type and Cache-Control; response headers %s bytes (issuer) and "
             "%s bytes (nginx). The issuer: idpoold with the default api-buffer (1,000), one application, pool "
             "%s IDs (step %s) refilled below %s %%, IDs of 18 digits; latency counts from when wrk sent the "
             "request on a connection that waited for the previous answer (closed loop)."
             % (i.get("api_wrk", "?"), i.get("api_conns", "?"),
                i.get("api_duration_s", "?"), i.get("api_rounds", "?"), i.get("api_pin", "?"),
                i.get("api_nginx", "?"), i.get("api_body_bytes", "?"), i.get("api_body", "?"),
                i.get("api_batch_body_bytes", "?"), i.get("api_issuer_header_bytes", "?"),
                i.get("api_nginx_header_bytes", "?"), inum(i.get("api_pool")), inum(i.get("api_step")),
                i.get("api_min_pct", "?")))
    L.append("")
    L.append("| goal | measured | target | met |")
    L.append("| --- | --- | --- | --- |")
    L.append("| api_ratio = issuer req/s / nginx req/s | %s | >= %.1f | %s |"
             % (f2(rat), API_GOAL_RATIO, "n/a" if rat is None else ("yes" if rat >= API_GOAL_RATIO else "**no**")))
    L.append("| issuer req/s (single ID) above Leaf's published %s QPS | %s | > %s | %s |"
             % (inum(LEAF_QPS), fmt_num(rps), inum(LEAF_QPS), "yes" if rps > LEAF_QPS else "**no**"))
    L.append("")
    L.append("| window | req/s | IDs/s | p50 µs | p99 µs | p99.9 µs | max µs | server CPU % | refills in it "
             "| errors, non-2xx |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, label, ids in API_ROWS:
        k = "api.%s." % name
        if not r.n(k + "rps"):
            continue
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, r.cell(k + "rps"), r.cell(k + "ids_per_s") if ids else "–", r.cell(k + "p50_us"),
            r.cell(k + "p99_us"), r.cell(k + "p999_us"), r.cell(k + "max_us"), r.cell(k + "server_cpu_pct"),
            r.cell(k + "refills") if ids else "–", fmt_num(r.total(k + "errors"), True)))
    L.append("")
    L.append("**api_ratio** = %s (the ratio of the medians; issuer / nginx within each round: %s); batch: "
             "issuer / nginx = %s; p99.9 with refills / without = %s; "
             "IDs pushed into the pool during the refilled windows: %s; wrk's CPU (%% of one core): %s "
             "(nginx), %s (issuer); redis-server's CPU during the issuer windows: %s %%."
             % (f2(rat), r.cell("api.round_ratio"), f2(ratio(r.med("api.batch.rps"), r.med("api.nginx_batch.rps"))),
                f2(ratio(r.med("api.issuer.p999_us"), r.med("api.norefill.p999_us"))),
                r.cell("api.issuer.pushed"), r.cell("api.nginx.wrk_cpu_pct"), r.cell("api.issuer.wrk_cpu_pct"),
                r.cell("api.issuer.redis_cpu_pct")))
    if r.n("api.batch.rps"):
        L.append("")
        L.append("count=%s: %s idpool_take calls a second (one in flight per application, at most %s IDs "
                 "each), redis-server at %s %% and idpoold at %s %% of a core, wrk at %s %%."
                 % (i.get("api_batch", "?"), r.cell("api.batch.takes_per_s"), i.get("api_per_take", "?"),
                    r.cell("api.batch.redis_cpu_pct"), r.cell("api.batch.server_cpu_pct"),
                    r.cell("api.batch.wrk_cpu_pct")))
    L.append("")
    return L


def api_report(outdir):
    """results.md of a run of the ID API section alone (api.py, or
    bench.py --api-only); returns its summary line."""
    return section_report(outdir, "ID API benchmark", "python3 test/bench/api.py", api_lines, api_summary)


# ------------------------------------------- the client libraries (client.py) ---

CLIENT_GOAL_IDS = 100e6  # idpool_next calls/s, 1 thread
CLIENT_GOAL_RATIO = 0.5  # idpool_next / atomic_fetch_add, 1 thread
CLIENT_WINDOWS = (  # measure prefix, label, timed
    ("flat", "1 thread flat out, untimed", False),
    ("flat_timed", "1 thread flat out, each call timed", True),
    ("paced", "1 thread at {rate} IDs/s, default options", True),
    ("paced_buf", "1 thread at {rate} IDs/s, buffer {buffer}", True),
    ("paced2_buf", "2 threads, {rate} IDs/s in all, buffer {buffer}", True),
)


def client_values(r):
    """(idpool_next calls/s, client_ratio) of 1 thread, medians from a
    Report; None if not measured."""
    return r.med("client.t1.next_per_s"), r.med("client.t1.ratio")


def client_summary(r):
    """" client_ids_per_s=X client_ratio=Y" for the summary line; "" if not measured."""
    ids, rat = client_values(r)
    if ids is None:
        return ""
    return " client_ids_per_s=%s client_ratio=%s" % (f0(ids), f2(rat))


def client_lines(r):
    """The client section of results.md (lines); [] if not measured."""
    i = r.info
    if not r.n("client.t1.next_per_s"):
        return []
    ids, rat = client_values(r)

    def met(ok):
        return "n/a" if ok is None else ("yes" if ok else "**no**")

    L = ["### The client libraries: libidpool's idpool_next() and idpool_client's App.next()", ""]
    L.append("One application, pool %s IDs (step %s) refilled below %s %% by idpoold, takes of at most %s IDs, IDs "
             "of 18 digits; %s rounds in the order of the tables; values are medians of the rounds, (min–max) in "
             "parentheses. Pinned: %s."
             % (inum(i.get("client_pool")), inum(i.get("client_step")), i.get("client_min_pct", "?"),
                inum(i.get("client_per_take")), i.get("client_rounds", "?"), i.get("client_pin", "?")))
    L.append("")
    waits = r.total("client.paced_buf.waits")
    L.append("| goal | measured | target | met |")
    L.append("| --- | --- | --- | --- |")
    L.append("| idpool_next, 1 thread (calls/s) | %s | >= %s | %s |"
             % (fmt_num(ids), inum(CLIENT_GOAL_IDS), met(None if ids is None else ids >= CLIENT_GOAL_IDS)))
    L.append("| client_ratio = idpool_next / atomic_fetch_add, 1 thread | %s | >= %.1f | %s |"
             % (f2(rat), CLIENT_GOAL_RATIO, met(None if rat is None else rat >= CLIENT_GOAL_RATIO)))
    L.append("| calls that waited for Redis at %s IDs/s with buffer %s (all rounds) | %s | 0 | %s |"
             % (inum(i.get("client_rate")), inum(i.get("client_buffer")), fmt_num(waits, True),
                met(None if waits is None else waits == 0)))
    L.append("")
    L.append("Throughput from memory: the client's buffer filled with %s IDs first, then 20 slices of untimed "
             "loops, `atomic_fetch_add` on one shared counter and `idpool_next` in turn in the same process "
             "(medians of the slices; the ratio is taken within each slice); the background thread refills "
             "meanwhile. Python %s: `App.next()` against `next()` on an `itertools.count()`, %s calls in 10 "
             "slices in turn, in one interpreter, buffer filled first."
             % (inum(i.get("client_calls")), i.get("client_python", "?"), inum(i.get("client_py_calls"))))
    L.append("")
    L.append("| threads | next() calls/s | counter calls/s | ratio | best slice: next() | best slice: counter "
             "| calls that waited |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for t in (1, 2):
        k = "client.t%d." % t
        if r.n(k + "next_per_s"):
            L.append("| libidpool, %d (`idpool_next` / `atomic_fetch_add`) | %s | %s | %s | %s | %s | %s |" % (
                t, r.cell(k + "next_per_s"), r.cell(k + "atomic_per_s"), r.cell(k + "ratio"),
                r.cell(k + "next_best_per_s"), r.cell(k + "atomic_best_per_s"),
                fmt_num(r.total(k + "waits"), True)))
    if r.n("client.py.next_per_s"):
        L.append("| Python, 1 (`App.next()` / `next(itertools.count())`) | %s | %s | %s | %s | %s | %s |" % (
            r.cell("client.py.next_per_s"), r.cell("client.py.count_per_s"), r.cell("client.py.ratio"),
            r.cell("client.py.next_best_per_s"), r.cell("client.py.count_best_per_s"),
            fmt_num(r.total("client.py.waits"), True)))
    L.append("")
    L.append("Sustained: threads call `idpool_next` continuously for %s s (after %s s of warm-up) while the "
             "background thread refills the buffer from Redis and idpoold refills the pool; paced threads make "
             "the calls due every millisecond back to back and sleep until the next. Each call timed with two "
             "`clock_gettime` (an empty timed call: %s ns, included) into a log-linear histogram (~3 %%); "
             "*waited*: calls that found the buffer empty (`idpool_stats.waits`); *preempted*: the measuring "
             "threads' involuntary context switches (a call the scheduler interrupts is slow without waiting); "
             "the pool's length sampled every 0.25 s; CPU over the tool's life (warm-up included), %% of one core."
             % (i.get("client_duration_s", "?"), i.get("client_warmup_s", "?"), r.cell("client.paced.timer_p50_ns")))
    L.append("")
    L.append("| window | IDs/s | calls that waited | p50 ns | p99 ns | p99.9 ns | p99.99 ns | max ns | calls over "
             "100 µs | preempted | pool low | refills | client CPU % | redis CPU % |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    fill = dict(rate=inum(i.get("client_rate")), buffer=inum(i.get("client_buffer")))
    for name, label, timed in CLIENT_WINDOWS:
        k = "client.%s." % name
        if not r.n(k + "ids_per_s"):
            continue
        L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label.format(**fill), r.cell(k + "ids_per_s"), r.cell(k + "waits"),
            *((r.cell(k + m) for m in ("p50_ns", "p99_ns", "p999_ns", "p9999_ns", "max_ns", "over_100us"))
              if timed else ["–"] * 6),
            r.cell(k + "preempted"), r.cell(k + "pool_min"), r.cell(k + "refills"), r.cell(k + "tool_cpu_pct"),
            r.cell(k + "redis_cpu_pct")))
    L.append("")
    return L


def client_report(outdir):
    """results.md of a run of the client section alone (client.py, or
    bench.py --client-only); returns its summary line."""
    return section_report(outdir, "Client library benchmark", "python3 test/bench/client.py", client_lines,
                          client_summary)


# ------------------------------------------- the Redis Cluster (cluster.py) ---

CLUSTER_GOAL_RATIO = 0.8  # e2e_ratio_cluster = sustained / ceiling of the 3 primaries at once
CLUSTER_WINDOWS = (  # CPU windows: measure infix, label
    ("push_all", "C1 push, 3 primaries"),
    ("pop_all", "C1 pop, 3 primaries"),
    ("push_one", "C1 push, 1 primary"),
    ("pop_one", "C1 pop, 1 primary"),
    ("e2e", "C2 holds at the sustained rate"),
)


def cluster_values(r):
    """(sustained, ceiling of the 3 primaries at once, of one alone,
    e2e_ratio_cluster, scale) from a Report; None where not measured."""
    sus, c_all, c_one = r.med("cl.e2e.sustained"), r.med("cl.all.ceiling"), r.med("cl.one.ceiling")
    return sus, c_all, c_one, ratio(sus, c_all), r.med("cl.scale")


def cluster_summary(r):
    """" e2e_ratio_cluster=..." for the summary line; "" if not measured."""
    sus, c_all, c_one, rat, scale = cluster_values(r)
    if c_all is None:
        return ""
    return (" e2e_ratio_cluster=%s cluster_sustained_ids_per_s=%s cluster_ceiling_ids_per_s=%s "
            "one_primary_ceiling_ids_per_s=%s cluster_scale=%s" % (f2(rat), f0(sus), f0(c_all), f0(c_one), f2(scale)))


def cluster_lines(r):
    """The Cluster section of results.md (lines); [] if not measured."""
    i = r.info
    if not r.n("cl.all.ceiling"):
        return []
    sus, c_all, c_one, rat, scale = cluster_values(r)
    roles = {k[len("cl_role_"):]: v for k, v in i.items() if k.startswith("cl_role_")}
    L = ["### Redis Cluster: ceiling and end to end", ""]
    L.append("A Cluster of %d nodes (%s) on this machine's cores with everything else; AOF everysec, rewrites off. "
             "Values are medians of %s runs, (min–max) in parentheses."
             % (len(roles), ", ".join("%s %s" % (n, roles[n].replace("-", " ")) for n in sorted(roles)),
                i.get("runs", "?")))
    L.append("")
    L.append("| goal | measured | target | met |")
    L.append("| --- | --- | --- | --- |")
    L.append("| e2e_ratio_cluster = sustained / ceiling of the 3 primaries at once | %s | >= %.1f | %s |"
             % (f2(rat), CLUSTER_GOAL_RATIO, "n/a" if rat is None else ("yes" if rat >= CLUSTER_GOAL_RATIO
                                                                         else "**no**")))
    L.append("")
    L.append("**C1, ceiling.** Section 1's method on each primary: RPUSH of 1000 pre-formatted IDs per command "
             "for %s s, then LPOP 100 from that list until 90 %% of it is gone (or %s s); one idpool-load per "
             "primary (%s connections, pipeline %s; lists %s), all started together, each counted over the window "
             "in which all of them ran and summed; ceiling = 1 / (1/push + 1/pop). *One primary alone*: the same "
             "in the same run on one of them (another each run; the two in turn first)."
             % (i.get("window_s", "?"), i.get("window_s", "?"), i.get("cl_conns", "?"), i.get("cl_pipeline", "?"),
                i.get("cl_lists", "?")))
    L.append("")
    L.append("| IDs/s | 3 primaries at once | one primary alone | ratio |")
    L.append("| --- | --- | --- | --- |")
    for m, label in (("push", "push: RPUSH, 1000 IDs per command"), ("pop100", "pop: LPOP, batch 100"),
                     ("ceiling", "**ceiling** = 1 / (1/push + 1/pop)")):
        L.append("| %s | %s | %s | %s |" % (label, r.cell("cl.all." + m), r.cell("cl.one." + m),
                                            f2(ratio(r.med("cl.all." + m), r.med("cl.one." + m)))))
    L.append("")
    prim = sorted(n for n, v in roles.items() if v == "primary")
    L.append("The three loads ran side by side for %s s (push) and %s s (pop; a pop ends when 90 %% of its list "
             "is gone, as in section 1); per primary, push %s and pop %s IDs/s. "
             "**scale** = ceiling of the 3 / ceiling of one = %s (medians of each run's ratio: %s)."
             % (r.cell("cl.all.push_window_s"), r.cell("cl.all.pop_window_s"),
                " / ".join(f0(r.med("cl.all.push." + n)) for n in prim),
                " / ".join(f0(r.med("cl.all.pop100." + n)) for n in prim), f2(ratio(c_all, c_one)), r.cell("cl.scale")))
    L.append("")
    L.append("**C2, end to end.** One idpoold on the Cluster URL refilling %s (pool %s IDs each, step %s, refilled "
             "below %s %%, IDs of 18 digits) while one idpool-load per application drains it, LPOP 100 (%s "
             "connections, pipeline %s), a third of the target each, steps held %s s%s. A step is held with no "
             "empty pop, 97 %% of the target reached in the window all loads ran and every pool keeping up (as "
             "section 2)."
             % (", ".join("%s (%s, slot %s)" % tuple(re.split(r"@|:slot", a)) for a in i.get("cl_apps", "?").split()),
                inum(i.get("cl_e2e_pool")),
                inum(i.get("cl_e2e_step")), i.get("cl_e2e_min_pct", "?"), i.get("cl_e2e_conns", "?"),
                i.get("cl_e2e_pipeline", "?"), i.get("hold_s", "?"), i.get("hold_note", "")))
    L.append("")
    L.append("| ramp step: target IDs/s | achieved IDs/s | empty pops | pool lows, first third -> last third |")
    L.append("| --- | --- | --- | --- |")
    path = os.path.join(r.outdir, "cluster-ramp.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) >= 3:
                    L.append("| %s | %s | %s | %s |" % (fmt_num(float(p[0])), fmt_num(float(p[1])), p[2], ", ".join(
                        " -> ".join(fmt_num(float(x)) for x in fl.split("/")) for fl in p[3:])))
    L.append("")
    leases, ids = r.total("cl.e2e.leases"), r.total("cl.e2e.ids")
    L += sustained_rows(r, sus, "cl.e2e")
    L.append("| **e2e_ratio_cluster** = sustained / ceiling of the 3 primaries | **%s** |" % f2(rat))
    L.append("| sustained / ceiling of one primary alone | %s |" % f2(ratio(sus, c_one)))
    L.append("| pushes fenced off (whole section) | %s |" % f0(r.total("cl.e2e.fenced_off")))
    L.append("| lease reservations | %s for %s IDs |" % (f0(leases), fmt_num(ids, True)))
    L.append("")
    L.append("**CPU**, % of one core over each window (2 cores: 200 in all): redis-server and idpoold from "
             "/proc/PID/stat, the loads from their own getrusage, *machine* from /proc/stat (every process, "
             "other work on the machine included). Each node's own figure only where the 3 primaries were "
             "loaded (one primary alone is another one each run).")
    L.append("")
    wins = [(w, label) for w, label in CLUSTER_WINDOWS if r.n("cl.cpu.%s.machine" % w)]
    L.append("| process | %s |" % " | ".join(label for _, label in wins))
    L.append("| --- |" + " --- |" * len(wins))
    procs = [(n, "redis-server %s (%s)" % (n, roles[n].replace("-", " "))) for n in sorted(roles)]
    procs += [("primaries", "the primaries loaded, in all"), ("replicas", "their replicas, in all"),
              ("redis", "**every redis-server**"), ("idpoold", "idpoold"), ("loads", "idpool-load, all of them"),
              ("machine", "**machine**")]
    for proc, label in procs:
        if any(r.n("cl.cpu.%s.%s" % (w, proc)) for w, _ in wins):
            L.append("| %s | %s |" % (label, " | ".join(r.cell("cl.cpu.%s.%s" % (w, proc)) if r.n(
                "cl.cpu.%s.%s" % (w, proc)) else "–" for w, _ in wins)))
    L.append("")
    L.append("The daemon's instructions per ID on the Cluster against one Redis: `meson test -C build "
             "perf_cluster` (callgrind), not measured here.")
    L.append("")
    return L


def cluster_json(outdir):
    """OUTDIR/cluster.json: the summary's values, every cl.* measurement
    (median, min, max, n) and the cl_* facts."""
    r = Report(outdir)
    sus, c_all, c_one, rat, scale = cluster_values(r)
    doc = {"e2e_ratio_cluster": rat, "sustained_ids_per_s": sus, "ceiling_all_ids_per_s": c_all,
           "ceiling_one_ids_per_s": c_one, "scale": scale,
           "measures": {k: {"median": median(v), "min": min(v), "max": max(v), "n": len(v)}
                        for k, v in r.m.items() if k.startswith("cl.")},
           "info": {k: v for k, v in r.info.items() if k.startswith("cl_") or k in (
               "machine", "versions", "date", "runs", "window_s", "hold_s", "elapsed_s", "load_start", "load_end")}}
    with open(os.path.join(outdir, "cluster.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def cluster_report(outdir):
    """results.md and cluster.json of a run of the Cluster section
    (bench.py --cluster); returns its summary line."""
    cluster_json(outdir)
    return section_report(outdir, "Redis Cluster benchmark", "scripts/bench.sh --cluster", cluster_lines,
                          cluster_summary)


def main(argv):
    if len(argv) == 3 and argv[1] == "cluster-report":
        print(cluster_report(argv[2]))
        return 0
    if len(argv) == 3 and argv[1] == "report":
        print(report(argv[2]))
        return 0
    if len(argv) == 3 and argv[1] == "api-report":
        print(api_report(argv[2]))
        return 0
    if len(argv) == 3 and argv[1] == "client-report":
        print(client_report(argv[2]))
        return 0
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
