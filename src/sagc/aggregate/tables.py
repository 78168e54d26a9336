"""The paper's tables: training efficiency, downstream accuracy, and the headline lines.

Each table is written as CSV (numbers, mean and std in separate columns, empty where a
value is missing — never zero), Markdown and LaTeX (display strings, ``mean ± std``).
Rows are one model x algorithm x sizing, aggregated over seeds (see ``sagc.aggregate.stats``
for every definition). Incomplete cells are never dropped: a row shows ``k/n`` seeds and a
note names each missing cell and why; a row without any complete seed reads ``missing``.

Files (in ``tables_dir``): ``efficiency.{csv,md,tex}``, ``downstream.{csv,md,tex}``,
``headline.md``, plus the per-seed detail ``efficiency_cells.csv`` and
``downstream_cells.csv``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sagc.aggregate.collect import CellResult, Collected
from sagc.aggregate.grid import TIME_UNITS
from sagc.aggregate.palette import sizing_order
from sagc.aggregate.render import latex_table, markdown_table
from sagc.aggregate.stats import MeanStd, fixed_group_size, reference_sizing

MISSING = "missing"

#: Efficiency statistics: (stat, display header, formatter kind).
_EFF_COLUMNS = (
    ("straggler_rate", "Straggler rate (%)", "pct"),
    ("wallclock", "Wall-clock ({unit})", "2f"),
    ("speedup", "Speed-up vs {ref}", "x"),
    ("final_reward", "Final reward (last {k})", "3f"),
    ("mean_group_size", "Mean G", "2f"),
    ("mean_length", "Mean length (tok)", "1f"),
    ("padding_efficiency", "Padding eff. (%)", "pct"),
    ("rollout_share", "Rollout share (%)", "pct"),
)


@dataclass
class Table:
    """One table in its three forms; ``write`` puts ``<name>.{csv,md,tex}`` in a folder."""

    name: str
    frame: pd.DataFrame
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        return markdown_table(self.headers, self.rows, self.notes)

    def latex(self) -> str:
        return latex_table(self.headers, self.rows, self.notes)

    def write(self, directory: str | Path) -> list[Path]:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = [directory / f"{self.name}.{ext}" for ext in ("csv", "md", "tex")]
        self.frame.to_csv(paths[0], index=False, float_format="%.6g")
        paths[1].write_text(self.markdown())
        paths[2].write_text(self.latex())
        return paths


# --------------------------------------------------------------------------- helpers


def fmt(value: MeanStd | float, kind: str) -> str:
    """Display string: ``mean ± std`` (std only with 2+ seeds); ``missing`` for NaN."""
    ms = value if isinstance(value, MeanStd) else MeanStd(float(value), math.nan, 1)
    if math.isnan(ms.mean):
        return MISSING
    scale, spec = {"pct": (100.0, ".1f"), "x": (1.0, ".2f")}.get(kind, (1.0, "." + kind))
    text = format(ms.mean * scale, spec)
    if not math.isnan(ms.std):
        text += " ± " + format(ms.std * scale, spec)
    return text + ("×" if kind == "x" else "")


def groups(collected: Collected) -> list[tuple[str, str, str, list[CellResult]]]:
    """(model, algorithm, sizing, cell results) in table order: models and algorithms as
    the grid lists them, sizings by ``palette.sizing_order``."""
    order = sizing_order(r.cell.sizing for r in collected.cells)
    models = list(dict.fromkeys(r.cell.model for r in collected.cells))
    algos = list(dict.fromkeys(r.cell.algorithm for r in collected.cells))
    out = []
    for model in models:
        for algo in algos:
            for sizing in order:
                rs = [r for r in collected.cells
                      if (r.cell.model, r.cell.algorithm, r.cell.sizing) == (model, algo, sizing)]  # fmt: skip
                if rs:
                    out.append((model, algo, sizing, rs))
    return out


def missing_notes(collected: Collected) -> list[str]:
    return [f"Missing: {cell}: {'; '.join(why)}" for cell, why in collected.missing().items()]


def _seeds(rs: list[CellResult]) -> str:
    done = sum(r.complete for r in rs)
    return f"{done}/{len(rs)}"


def _status(rs: list[CellResult]) -> str:
    done = sum(r.complete for r in rs)
    return "complete" if done == len(rs) else ("partial" if done else MISSING)


def _missing_cells(rs) -> str:
    return "; ".join(f"{r.cell.id}: {', '.join(r.missing)}" for r in rs if r.missing)


# --------------------------------------------------------------------------- efficiency


def _efficiency_stats(rs: list[CellResult], divisor: float) -> dict[str, MeanStd]:
    done = [r for r in rs if r.complete]
    out = {name: MeanStd.of([r.stats[name] for r in done]) for name, *_ in _EFF_COLUMNS
           if name not in ("wallclock", "speedup")}  # fmt: skip
    out["wallclock"] = MeanStd.of([r.stats["wallclock_s"] / divisor for r in done])
    return out


def efficiency_table(collected: Collected) -> Table:
    """Training efficiency, one row per model x algorithm x sizing (mean ± std over seeds)."""
    grid = collected.grid
    unit = grid.time_unit
    divisor = TIME_UNITS[unit]
    rows_num, rows_txt = [], []
    grouped = groups(collected)
    stats = {(m, a, s): _efficiency_stats(rs, divisor) for m, a, s, rs in grouped}
    refs = set()
    for model, algo, sizing, rs in grouped:
        st = stats[(model, algo, sizing)]
        ref = reference_sizing(s for m, a, s, _ in grouped if (m, a) == (model, algo))
        refs.add(ref)
        ref_wall = stats[(model, algo, ref)]["wallclock"].mean if ref else math.nan
        speedup = ref_wall / st["wallclock"].mean if st["wallclock"].mean > 0 else math.nan
        num = {"model": model, "algorithm": algo, "sizing": sizing,
               "seeds": sum(r.complete for r in rs), "seeds_expected": len(rs),
               "status": _status(rs)}  # fmt: skip
        for name, *_ in _EFF_COLUMNS:
            if name == "speedup":
                num["speedup"], num["speedup_reference"] = speedup, ref or ""
                continue
            col = f"wallclock_{unit}" if name == "wallclock" else name
            num[f"{col}_mean"], num[f"{col}_std"] = st[name].mean, st[name].std
        num["missing_cells"] = _missing_cells(rs)
        rows_num.append(num)
        txt = [model, algo, sizing, _seeds(rs)]
        for name, _, kind in _EFF_COLUMNS:
            txt.append(fmt(speedup if name == "speedup" else st[name], kind))
        rows_txt.append(txt)
    ref_label = "/".join(sorted(r for r in refs if r)) or "largest fixed G"
    headers = ["Model", "Algorithm", "Sizing", "Seeds"] + [
        h.format(unit=unit, ref=ref_label, k=grid.last_k) for _, h, _ in _EFF_COLUMNS
    ]
    notes = [
        f"Mean ± std over seeds (sample std); speed-up = wall-clock of the largest fixed G "
        f"({ref_label}) / wall-clock of the row, per model and algorithm."
    ] + missing_notes(collected)
    return Table("efficiency", pd.DataFrame(rows_num), headers, rows_txt, notes)


def efficiency_cells(collected: Collected) -> pd.DataFrame:
    """Per-seed statistics (one row per grid cell; empty values for missing cells)."""
    rows = []
    for r in collected.cells:
        row = {"cell": r.cell.id, "model": r.cell.model, "algorithm": r.cell.algorithm,
               "sizing": r.cell.sizing, "seed": r.cell.seed,
               "status": "complete" if r.complete else MISSING}  # fmt: skip
        row.update(r.stats if (r.stats and r.complete) else {})
        row["missing"] = "; ".join(r.missing)
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- downstream


def _tasks(collected: Collected) -> list[str]:
    tasks = set()
    for r in list(collected.cells) + list(collected.base):
        tasks.update((r.eval or {}).keys())
    return sorted(tasks)


def _downstream_row(evals: list[dict], tasks: list[str]) -> tuple[dict, dict[str, MeanStd]]:
    """Numeric columns and display values for a set of seeds' evaluation summaries."""
    num: dict = {}
    show: dict[str, MeanStd] = {}
    lengths = []
    for task in tasks:
        vals = [e[task] for e in evals if task in e]
        acc = MeanStd.of([v["accuracy"] for v in vals])
        stderr = MeanStd.of([v["accuracy_stderr"] for v in vals])
        length = MeanStd.of([v["mean_output_tokens"] for v in vals])
        trunc = MeanStd.of([v["truncation_rate"] for v in vals])
        num[f"{task}_accuracy_mean"], num[f"{task}_accuracy_std"] = acc.mean, acc.std
        num[f"{task}_accuracy_stderr"] = stderr.mean
        num[f"{task}_mean_output_tokens"] = length.mean
        num[f"{task}_truncation_rate"] = trunc.mean
        # One seed: the ± is lm-eval's standard error; several: the std over seeds.
        show[task] = acc if acc.n > 1 else MeanStd(acc.mean, stderr.mean, acc.n)
        lengths.append(length.mean)
    mean_len = sum(lengths) / len(lengths) if lengths else math.nan
    num["mean_output_tokens"] = mean_len
    show["__length__"] = MeanStd(mean_len, math.nan, 1)
    return num, show


