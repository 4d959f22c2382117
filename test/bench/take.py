#!/usr/bin/env python3
"""The cost of idpool_take (limits enforced inside Redis) against plain LPOP,
same batch size, same Redis, side by side in one run.

  scripts/bench-take.sh [RUNS] [BATCH] [REQUESTS]

On a throwaway loopback redis-server (scripts/servers.sh, through the
harness' helpers in test/lib/harness.py) with the idpool function library
loaded, each run refills one pool with REQUESTS x BATCH IDs (so no pop
ever finds it empty) and times REQUESTS pops with redis-benchmark (50
clients): LPOP KEY BATCH; a function that does nothing but that LPOP (the
floor of any Redis Function that returns BATCH IDs: the Lua <-> RESP
conversion of the reply); and FCALL idpool_take 2 POOL META BATCH with
limits that never refuse. Prints IDs/s per run, then the medians and ratios,
and Redis' own time per call (INFO commandstats), which the machine's other
load disturbs far less than the throughput.
Defaults: 5 runs, batch 100, 20000 requests.

BENCH_TAKE_BASELINE=FILE also loads FILE (another version of src/idpool.lua,
e.g. `git show REV:src/idpool.lua`) as a second library whose functions are
renamed base_*, and times its base_take in the same runs: the cost of a
change to idpool_take, measured side by side.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
sys.path.insert(0, HERE)

import results  # noqa: E402
import harness  # noqa: E402

BENCH_LUA = """#!lua name=idpool_bench
redis.register_function('bench_lpop', function(k, a) return redis.call('LPOP', k[1], a[1]) end)"""


def baseline_library(path):
    """The library in `path`, renamed so that it loads beside ours."""
    with open(path) as f:
        lua = f.read()
    lua = lua.replace("#!lua name=idpool", "#!lua name=idpool_baseline", 1)
    lua = re.sub(r"(register_function\(\s*'|function_name = ')idpool_", r"\1base_", lua)
    return lua


class Failed(Exception):
    pass


def resp(*parts):
    """One command in RESP, for redis-cli --pipe."""
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(p), p))
    return b"".join(out)



def main(argv):
    if len(argv) > 4 or any(a in ("-h", "--help") for a in argv[1:]):
        sys.stderr.write(__doc__)
        return 64
    runs, batch, reqs = (int(a) for a in (argv[1:] + ["5", "100", "20000"][len(argv) - 1:]))
    work = tempfile.mkdtemp(prefix="idpool-bench-take.", dir=os.environ.get("TMPDIR") or "/tmp")
    h = harness.Harness(work)
    pool, meta = harness.pool_key("bench"), harness.meta_key("bench")

    def fill():
        """REQS x BATCH IDs, 1000 per RPUSH, through redis-cli --pipe."""
        h.rcli("DEL", pool)
        n, key = reqs * batch, pool.encode()
        cmds = b"".join(resp(b"RPUSH", key, *(str(i).encode() for i in range(lo + 1, min(lo + 1000, n) + 1)))
                        for lo in range(0, n, 1000))
        subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(h.redis_port), "--pipe"], input=cmds,
                       stdout=subprocess.DEVNULL, check=True)

    def ids(*cmd):
        """redis-benchmark of cmd on a full pool; IDs/s. Also notes in cpu[cmd[0], cmd[1]] Redis' own
        time per call (INFO commandstats), which other load on the machine disturbs far less."""
        fill()
        h.rcli("CONFIG", "RESETSTAT")
        out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(h.redis_port), "-c", "50",
                              "-n", str(reqs), "-q"] + [str(c) for c in cmd],
                             stdout=subprocess.PIPE, check=True).stdout.decode().replace("\r", "\n")
        rps = re.findall(r".*: ([0-9.]*) requests per second", out)
        if not rps:
            raise Failed("no requests per second from redis-benchmark %s" % cmd[0])
        if h.llen("bench") != 0:
            raise Failed("pool not drained exactly by %s" % cmd[0])
        stat = re.search(r"cmdstat_%s:calls=([0-9]+),usec=([0-9]+)" % cmd[0].lower(),
                         h.rcli("INFO", "commandstats"))
        if not stat or int(stat.group(1)) < reqs:
            raise Failed("no commandstats for %s" % cmd[0])
        cpu.setdefault(cmd[1], []).append(int(stat.group(2)) / int(stat.group(1)))
        return float("%.0f" % (float(rps[-1]) * batch))

    try:
        h.start_servers(only="redis")
        with open(os.path.join(ROOT, "src", "idpool.lua")) as f:
            h.rcli("FUNCTION", "LOAD", "REPLACE", f.read())
        h.rcli("FUNCTION", "LOAD", "REPLACE", BENCH_LUA)
        base_path = os.environ.get("BENCH_TAKE_BASELINE")
        if base_path:
            h.rcli("FUNCTION", "LOAD", "REPLACE", baseline_library(base_path))
        # Written under the epoch the library validated (no daemon runs here): takes are served.
        # (A baseline library of version <= 4 keeps its epoch in run_id and validates with
        # idpool_epoch; ours in epoch, validated by idpool_validate.)
        epoch = h.rcli("FCALL", "idpool_validate", 0, "bench", "0123456789abcdef").strip()
        h.rcli("HSET", meta, "per_take", batch, "per_second", 1000000000, "epoch", epoch,
               "run_id", "bench")
        if base_path:
            h.rcli("FCALL", "base_epoch", 2, pool, meta, "bench")
        version = subprocess.run(["redis-server", "--version"], stdout=subprocess.PIPE).stdout.decode().split()
        print("bench-take: batch=%d requests=%d runs=%d redis=%s" % (batch, reqs, runs, version[2]), flush=True)
        lpop, floor, take, base, cpu = [], [], [], [], {}
        for run in range(1, runs + 1):
            lp = ids("LPOP", pool, batch)
            fl = ids("FCALL", "bench_lpop", 1, pool, batch)
            tk = ids("FCALL", "idpool_take", 2, pool, meta, batch)
            if base_path:
                base.append(ids("FCALL", "base_take", 2, pool, meta, batch))
                print("run %d: baseline take %.0f IDs/s" % (run, base[-1]), flush=True)
            print("run %d: LPOP %.0f IDs/s, LPOP-in-a-function %.0f IDs/s, idpool_take %.0f IDs/s "
                  "(Redis %.2f us per take%s)" % (run, lp, fl, tk, cpu["idpool_take"][-1],
                                                  ", baseline %.2f us" % cpu["base_take"][-1] if base_path else ""),
                  flush=True)
            lpop.append(lp)
            floor.append(fl)
            take.append(tk)
        ml, mf, mt = (results.median(v) for v in (lpop, floor, take))
        print("median (batch %d): LPOP %.0f, LPOP-in-a-function %.0f, idpool_take %.0f IDs/s; take/LPOP %.2f, "
              "take/function-floor %.2f" % (batch, ml, mf, mt, mt / ml, mt / mf))
        if base:
            mb = results.median(base)
            ct, cb = results.median(cpu["idpool_take"]), results.median(cpu["base_take"])
            print("median (batch %d): baseline take %.0f IDs/s; idpool_take/baseline %.3f (median of the "
                  "runs' own ratios %.3f); Redis time per take %.2f us, baseline %.2f us, baseline/now %.3f"
                  % (batch, mb, mt / mb, results.median([t / b for t, b in zip(take, base)]), ct, cb,
                     cb / ct))
        return 0
    except (Failed, harness.HarnessError) as e:
        sys.stderr.write("bench-take: %s\n" % e)
        return 1
    finally:
        h.stop_servers()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
