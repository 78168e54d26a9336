"""The paper's tables: training efficiency, downstream accuracy, and the headline lines.

Each table is written as CSV (numbers: mean and std over seeds, and the 95 % interval as
``_low``/``_high`` where one is computed, in separate columns, empty where a value is
missing — never zero), Markdown and LaTeX (display strings). Rows are one model x
algorithm x sizing, aggregated over seeds (see ``sagc.aggregate.stats`` for every
definition). Per-step quantities (straggler rates, decode steps, reward) show
``mean [95 % interval]`` (batch means over the seeds' steps); speed-ups against
the reference fixed G are paired by seed and step (``sagc.aggregate.paired``); run totals
(wall-clock) show ``mean ± std`` over seeds. Incomplete cells are never dropped: a row shows ``k/n`` seeds and a
note names each missing cell and why; a row without any complete seed reads ``missing``.

Files (in ``tables_dir``): ``efficiency.{csv,md,tex}``, ``downstream.{csv,md,tex}``,
``headline.md``, plus the per-seed detail ``efficiency_cells.csv`` and
``downstream_cells.csv``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sagc import metrics
from sagc.aggregate import paired
from sagc.aggregate.collect import CellResult, Collected
from sagc.aggregate.grid import TIME_UNITS
from sagc.aggregate.palette import sizing_order
from sagc.aggregate.render import latex_table, markdown_table
from sagc.aggregate.stats import MeanStd, reference_sizing
from sagc.controller import fixed_group_size

MISSING = "missing"

#: Efficiency statistics: (stat, display header, formatter kind).
_EFF_COLUMNS = (
    ("straggler_rate", "Straggler rate (%)", "pct"),
    ("straggler_rate_second_half", "2nd-half straggler rate (%)", "pct"),
    ("mean_group_size", "Mean G", "2f"),
    ("decode_steps", "Decode steps / step", "1f"),
    ("cost_speedup", "Cost speed-up vs {ref}", "x"),
    ("token_speedup", "Token speed-up", "x"),
    ("cpu_speedup", "CPU-time speed-up", "x"),
    ("wallclock", "Wall-clock ({unit})", "2f"),
    ("speedup", "Wall-clock speed-up", "x"),
    ("final_reward", "Final reward (last {k})", "3f"),
    ("mean_length", "Mean length (tok)", "1f"),
    ("padding_efficiency", "Padding eff. (%)", "pct"),
    ("rollout_share", "Rollout share (%)", "pct"),
)

#: Per-step statistics shown with a batch-means interval: stat -> (metric, which steps).
_STEP_INTERVALS = {
    "straggler_rate": (metrics.STRAGGLER, "all"),
    "straggler_rate_second_half": (metrics.STRAGGLER, "second_half"),
    "decode_steps": (metrics.DECODE_STEPS, "all"),
    "final_reward": (metrics.REWARD_MEAN, "last_k"),
}

#: Paired speed-ups against the reference: stat -> the per-step cost it sums.
_SPEEDUPS = {
    "cost_speedup": metrics.DECODE_STEPS,
    "token_speedup": metrics.PADDED_TOKENS,
    "cpu_speedup": metrics.CPU_SECONDS,
    "speedup": metrics.STEP_SECONDS,
}


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


def fmt(value: MeanStd | paired.Interval | float, kind: str) -> str:
    """Display string: ``mean [low, high]`` for an interval, ``mean ± std`` (std only with
    2+ seeds) for a ``MeanStd``; ``missing`` for NaN."""
    scale, spec = {"pct": (100.0, ".1f"), "x": (1.0, ".2f")}.get(kind, (1.0, "." + kind))
    if isinstance(value, paired.Interval):
        if math.isnan(value.estimate):
            return MISSING
        return value.text(spec, scale, "×" if kind == "x" else "")
    ms = value if isinstance(value, MeanStd) else MeanStd(float(value), math.nan, 1)
    if math.isnan(ms.mean):
        return MISSING
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


def _histories(rs: list[CellResult]) -> dict[int, pd.DataFrame]:
    """Seed -> step-sorted history of every complete cell."""
    return {r.cell.seed: r.run.history.sort_values(metrics.STEP) for r in rs if r.complete}


def _steps(history: pd.DataFrame, which: str, last_k: int) -> pd.DataFrame:
    """The steps of a history that a statistic reads: all, second_half, first_quarter,
    last_quarter (by step number against the last step) or last_k."""
    step = pd.to_numeric(history[metrics.STEP])
    if which == "second_half":
        return history[step > step.max() / 2]
    if which == "first_quarter":
        return history[step <= step.max() / 4]
    if which == "last_quarter":
        return history[step > step.max() * 3 / 4]
    return history.iloc[-last_k:] if which == "last_k" else history


#: Ranges of per-step metrics whose intervals must stay inside them (a 0/1 flag's rate).
_RANGES = {metrics.STRAGGLER: (0.0, 1.0)}


def step_interval(rs: list[CellResult], metric: str, which: str = "all", last_k: int = 5) -> paired.Interval:
    """Mean of a per-step metric over the seeds' steps (``which``: all, second_half,
    last_k) with its batch-means interval (``sagc.aggregate.paired``), cut to the metric's
    range."""
    strata = []
    for h in _histories(rs).values():
        strata.append(pd.to_numeric(_steps(h, which, last_k)[metric], errors="coerce").dropna().to_numpy(float))
    iv = paired.mean_interval(strata)
    return iv.clipped(*_RANGES[metric]) if metric in _RANGES else iv


def paired_interval(ref_rs: list[CellResult], ctrl_rs: list[CellResult], metric: str, statistic,
                    which: str = "all", last_k: int = 5) -> paired.Interval:
    """``statistic`` (``paired.difference_interval`` or ``paired.ratio_interval``) over the
    steps (``which``, as in ``step_interval``) both cells of each seed logged."""
    ref_h, ctrl_h = _histories(ref_rs), _histories(ctrl_rs)
    strata = [
        paired.paired_steps(_steps(ref_h[seed], which, last_k), _steps(ctrl_h[seed], which, last_k), metric)
        for seed in sorted(ref_h.keys() & ctrl_h.keys())
    ]
    return statistic(strata)


def _efficiency_stats(rs: list[CellResult], divisor: float, last_k: int = 5) -> dict:
    done = [r for r in rs if r.complete]
    out = {name: MeanStd.of([r.stats[name] for r in done]) for name, *_ in _EFF_COLUMNS
           if name not in ("wallclock",) and name not in _SPEEDUPS}  # fmt: skip
    out["wallclock"] = MeanStd.of([r.stats["wallclock_s"] / divisor for r in done])
    for name, (metric, which) in _STEP_INTERVALS.items():
        out[name + "_ci"] = step_interval(rs, metric, which, last_k)
    return out


def efficiency_table(collected: Collected) -> Table:
    """Training efficiency, one row per model x algorithm x sizing (see the module docstring)."""
    grid = collected.grid
    unit = grid.time_unit
    divisor = TIME_UNITS[unit]
    rows_num, rows_txt = [], []
    grouped = groups(collected)
    by_key = {(m, a, s): rs for m, a, s, rs in grouped}
    stats = {key: _efficiency_stats(rs, divisor, grid.last_k) for key, rs in by_key.items()}
    refs = set()
    for model, algo, sizing, rs in grouped:
        st = stats[(model, algo, sizing)]
        ref = reference_sizing(s for m, a, s, _ in grouped if (m, a) == (model, algo))
        refs.add(ref)
        speedups = {
            name: (paired_interval(by_key[(model, algo, ref)], rs, metric, paired.ratio_interval)
                   if ref else paired.Interval(math.nan, math.nan, math.nan, 0))
            for name, metric in _SPEEDUPS.items()
        }  # fmt: skip
        num = {"model": model, "algorithm": algo, "sizing": sizing,
               "seeds": sum(r.complete for r in rs), "seeds_expected": len(rs),
               "status": _status(rs)}  # fmt: skip
        txt = [model, algo, sizing, _seeds(rs)]
        for name, _, kind in _EFF_COLUMNS:
            if name in _SPEEDUPS:
                iv = speedups[name]
                num[name], num[f"{name}_low"], num[f"{name}_high"] = iv.estimate, iv.low, iv.high
                if name == "speedup":
                    num["speedup_reference"] = ref or ""
                txt.append(fmt(iv, kind))
                continue
            col = f"wallclock_{unit}" if name == "wallclock" else name
            num[f"{col}_mean"], num[f"{col}_std"] = st[name].mean, st[name].std
            ci = st.get(name + "_ci")
            if ci is not None:
                num[f"{col}_low"], num[f"{col}_high"] = ci.low, ci.high
            txt.append(fmt(ci if ci is not None else st[name], kind))
        num["missing_cells"] = _missing_cells(rs)
        rows_num.append(num)
        rows_txt.append(txt)
    ref_label = "/".join(sorted(r for r in refs if r)) or "largest fixed G"
    headers = ["Model", "Algorithm", "Sizing", "Seeds"] + [
        h.format(unit=unit, ref=ref_label, k=grid.last_k) for _, h, _ in _EFF_COLUMNS
    ]
    notes = [
        "Per-step rates, decode steps and reward: mean [95 % interval] over every seed's steps "
        "(batch means: 4 batches of consecutive steps per seed, Student's t). Speed-ups are paired against the largest "
        f"fixed G ({ref_label}) of the same model, algorithm and seed, step by step: the "
        "reference's summed cost / the row's, for decode steps (cost: the latency of a "
        "synchronous decode, identical on every machine for the same rollouts), generated "
        "padded tokens, process CPU time and wall-clock. Wall-clock: mean ± std over seeds."
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


def accuracy_interval(eval_dirs: list[str], task: str) -> paired.Interval | None:
    """Mean per-problem accuracy over the evaluations in ``eval_dirs`` with its t
    interval (problems resampled within each evaluation); None without samples files."""
    try:
        strata = [np.array(list(paired.doc_scores(d, task).values())) for d in eval_dirs]
    except FileNotFoundError:
        return None
    if not strata:
        return None
    return paired.mean_interval(strata, batches=None)


def downstream_table(collected: Collected) -> Table:
    """Accuracy per benchmark and mean output length, per base model and per
    model x algorithm x sizing."""
    tasks = _tasks(collected)
    rows_num, rows_txt = [], []
    entries: list[tuple[str, str, str, list, str, str]] = []
    for b in collected.base:
        evals = [b.eval] if b.eval is not None and not b.missing else []
        status = "complete" if evals else MISSING
        dirs = [str(Path(b.base.eval_summary).parent)] if evals else []
        entries.append((b.base.model, "base", "-", evals, "1/1" if evals else "0/1", status, dirs))
    for model, algo, sizing, rs in groups(collected):
        evals = [r.eval for r in rs if r.complete]
        dirs = [str(Path(r.cell.eval_summary).parent) for r in rs if r.complete]
        entries.append((model, algo, sizing, evals, _seeds(rs), _status(rs), dirs))
    for model, algo, sizing, evals, seeds, status, dirs in entries:
        num, show = _downstream_row(evals, tasks)
        for task in tasks:
            iv = accuracy_interval(dirs, task)
            if iv is not None:
                show[task] = iv
                num[f"{task}_accuracy_low"], num[f"{task}_accuracy_high"] = iv.low, iv.high
        rows_num.append({"model": model, "algorithm": algo, "sizing": sizing, "seeds": seeds,
                         "status": status, **num})  # fmt: skip
        rows_txt.append([model, algo, sizing, seeds]
                        + [fmt(show[t], "pct") for t in tasks] + [fmt(show["__length__"], "1f")])  # fmt: skip
    headers = ["Model", "Algorithm", "Sizing", "Seeds"] + [f"{t} acc. (%)" for t in tasks] + [
        "Mean output length (tok)"
    ]
    notes = [
        "Accuracy: mean [95 % interval] over every seed's problems (per-problem avg@k scores "
        "from lm-eval's samples, Student's t over problems); where no samples file "
        "exists, ± lm-eval's standard error for one seed or ± std over seeds. Mean output "
        "length averaged over the benchmarks."
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


@dataclass(frozen=True)
class Claim:
    """One headline claim of a controller against the reference fixed G, with its verdict
    at 95 % (``sagc.aggregate.paired``: holds, fails or inconclusive)."""

    pair: str
    claim: str
    verdict: str
    detail: str

    def line(self) -> str:
        return f"{self.pair}: {self.claim}: **{self.verdict}** — {self.detail}"


def _accuracy_strata(ref_rs: list[CellResult], ctrl_rs: list[CellResult], task: str):
    """Per seed, the paired per-problem scores of the two cells' evaluations."""
    ref = {r.cell.seed: r for r in ref_rs if r.complete}
    ctrl = {r.cell.seed: r for r in ctrl_rs if r.complete}
    strata = []
    for seed in sorted(ref.keys() & ctrl.keys()):
        a = paired.doc_scores(str(Path(ref[seed].cell.eval_summary).parent), task)
        b = paired.doc_scores(str(Path(ctrl[seed].cell.eval_summary).parent), task)
        strata.append(paired.paired_docs(a, b))
    return strata