def downstream_table(collected: Collected) -> Table:
    """Accuracy per benchmark and mean output length, per base model and per
    model x algorithm x sizing."""
    tasks = _tasks(collected)
    rows_num, rows_txt = [], []
    entries: list[tuple[str, str, str, list, str, str]] = []
    for b in collected.base:
        evals = [b.eval] if b.eval is not None and not b.missing else []
        status = "complete" if evals else MISSING
        entries.append((b.base.model, "base", "-", evals, "1/1" if evals else "0/1", status))
    for model, algo, sizing, rs in groups(collected):
        evals = [r.eval for r in rs if r.complete]
        entries.append((model, algo, sizing, evals, _seeds(rs), _status(rs)))
    for model, algo, sizing, evals, seeds, status in entries:
        num, show = _downstream_row(evals, tasks)
        rows_num.append({"model": model, "algorithm": algo, "sizing": sizing, "seeds": seeds,
                         "status": status, **num})  # fmt: skip
        rows_txt.append([model, algo, sizing, seeds]
                        + [fmt(show[t], "pct") for t in tasks] + [fmt(show["__length__"], "1f")])  # fmt: skip
    headers = ["Model", "Algorithm", "Sizing", "Seeds"] + [f"{t} acc. (%)" for t in tasks] + [
        "Mean output length (tok)"
    ]
    notes = [
        "Accuracy ± lm-eval standard error for a single seed, ± std over seeds for several; "
        "mean output length averaged over the benchmarks."
    ] + missing_notes(collected)
    frame = pd.DataFrame(rows_num)
    # Order rows the same way in every table: bases first, then training cells.
    return Table("downstream", frame, headers, rows_txt, notes)


