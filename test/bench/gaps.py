#!/usr/bin/env python3
"""What an observer learns about volume from the IDs of a monotonic
application with random gaps (issue 24, docs/guarantees.md "Gaps").

  python3 test/bench/gaps.py [--n N] [--trials T] [--seed S] [--markdown]

A day of IDs is simulated as src/core/gen.c makes them: N IDs (default
86,400: one a second), each the previous plus a gap uniform in
[1, increment_max] (delta 1; a larger delta scales IDs and gaps alike), from
an offset the observer does not know. The observer sees a random sample of
k of the day's IDs (say, IDs that leaked in URLs) and estimates how many
were issued with the German-tank estimate over an unknown start:

    N_hat = (max - min) / g * (k + 1) / (k - 1) + 1

where g is the mean gap the observer assumes:

  known       g = (increment_max + 1) / 2: the observer knows
              increment_max (the default, the docs, a leaked row);
  assumed 1   g = 1: the observer ignores the gaps (reads the span as a count);
  calibrated  g = the mean of 10 gaps the observer saw between IDs it took
              back to back itself (sign up twice, place two orders).

Reported per increment_max and k: the median and the 90th percentile of the
relative error |N_hat - N| / N over T trials (default 200). Standard
library only; deterministic for a seed.
"""
import argparse
import itertools
import random
import statistics
import sys

INCREMENT_MAX = (1, 2, 10, 100, 1000)
SAMPLES = (10, 100, 1000)
CALIBRATION_GAPS = 10


def day(rng, n, increment_max):
    """The day's IDs: from a random offset, gaps uniform in [1, increment_max]."""
    start = rng.randrange(1, 1 << 40)
    if increment_max == 1:
        return range(start, start + n)
    gaps = rng.choices(range(1, increment_max + 1), k=n)
    return list(itertools.accumulate(gaps, initial=start))[1:]


def estimate(sample, gap):
    """German tank over an unknown start, the span read through the mean gap."""
    k = len(sample)
    return (max(sample) - min(sample)) / gap * (k + 1) / (k - 1) + 1


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure(n, trials, seed):
    """{(increment_max, k, mode): [relative errors]}"""
    rng = random.Random(seed)
    errs = {}
    for m in INCREMENT_MAX:
        for _ in range(trials):
            ids = day(rng, n, m)
            # the observer's own back-to-back IDs: CALIBRATION_GAPS gaps of the generator
            own = rng.choices(range(1, m + 1), k=CALIBRATION_GAPS)
            gaps = {"known": (m + 1) / 2, "assumed 1": 1.0, "calibrated": statistics.mean(own)}
            for k in SAMPLES:
                sample = rng.sample(ids, k)
                for mode, g in gaps.items():
                    errs.setdefault((m, k, mode), []).append(abs(estimate(sample, g) - n) / n)
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=86400, help="IDs issued in the day (86400)")
    ap.add_argument("--trials", type=int, default=200, help="days simulated per increment_max")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    a = ap.parse_args()
    if a.n < max(SAMPLES) or a.trials < 1:
        sys.exit("gaps.py: --n must be at least %d and --trials at least 1" % max(SAMPLES))
    errs = measure(a.n, a.trials, a.seed)
    modes = ("known", "assumed 1", "calibrated")

    def pct(x):
        return "%.1f%%" % (100 * x) if x < 10 else "%.0fx" % (x + 1)

    head = ["increment_max", "k"] + ["%s: median, p90" % m for m in modes]
    rows = []
    for m in INCREMENT_MAX:
        for k in SAMPLES:
            cells = [str(m), str(k)]
            for mode in modes:
                e = errs[(m, k, mode)]
                cells.append("%s, %s" % (pct(statistics.median(e)), pct(quantile(e, 0.9))))
            rows.append(cells)
    print("# %d IDs a day, %d days per increment_max, seed %d; relative error of the "
          "estimated count (NNx: the estimate is NN times the count)" % (a.n, a.trials, a.seed))
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        w = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
        for r in [head] + rows:
            print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())


if __name__ == "__main__":
    main()