def _pair_claims(label: str, ref_rs: list[CellResult], ctrl_rs: list[CellResult], tasks: list[str]) -> list[Claim]:
    seeds = len(_histories(ref_rs).keys() & _histories(ctrl_rs).keys())
    steps = paired_interval(ref_rs, ctrl_rs, metrics.STRAGGLER, paired.difference_interval)
    label = f"{label} ({seeds} seed{'s' if seeds != 1 else ''}, {steps.n} paired steps)"
    rate_ref = step_interval(ref_rs, metrics.STRAGGLER)
    rate_ctrl = step_interval(ctrl_rs, metrics.STRAGGLER)
    claims = [Claim(
        label, "fewer stragglers", paired.verdict_difference(steps, "below"),
        f"straggler rate {rate_ref.estimate:.1%} → {rate_ctrl.estimate:.1%}, difference "
        f"{steps.text('+.1f', 100, ' pts')}",
    )]  # fmt: skip
    cost = paired_interval(ref_rs, ctrl_rs, metrics.DECODE_STEPS, paired.ratio_interval)
    cpu = paired_interval(ref_rs, ctrl_rs, metrics.CPU_SECONDS, paired.ratio_interval)
    wall = paired_interval(ref_rs, ctrl_rs, metrics.STEP_SECONDS, paired.ratio_interval)
    claims.append(Claim(
        label, "cheaper (decode steps)", paired.verdict_difference(cost, "above", 1.0),
        f"cost speed-up {cost.text('.2f', suffix='×')}; CPU-time {cpu.text('.2f', suffix='×')}; "
        f"wall-clock {wall.text('.2f', suffix='×')}",
    ))  # fmt: skip
    reward = paired_interval(ref_rs, ctrl_rs, metrics.REWARD_MEAN, paired.difference_interval, "second_half")
    claims.append(Claim(
        label, f"reward not worse (margin {paired.REWARD_MARGIN})",
        paired.verdict_not_worse(reward, paired.REWARD_MARGIN),
        f"second-half reward difference {reward.text('+.3f')}",
    ))  # fmt: skip
    for task in tasks:
        try:
            strata = _accuracy_strata(ref_rs, ctrl_rs, task)
        except FileNotFoundError as exc:
            claims.append(Claim(label, f"{task} accuracy not worse", paired.INCONCLUSIVE, f"no per-problem scores ({exc})"))
            continue
        acc = paired.difference_interval(strata, batches=None)
        claims.append(Claim(
            label, f"{task} accuracy not worse (margin {paired.ACCURACY_MARGIN * 100:.0f} pts)",
            paired.verdict_not_worse(acc, paired.ACCURACY_MARGIN),
            f"difference {acc.text('+.1f', 100, ' pts')} over {acc.n} paired problem evaluations",
        ))  # fmt: skip
    return claims