def downstream_cells(collected: Collected) -> pd.DataFrame:
    """Per-cell, per-task evaluation rows (base models with algorithm ``base``)."""
    rows = []

    def add(cell_id, model, algo, sizing, seed, result):
        evals = result.eval if (result.eval is not None and not result.missing) else None
        for task in _tasks(collected):
            row = {"cell": cell_id, "model": model, "algorithm": algo, "sizing": sizing,
                   "seed": seed, "task": task, "status": "complete" if evals else MISSING}  # fmt: skip
            if evals and task in evals:
                row.update(evals[task])
            row["missing"] = "; ".join(result.missing)
            rows.append(row)

    for b in collected.base:
        add(f"base:{b.base.model}", b.base.model, "base", "-", None, b)
    for r in collected.cells:
        add(r.cell.id, r.cell.model, r.cell.algorithm, r.cell.sizing, r.cell.seed, r)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- headline


def headline_lines(collected: Collected) -> list[str]:
    """The paper's headline style, one line per model x algorithm x controller:
    ``tiny-qwen2 DAPO, sagc vs g16: straggler rate 99.6% → 43.4%, wall-clock 29.50 h →
    16.00 h (1.84× faster), final reward 0.512 → 0.498``."""
    grid = collected.grid
    unit = grid.time_unit
    divisor = TIME_UNITS[unit]
    grouped = groups(collected)
    by_key = {(m, a, s): rs for m, a, s, rs in grouped}
    lines = []
    for model, algo in dict.fromkeys((m, a) for m, a, _, _ in grouped):
        sizings = [s for m, a, s, _ in grouped if (m, a) == (model, algo)]
        ref = reference_sizing(sizings)
        for ctrl in (s for s in sizings if fixed_group_size(s) is None):
            label = f"{model} {algo.upper()}, {ctrl} vs {ref or '(no fixed G)'}"
            if ref is None:
                lines.append(f"{label}: no fixed group size in the grid to compare with")
                continue
            a_rs, b_rs = by_key[(model, algo, ref)], by_key[(model, algo, ctrl)]
            absent = [r for r in a_rs + b_rs if not r.complete]
            a = _efficiency_stats(a_rs, divisor)
            b = _efficiency_stats(b_rs, divisor)
            if math.isnan(a["wallclock"].mean) or math.isnan(b["wallclock"].mean):
                lines.append(f"{label}: {MISSING} ({', '.join(r.cell.id for r in absent)})")
                continue
            speed = a["wallclock"].mean / b["wallclock"].mean
            line = (
                f"{label}: straggler rate {a['straggler_rate'].mean * 100:.1f}% → "
                f"{b['straggler_rate'].mean * 100:.1f}%, wall-clock {a['wallclock'].mean:.2f} {unit}"
                f" → {b['wallclock'].mean:.2f} {unit} ({speed:.2f}× faster), final reward "
                f"{a['final_reward'].mean:.3f} → {b['final_reward'].mean:.3f}"
            )
            if absent:
                line += f" (partial; missing: {', '.join(r.cell.id for r in absent)})"
            lines.append(line)
    return lines


