"""Tables (CSV + JSON) and figures (PNG + PDF) of a simulation: fixed file names, so the
Snakemake rule can list its outputs."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from sagc.controller import fixed_group_size
from sagc.simulate.sweep import reference_column

TABLE_FILES = ("summary.csv", "summary.json", "sweep.csv")
FIGURE_FILES = ("sim_sizing.png", "sim_sizing.pdf", "sim_sweep.png", "sim_sweep.pdf")


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if hasattr(x, "item"):  # numpy scalars
        return x.item()
    return x


def write_tables(out_dir: str | Path, rows: list[dict], sweep_rows: list[dict], meta: dict[str, Any]) -> list[Path]:
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "summary.csv", index=False)
    pd.DataFrame(sweep_rows).to_csv(out / "sweep.csv", index=False)
    (out / "summary.json").write_text(json.dumps(_json_safe({**meta, "sizings": rows}), indent=2) + "\n")
    return [out / f for f in TABLE_FILES]


def write_figures(out_dir: str | Path, rows: list[dict], sweep_rows: list[dict], title: str = "") -> list[Path]:
    os.environ.setdefault("MPLCONFIGDIR", str(Path(out_dir) / ".mplconfig"))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows)

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    colors = ["#4C72B0" if fixed_group_size(s) is not None else "#DD8452" for s in df["sizing"]]
    axes[0].bar(df["sizing"], df["total_hours"], color=colors)
    axes[0].set_ylabel("simulated training time (h)")
    axes[1].bar(df["sizing"], 100 * df["straggler_rate"], color=colors)
    axes[1].set_ylabel("straggler rate (% of steps)")
    axes[1].set_ylim(0, 100)
    for ax in axes:
        ax.set_xlabel("group sizing")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    for ext in ("png", "pdf"):
        fig.savefig(out / f"sim_sizing.{ext}", dpi=150)
    plt.close(fig)

    sw = pd.DataFrame(sweep_rows)
    ref = reference_column(sw.columns)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    first = (ref, f"SAGC speed-up vs fixed {ref.rsplit('_', 1)[1].upper()}", ".2f") if ref else None
    panels = [
        first or ("total_hours", "SAGC training time (h)", ".1f"),
        ("straggler_rate", "SAGC straggler rate", ".2f"),
    ]
    for ax, (col, label, fmt) in zip(axes, panels):
        grid = sw.pivot(index="tau", columns="delta", values=col).sort_index(ascending=False)
        sns.heatmap(grid, annot=True, fmt=fmt, cmap="viridis", ax=ax, cbar=False)
        ax.set_title(label)
        ax.set_xlabel("delta (straggler budget)")
        ax.set_ylabel("tau (max/median threshold)")
    fig.tight_layout()
    for ext in ("png", "pdf"):
        fig.savefig(out / f"sim_sweep.{ext}", dpi=150)
    plt.close(fig)
    return [out / f for f in FIGURE_FILES]
