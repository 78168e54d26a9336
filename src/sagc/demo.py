"""``python -m sagc.demo``: SAGC against synthetic lengths, next to fixed G.

The lengths come from the simulator's parametric model (``sagc.simulate``): a per-prompt
typical length that drifts up over training (chains of thought grow) and a small chance,
growing too, that a rollout runs into a heavy tail. The more rollouts a step holds, the
likelier one of them does, so large groups straggle more. Every policy sees the same draws
(a policy at G takes the first G of a shared pool). Each step's time is taken as the
decode time of its longest rollout (the synchronous barrier), in units of tokens.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from sagc.controller import SELECTIONS, FixedGroupSize, SAGCConfig, SAGCController
from sagc.simulate.config import ParametricLengthConfig
from sagc.simulate.sources import ParametricLengths

#: A world in which the budget is reachable: a narrow body (no prompt spread) and a
#: runaway tail that grows from 0.1% to 1% of rollouts, so G=4 mostly stays under the
#: budget and G=16 does not.
DEMO_LENGTHS = ParametricLengthConfig(
    median_start=300.0, median_end=800.0, sigma=0.15, prompt_sigma=0.0,
    tail_prob_start=0.001, tail_prob_end=0.01, max_tokens=4096,
)  # fmt: skip


def simulate(policy, steps: int, prompts: int, seed: int):
    pool = ParametricLengths(DEMO_LENGTHS, steps, prompts, seed).block(0, policy.max_group_size)
    records = []
    for t in range(steps):
        g = policy.next_group_size()
        records.append(policy.observe(pool[t, :, :g]))
    return records


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400, help="at most 1024")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step")
    ap.add_argument("--delta", type=float, default=SAGCConfig.delta)
    ap.add_argument("--tau", type=float, default=SAGCConfig.tau)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--counterfactual",
        action="store_true",
        help="beyond the paper: learn every smaller G from the step's sub-groups",
    )
    ap.add_argument(
        "--selection",
        choices=SELECTIONS,
        default=SAGCConfig.selection,
        help="lagrangian (the paper) or constrained (largest G whose sampled risk <= delta)",
    )
    ap.add_argument("--window", type=int, default=50, help="steps per table row")
    args = ap.parse_args(argv)

    cfg = SAGCConfig(
        delta=args.delta, tau=args.tau, seed=args.seed, counterfactual=args.counterfactual, selection=args.selection
    )
    sagc = simulate(SAGCController(cfg), args.steps, args.prompts, args.seed)
    print(
        f"SAGC (tau={cfg.tau}, delta={cfg.delta}, eta={cfg.eta}, forgetting={cfg.forgetting},"
        f" counterfactual={cfg.counterfactual}, selection={cfg.selection}),"
        f" {args.prompts} prompts/step, {args.steps} steps\n"
    )
    print(f"{'steps':>11} {'G chosen (count)':<26} {'mean G':>6} {'straggler':>9} {'lambda':>7}")
    for lo in range(0, args.steps, args.window):
        win = sagc[lo : lo + args.window]
        counts = Counter(r.group_size for r in win)
        chosen = " ".join(f"{g}:{counts[g]}" for g in sorted(counts))
        print(
            f"{lo + 1:>5}-{lo + len(win):<5} {chosen:<26} {np.mean([r.group_size for r in win]):>6.1f}"
            f" {np.mean([r.straggler for r in win]):>9.2f} {win[-1].lambda_:>7.2f}"
        )

    print(f"\n{'policy':<8} {'straggler rate':>14} {'mean G':>7} {'time (Mtok)':>11}")
    rows = [("sagc", sagc)] + [
        (f"g{g}", simulate(FixedGroupSize(g, tau=cfg.tau), args.steps, args.prompts, args.seed))
        for g in cfg.sorted_candidates
    ]
    for name, recs in rows:
        time = sum(r.length_max for r in recs) / 1e6
        print(
            f"{name:<8} {np.mean([r.straggler for r in recs]):>14.3f}"
            f" {np.mean([r.group_size for r in recs]):>7.2f} {time:>11.3f}"
        )
    print(f"\nbudget delta = {cfg.delta}: SAGC's long-run straggler rate {sagc[-1].straggler_rate:.3f}")


if __name__ == "__main__":
    main()
