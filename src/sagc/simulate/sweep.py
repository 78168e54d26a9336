"""The tau x delta sweep: how SAGC's savings depend on its two main knobs, every setting on the
same cached length pool (the fixed-G baselines re-measured per tau: their flags depend on it)."""

from __future__ import annotations

from typing import Any

from sagc.controller import SAGCConfig, fixed_group_size
from sagc.simulate.config import SimConfig, SweepConfig
from sagc.simulate.engine import make_source, simulate, summary_table
from sagc.simulate.sources import CachedSource

_SAGC_COLUMNS = ("straggler_rate", "total_hours", "mean_group_size", "mean_log2_group_size", "padding_efficiency")


def run_sweep(cfg: SimConfig, sweep: SweepConfig | None = None) -> list[dict[str, Any]]:
    """One row per (tau, delta): SAGC's rate, hours, mean G, speed-up against every fixed G
    of ``cfg.sizings`` and whether the realised rate met the budget (rate <= delta)."""
    sweep = sweep or cfg.sweep or SweepConfig()
    fixed = [s for s in cfg.sizings if fixed_group_size(s) is not None]
    src, steps = make_source(cfg)
    cached = CachedSource(src, steps, cfg.pool_width)
    rows = []
    for tau in sweep.tau:
        fixed_rows = {}
        if fixed:
            fcfg = cfg.replace(sizings=tuple(fixed), sagc=SAGCConfig.from_dict({**cfg.sagc.to_dict(), "tau": tau}))
            fixed_rows = {r["sizing"]: r for r in summary_table(simulate(fcfg, source=cached))}
        for delta in sweep.delta:
            sc = SAGCConfig.from_dict({**cfg.sagc.to_dict(), "tau": tau, "delta": delta})
            res = simulate(cfg.replace(sizings=("sagc",), sagc=sc), source=cached)["sagc"].summary()
            row = {"tau": tau, "delta": delta, **{k: res[k] for k in _SAGC_COLUMNS}}
            row["budget_met"] = res["straggler_rate"] <= delta
            for name, fr in fixed_rows.items():
                row[f"speedup_vs_{name}"] = fr["total_hours"] / res["total_hours"]
                row[f"straggler_rate_{name}"] = fr["straggler_rate"]
            rows.append(row)
    return rows


def reference_column(columns) -> str | None:
    """The ``speedup_vs_g<N>`` column of the largest fixed G (``None`` without one)."""
    keys = [k for k in columns if k.startswith("speedup_vs_g")]
    return max(keys, key=lambda k: fixed_group_size(k.removeprefix("speedup_vs_"))) if keys else None


def best_settings(rows: list[dict[str, Any]], reference: str | None = None) -> dict[str, Any]:
    """Two readings of the sweep (time alone always favours the smallest G): ``fastest``, the
    largest speed-up against ``reference`` (default: the largest fixed G), and
    ``best_within_budget``, the largest mean log2 G among settings that met their delta, ties to
    the faster (``None`` if none did)."""
    if not rows:
        raise ValueError("best_settings: the sweep is empty")
    if reference is None:
        reference = reference_column(rows[0])
    fastest = max(rows, key=lambda r: r[reference]) if reference else min(rows, key=lambda r: r["total_hours"])
    within = [r for r in rows if r["budget_met"]]
    best = max(within, key=lambda r: (r["mean_log2_group_size"], -r["total_hours"])) if within else None
    return {"reference": reference, "fastest": fastest, "best_within_budget": best}