def headline_claims(collected: Collected) -> list[Claim]:
    """Every controller sizing against the largest fixed G of the same model and algorithm:
    fewer stragglers, cheaper, reward not worse, accuracy not worse per task."""
    grouped = groups(collected)
    by_key = {(m, a, s): rs for m, a, s, rs in grouped}
    tasks = _tasks(collected)
    claims = []
    for model, algo in dict.fromkeys((m, a) for m, a, _, _ in grouped):
        sizings = [s for m, a, s, _ in grouped if (m, a) == (model, algo)]
        ref = reference_sizing(sizings)
        for ctrl in (s for s in sizings if fixed_group_size(s) is None):
            label = f"{model} {algo.upper()}, {ctrl} vs {ref or '(no fixed G)'}"
            if ref is None:
                claims.append(Claim(label, "comparison", MISSING, "no fixed group size in the grid"))
                continue
            a_rs, b_rs = by_key[(model, algo, ref)], by_key[(model, algo, ctrl)]
            absent = [r.cell.id for r in a_rs + b_rs if not r.complete]
            if not _histories(a_rs).keys() & _histories(b_rs).keys():
                claims.append(Claim(label, "comparison", MISSING, f"no complete pair ({', '.join(absent)})"))
                continue
            found = _pair_claims(label, a_rs, b_rs, tasks)
            if absent:
                found = [Claim(c.pair, c.claim, c.verdict, c.detail + f" (partial; missing: {', '.join(absent)})")
                         for c in found]  # fmt: skip
            claims.extend(found)
    return claims


