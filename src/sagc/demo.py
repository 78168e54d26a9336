"""``python -m sagc.demo``: SAGC against a synthetic length generator, next to fixed G.

The generator mimics what the paper describes: per prompt a typical length that drifts up
over training (chains of thought grow), and per completion a small chance of rambling far
past it. The more rollouts a step holds, the likelier one of them rambles, so large groups
straggle more, and more so as training goes on. Each step's time is taken as the decode
time of its longest rollout (the synchronous barrier), in units of tokens.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from sagc.controller import FixedGroupSize, SAGCConfig, SAGCController


class SyntheticLengths:
    """Lognormal per-prompt lengths with a rambling tail that grows over training."""

    def __init__(self, prompts: int, steps: int, seed: int, cap: int = 4096) -> None:
        self.prompts, self.steps, self.cap = prompts, steps, cap
        self.rng = np.random.default_rng(seed)

    def sample(self, step: int, group_size: int) -> list[list[float]]:
        progress = step / max(1, self.steps - 1)
        typical = self.rng.lognormal(np.log(300 + 500 * progress), 0.2, size=(self.prompts, 1))  # prompt difficulty
        lengths = typical * self.rng.lognormal(0.0, 0.1, size=(self.prompts, group_size))
        ramble_p = 0.001 + 0.01 * progress
        ramble = self.rng.random((self.prompts, group_size)) < ramble_p
        lengths = np.where(ramble, lengths * self.rng.uniform(2.5, 6.0, lengths.shape), lengths)
        return np.minimum(np.round(lengths), self.cap).tolist()


def simulate(policy, steps: int, prompts: int, seed: int):
    env = SyntheticLengths(prompts, steps, seed)
    records = []
    for t in range(steps):
        g = policy.next_group_size()
        records.append(policy.observe(env.sample(t, g)))
    return records


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step")
    ap.add_argument("--delta", type=float, default=SAGCConfig.delta)
    ap.add_argument("--tau", type=float, default=SAGCConfig.tau)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=int, default=50, help="steps per table row")
    args = ap.parse_args(argv)

    cfg = SAGCConfig(delta=args.delta, tau=args.tau, seed=args.seed)
    sagc = simulate(SAGCController(cfg), args.steps, args.prompts, args.seed)
    print(f"SAGC (tau={cfg.tau}, delta={cfg.delta}, eta={cfg.eta}, forgetting={cfg.forgetting}),"
          f" {args.prompts} prompts/step, {args.steps} steps\n")
    print(f"{'steps':>11} {'G chosen (count)':<26} {'mean G':>6} {'straggler':>9} {'lambda':>7}")
    for lo in range(0, args.steps, args.window):
        win = sagc[lo : lo + args.window]
        counts = Counter(r.group_size for r in win)
        chosen = " ".join(f"{g}:{counts[g]}" for g in sorted(counts))
        print(f"{lo + 1:>5}-{lo + len(win):<5} {chosen:<26} {np.mean([r.group_size for r in win]):>6.1f}"
              f" {np.mean([r.straggler for r in win]):>9.2f} {win[-1].lambda_:>7.2f}")

    print(f"\n{'policy':<8} {'straggler rate':>14} {'mean G':>7} {'time (Mtok)':>11}")
    rows = [("sagc", sagc)] + [
        (f"g{g}", simulate(FixedGroupSize(g, tau=cfg.tau), args.steps, args.prompts, args.seed))
        for g in cfg.sorted_candidates
    ]
    for name, recs in rows:
        time = sum(r.length_max for r in recs) / 1e6
        print(f"{name:<8} {np.mean([r.straggler for r in recs]):>14.3f}"
              f" {np.mean([r.group_size for r in recs]):>7.2f} {time:>11.3f}")
    print(f"\nbudget delta = {cfg.delta}: SAGC's long-run straggler rate "
          f"{sagc[-1].straggler_rate:.3f}")


if __name__ == "__main__":
    main()
