#!/usr/bin/env python3
"""The benchmark's arithmetic without servers (test/bench/results.py):
overlap() counts loads run side by side only over the window all of them
ran, from timelines lined up by their start (t0_ns); pool_lows() and
step_faults() decide whether a ramp step was held."""

import os
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "test", "bench"))
import results  # noqa: E402

MS = 1000000  # ns


class Overlap(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def timeline(self, name, ids):
        """A --timeline file: one 100-ms bucket per element of ids."""
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write("".join("%.3f %d 0 0\n" % (k * 0.1, n) for k, n in enumerate(ids)))
        return path

    def test_only_the_common_window_counts(self):
        # a: 1.0 s from t=0, 1000 IDs a bucket; b: 1.0 s from t=300 ms, 5000
        # a bucket, but 90,000 in its last 300 ms, after a ended.
        a = self.timeline("a", [1000] * 10)
        b = self.timeline("b", [5000] * 7 + [30000] * 3)
        t0 = 10 ** 12
        got = results.overlap([(t0, 1.0, a), (t0 + 300 * MS, 1.0, b)])
        self.assertIsNotNone(got)
        window, (ra, rb) = got
        # from 300 ms to 990 ms (a's end less the 10 ms of secs' precision)
        self.assertAlmostEqual(window, 0.69, places=6)
        # a's buckets 300..900 ms (whole inside), b's 0..600 ms of its own
        self.assertAlmostEqual(ra, 10000)
        self.assertAlmostEqual(rb, 50000)

    def test_no_common_bucket(self):
        a = self.timeline("a", [1000] * 5)
        b = self.timeline("b", [1000] * 5)
        self.assertIsNone(results.overlap([(0, 0.5, a), (450 * MS, 0.5, b)]))


class Step(unittest.TestCase):
    def test_pool_lows(self):
        with tempfile.NamedTemporaryFile("w", suffix=".llen", delete=False) as f:
            # a step from 0 to 900 ms: thirds end at 300 and start at 600 ms
            f.write("".join("%d %d\n" % (t * MS, n) for t, n in
                            ((0, 90), (100, 80), (400, 10), (700, 60), (800, 70), (1000, 5))))
        try:
            self.assertEqual(results.pool_lows(f.name, 0, 900 * MS), (80, 60))
            self.assertEqual(results.pool_lows(f.name, 2000 * MS, 3000 * MS), (0, 0))
        finally:
            os.unlink(f.name)

    def test_step_faults(self):
        self.assertEqual(results.step_faults(1000, 970, 0, [(100, 96)], 100), [])
        self.assertEqual(results.step_faults(1000, 969, 1, [(100, 94)], 100),
                         ["empty pops", "rate not reached", "pool shrinking"])
        # one pool of several falling behind is enough
        self.assertEqual(results.step_faults(1000, 1000, 0, [(100, 100), (100, 94)], 100), ["pool shrinking"])


if __name__ == "__main__":
    unittest.main()