def headline_lines(collected: Collected) -> list[str]:
    return [c.line() for c in headline_claims(collected)]


def straggler_structure(collected: Collected) -> list[str]:
    """Markdown rows: the fixed sizes' straggler rates in the first and last quarter of
    training (mean [95 % interval] over seeds' steps), per model and algorithm: whether the
    budget stays binding as the policy trains."""
    rows = ["| Model | Algorithm | Sizing | First quarter (%) | Last quarter (%) |", "|---|---|---|---|---|"]
    for model, algo, sizing, rs in groups(collected):
        if fixed_group_size(sizing) is None:
            continue
        first = step_interval(rs, metrics.STRAGGLER, "first_quarter")
        last = step_interval(rs, metrics.STRAGGLER, "last_quarter")
        rows.append(f"| {model} | {algo} | {sizing} | {fmt(first, 'pct')} | {fmt(last, 'pct')} |")
    return rows


def learning_rows(collected: Collected) -> list[str]:
    """Markdown rows: did training improve the policy? Per cell group and task, accuracy
    after training minus the base model's (paired per problem, every seed against the one
    base evaluation), and the reward of the last quarter of steps minus the first quarter's
    (paired by seed and batch position)."""
    tasks = _tasks(collected)
    base_dirs = {b.base.model: str(Path(b.base.eval_summary).parent) for b in collected.base if b.eval}
    rows = ["| Model | Algorithm | Sizing | " + " | ".join(f"{t} accuracy − base (pts)" for t in tasks)
            + " | Reward, last − first quarter |", "|---|---|---|" + "---|" * (len(tasks) + 1)]
    for model, algo, sizing, rs in groups(collected):
        cells = []
        for task in tasks:
            try:
                base = paired.doc_scores(base_dirs[model], task)
                strata = [paired.paired_docs(base, paired.doc_scores(str(Path(r.cell.eval_summary).parent), task))
                          for r in rs if r.complete]
                cells.append(fmt(paired.difference_interval(strata, batches=None), "pct"))
            except (KeyError, FileNotFoundError):
                cells.append(MISSING)
        strata = []
        for h in _histories(rs).values():
            first = pd.to_numeric(_steps(h, "first_quarter", 0)[metrics.REWARD_MEAN], errors="coerce").dropna()
            last = pd.to_numeric(_steps(h, "last_quarter", 0)[metrics.REWARD_MEAN], errors="coerce").dropna()
            n = min(len(first), len(last))
            strata.append((first.to_numpy(float)[:n], last.to_numpy(float)[:n]))
        reward = paired.difference_interval(strata, batches=None)
        rows.append(f"| {model} | {algo} | {sizing} | " + " | ".join(cells) + f" | {fmt(reward, '3f')} |")
    return rows


