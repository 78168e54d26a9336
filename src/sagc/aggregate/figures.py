"""The paper's figures, each as PNG and PDF, the same bytes on the same data (docs/aggregation.md, "Figures")."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on compute nodes; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator
from matplotlib.transforms import ScaledTranslation
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import cdist

from sagc import metrics
from sagc.aggregate.collect import Collected
from sagc.aggregate.grid import TIME_UNITS
from sagc.aggregate.outputs import FIGURE_NAMES
from sagc.aggregate.palette import BASE_COLOUR, palette
from sagc.controller import fixed_group_size, parse_sizing

COLUMN_IN = 3.4
FULL_IN = 7.0
_RC = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7,
    "ytick.labelsize": 7, "legend.fontsize": 7, "legend.title_fontsize": 7,
    "lines.linewidth": 1.2, "svg.hashsalt": "sagc", "pdf.fonttype": 42,
}  # fmt: skip


def _panel(model: str, algorithm: str) -> str:
    return f"{model} / {algorithm.upper()}"


def history_frame(collected: Collected) -> pd.DataFrame:
    """Long-form histories of the complete cells, tagged with model/algorithm/sizing/seed."""
    frames = []
    divisor = TIME_UNITS[collected.grid.time_unit]
    for r in collected.cells:
        if not r.complete or r.run is None:
            continue
        h = r.run.history.apply(pd.to_numeric, errors="coerce")
        h["model"], h["algorithm"], h["sizing"], h["seed"] = (
            r.cell.model, r.cell.algorithm, r.cell.sizing, r.cell.seed)  # fmt: skip
        h["panel"] = _panel(r.cell.model, r.cell.algorithm)
        h["wallclock"] = h[metrics.WALLCLOCK_SECONDS] / divisor
        frames.append(h)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _grid_axes(n: int, height_per_row: float = 1.9):
    """A figure with ``n`` panels, two per row (one column wide when n == 1)."""
    ncols = 1 if n == 1 else 2
    nrows = math.ceil(n / ncols)
    width = COLUMN_IN if n == 1 else FULL_IN
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height_per_row * nrows + 0.5),
                             squeeze=False, sharex=False)  # fmt: skip
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _placeholder(text: str):
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return fig


def _line(colour: str, **kw) -> Line2D:
    return Line2D([], [], color=colour, linewidth=kw.pop("linewidth", 1.6), **kw)


def _marker(colour: str, marker: str = "o") -> Line2D:
    return Line2D([], [], color=colour, marker=marker, linestyle="", markersize=5)


def _legend_on_top(fig, axes, entries: list[tuple[str, Line2D]]) -> None:
    """One legend of (label, handle) ``entries`` above the panels instead of seaborn's per-axes ones."""
    for ax in axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.tight_layout()
    if entries:
        most = 7 if fig.get_figwidth() > COLUMN_IN else 4
        ncol = len(entries) if len(entries) <= most else math.ceil(len(entries) / math.ceil(len(entries) / most))
        fig.legend([h for _, h in entries], [lab for lab, _ in entries], loc="lower center",
                   bbox_to_anchor=(0.5, 1.0), ncol=ncol, frameon=False,
                   handlelength=1.6, columnspacing=1.0)  # fmt: skip


def _sizing_entries(pal: dict[str, str]) -> list[tuple[str, Line2D]]:
    return [(s, _line(c)) for s, c in pal.items()]


def _palette(collected: Collected, shown) -> dict[str, str]:
    """Sizing -> colour of the sizings ``shown``, from the palette of the whole grid."""
    present = set(shown)
    return {s: c for s, c in palette(c.sizing for c in collected.grid.cells).items() if s in present}


def controller_deltas(collected: Collected) -> dict[str, float]:
    """Controller sizing -> its straggler budget δ, from the run config (the policy's default when unset)."""
    deltas: dict[str, float] = {}
    for r in collected.cells:
        if not r.complete or r.run is None or fixed_group_size(r.cell.sizing) is not None:
            continue
        sizing = parse_sizing(r.cell.sizing)
        sizing_cfg = (r.run.config.get("config") or {}).get("sizing") or {}
        block = dict(sizing_cfg.get(sizing.block) or {})
        block.pop("seed", None)
        delta = getattr(sizing.config(block), "delta", None)
        if delta is not None:
            deltas.setdefault(r.cell.sizing, float(delta))
    return deltas


