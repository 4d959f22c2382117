#!/usr/bin/env python3
"""Offline checks of popped IDs against the invariants (design brief §4).

    idcheck.py [options] FILE...

A FILE ending in .bin is a binary popper dump (little-endian uint64 per ID);
anything else holds one decimal ID per line (popper --text, LRANGE output).
Checks across all files:

  always            every ID is below 2^63 and unique across all FILEs (U)
  --leases F        F holds the application's lease rows, "lo<TAB>hi[<TAB>...]"
                    per line (any order): the ranges are disjoint and every ID
                    lies inside exactly one of them (L)
  --current-offset N  every ID and every lease end is <= N, IDs < N
  --min M / --delta D --remainder R   arithmetic (A)

Checks per FILE (each file is one consumer's stream in pop order):

  --increasing      strictly increasing (M)
  --gap LO HI       (needs --leases) consecutive IDs inside the same lease
                    differ by k x delta with LO <= k <= HI; across a lease
                    boundary by a positive multiple of delta
  --blocks STEP     the stream is whole groups of STEP IDs; each group sorted
                    is a contiguous run with stride delta, is not in sorted
                    order (shuffled), and each group lies above the previous
  --count N         the file holds exactly N IDs

Prints a one-line summary on stderr; exit status 0 if every check passed,
1 with the first few problems otherwise.
"""
import argparse
import bisect
import sys
from array import array

ID_LIMIT = 1 << 63


