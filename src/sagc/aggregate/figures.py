"""The paper's figures (seaborn on matplotlib's Agg backend), each as PNG and PDF.

Sized for a two-column paper: single-panel figures are one column wide (3.4 in), faceted
ones a full text width (7 in), 8 pt text. Each sizing has the same colour in every
figure (``sagc.aggregate.palette``); in the posterior figure candidate G uses the colour
of the fixed sizing of that G (``g4`` ... ``g16``). Only complete cells are drawn (the
tables name the missing ones); a figure whose data are absent from the grid (e.g. no SAGC
cell) is still written, with a line saying so, so that the pipeline's outputs always exist.

Files (in ``figures_dir``): ``straggler_rate``, ``sagc_group_size``, ``sagc_posterior``,
``reward_vs_time``, ``length_ratio``, ``accuracy_vs_length``, each ``.png`` and ``.pdf``.
PDFs carry no creation date, so re-running on the same data gives the same files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")  # no display on compute nodes; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from sagc import metrics  # noqa: E402
from sagc.aggregate.collect import Collected  # noqa: E402
from sagc.aggregate.grid import TIME_UNITS  # noqa: E402
from sagc.aggregate.outputs import FIGURE_NAMES  # noqa: E402
from sagc.aggregate.palette import BASE_COLOUR, palette, sizing_colour  # noqa: E402
from sagc.aggregate.stats import fixed_group_size  # noqa: E402

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
        h = r.run.history.copy()
        for col in h.columns:
            h[col] = pd.to_numeric(h[col], errors="coerce")
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


def _legend_on_top(fig, axes, entries: list[tuple[str, Line2D]] | None = None,
                   title: str | None = None) -> None:  # fmt: skip
    """One legend above the panels (seaborn's per-axes legends removed).

    ``entries`` are (label, handle) pairs built by hand, so the legend shows exactly the
    sizings (or candidates, tasks) and their colours, without seaborn's sub-titles.
    """
    for ax in axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.tight_layout()
    if entries:
        ncol = min(len(entries), 6 if fig.get_figwidth() > COLUMN_IN else 4)
        fig.legend([h for _, h in entries], [lab for lab, _ in entries], loc="lower center",
                   bbox_to_anchor=(0.5, 1.0), ncol=ncol, frameon=False, title=title,
                   handlelength=1.6, columnspacing=1.0)  # fmt: skip


def _sizing_entries(pal: dict[str, str]) -> list[tuple[str, Line2D]]:
    return [(s, _line(c)) for s, c in pal.items()]


# --------------------------------------------------------------------------- figures


def straggler_rate_figure(collected: Collected):
    """Straggler rate (%) by sizing, grouped by model x algorithm (bars: mean over seeds,
    whiskers: std over seeds)."""
    rows = [
        {"panel": _panel(r.cell.model, r.cell.algorithm), "sizing": r.cell.sizing,
         "rate": r.stats["straggler_rate"] * 100}  # fmt: skip
        for r in collected.cells if r.complete
    ]
    if not rows:
        return _placeholder("no complete training cell")
    df = pd.DataFrame(rows)
    pal = palette(df["sizing"])
    panels = list(dict.fromkeys(df["panel"]))
    width = COLUMN_IN if len(panels) * len(pal) <= 8 else FULL_IN
    fig, ax = plt.subplots(figsize=(width, 2.4))
    sns.barplot(data=df, x="panel", y="rate", hue="sizing", hue_order=list(pal), order=panels,
                palette=pal, saturation=1.0, errorbar="sd", capsize=0.1, err_kws={"linewidth": 0.8}, ax=ax)  # fmt: skip
    ax.set_xlabel("")
    ax.set_ylabel("straggler rate (%)")
    ax.set_ylim(0, 105)
    _legend_on_top(fig, [ax], [(s, Patch(color=c)) for s, c in pal.items()])
    return fig


def _controller_frame(collected: Collected) -> pd.DataFrame:
    df = history_frame(collected)
    if df.empty:
        return df
    return df[df["sizing"].map(fixed_group_size).isna()]


def group_size_figure(collected: Collected):
    """SAGC's G over training steps (top row) and its dual variable lambda (bottom row),
    one column per model x algorithm, one line per seed."""
    df = _controller_frame(collected)
    if df.empty:
        return _placeholder("no complete SAGC (controller) cell in this grid")
    pal = palette(df["sizing"])
    panels = list(dict.fromkeys(df["panel"]))
    width = COLUMN_IN if len(panels) == 1 else FULL_IN
    fig, axes = plt.subplots(2, len(panels), figsize=(width, 3.6), sharex="col", squeeze=False)
    has_lambda = metrics.LAMBDA in df.columns and df[metrics.LAMBDA].notna().any()
    for j, panel in enumerate(panels):
        sub = df[df["panel"] == panel]
        ax_g, ax_l = axes[0, j], axes[1, j]
        # One line per seed: a mean over seeds would show group sizes never used.
        common = dict(data=sub, x=metrics.STEP, hue="sizing", hue_order=list(pal), palette=pal,
                      units="seed", estimator=None, drawstyle="steps-post", linewidth=1.0)  # fmt: skip
        sns.lineplot(y=metrics.GROUP_SIZE, ax=ax_g, **common)
        gs = sorted(set(sub[metrics.GROUP_SIZE].dropna().round().astype(int)))
        if 0 < len(gs) <= 8:
            ax_g.set_yticks(gs)
        ax_g.set_title(panel)
        ax_g.set_ylabel("group size G" if j == 0 else "")
        if has_lambda and sub[metrics.LAMBDA].notna().any():
            sns.lineplot(y=metrics.LAMBDA, ax=ax_l, **common)
        else:
            ax_l.text(0.5, 0.5, "no λ logged", ha="center", va="center", transform=ax_l.transAxes)
        ax_l.set_ylabel("dual variable λ" if j == 0 else "")
        ax_l.set_xlabel("training step")
    _legend_on_top(fig, list(axes.flat), _sizing_entries(pal))
    return fig


def posterior_figure(collected: Collected):
    """SAGC's posterior mean straggler risk p(G) per candidate G over training steps
    (mean over seeds), one panel per model x algorithm x controller."""
    df = _controller_frame(collected)
    prefix = metrics.POSTERIOR_MEAN_PREFIX
    cols = sorted((c for c in df.columns if c.startswith(prefix)), key=lambda c: int(c[len(prefix):]))
    if df.empty or not cols:
        return _placeholder("no SAGC posterior logged in this grid")
    long = df.melt(id_vars=[metrics.STEP, "panel", "sizing", "seed"], value_vars=cols,
                   var_name="candidate", value_name="risk").dropna(subset=["risk"])  # fmt: skip
    long["candidate"] = "G=" + long["candidate"].str[len(prefix):]
    long["facet"] = long["panel"] + " · " + long["sizing"]
    facets = list(dict.fromkeys(long["facet"]))
    # Candidate G is drawn in the colour of the fixed sizing with that G (g4, g8, g16...).
    pal = {f"G={c[len(prefix):]}": sizing_colour(f"g{c[len(prefix):]}") for c in cols}
    fig, axes = _grid_axes(len(facets))
    for ax, facet in zip(axes, facets):
        sns.lineplot(data=long[long["facet"] == facet], x=metrics.STEP, y="risk", hue="candidate",
                     hue_order=list(pal), palette=pal, errorbar=None, ax=ax)  # fmt: skip
        ax.set_title(facet)
        ax.set_ylim(0, 1)
        ax.set_xlabel("training step")
        ax.set_ylabel("posterior mean p(G)")
    _legend_on_top(fig, axes, [(c, _line(col)) for c, col in pal.items()])
    return fig


def _per_panel_lines(collected: Collected, x: str, y: str, xlabel: str, ylabel: str,
                     smooth: bool, hline: float | None = None):  # fmt: skip
    df = history_frame(collected)
    if df.empty:
        return _placeholder("no complete training cell")
    pal = palette(df["sizing"])
    panels = list(dict.fromkeys(df["panel"]))
    fig, axes = _grid_axes(len(panels))
    for ax, panel in zip(axes, panels):
        sub = df[df["panel"] == panel].sort_values(["sizing", "seed", metrics.STEP]).copy()
        if smooth:
            # Rolling mean over ~5% of the steps: per-step rewards are noisy.
            window = max(1, round(sub.groupby(["sizing", "seed"]).size().max() / 20))
            sub[y] = sub.groupby(["sizing", "seed"])[y].transform(
                lambda v: v.rolling(window, min_periods=1).mean())  # fmt: skip
        present = [s for s in pal if s in set(sub["sizing"])]
        sns.lineplot(data=sub, x=x, y=y, hue="sizing", hue_order=present, palette=pal,
                     units="seed", estimator=None, ax=ax, linewidth=1.0, alpha=0.9)  # fmt: skip
        if hline is not None:
            ax.axhline(hline, color="black", linestyle="--", linewidth=0.8)
        ax.set_title(panel)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    entries = _sizing_entries(pal)
    if hline is not None:
        entries.append((f"τ = {hline:g}", _line("black", linestyle="--", linewidth=0.8)))
    _legend_on_top(fig, axes, entries)
    return fig


def reward_vs_time_figure(collected: Collected):
    """Training reward (rolling mean) against wall-clock time, all sizings overlaid, one
    line per seed."""
    unit = collected.grid.time_unit
    return _per_panel_lines(collected, "wallclock", metrics.REWARD_MEAN,
                            f"wall-clock ({unit})", "training reward", smooth=True)  # fmt: skip


def length_ratio_figure(collected: Collected):
    """Max/median completion length ratio over training steps, per sizing and seed."""
    return _per_panel_lines(collected, metrics.STEP, metrics.LENGTH_RATIO, "training step",
                            "max / median length", smooth=False, hline=collected.grid.tau)  # fmt: skip


_TASK_MARKERS = ("o", "X", "s", "^", "D", "v", "P", "*")


def accuracy_vs_length_figure(collected: Collected):
    """Downstream accuracy against mean output length: colour = sizing (base model in
    grey), marker = benchmark; one point per sizing x benchmark (mean over seeds), one
    panel per model x algorithm (each with its base model)."""
    rows = []
    for r in collected.cells:
        if r.complete and r.eval:
            for task, v in r.eval.items():
                rows.append({"model": r.cell.model, "panel": _panel(r.cell.model, r.cell.algorithm),
                             "label": r.cell.sizing, "task": task, "acc": v["accuracy"] * 100,
                             "len": v["mean_output_tokens"]})  # fmt: skip
    if not rows:
        return _placeholder("no evaluation summary of a complete cell")
    df = pd.DataFrame(rows)
    base = []
    for b in collected.base:
        if b.eval and not b.missing:
            for panel in df.loc[df["model"] == b.base.model, "panel"].unique():
                for task, v in b.eval.items():
                    base.append({"model": b.base.model, "panel": panel, "label": "base", "task": task,
                                 "acc": v["accuracy"] * 100, "len": v["mean_output_tokens"]})  # fmt: skip
    df = pd.concat([df, pd.DataFrame(base)], ignore_index=True)
    df = df.groupby(["panel", "label", "task"], as_index=False, sort=False)[["acc", "len"]].mean()
    pal = palette(s for s in df["label"] if s != "base")
    if (df["label"] == "base").any():
        pal["base"] = BASE_COLOUR
    tasks = sorted(set(df["task"]))
    markers = {t: _TASK_MARKERS[i % len(_TASK_MARKERS)] for i, t in enumerate(tasks)}
    panels = list(dict.fromkeys(df["panel"]))
    fig, axes = _grid_axes(len(panels), height_per_row=2.3)
    for ax, panel in zip(axes, panels):
        sub = df[df["panel"] == panel]
        sns.scatterplot(data=sub, x="len", y="acc", hue="label", hue_order=[s for s in pal if s in set(sub["label"])],
                        palette=pal, style="task", style_order=tasks, markers=markers, s=30, ax=ax)  # fmt: skip
        ax.set_title(panel)
        ax.set_xlabel("mean output length (tokens)")
        ax.set_ylabel("accuracy (%)")
    entries = [(s, _marker(c)) for s, c in pal.items()]
    entries += [(t, _marker("black", markers[t])) for t in tasks]
    _legend_on_top(fig, axes, entries)
    return fig


# Keyed by the names in ``sagc.aggregate.outputs.FIGURE_NAMES`` (checked below).
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
    """Draw and write every figure to ``directory`` (the grid's ``figures_dir``)."""
    directory = Path(directory if directory is not None else collected.grid.figures_dir)
    paths = []
    with sns.axes_style("whitegrid"), plt.rc_context(_RC):
        for name, draw in FIGURES.items():
            paths += save(draw(collected), directory, name)
    return paths


__all__ = ["FIGURES", "FIGURE_NAMES", "history_frame", "write_figures"]
