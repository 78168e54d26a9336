"""Simulator throughput: simulated steps per second (run by hand, not a timed test).

Two numbers, since they measure different things:

- fixed-G fast path (vectorised numpy, no controller call; target >= 100k steps/s),
  drawing the length pool included, and the same with the pool drawn beforehand;
- controller loop (SAGC's next_group_size + observe every step: its ~10-30 us per step
  is the ceiling there).

    OMP_NUM_THREADS=1 python benchmarks/simulator_throughput.py [--steps 200000]
"""

from __future__ import annotations

import argparse
import time

from sagc.controller import SAGCController
from sagc.simulate import CachedSource, ParametricLengths, SimConfig, run_controller, run_fixed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--controller-steps", type=int, default=20_000)
    ap.add_argument("--prompts", type=int, default=8)
    args = ap.parse_args()
    cfg = SimConfig(steps=args.steps, prompts_per_step=args.prompts)
    tp, width = cfg.throughput, 16

    for g in (4, 16):
        src = ParametricLengths(cfg.lengths, args.steps, args.prompts, seed=0)
        t0 = time.perf_counter()
        r = run_fixed(g, src, args.steps, g, tp, tau=2.0, scope="step")
        dt = time.perf_counter() - t0
        print(
            f"fixed G={g:2d}, pool drawn on the fly: {args.steps / dt:10,.0f} steps/s "
            f"({args.steps} steps, {args.prompts} prompts, straggler rate {r.straggler.mean():.3f})"
        )
    cached = CachedSource(ParametricLengths(cfg.lengths, args.steps, args.prompts, seed=0), args.steps, width)
    for g in (4, 16):
        t0 = time.perf_counter()
        run_fixed(g, cached, args.steps, width, tp, tau=2.0, scope="step")
        dt = time.perf_counter() - t0
        print(f"fixed G={g:2d}, pool drawn beforehand: {args.steps / dt:10,.0f} steps/s")

    n = args.controller_steps
    src = ParametricLengths(cfg.lengths, n, args.prompts, seed=0)
    t0 = time.perf_counter()
    r = run_controller(SAGCController(), src, n, width, tp, "sagc")
    dt = time.perf_counter() - t0
    print(
        f"SAGC controller loop:               {n / dt:10,.0f} steps/s ({1e6 * dt / n:.1f} us/step, "
        f"mean G {r.group_size.mean():.2f})"
    )


if __name__ == "__main__":
    main()