def headline_markdown(collected: Collected) -> str:
    lines = headline_lines(collected)
    body = "\n".join(f"- {line}" for line in lines) if lines else "- (no controller sizing in the grid)"
    return (
        f"# Headline results: {collected.grid.name}\n\n{body}\n\n"
        "Means over seeds; the reference is the largest fixed group size of the same model "
        "and algorithm.\n"
    )


def write_tables(collected: Collected, directory: str | Path | None = None) -> list[Path]:
    """Write every table of the aggregation to ``directory`` (the grid's ``tables_dir``)."""
    directory = Path(directory if directory is not None else collected.grid.tables_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = efficiency_table(collected).write(directory)
    paths += downstream_table(collected).write(directory)
    for name, frame in (("efficiency_cells", efficiency_cells(collected)),
                        ("downstream_cells", downstream_cells(collected))):  # fmt: skip
        frame.to_csv(directory / f"{name}.csv", index=False, float_format="%.6g")
        paths.append(directory / f"{name}.csv")
    (directory / "headline.md").write_text(headline_markdown(collected))
    paths.append(directory / "headline.md")
    return paths


__all__ = [
    "Table", "efficiency_table", "downstream_table", "efficiency_cells", "downstream_cells",
    "headline_lines", "headline_markdown", "write_tables",
]  # fmt: skip
