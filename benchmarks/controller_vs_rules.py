"""What SAGC adds over a simple rule, on a trained grid: every adaptive sizing against the
others, seed by seed, pooled over the model x algorithm strata.

    python benchmarks/controller_vs_rules.py results/beyond [--against threshold]

Reads a finished grid of `configs/beyond.yaml` (its `tables/grid.json`). Per controller:
the straggler rate (all steps, and the second half against delta), the share of the
ceiling's step-cost saving it reaches (the ceiling: always the smallest G; the share is
the mean log cost ratio over g16 divided by the ceiling's), in step cost and in decode
steps; the utility regret against the oracle static mix (per stratum, the best randomised
mix of the fixed G's whose trained straggler rate meets delta, `sagc.simulate.suite.oracle_mix`:
its mean log2 G minus the controller's; negative = more samples than the budget allows,
bought by overspending it), then each controller paired
with `--against` on the same seeds and prompt streams: straggler rate, step cost (log
ratio, shown as a ratio: > 1 means the controller is cheaper) and accuracy, each a
stratified paired t over seeds (`sagc.aggregate.paired.pooled_interval`). Exploratory:
no claim here was registered, and no multiplicity correction is applied.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from sagc import metrics
from sagc.aggregate import perseed
from sagc.aggregate.collect import collect
from sagc.aggregate.grid import load_grid
from sagc.aggregate.paired import as_ratio, pooled_interval
from sagc.simulate.suite import oracle_mix

ADAPTIVE = ("sagc", "sagc-fast", "aimd", "threshold")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--against", default="threshold", help="the controller every other one is paired with")
    args = ap.parse_args(argv)
    grid = load_grid(args.results / "tables" / "grid.json")
    collected = collect(grid)
    cells = defaultdict(list)
    for r in collected.cells:
        cells[(r.cell.model, r.cell.algorithm, r.cell.sizing)].append(r)
    strata = sorted({(m, a) for m, a, _ in cells})
    tasks = sorted({t for r in collected.cells if r.eval for t in r.eval})
    delta = grid.delta
    cost = grid.claims.cost

    def pooled(per_stratum):
        return pooled_interval([list(d.values()) for d in per_stratum])

    def mean_over_strata(per_stratum):
        return float(np.mean([np.mean(list(d.values())) for d in per_stratum]))

    def share(ctrl, unit):
        """Mean log ratio g16 / ctrl over strata, as a share of the ceiling's, and both ratios."""
        saved = mean_over_strata([perseed.cost_log_ratios(cells[(*s, "g16")], cells[(*s, ctrl)], unit) for s in strata])
        ceiling = mean_over_strata(
            [perseed.cost_log_ratios(cells[(*s, "g16")], cells[(*s, "g4")], unit) for s in strata]
        )
        return saved / ceiling, math.exp(saved), math.exp(ceiling)

    def regret(ctrl):
        """Oracle mix's mean log2 G minus the controller's, averaged over strata."""
        out = []
        for s in strata:
            fixed = {
                g: SimpleNamespace(
                    straggler=np.array(list(perseed.seed_means(cells[(*s, f"g{g}")], metrics.STRAGGLER).values()))
                )
                for g in (4, 8, 16)
            }
            mix = oracle_mix(fixed, delta)
            oracle = sum(w * math.log2(g) for g, w in mix.items())
            used = [
                np.log2(h[metrics.GROUP_SIZE].astype(float)).mean()
                for h in perseed.histories(cells[(*s, ctrl)]).values()
            ]
            out.append(oracle - np.mean(used))
        return float(np.mean(out))

    print(f"{args.results}: {len(strata)} strata; cost {cost}; delta {delta}")
    for ctrl in ("g16", "g4", *ADAPTIVE):
        rate = mean_over_strata([perseed.seed_means(cells[(*s, ctrl)], metrics.STRAGGLER) for s in strata])
        late = mean_over_strata(
            [perseed.seed_means(cells[(*s, ctrl)], metrics.STRAGGLER, "second_half") for s in strata]
        )
        line = f"  {ctrl:10s} straggler rate {rate:.3f} (second half {late:.3f})"
        if ctrl not in ("g16", "g4"):
            for unit in (cost, "decode_steps"):
                part, speedup, ceiling = share(ctrl, unit)
                line += f"; {unit} {speedup:.2f}x cheaper than g16, {100 * part:.0f} % of the ceiling's {ceiling:.2f}x"
            line += f"; utility regret {regret(ctrl):+.2f}"
        print(line)
    print(f"paired with {args.against} (controller - {args.against}; cost: {args.against}'s / the controller's):")
    for ctrl in ADAPTIVE:
        if ctrl == args.against:
            continue
        ref = {s: cells[(*s, args.against)] for s in strata}
        ctl = {s: cells[(*s, ctrl)] for s in strata}
        rate = pooled([perseed.paired_differences(ref[s], ctl[s], metrics.STRAGGLER) for s in strata])
        price = as_ratio(pooled([perseed.cost_log_ratios(ref[s], ctl[s], cost) for s in strata]))
        acc = pooled(
            [perseed.mean_over_tasks([perseed.accuracy_differences(ref[s], ctl[s], t) for t in tasks]) for s in strata]
        )
        print(
            f"  {ctrl:10s} straggler rate {100 * rate.estimate:+.1f} pts [{100 * rate.low:+.1f}, {100 * rate.high:+.1f}]"
            f"; cost {price.estimate:.2f}x [{price.low:.2f}, {price.high:.2f}]"
            f"; accuracy {100 * acc.estimate:+.1f} pts [{100 * acc.low:+.1f}, {100 * acc.high:+.1f}]"
            f" ({rate.n} seeds, df {rate.df:g})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
