"""Cost of one ``sagc.answers.is_correct`` call, per kind of answer.

Prints the median and p99 in microseconds for: the tiny world's single digits (right and
wrong: the string path), GPQA letters, and competition answers that need the symbolic
check (math-verify), equivalent and not. Run by hand: ``python benchmarks/answer_checking.py``.
A training step scores P x G completions (up to 512 in the paper grid), so the symbolic
path's cost per step is about 512 x its median when every answer needs it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sagc.answers import is_correct

CASES = {
    "tiny digit, right": ("so y=\\boxed{7}", "7"),
    "tiny digit, wrong": ("so y=\\boxed{3}", "7"),
    "gpqa letter, wrong": ("\\boxed{C}", "B"),
    "latex, equivalent": ("\\boxed{\\dfrac{\\sqrt3}{2}}", "\\frac{\\sqrt{3}}{2}"),
    "latex, different": ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{3}}{2}"),
    "interval, equivalent": ("\\boxed{[1,2)}", "[1, 2)"),
    "pi expression": ("\\boxed{3\\pi/4}", "\\frac{3\\pi}{4}"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    for name, (completion, reference) in CASES.items():
        is_correct(completion, reference)  # imports and caches out of the timed region
        times = np.empty(args.repeats)
        for i in range(args.repeats):
            t0 = time.perf_counter()
            is_correct(completion, reference)
            times[i] = time.perf_counter() - t0
        print(f"{name:24s} median {np.median(times) * 1e6:9.1f} us   p99 {np.percentile(times, 99) * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