def headline_markdown(collected: Collected) -> str:
    lines = headline_lines(collected)
    body = "\n".join(f"- {line}" for line in lines) if lines else "- (no controller sizing in the grid)"
    structure = "\n".join(straggler_structure(collected))
    return (
        f"# Headline results: {collected.grid.name}\n\n{body}\n\n"
        f"## Did training improve the policy?\n\n" + "\n".join(learning_rows(collected)) + "\n\n"
        f"## Straggler rate of the fixed group sizes over training\n\n{structure}\n\n"
        "Each claim compares a controller with the largest fixed group size of the same model, "
        "algorithm and seed (same prompt stream), paired step by step or problem by problem, with "
        "95 % intervals in brackets (Student's t over batch means of 4 consecutive-step batches "
        "per seed; over problems for accuracy). A difference claim *holds* when the whole interval is on the "
        "claimed side, *fails* when it is wholly on the other side, and is *inconclusive* otherwise. "
        "A 'not worse' claim holds when the interval's lower end is above minus the margin, fails "
        "when its upper end is below zero. Costs: decode steps per step (machine-independent); "
        "CPU time and wall-clock beside them.\n"
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
    "Table", "Claim", "efficiency_table", "downstream_table", "efficiency_cells", "downstream_cells",
    "headline_claims", "headline_lines", "headline_markdown", "write_tables",
]  # fmt: skip