def straggler_rate_figure(collected: Collected):
    """Straggler rate (%) by sizing per model x algorithm: mean, std and seeds, with each controller's δ."""
    rows = [
        {
            "panel": _panel(r.cell.model, r.cell.algorithm),
            "sizing": r.cell.sizing,
            "seed": r.cell.seed,
            "rate": r.stats["straggler_rate"] * 100,
        }
        for r in collected.cells
        if r.complete
    ]
    if not rows:
        return _placeholder("no complete training cell")
    df = pd.DataFrame(rows)
    pal = _palette(collected, df["sizing"])
    panels = list(dict.fromkeys(df["panel"]))
    width = COLUMN_IN if len(panels) * len(pal) <= 8 else FULL_IN
    fig, ax = plt.subplots(figsize=(width, 2.4))
    common = dict(data=df, x="panel", y="rate", hue="sizing", hue_order=list(pal), order=panels, ax=ax)
    sns.barplot(palette=pal, saturation=1.0, errorbar="sd", capsize=0.1, err_kws={"linewidth": 0.8},
                **common)  # fmt: skip
    if df.groupby(["panel", "sizing"]).size().max() > 1:
        # No jitter: seaborn's draws from the global random state.
        sns.stripplot(palette={s: "black" for s in pal}, dodge=True, size=2.0, jitter=False, alpha=0.7,
                      legend=False, **common)  # fmt: skip
    entries = [(s, Patch(color=c)) for s, c in pal.items()]
    deltas = controller_deltas(collected)
    same = len(set(deltas.values())) == 1
    for value in sorted(set(deltas.values())):
        owners = [s for s, d in deltas.items() if d == value]
        colour = "black" if same else pal[owners[0]]
        ax.axhline(value * 100, color=colour, linestyle="--", linewidth=0.9, zorder=2.5)
        label = f"δ = {value:g}" + ("" if same and len(deltas) == 1 else f" ({', '.join(owners)})")
        entries.append((label, _line(colour, linestyle="--", linewidth=0.9)))
    ax.set_xlabel("")
    ax.set_ylabel("straggler rate (%)")
    ax.set_ylim(0, 105)
    _legend_on_top(fig, [ax], entries)
    return fig


def _controller_frame(collected: Collected) -> pd.DataFrame:
    df = history_frame(collected)
    return df if df.empty else df[df["sizing"].map(fixed_group_size).isna()]


def group_size_figure(collected: Collected):
    """SAGC's G (log2 axis) and dual variable λ over training steps, one column per model x algorithm."""
    df = _controller_frame(collected)
    if df.empty:
        return _placeholder("no complete SAGC (controller) cell in this grid")
    pal = _palette(collected, df["sizing"])
    panels = list(dict.fromkeys(df["panel"]))
    width = COLUMN_IN if len(panels) == 1 else FULL_IN
    fig, axes = plt.subplots(2, len(panels), figsize=(width, 3.6), sharex="col", sharey="row", squeeze=False)
    has_lambda = metrics.LAMBDA in df.columns and df[metrics.LAMBDA].notna().any()
    for j, panel in enumerate(panels):
        sub = df[df["panel"] == panel]
        ax_g, ax_l = axes[0, j], axes[1, j]
        for sizing, colour in pal.items():
            cells = sub[sub["sizing"] == sizing].sort_values(metrics.STEP)
            many = cells["seed"].nunique() > 1
            for _, seed_rows in cells.groupby("seed"):
                for ax, col in ((ax_g, metrics.GROUP_SIZE), (ax_l, metrics.LAMBDA)):
                    if col in seed_rows and seed_rows[col].notna().any():
                        ax.step(seed_rows[metrics.STEP], seed_rows[col], where="post", color=colour,
                                linewidth=0.7 if many else 1.1, alpha=0.35 if many else 1.0)  # fmt: skip
            if many:
                by_step = cells.groupby(metrics.STEP)
                geo = by_step[metrics.GROUP_SIZE].apply(lambda v: float(2 ** np.log2(v.dropna()).mean()))
                ax_g.step(geo.index, geo.to_numpy(), where="post", color=colour, linewidth=1.6)
                if has_lambda:
                    lam = by_step[metrics.LAMBDA].mean()
                    ax_l.step(lam.index, lam.to_numpy(), where="post", color=colour, linewidth=1.6)
        ax_g.set_title(panel)
        ax_g.set_ylabel("group size G" if j == 0 else "")
        if not (has_lambda and sub[metrics.LAMBDA].notna().any()):
            ax_l.text(0.5, 0.5, "no λ logged", ha="center", va="center", transform=ax_l.transAxes)
        ax_l.set_ylabel("dual variable λ" if j == 0 else "")
        ax_l.set_xlabel("training step")
    sizes = sorted(set(df[metrics.GROUP_SIZE].dropna().round().astype(int)))
    if sizes:  # a log2 axis with ticks at the sizes that occur; shared, so the first sets the row
        ax = axes[0, 0]
        ax.set_yscale("log", base=2)
        ax.set_yticks(sizes)
        ax.set_yticklabels([str(g) for g in sizes])
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylim(min(sizes) / 2**0.25, max(sizes) * 2**0.25)
    _legend_on_top(fig, list(axes.flat), _sizing_entries(pal))
    return fig


