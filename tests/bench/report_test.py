#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Unit test of bench/report.py's cache-overhead metric and goals, on made-up rows (no run of the
bench): overhead = (restore or mount) + job + unmount - the job alone on a local tree, the ratio
peer overhead / lazycache overhead, the second run quoted against the first run's peers and
reference, the goal verdicts, the chart's data, and RESULTS.md's tables."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import report  # noqa: E402


def row(scen, fx, prof, tool, median, note=None):
    return {"scenario": scen, "fixture": fx, "profile": prof, "tool": tool, "median_s": median,
            "min_s": median, "max_s": median, "runs": 1, "load1": 0.5, "command": "cmd", "note": note or {}}


ROWS = [
    row("job", "node", "hosted", "actions/cache: curl, extract, job", 10.0),
    row("job", "node", "hosted", "job alone on a local tree", 2.0),
    row("job", "node", "hosted", "lazycache restore --extract, job", 7.0),
    row("job", "node", "hosted", "lazycache mount, job, unmount", 4.0),      # overhead 2 vs 8: 4x
    row("job_learned", "node", "hosted", "lazycache mount, job, unmount (second run)", 3.0),  # 1 vs 8
    row("job_large", "large", "hosted", "actions/cache: curl, extract, job", 40.0),
    row("job_large", "large", "hosted", "job alone on a local tree", 5.0),
    row("job_large", "large", "hosted", "lazycache mount, job, unmount", 12.0),  # 7 vs 35: 5x
    row("job_large_learned", "large", "hosted", "lazycache mount, job, unmount (second run)", 9.0),  # 4: 8.75x
    row("restore", "large", "hosted", "curl | zstd -d | tar -x", 30.0),
    row("restore", "large", "hosted", "rclone 8 streams, then extract", 24.0),
    row("restore", "large", "hosted", "lazycache restore --extract", 20.0),   # 1.5x and 1.2x: met
    row("transfer_restore", "random", "hosted", "curl | zstd -d | tar -x", 6.0),
    row("transfer_restore", "random", "hosted", "lazycache restore --extract, 8 x 8 MiB", 5.0),
    row("transfer_restore", "random", "hosted", "lazycache restore --extract, auto (default)", 4.0),
    row("bytes", "large", "hosted", "job: share of the tree's bytes it reads", 9.5, {"unit": "%"}),
]


class OverheadTest(unittest.TestCase):
    def setUp(self):
        self.g = report.groups(ROWS)

    def by_scen(self):
        return {(o["scenario"], o["fixture"]): o for o in report.overhead_table(self.g)}

    def test_overhead_is_total_minus_job_alone(self):
        o = self.by_scen()
        self.assertAlmostEqual(o[("job", "node")]["lazycache_overhead_s"], 2.0)
        self.assertAlmostEqual(o[("job", "node")]["best_peer_overhead_s"], 8.0)
        self.assertEqual(o[("job", "node")]["best_peer"]["tool"], "actions/cache: curl, extract, job")
        self.assertAlmostEqual(o[("job", "node")]["ratio"], 4.0)
        self.assertAlmostEqual(o[("job_large", "large")]["ratio"], 5.0)

    def test_second_run_uses_first_runs_reference_and_peers(self):
        o = self.by_scen()
        self.assertEqual(o[("job_learned", "node")]["alone"]["median_s"], 2.0)
        self.assertAlmostEqual(o[("job_learned", "node")]["lazycache_overhead_s"], 1.0)
        self.assertAlmostEqual(o[("job_learned", "node")]["ratio"], 8.0)
        self.assertAlmostEqual(o[("job_large_learned", "large")]["ratio"], 35.0 / 4.0)

    def test_no_reference_no_overhead(self):
        self.assertNotIn(("restore", "large"), self.by_scen())
        self.assertIsNone(report.overhead(ROWS[0], None))
        self.assertIsNone(report.overhead(ROWS[1], ROWS[1]))

    def test_lazycache_faster_than_the_job_alone_is_not_a_division_by_zero(self):
        rows = [row("job", "node", "far", "actions/cache: curl, extract, job", 10.0),
                row("job", "node", "far", "job alone on a local tree", 2.0),
                row("job", "node", "far", "lazycache mount, job, unmount", 2.0)]
        (o,) = report.overhead_table(report.groups(rows))
        self.assertEqual(o["ratio"], float("inf"))
        goals = {g[0]: g for g in report.goal_rows(report.groups(rows))}
        verdicts = [g[4] for name, g in goals.items() if "cache overhead" in name]
        self.assertEqual(verdicts, ["met"])

    def test_goals(self):
        goals = report.goal_rows(self.g)
        v = {(g[0].split(":")[0], g[1], g[3]): g[4] for g in goals}
        self.assertEqual(v[("Partial job (node)", "hosted", ">= 4x")], "met")           # 8 / 2 = 4
        self.assertEqual(v[("Partial job, second run (node)", "hosted", ">= 5x")], "met")  # 8 / 1
        self.assertEqual(v[("Partial job (large)", "hosted", ">= 5x")], "met")          # 35 / 7
        self.assertEqual(v[("Partial job, second run (large)", "hosted", ">= 10x")], "NOT met")  # 8.75
        self.assertEqual(v[("Partial job (node)", "hosted", ">= 1.5x")], "met")          # 10 / 4 end to end
        restore = [g for g in goals if g[0].startswith("Full restore (large)")]
        self.assertEqual([(g[2], g[4]) for g in restore], [("1.50x", "met"), ("1.20x", "met")])

    def test_unmount_goal(self):
        rows = [row("unmount", "node", "local", "lazycache unmount, idle mount (--archive)", 0.031),
                row("unmount", "node", "hosted", "lazycache unmount, idle mount (--store)", 0.064)]
        goals = [g for g in report.goal_rows(report.groups(rows)) if g[0].startswith("Unmount")]
        self.assertEqual([(g[1], g[2], g[3], g[4]) for g in goals],
                         [("local", "31 ms", "<= 50 ms", "met"), ("hosted", "64 ms", "<= 50 ms", "NOT met")])
        md = report.build_markdown(rows, {"cpu": "test"}, "bench/run.sh", [], {})
        self.assertIn("## Unmount of an idle mount", md)
        self.assertIn("| Unmount of an idle mount (node) | local | 31 ms | <= 50 ms | met |", md)

    def test_default_row_is_the_transfer_reference(self):
        ref = report.reference(self.g[("transfer_restore", "random", "hosted")])
        self.assertEqual(ref["tool"], "lazycache restore --extract, auto (default)")

    def test_chart_and_markdown(self):
        ratios, overheads = report.chart_data(ROWS)
        self.assertIn(("Partial job (node), node, hosted", 2.5), ratios)
        self.assertIn(("Partial job (large), large, hosted", 7.0, 35.0), overheads)
        md = report.build_markdown(ROWS, {"cpu": "test"}, "bench/run.sh", [], {})
        self.assertIn("### Cache overhead", md)
        self.assertIn("| Partial job (large) | large | hosted | 5.000 | 7.00 (lazycache mount, job, unmount) | "
                      "35.00 (actions/cache: curl, extract, job) | 5.00x |", md)


if __name__ == "__main__":
    unittest.main()
