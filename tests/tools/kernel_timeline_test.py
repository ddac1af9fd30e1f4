#!/usr/bin/env python3
"""tools/kernel_timeline.py's arithmetic on a trace whose answer is known by hand."""
import csv
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import kernel_timeline  # noqa: E402


class Timeline(unittest.TestCase):
    def test_marginal_idle_and_after(self):
        # Three steps of 6 us (ns below): the embedding (0-1000), A started early under it (500-3000: adds
        # 2000 past the embedding's end), idle 1000, B (4000-5000), then 1000 until the next step.
        kernels = []
        for step in range(3):
            t = 6000 * step
            kernels += [("void rf::gpu::(anonymous namespace)::embedding_kernel<int>(int)", t, t + 1000),
                        ("a_kernel", t + 500, t + 3000), ("b_kernel", t + 4000, t + 5000)]
        kernels.append(("void rf::gpu::(anonymous namespace)::embedding_kernel<int>(int)", 18000, 19000))
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trace.csv")
            with open(path, "w", newline="") as f:
                out = csv.writer(f)
                out.writerow(["start_ns", "end_ns", "stream", "grid", "block", "name"])
                for name, start, end in reversed(kernels):  # load() orders them
                    out.writerow([start, end, 7, 32, 128, name])
            summary, rows = kernel_timeline.timeline(kernel_timeline.load(path), 2, "embedding_kernel")
        self.assertEqual(summary, {"steps": 2, "kernels": 3, "wall": 6.0, "idle": 1.0, "after": 1.0})
        by_name = {key[0]: row for key, row in rows.items()}
        self.assertEqual(list(by_name), ["embedding_kernel<int>", "a_kernel", "b_kernel"])
        self.assertEqual(by_name["a_kernel"]["own"], [2.5, 2.5])
        self.assertEqual(by_name["a_kernel"]["marginal"], [2.0, 2.0])
        self.assertEqual(by_name["b_kernel"]["marginal"], [1.0, 1.0])
        self.assertEqual(by_name["embedding_kernel<int>"]["marginal"], [1.0, 1.0])
        self.assertEqual([key[3] for key in rows], ["(step)", "embedding_kernel<int>", "a_kernel"])

    def test_a_trace_without_two_steps_is_refused(self):
        with self.assertRaises(SystemExit):
            kernel_timeline.timeline([{"start": 0, "end": 1, "grid": 1, "block": 1, "name": "embedding_kernel"}], 4,
                                     "embedding_kernel")


if __name__ == "__main__":
    unittest.main()