def posterior_figure(collected: Collected):
    """SAGC's posterior mean straggler risk p(G) per candidate G over training steps."""
    df = _controller_frame(collected)
    prefix = metrics.POSTERIOR_MEAN_PREFIX
    cols = sorted((c for c in df.columns if c.startswith(prefix)), key=lambda c: int(c[len(prefix) :]))
    if df.empty or not cols:
        return _placeholder("no SAGC posterior logged in this grid")
    long = df.melt(id_vars=[metrics.STEP, "panel", "sizing", "seed"], value_vars=cols,
                   var_name="candidate", value_name="risk").dropna(subset=["risk"])  # fmt: skip
    long["candidate"] = "G=" + long["candidate"].str[len(prefix) :]
    long["facet"] = long["panel"] + " · " + long["sizing"]
    facets = list(dict.fromkeys(long["facet"]))
    # Candidate G is drawn in the colour of the fixed sizing with that G (g4, g8, g16...).
    fixed = palette([f"g{c[len(prefix) :]}" for c in cols])
    pal = {f"G={c[len(prefix) :]}": fixed[f"g{c[len(prefix) :]}"] for c in cols}
    fig, axes = _grid_axes(len(facets))
    for ax, facet in zip(axes, facets):
        sub = long[long["facet"] == facet]
        sns.lineplot(data=sub, x=metrics.STEP, y="risk", hue="candidate", hue_order=list(pal), palette=pal,
                     errorbar="sd" if sub["seed"].nunique() > 1 else None, ax=ax)  # fmt: skip
        ax.set_title(facet)
        ax.set_ylim(0, 1)
        ax.set_xlabel("training step")
        ax.set_ylabel("posterior mean p(G)")
    _legend_on_top(fig, axes, _sizing_entries(pal))
    return fig


def _seed_band(runs: list[tuple[np.ndarray, np.ndarray]], points: int = 200):
    """(x, mean, std) of the seeds' curves over the x range all cover; std None for one seed."""
    if len(runs) == 1:
        x, y = runs[0]
        return x, y, None
    lo = max(float(x[0]) for x, _ in runs)
    hi = min(float(x[-1]) for x, _ in runs)
    if hi <= lo:
        return None
    grid = np.linspace(lo, hi, points)
    ys = np.vstack([np.interp(grid, x, y) for x, y in runs])
    return grid, ys.mean(axis=0), ys.std(axis=0, ddof=1)


