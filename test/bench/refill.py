#!/usr/bin/env python3
"""How fast one idpoold fills one application's pool, and how many MySQL
writes (lease reservations) it makes per million IDs while clients drain it.

  scripts/bench-refill.sh [RUNS] [POOL] [DRAIN_IDS]

Per run, on throwaway loopback servers (scripts/servers.sh, through the
harness' helpers in test/lib/harness.py) and a fresh application:
  fill:  time from the first ID in the pool until it holds POOL IDs
         -> IDs/s pushed into Redis by the daemon (fenced pushes included);
  drain: two idpool-load clients take DRAIN_IDS IDs (LPOP 1000) while the
         daemon refills -> lease rows written per million IDs, empty pops.
Prints one line per run and the medians. Defaults: 5 runs, 2000000, 20000000.
Environment: BUILD (default build/).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
sys.path.insert(0, HERE)

import results  # noqa: E402
import harness  # noqa: E402


def num(x):
    """A median as awk prints it: integers whole, else 6 significant digits."""
    return "%d" % x if float(x).is_integer() else "%.6g" % x


def main(argv):
    if len(argv) > 4 or any(a in ("-h", "--help") for a in argv[1:]):
        sys.stderr.write(__doc__)
        return 64
    runs, pool, drain = (int(a) for a in (argv[1:] + ["5", "2000000", "20000000"][len(argv) - 1:]))
    build = os.environ.get("BUILD") or os.path.join(ROOT, "build")
    idpoold = os.path.join(build, "idpoold")
    load = os.path.join(build, "test", "idpool-load")
    if not (os.access(idpoold, os.X_OK) and os.access(load, os.X_OK)):
        if not os.path.isdir(build):
            subprocess.run(["meson", "setup", build, ROOT], stdout=subprocess.DEVNULL, check=True)
        subprocess.run(["ninja", "-C", build], stdout=subprocess.DEVNULL, check=True)
    work = tempfile.mkdtemp(prefix="idpool-bench.", dir=os.environ.get("TMPDIR") or "/tmp")
    h = harness.Harness(work)
    try:
        h.start_servers()
        print("bench-refill: pool=%d drain=%d runs=%d cpu=%dx %s"
              % (pool, drain, runs, len(os.sched_getaffinity(0)), results.cpu_model()), flush=True)
        fills, writes_all = [], []
        for run in range(1, runs + 1):
            key = "bench%d" % run
            # max_size_per_second only sizes the default pool; here the pool is explicit.
            h.add_app(key, step=1000, max_size_per_second=100000000, max_pool_size=pool,
                      max_size_per_times=1000)
            d = h.start_daemon("idpoold", idpoold, os.path.join(work, "idpoold.log"), log_level="warn")
            deadline = time.monotonic() + 60
            if not harness.wait_until(deadline - time.monotonic(), lambda: (h.llen(key) or 0) > 0, 0.001):
                sys.stderr.write("no IDs after 60 s\n")
                return 1
            t0 = time.monotonic()
            if not harness.wait_until(deadline - time.monotonic(), lambda: h.pool_ge(key, pool), 0.002):
                sys.stderr.write("pool not full after 60 s\n")
                return 1
            ms = int((time.monotonic() - t0) * 1000)
            fill = pool * 1000 // (ms if ms > 0 else 1)
            leases0 = h.leases_of(key)
            logs = [os.path.join(work, "pop%d.json" % c) for c in (1, 2)]
            pops = []
            for log in logs:
                with open(log, "w") as f:
                    pops.append(subprocess.Popen(
                        [load, "--port", str(h.redis_port), "--mode", "lpop", "--key",
                         harness.pool_key(key), "--batch", "1000", "--count", str(drain // 2),
                         "--duration", "120", "--json"], stdout=f))
            for p in pops:
                p.wait()
            leases1 = h.leases_of(key)
            h.stop_daemon(d)
            stats = [json.load(open(log)) for log in logs]
            if any(p.returncode != 0 for p in pops) or sum(s["ids"] for s in stats) < drain // 2 * 2:
                sys.stderr.write("the drain did not take %d IDs within 120 s\n" % drain)
                return 1
            empties = sum(s["empties"] for s in stats)
            rates = sum(s["ids_per_s"] for s in stats)
            writes = "%.2f" % ((leases1 - leases0) * 1e6 / drain)
            print("run %d: fill %d IDs/s (%d in %d ms); drain %d IDs/s, %d leases = %s MySQL writes per "
                  "million IDs, %d empty pops" % (run, fill, pool, ms, rates, leases1 - leases0, writes, empties),
                  flush=True)
            fills.append(fill)
            writes_all.append(float(writes))
        print("median: fill %.0f IDs/s pushed by idpoold; %s MySQL writes per million IDs"
              % (results.median(fills), num(results.median(writes_all))))
        return 0
    finally:
        h.stop_all()
        h.stop_servers()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
