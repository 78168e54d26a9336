"""Per-step overhead of the controller: ``next_group_size()`` + ``observe(lengths)``.

Prints median and p99 in microseconds for 3 and 8 candidates, with G up to 64 completions
per group, for the paper's controller (``sagc``) and with both options beyond the paper
(``fast``: counterfactual sub-group observations + constrained selection). Run by hand: ``python benchmarks/controller_overhead.py``. The paper calls the
overhead negligible; our target is a median under 50 us per step.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sagc import FixedGroupSize, SAGCConfig, SAGCController

SETTINGS = [
    ("sagc", (4, 8, 16)),
    ("sagc", (2, 4, 8, 16, 24, 32, 48, 64)),
    ("fast", (4, 8, 16)),
    ("fast", (2, 4, 8, 16, 24, 32, 48, 64)),
    ("fixed", (64,)),
]
OPTIONS = {"sagc": {}, "fast": {"counterfactual": True, "selection": "constrained"}}


def bench(policy, prompts: int, steps: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    max_g = max(policy.candidates)
    # Pre-draw lengths (Python lists, as a trainer hands them over) outside the timed region.
    pool = rng.lognormal(6.0, 0.5, size=(steps, prompts, max_g)).round().tolist()
    times = np.empty(steps)
    for t in range(steps):
        t0 = time.perf_counter()
        g = policy.next_group_size()
        policy.observe([row[:g] for row in pool[t]])
        times[t] = time.perf_counter() - t0
    return times * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--prompts", type=int, nargs="+", default=[8, 32])
    args = ap.parse_args()
    print(f"{'policy':<6} {'candidates':<28} {'prompts':>7} {'max rollouts':>12} {'median us':>9} {'p99 us':>8}")
    for kind, cands in SETTINGS:
        for prompts in args.prompts:
            policy = (
                SAGCController(SAGCConfig(candidates=cands, initial=cands[-1], seed=0, **OPTIONS[kind]))
                if kind in OPTIONS
                else FixedGroupSize(cands[0])
            )
            us = bench(policy, prompts, args.steps)
            print(
                f"{kind:<6} {str(cands):<28} {prompts:>7} {prompts * max(cands):>12} "
                f"{np.median(us):>9.1f} {np.percentile(us, 99):>8.1f}"
            )


if __name__ == "__main__":
    main()