def load(path):
    if path.endswith(".bin"):
        a = array("Q")
        with open(path, "rb") as f:
            data = f.read()
        if len(data) % 8:
            raise SystemExit(f"idcheck: {path}: size {len(data)} is not a multiple of 8")
        a.frombytes(data)
        if sys.byteorder != "little":
            a.byteswap()
        return list(a)
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description="check popped IDs")
    ap.add_argument("--leases")
    ap.add_argument("--current-offset", type=int)
    ap.add_argument("--min", type=int)
    ap.add_argument("--delta", type=int, default=1)
    ap.add_argument("--remainder", type=int, default=0)
    ap.add_argument("--increasing", action="store_true")
    ap.add_argument("--gap", type=int, nargs=2, metavar=("LO", "HI"))
    ap.add_argument("--gap-all", action="store_true")
    ap.add_argument("--blocks", type=int, metavar="STEP")
    ap.add_argument("--count", type=int)
    ap.add_argument("files", nargs="+")
    o = ap.parse_args()

    problems = []

    def bad(msg):
        problems.append(msg)
        return len(problems) >= 10

    streams = {p: load(p) for p in o.files}
    total = sum(len(s) for s in streams.values())
    if total == 0:
        bad("no IDs at all")

    leases = []
    if o.leases:
        with open(o.leases) as f:
            for line in f:
                if line.strip():
                    parts = line.split("\t")
                    leases.append((int(parts[0]), int(parts[1])))
        leases.sort()
        for i, (lo, hi) in enumerate(leases):
            if hi <= lo:
                bad(f"empty or inverted lease [{lo}, {hi})")
            if i and lo < leases[i - 1][1]:
                bad(f"leases overlap: [{leases[i-1][0]}, {leases[i-1][1]}) and [{lo}, {hi})")
    los = [lo for lo, _ in leases]

    def lease_of(x):
        """Index of the lease holding x, or -1."""
        i = bisect.bisect_right(los, x) - 1
        if i >= 0 and leases[i][0] <= x < leases[i][1]:
            return i
        return -1

    # --- global: range, arithmetic, uniqueness, leases ---------------------
    all_ids = sorted(x for s in streams.values() for x in s)
    prev = None
    used = set()
    li = 0
    for x in all_ids:
        if x >= ID_LIMIT and bad(f"ID {x} >= 2^63"):
            break
        if o.min is not None and x < o.min and bad(f"ID {x} below --min {o.min}"):
            break
        if x % o.delta != o.remainder and bad(f"ID {x} % {o.delta} != {o.remainder}"):
            break
        if prev == x and bad(f"duplicate ID {x}"):
            break
        prev = x
        if o.current_offset is not None and x >= o.current_offset and bad(
            f"ID {x} is not below current_offset {o.current_offset}"
        ):
            break
        if o.leases:
            # merge walk: IDs and leases are both sorted
            while li < len(leases) and leases[li][1] <= x:
                li += 1
            if li < len(leases) and leases[li][0] <= x:
                used.add(li)
            elif bad(f"ID {x} lies in no lease"):
                break
    if o.current_offset is not None and leases:
        top = max(hi for _, hi in leases)
        if top > o.current_offset:
            bad(f"lease end {top} is above current_offset {o.current_offset}")

    # --- per stream ----------------------------------------------------------
    gaps = {}
    nblocks = 0
    for path, s in streams.items():
        if o.count is not None and len(s) != o.count:
            bad(f"{path}: {len(s)} IDs, expected {o.count}")
        if o.increasing:
            for i in range(1, len(s)):
                if s[i] <= s[i - 1]:
                    bad(f"{path}: not increasing at #{i}: {s[i]} after {s[i-1]}")
                    break
        if o.gap:
            lo_k, hi_k = o.gap
            for i in range(1, len(s)):
                d = s[i] - s[i - 1]
                if d <= 0 or d % o.delta:
                    if bad(f"{path}: gap {d} at #{i} is not a positive multiple of {o.delta}"):
                        break
                    continue
                if lease_of(s[i]) == lease_of(s[i - 1]):
                    k = d // o.delta
                    gaps[k] = gaps.get(k, 0) + 1
                    if not lo_k <= k <= hi_k and bad(
                        f"{path}: gap {d} = {k} x {o.delta} at #{i} ({s[i-1]} -> {s[i]}) "
                        f"outside [{lo_k}, {hi_k}] x delta inside one lease"
                    ):
                        break
                else:
                    gaps["lease-boundary"] = gaps.get("lease-boundary", 0) + 1
        if o.blocks:
            step = o.blocks
            if len(s) % step:
                bad(f"{path}: {len(s)} IDs is not a whole number of blocks of {step}")
            top = None
            for b in range(0, len(s) - len(s) % step, step):
                blk = s[b : b + step]
                srt = sorted(blk)
                nblocks += 1
                if len(set(blk)) != step:
                    bad(f"{path}: block at #{b} has repeated IDs")
                elif srt[-1] - srt[0] != (step - 1) * o.delta or any(
                    srt[i + 1] - srt[i] != o.delta for i in range(step - 1)
                ):
                    bad(f"{path}: block at #{b} ({srt[0]}..{srt[-1]}) is not a contiguous "
                        f"run of {step} with stride {o.delta}")
                if step >= 8 and (blk == srt or blk == srt[::-1]):
                    bad(f"{path}: block at #{b} ({srt[0]}..{srt[-1]}) is not shuffled")
                if top is not None and srt[0] <= top:
                    bad(f"{path}: block at #{b} ({srt[0]}..{srt[-1]}) overlaps or is below "
                        f"the previous block (max {top})")
                top = srt[-1]
                if len(problems) >= 10:
                    break

    if o.gap and o.gap_all:
        missing = [k for k in range(o.gap[0], o.gap[1] + 1) if k not in gaps]
        if missing:
            bad(f"gap multiples {missing} never occur: the gaps are not random in the range")

    summary = f"idcheck: {total} IDs in {len(streams)} file(s), {len(set(all_ids))} distinct"
    if o.leases:
        summary += f", {len(leases)} leases ({len(used)} used)"
    if o.gap:
        summary += f", gaps {dict(sorted(gaps.items(), key=str))}"
    if o.blocks:
        summary += f", {nblocks} blocks of {o.blocks}"
    print(summary, file=sys.stderr)
    if problems:
        for p in problems:
            print(f"idcheck: {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