def reward_vs_time_figure(collected: Collected):
    """Smoothed training reward against wall-clock time, band ±1 std over seeds."""
    df = history_frame(collected)
    if df.empty:
        return _placeholder("no complete training cell")
    pal = _palette(collected, df["sizing"])
    # The centred rolling mean's window: about a tenth of the run, at least 3, odd (centred on a step).
    window = max(3, round(int(df.groupby(["panel", "sizing", "seed"]).size().max()) / 10))
    window = window if window % 2 else window + 1
    panels = list(dict.fromkeys(df["panel"]))
    fig, axes = _grid_axes(len(panels))
    for ax, panel in zip(axes, panels):
        sub = df[df["panel"] == panel]
        for sizing, colour in pal.items():
            runs = []
            for _, seed_rows in sub[sub["sizing"] == sizing].groupby("seed"):
                seed_rows = seed_rows.sort_values(metrics.STEP).dropna(subset=["wallclock", metrics.REWARD_MEAN])
                if seed_rows.empty:
                    continue
                smooth = seed_rows[metrics.REWARD_MEAN].rolling(window, center=True, min_periods=1).mean()
                runs.append((seed_rows["wallclock"].to_numpy(), smooth.to_numpy()))
            band = _seed_band(runs) if runs else None
            if band is None:
                continue
            x, mean, std = band
            ax.plot(x, mean, color=colour, linewidth=1.3)
            if std is not None:
                ax.fill_between(x, mean - std, mean + std, color=colour, alpha=0.18, linewidth=0)
        ax.set_title(panel)
        ax.set_xlabel(f"wall-clock ({collected.grid.time_unit})")
        ax.set_ylabel(f"training reward ({window}-step mean)")
    seeds = df.groupby(["panel", "sizing"])["seed"].nunique().max()
    entries = _sizing_entries(pal)
    if seeds > 1:
        entries.append(("±1 std over seeds", Patch(color="grey", alpha=0.3)))
    _legend_on_top(fig, axes, entries)
    return fig


def length_ratio_figure(collected: Collected):
    """Max/median completion length ratio over training steps, with the straggler threshold τ."""
    df = history_frame(collected)
    if df.empty:
        return _placeholder("no complete training cell")
    pal = _palette(collected, df["sizing"])
    panels = list(dict.fromkeys(df["panel"]))
    many = df.groupby(["panel", "sizing"])["seed"].nunique().max() > 1
    tau = collected.grid.tau
    fig, axes = _grid_axes(len(panels))
    for ax, panel in zip(axes, panels):
        sub = df[df["panel"] == panel].sort_values(["sizing", "seed", metrics.STEP])
        sns.lineplot(data=sub, x=metrics.STEP, y=metrics.LENGTH_RATIO, hue="sizing", hue_order=list(pal),
                     palette=pal, units="seed", estimator=None, ax=ax, linewidth=0.8 if many else 1.0,
                     alpha=0.6 if many else 0.9)  # fmt: skip
        if tau is not None:
            ax.axhline(tau, color="black", linestyle="--", linewidth=0.8)
        ax.set_title(panel)
        ax.set_xlabel("training step")
        ax.set_ylabel("max / median length")
    entries = _sizing_entries(pal)
    if tau is not None:
        entries.append((f"τ = {tau:g}", _line("black", linestyle="--", linewidth=0.8)))
    _legend_on_top(fig, axes, entries)
    return fig


_TASK_MARKERS = ("o", "X", "s", "^", "D", "v", "P", "*")
#: Points closer than this (in typographic points) are drawn side by side.
_OVERLAP_PT = 5.0
_DODGE_PT = 5.5


def _accuracy_rows(collected: Collected) -> pd.DataFrame:
    """Per panel x (sizing or base) x task: accuracy and output length, mean and standard error over
    seeds (lm-eval's standard error for one seed)."""

    def rows_of(model: str, panel: str, label: str, evals: dict) -> list[dict]:
        return [{"model": model, "panel": panel, "label": label, "task": task, "acc": v["accuracy"] * 100,
                 "acc_se": v["accuracy_stderr"] * 100, "len": v["mean_output_tokens"]}
                for task, v in evals.items()]  # fmt: skip

    rows = []
    for r in collected.cells:
        if r.complete and r.eval:
            rows += rows_of(r.cell.model, _panel(r.cell.model, r.cell.algorithm), r.cell.sizing, r.eval)
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    for b in collected.base:
        if b.eval and not b.missing:
            for panel in df.loc[df["model"] == b.base.model, "panel"].unique():
                rows += rows_of(b.base.model, panel, "base", b.eval)
    df = pd.DataFrame(rows)
    out = []
    for (panel, label, task), g in df.groupby(["panel", "label", "task"], sort=False):
        n = len(g)
        out.append({
            "panel": panel, "label": label, "task": task, "n": n,
            "acc": g["acc"].mean(), "len": g["len"].mean(),
            "acc_err": g["acc"].std(ddof=1) / math.sqrt(n) if n > 1 else g["acc_se"].iloc[0],
            "len_err": g["len"].std(ddof=1) / math.sqrt(n) if n > 1 else 0.0,
        })  # fmt: skip
    return pd.DataFrame(out)


