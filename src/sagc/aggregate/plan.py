"""Planned power of the pre-registered primaries: before a run (the dry run's lines) and from
development-seed runs (``python -m sagc.aggregate.plan results/dev [results/dev2 ...] [--seeds 3 5 8]``)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from sagc.aggregate.grid import controller_problem, fixed_sizes
from sagc.aggregate.paired import planned_power
from sagc.aggregate.registration import PRIMARIES, PRIMARY, Registration

SEED_RANGE = tuple(range(3, 11))


def dry_run_lines(config: Any) -> list[str]:
    """The primary family with its planned power for the dry run of a checked ``PipelineConfig``;
    ``ValueError`` naming ``claims.controller`` when it names no controller of a grid that has some."""
    reg: Registration = config.claims
    sizings = config.sizings
    problem = controller_problem(reg.controller, sizings)
    if problem:
        raise ValueError(f"config key 'claims.controller': {problem}")
    fixed = fixed_sizes(sizings)
    if reg.controller not in sizings or not fixed:
        why = "the grid trains no controller" if reg.controller not in sizings else "no fixed G to compare"
        return [f"pre-registered claims: no primary family ({why})"]
    ref = fixed[-1][1]
    strata, seeds = len(config.models) * len(config.algorithms), len(config.seeds)
    m = len(PRIMARIES)
    alpha = reg.alpha / m
    df = strata * (seeds - 1)
    lines = [f"pre-registered primary family (claims:): {reg.controller} vs {ref}, pooled over {strata} model x "
             f"algorithm strata x {seeds} seeds (df {df}); Holm over {m} at alpha {reg.alpha:g}, planned power "
             f"at alpha/{m} = {alpha:.4g} (the first Holm step, conservative):"]  # fmt: skip
    for p in PRIMARIES:
        planned = p.planned(reg)
        power = planned_power(p.planned_distance(reg), planned.sd, [seeds] * strata, alpha)
        low = f" (below the target {reg.power_target:g})" if not power >= reg.power_target else ""
        where = f" [in the strata where that is not {ref}]" if p.id == "P4" else ""
        margin = f" vs margin -{reg.accuracy_margin * 100:g} pts" if p.key.startswith("not_worse") else ""
        shown = "n/a (df 0: one seed per stratum)" if math.isnan(power) else f"{power:.2f}"
        label = p.label(reg, reg.controller, "the best static G" if p.id == "P4" else ref)
        lines.append(f"  {p.id} {label}{where}: planned {p.show(planned.effect)}"
                     f"{margin}, sd {p.show_sd(planned.sd)} -> power {shown}{low}")  # fmt: skip
    table = ", ".join(
        f"{n}: " + "/".join(f"{planned_power(p.planned_distance(reg), p.planned(reg).sd, [n] * strata, alpha):.2f}"
                            for p in PRIMARIES)
        for n in SEED_RANGE)  # fmt: skip
    lines.append(f"  power P1/P2/P3/P4 by seeds per stratum: {table}")
    cells_per_seed = strata * len(sizings)
    if reg.gpu_hours_per_cell is not None:
        hours = cells_per_seed * reg.gpu_hours_per_cell
        lines.append(f"  each extra seed: {cells_per_seed} training cells x {reg.gpu_hours_per_cell:g} GPU-hours "
                     f"(claims.gpu_hours_per_cell, assumed) = {hours:,.0f} GPU-hours")  # fmt: skip
    if reg.plan_provisional:
        lines.append(
            "  PROVISIONAL plan (claims.plan_provisional): placeholder effects and spreads; run "
            "`python -m sagc.aggregate.plan results/<development-seed run>` and paste its block"
        )
    return lines


def plan_lines(sources, seeds=SEED_RANGE, alpha: float | None = None) -> list[str]:
    """Effect, pooled sd and power by seeds per stratum of each primary of finished runs of one
    world (results folders or ``headline.csv`` files, pooled as one), then the ``claims:`` block."""
    from sagc.aggregate.compare import read_headline  # pandas: not at the dry run's import

    sources = [sources] if isinstance(sources, (str, Path)) else list(sources)
    runs = []
    for source in sources:
        frame = read_headline(source)
        rows = frame[frame["family"] == "primary"].set_index("id")
        if rows.empty:
            raise ValueError(f"{source}: its headline has no primary claims (no controller, or no complete pair)")
        runs.append(rows)
    ids = list(runs[0].index)
    for source, rows in zip(sources, runs):
        if list(rows.index) != ids or set(rows["strata"]) != set(runs[0]["strata"]):
            raise ValueError(f"{source}: other primaries or strata than {sources[0]}: plan one world's runs")
        if not rows["null"].equals(runs[0]["null"]):  # another margin: its effects sit against another null
            raise ValueError(f"{source}: other nulls (margins) than {sources[0]}: plan runs of one registration")
    alpha = Registration.default("alpha") if alpha is None else alpha
    m = len(ids)
    where = sources[0] if len(sources) == 1 else f"{len(sources)} runs ({', '.join(map(str, sources))})"
    lines = [f"{where}: {m} primaries; power at alpha/{m} = {alpha / m:.4g} (the first Holm step), two-sided t "
             "with the pooled df, on this world's strata:"]  # fmt: skip
    block = []
    for pid in ids:
        p, rs = PRIMARY[pid], [rows.loc[pid] for rows in runs]
        log = rs[0].scale == "log"
        n = [int(r.seeds) for r in rs]
        df = [float(r.df) for r in rs]
        effect = sum(k * (math.log(r.estimate) if log else float(r.estimate)) for k, r in zip(n, rs)) / sum(n)
        sd = math.sqrt(sum(d * float(r.sd) ** 2 for d, r in zip(df, rs)) / sum(df))
        null = math.log(rs[0].null) if log else float(rs[0].null)
        distance = (effect - null) if p.side == "above" else (null - effect)
        strata = int(rs[0].strata)
        powers = ", ".join(f"{k}: {planned_power(distance, sd, [k] * strata, alpha / m):.2f}" for k in seeds)
        lines.append(
            f"  {pid} {rs[0].claim}: effect {p.show(effect)}, sd {p.show_sd(sd)} "
            f"({sum(n)} seeds in {strata} strata, df {sum(df):g}); power by seeds per stratum: {powers}"
        )
        block.append(f"    {p.key}: {{effect: {effect:.4g}, sd: {sd:.4g}}}  # {pid}, measured on {where}")
    lines += ["", "claims:", "  plan_provisional: false", "  plan:"] + block
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sagc.aggregate.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "results", nargs="+", help="finished development-seed runs of one world: results folders or headline.csv files"
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=list(SEED_RANGE),
        help="seeds per stratum to state the power at (default 3..10)",
    )
    parser.add_argument("--alpha", type=float, default=None, help="family-wise level (default: claims.alpha's)")
    ns = parser.parse_args(argv)
    try:
        print("\n".join(plan_lines(ns.results, ns.seeds, ns.alpha)))
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