def _dodge_offsets(ax, xs, ys) -> np.ndarray:
    """Horizontal offsets (points) that spread clusters of points within ``_OVERLAP_PT`` side by side."""
    pts = ax.transData.transform(np.column_stack([xs, ys])) * 72.0 / ax.figure.dpi
    _, labels = connected_components(cdist(pts, pts) < _OVERLAP_PT, directed=False)
    offsets = np.zeros(len(pts))
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        offsets[members] = (np.arange(members.size) - (members.size - 1) / 2) * _DODGE_PT
    return offsets


def accuracy_vs_length_figure(collected: Collected):
    """Downstream accuracy against mean output length: colour = sizing, marker = benchmark."""
    df = _accuracy_rows(collected)
    if df.empty:
        return _placeholder("no evaluation summary of a complete cell")
    pal = _palette(collected, df["label"])
    if (df["label"] == "base").any():
        pal["base"] = BASE_COLOUR
    tasks = sorted(set(df["task"]))
    markers = {t: _TASK_MARKERS[i % len(_TASK_MARKERS)] for i, t in enumerate(tasks)}
    panels = list(dict.fromkeys(df["panel"]))
    fig, axes = _grid_axes(len(panels), height_per_row=2.3)
    drawn = []
    for ax, panel in zip(axes, panels):
        sub = df[df["panel"] == panel].reset_index(drop=True)
        bars = [ax.errorbar(row.len, row.acc, yerr=row.acc_err, xerr=row.len_err or None, fmt=markers[row.task],
                            color=pal[row.label], markersize=4.5, markeredgecolor="white",
                            markeredgewidth=0.4, elinewidth=0.7, capsize=1.5, zorder=3)
                for row in sub.itertuples()]  # fmt: skip
        ax.set_title(panel)
        ax.set_xlabel("mean output length (tokens)")
        ax.set_ylabel("accuracy (%)")
        drawn.append((ax, sub, bars))
    # Overlaps are judged on the final axes: limits frozen, layout done.
    fig.tight_layout()
    for ax, sub, bars in drawn:
        ax.set_xlim(ax.get_xlim())
        ax.set_ylim(ax.get_ylim())
        offsets = _dodge_offsets(ax, sub["len"].to_numpy(), sub["acc"].to_numpy())
        for bar, dx in zip(bars, offsets):
            if dx:
                shift = ScaledTranslation(dx / 72.0, 0, fig.dpi_scale_trans)
                for artist in bar.get_children():
                    artist.set_transform(artist.get_transform() + shift)
    entries = [(s, _marker(c)) for s, c in pal.items()]
    entries += [(t, _marker("black", markers[t])) for t in tasks]
    _legend_on_top(fig, axes, entries)
    return fig


FIGURES: dict[str, Callable[[Collected], plt.Figure]] = {
    "straggler_rate": straggler_rate_figure,
    "sagc_group_size": group_size_figure,
    "sagc_posterior": posterior_figure,
    "reward_vs_time": reward_vs_time_figure,
    "length_ratio": length_ratio_figure,
    "accuracy_vs_length": accuracy_vs_length_figure,
}


assert tuple(FIGURES) == FIGURE_NAMES, "figures and sagc.aggregate.outputs disagree"


def save(fig, directory: Path, name: str) -> list[Path]:
    """Write ``name.png`` (200 dpi) and ``name.pdf`` without timestamps, then close."""
    directory.mkdir(parents=True, exist_ok=True)
    png, pdf = directory / f"{name}.png", directory / f"{name}.pdf"
    fig.savefig(png, dpi=200, bbox_inches="tight")
    fig.savefig(pdf, bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
    plt.close(fig)
    return [png, pdf]


def write_figures(collected: Collected, directory: str | Path | None = None) -> list[Path]:
    """Draw and write every figure to ``directory`` (default: the grid's ``figures_dir``)."""
    directory = Path(directory if directory is not None else collected.grid.figures_dir)
    paths = []
    with sns.axes_style("whitegrid"), plt.rc_context(_RC):
        for name, draw in FIGURES.items():
            paths += save(draw(collected), directory, name)
    return paths
