"""The paper's tables as CSV, Markdown and LaTeX, and the headline (docs/aggregation.md, "The tables")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sagc import metrics
from sagc.aggregate import paired, primary, verdicts
from sagc.aggregate.collect import CellResult, Collected
from sagc.aggregate.grid import TIME_UNITS, reference_sizing
from sagc.aggregate.palette import sizing_order
from sagc.aggregate.perseed import eval_dir, seed_means, speedup
from sagc.aggregate.render import latex_table, markdown_table
from sagc.aggregate.stats import MeanStd
from sagc.controller import fixed_group_size
from sagc.lengths import REAL_RUN_TAIL, TAIL_GROUP_SIZE, tail_table
from sagc.trace import read_trace
from sagc.train.run import LENGTHS_FILE

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

#: Per-step statistics shown with a seed-level interval: stat -> (metric, which steps).
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


def fmt(value: MeanStd | paired.Interval | float, kind: str) -> str:
    """``mean [low, high]`` for an interval, ``mean ± std`` for a ``MeanStd``, ``missing`` for NaN."""
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
    """(model, algorithm, sizing, cell results) in table order (sizings by ``sizing_order``)."""
    by_key = verdicts.claim_groups(collected)
    order = sizing_order(r.cell.sizing for r in collected.cells)
    models = dict.fromkeys(r.cell.model for r in collected.cells)
    algos = dict.fromkeys(r.cell.algorithm for r in collected.cells)
    return [(m, a, s, by_key[(m, a, s)]) for m in models for a in algos for s in order if (m, a, s) in by_key]


def missing_notes(collected: Collected) -> list[str]:
    return [f"Missing: {cell}: {'; '.join(why)}" for cell, why in collected.missing().items()]


def _seeds(rs: list[CellResult]) -> str:
    return f"{sum(r.complete for r in rs)}/{len(rs)}"


def _status(rs: list[CellResult]) -> str:
    done = sum(r.complete for r in rs)
    return "complete" if done == len(rs) else ("partial" if done else MISSING)


def step_interval(rs: list[CellResult], metric: str, which: str = "all", last_k: int = 5) -> paired.Interval:
    """Mean over seeds of each seed's mean of a per-step metric, with its t interval over seeds."""
    iv = paired.seed_interval(list(seed_means(rs, metric, which, last_k).values()))
    return iv.clipped(0.0, 1.0) if metric == metrics.STRAGGLER else iv  # a 0/1 flag's rate


def efficiency_table(collected: Collected) -> Table:
    grid = collected.grid
    unit = grid.time_unit
    divisor = TIME_UNITS[unit]
    rows_num, rows_txt = [], []
    grouped = groups(collected)
    by_key = {(m, a, s): rs for m, a, s, rs in grouped}
    refs = set()
    for model, algo, sizing, rs in grouped:
        done = [r for r in rs if r.complete]
        ref = reference_sizing(s for m, a, s, _ in grouped if (m, a) == (model, algo))
        refs.add(ref)
        num = {"model": model, "algorithm": algo, "sizing": sizing,
               "seeds": sum(r.complete for r in rs), "seeds_expected": len(rs),
               "status": _status(rs)}  # fmt: skip
        txt = [model, algo, sizing, _seeds(rs)]
        for name, _, kind in _EFF_COLUMNS:
            if name in _SPEEDUPS:
                iv = speedup(by_key[(model, algo, ref)], rs, _SPEEDUPS[name]) if ref else paired.seed_interval([])
                num[name], num[f"{name}_low"], num[f"{name}_high"] = iv.estimate, iv.low, iv.high
                if name == "speedup":
                    num["speedup_reference"] = ref or ""
                txt.append(fmt(iv, kind))
                continue
            col = f"wallclock_{unit}" if name == "wallclock" else name
            ms = MeanStd.of([r.stats["wallclock_s"] / divisor if name == "wallclock" else r.stats[name] for r in done])
            num[f"{col}_mean"], num[f"{col}_std"] = ms.mean, ms.std
            ci = step_interval(rs, *_STEP_INTERVALS[name], grid.last_k) if name in _STEP_INTERVALS else None
            if ci is not None:
                num[f"{col}_low"], num[f"{col}_high"] = ci.low, ci.high
            txt.append(fmt(ci if ci is not None else ms, kind))
        num["missing_cells"] = "; ".join(f"{r.cell.id}: {', '.join(r.missing)}" for r in rs if r.missing)
        rows_num.append(num)
        rows_txt.append(txt)
    ref_label = "/".join(sorted(r for r in refs if r)) or "largest fixed G"
    headers = ["Model", "Algorithm", "Sizing", "Seeds"] + [
        h.format(unit=unit, ref=ref_label, k=grid.last_k) for _, h, _ in _EFF_COLUMNS
    ]
    notes = [
        "Per-step rates, decode steps and reward: mean [95 % interval] over seeds (each seed's mean "
        "over its steps is one unit; Student's t, seeds - 1 degrees of freedom). Speed-ups are paired "
        f"against the largest fixed G ({ref_label}) of the same model, algorithm and seed: per seed "
        "the reference's summed cost / the row's over the steps both logged, then the geometric "
        "mean over seeds with its t interval on the log scale, for decode steps (cost: the latency "
        "of a synchronous decode, identical on every machine for the same rollouts), generated "
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


def _downstream_row(evals: list[dict], tasks: list[str]) -> tuple[dict, dict[str, MeanStd]]:
    num: dict = {}
    show: dict[str, MeanStd] = {}
    lengths = []
    for task in tasks:
        vals = [e[task] for e in evals if task in e]
        acc = MeanStd.of([v["accuracy"] for v in vals])
        lenient = MeanStd.of([v["accuracy_lenient"] for v in vals])
        pass_n = MeanStd.of([v["pass_at_n"] for v in vals])
        stderr = MeanStd.of([v["accuracy_stderr"] for v in vals])
        length = MeanStd.of([v["mean_output_tokens"] for v in vals])
        trunc = MeanStd.of([v["truncation_rate"] for v in vals])
        num[f"{task}_accuracy_mean"], num[f"{task}_accuracy_std"] = acc.mean, acc.std
        num[f"{task}_accuracy_stderr"] = stderr.mean
        num[f"{task}_accuracy_lenient_mean"], num[f"{task}_accuracy_lenient_std"] = lenient.mean, lenient.std
        num[f"{task}_pass_at_n_mean"], num[f"{task}_pass_at_n_std"] = pass_n.mean, pass_n.std
        num[f"{task}_samples_per_problem"] = vals[0]["samples_per_problem"] if vals else math.nan
        num[f"{task}_mean_output_tokens"] = length.mean
        num[f"{task}_truncation_rate"] = trunc.mean
        # One seed: the ± is lm-eval's standard error; several: the std over seeds.
        show[task] = acc if acc.n > 1 else MeanStd(acc.mean, stderr.mean, acc.n)
        show[f"{task}/lenient"], show[f"{task}/pass"] = lenient, pass_n
        lengths.append(length.mean)
    mean_len = sum(lengths) / len(lengths) if lengths else math.nan
    num["mean_output_tokens"] = mean_len
    show["__length__"] = MeanStd(mean_len, math.nan, 1)
    return num, show


def accuracy_interval(eval_dirs: list[str], task: str) -> paired.Interval | None:
    """Mean over seeds of per-problem accuracy with its t interval; None under 2 seeds or without samples."""
    try:
        per_seed = [float(np.mean(list(paired.doc_scores(d, task).values()))) for d in eval_dirs]
    except FileNotFoundError:
        return None
    if len(per_seed) < 2:
        return None
    return paired.seed_interval(per_seed).clipped(0.0, 1.0)


def _samples_per_problem(evals: list[dict], task: str) -> str:
    """The n of a task's avg@n / pass@n headers (``n`` when none was evaluated, a range when they differ)."""
    ns = sorted({int(e[task]["samples_per_problem"]) for e in evals if task in e})
    return "n" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def downstream_table(collected: Collected) -> Table:
    tasks = verdicts.tasks_of(collected)
    rows_num, rows_txt = [], []
    entries = []  # (model, algorithm, sizing, evaluations, seeds, status, evaluation dirs)
    for b in collected.base:
        evals = [b.eval] if b.eval is not None and not b.missing else []
        status = "complete" if evals else MISSING
        dirs = [str(Path(b.base.eval_summary).parent)] if evals else []
        entries.append((b.base.model, "base", "-", evals, "1/1" if evals else "0/1", status, dirs))
    for model, algo, sizing, rs in groups(collected):
        evals = [r.eval for r in rs if r.complete]
        dirs = [eval_dir(r) for r in rs if r.complete]
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
                        + [fmt(show[f"{t}{part}"], "pct") for t in tasks for part in ("", "/lenient", "/pass")]
                        + [fmt(show["__length__"], "1f")])  # fmt: skip
    every_eval = [e for _, _, _, evals, *_ in entries for e in evals]
    n_of = {t: _samples_per_problem(every_eval, t) for t in tasks}
    headers = ["Model", "Algorithm", "Sizing", "Seeds"]
    for t in tasks:
        headers += [f"{t} strict avg@{n_of[t]} (%)", f"{t} lenient avg@{n_of[t]} (%)", f"{t} pass@{n_of[t]} (%)"]
    headers.append("Mean output length (tok)")
    notes = [
        "Strict: the answer in the last box, as the prompt asks (the primary score; the headline's "
        "claims use it). Lenient: unboxed answers also read (an 'answer is' phrase, else the last "
        "number or option label), as lighteval and Qwen2.5-Math grade; comparable with published "
        "numbers. avg@n: the mean over problems of each problem's fraction of n samples correct; "
        "pass@n: Chen et al.'s unbiased pass@k at k = n, strict, from the same samples.",
        "Strict accuracy: mean [95 % interval] over seeds (each seed's avg@n over the problems is "
        "one unit; Student's t, seeds - 1 degrees of freedom); for one evaluation (a base model), "
        "± lm-eval's standard error over problems. Lenient and pass@n: mean ± sd over seeds. Mean "
        "output length averaged over the benchmarks.",
    ]
    notes += _pass_gain_notes(collected) + missing_notes(collected)
    return Table("downstream", pd.DataFrame(rows_num), headers, rows_txt, notes)


def downstream_cells(collected: Collected) -> pd.DataFrame:
    """Per-cell, per-task evaluation rows (base models with algorithm ``base``)."""
    rows = []

    def add(cell_id, model, algo, sizing, seed, result):
        evals = result.eval if (result.eval is not None and not result.missing) else None
        for task in verdicts.tasks_of(collected):
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


def straggler_structure(collected: Collected) -> list[str]:
    """Markdown rows: the fixed sizes' straggler rates in the first and last quarter of training."""
    rows = ["| Model | Algorithm | Sizing | First quarter (%) | Last quarter (%) |", "|---|---|---|---|---|"]
    for model, algo, sizing, rs in groups(collected):
        if fixed_group_size(sizing) is None:
            continue
        first = step_interval(rs, metrics.STRAGGLER, "first_quarter")
        last = step_interval(rs, metrics.STRAGGLER, "last_quarter")
        rows.append(f"| {model} | {algo} | {sizing} | {fmt(first, 'pct')} | {fmt(last, 'pct')} |")
    return rows


def learning_rows(collected: Collected) -> list[str]:
    """Markdown rows: each task's paired accuracy minus the base model's, and the reward's last minus
    first quarter, per seed with its interval over seeds."""
    tasks = verdicts.tasks_of(collected)
    base_dirs = {b.base.model: str(Path(b.base.eval_summary).parent) for b in collected.base if b.eval}
    rows = [
        "| Model | Algorithm | Sizing | "
        + " | ".join(f"{t} accuracy − base (pts)" for t in tasks)
        + " | Reward, last − first quarter |",
        "|---|---|---|" + "---|" * (len(tasks) + 1),
    ]
    for model, algo, sizing, rs in groups(collected):
        cells = []
        for task in tasks:
            try:
                base = paired.doc_scores(base_dirs[model], task)
                pairs = [paired.paired_docs(base, paired.doc_scores(eval_dir(r), task)) for r in rs if r.complete]
                per_seed = [float(np.mean(b - a)) for a, b in pairs]
                cells.append(fmt(paired.seed_interval(per_seed), "pct"))
            except (KeyError, FileNotFoundError):
                cells.append(MISSING)
        first = seed_means(rs, metrics.REWARD_MEAN, "first_quarter")
        last = seed_means(rs, metrics.REWARD_MEAN, "last_quarter")
        reward = paired.seed_interval([last[k] - first[k] for k in sorted(first.keys() & last.keys())])
        rows.append(f"| {model} | {algo} | {sizing} | " + " | ".join(cells) + f" | {fmt(reward, '3f')} |")
    return rows


def reference_rows(collected: Collected) -> list[str]:
    """Markdown rows: each model's references and the base straggler rates behind the best static G."""
    grid = collected.grid
    rows = []
    for model, refs in verdicts.references(collected).items():
        report = grid.straggler_reports.get(model)
        rates = ""
        if report is not None:
            r = verdicts.base_straggler_rates(report)
            rates = ", base straggler rate " + " / ".join(f"G={g}: {v:.0%}" for g, v in sorted(r.items()))
        best = refs["best_static"] or "none (no straggler report)"
        rows.append(
            f"- {model}: largest fixed G {refs['largest']}; best static G under δ = {grid.delta}: {best}{rates}"
        )
    return rows


def _primary_section(collected: Collected, claims: list[verdicts.Claim]) -> str:
    reg = collected.grid.claims
    fam = [c for c in claims if c.family == verdicts.PRIMARY]
    if not fam:
        return (
            "## Primary claims\n\n- (no controller sizing in the grid)\n"
            if not any(fixed_group_size(r.cell.sizing) is None for r in collected.cells)
            else f"## Primary claims\n\n- none: `claims.controller` {reg.controller} has no complete pair\n"
        )
    held, tested = verdicts.family_counts(claims, verdicts.PRIMARY)
    m = len(fam)
    low = [c.id for c in fam if c.power_planned < reg.power_target]
    power = (
        f" Planned power below the target {reg.power_target:.0%}: {', '.join(low)}."
        if low
        else f" Every primary has planned power ≥ {reg.power_target:.0%}."
    )
    provisional = (
        " **The plan is provisional** (`claims.plan_provisional`): its effects and spreads are "
        "placeholders, not measured on development seeds, so the planned power is a guess."
        if reg.plan_provisional
        else ""
    )
    return (
        "## Primary claims (pre-registered)\n\n"
        f"**{held} of {m} primary claims hold** (Holm over these {m} claims only, family-wise error "
        f"{reg.alpha:.0%}; {tested} testable). Each pools the model × algorithm strata: per seed the "
        "controller's value minus (or over) the reference's of the same seed, the mean of the strata's "
        "means, the pooled within-stratum spread, df = Σ (seeds − 1). Planned power: the config's plan "
        f"at these seeds, at α / {m} (the first Holm step, conservative); observed power: the planned "
        f"effect against the spread these seeds showed.{power}{provisional}\n\n"
        + "\n".join(verdicts.summary_markdown(claims))
        + "\n\n"
        + "\n".join(f"- {c.line()}" for c in fam)
        + "\n"
    )


def _control_section(claims: list[verdicts.Claim]) -> str:
    ctl = [c for c in claims if c.family == verdicts.CONTROL]
    if not ctl:
        return "## Positive control\n\n- none: the grid has fewer than two fixed group sizes\n"
    c = ctl[0]
    flag = (
        ""
        if c.verdict == verdicts.HOLDS
        else (
            f"**WARNING: THE POSITIVE CONTROL DID NOT HOLD ({c.verdict}).** {c.controller} should straggle "
            f"less than {c.reference} in any world where group size matters: either the machinery (logging, "
            "pairing, pooling) or the world is broken. Read no other claim of this page before finding out.\n\n"
        )
    )
    return f"## Positive control\n\n{flag}- {c.line()}\n"


def _secondary_section(claims: list[verdicts.Claim]) -> str:
    parts = []
    for sid, (gate, what) in primary.SECONDARIES.items():
        fam = [c for c in claims if c.family == f"{verdicts.SECONDARY} {sid}"]
        if fam:
            held, _ = verdicts.family_counts(claims, f"{verdicts.SECONDARY} {sid}")
            parts.append(
                f"### {sid}: {what} (gate {gate}; {held} of {len(fam)} hold)\n\n"
                + "\n".join(f"- {c.line()}" for c in fam)
            )
    if not parts:
        return ""
    return (
        "## Secondary claims (gated)\n\nEach family refines one primary and is tested (Holm within the "
        "family) only when that primary holds; otherwise its claims read *not tested* and their intervals "
        "are description only.\n\n" + "\n\n".join(parts) + "\n"
    )


def _exploratory_section(claims: list[verdicts.Claim]) -> str:
    fams = list(dict.fromkeys(c.family for c in claims if c.family.startswith(verdicts.EXPLORATORY)))
    if not fams:
        return ""
    body = "\n".join(f"- *{f}*: {c.line()}" for f in fams for c in claims if c.family == f)
    return (
        "## Exploratory: other controllers (not pre-registered)\n\nThe primary claims' kinds for each "
        f"other controller, Holm within each controller's family.\n\n{body}\n"
    )


def headline_markdown(collected: Collected, claims: list[verdicts.Claim] | None = None) -> str:
    claims = primary.headline_claims(collected) if claims is None else claims
    reg = collected.grid.claims
    seeds = sorted({r.cell.seed for r in collected.cells})
    largest = reference_sizing(r.cell.sizing for r in collected.cells) or "none"
    sections = [_primary_section(collected, claims), _control_section(claims), _secondary_section(claims),
                _exploratory_section(claims)]  # fmt: skip
    return (
        f"# Headline results: {collected.grid.name}\n\n"
        f"Seeds {seeds}: each training run is one unit. Pre-registered in the config (`claims:`): "
        f"controller **{reg.controller}**, reference **{largest}** (the largest fixed G), registered cost "
        f"**{reg.cost}**, accuracy margin {reg.accuracy_margin * 100:g} pts ({reg.accuracy_margin_reason}), "
        f"budget margin ε = {reg.budget_margin * 100:g} pts ({reg.budget_margin_reason}), α = {reg.alpha:.0%}.\n\n"
        + "\n".join(reference_rows(collected))
        + "\n\n"
        + "\n".join(s for s in sections if s)
        + "\n"
        "## Did training improve the policy?\n\n" + "\n".join(learning_rows(collected)) + "\n\n"
        "## Straggler rate of the fixed group sizes over training\n\n"
        + "\n".join(straggler_structure(collected))
        + "\n\n"
        "How to read a claim (`sagc.aggregate.verdicts`, `sagc.aggregate.primary`): one number per seed (the "
        "controller minus the reference of the same seed and prompt stream, or log of the reference over it "
        "for a speed-up); Student's t, 95 % interval in brackets (unadjusted). The p-value of each claim's "
        "two-sided test against its null (no difference; 1× speed-up; minus the margin for *not worse*; "
        "δ + ε for the budget) is Holm-adjusted within its family. A claim *holds* when the adjusted p is "
        "below α and the estimate is on the claimed side, *fails* when it is below α on the other side, is "
        "*inconclusive* otherwise, *untestable* without a spread to test against (one seed, or every seed "
        "the same value), and *not tested* when its gate did not hold. *Detectable effect*: the smallest "
        "true distance from the null these seeds would detect with 80 % power at the family's first Holm "
        "step. The best static G is the largest fixed G whose base-model straggler rate (the world's "
        "straggler report, before training) is at most δ. Accuracy: the strict score (the last boxed "
        "answer; avg@n over each problem's n samples). Costs: `step_cost` = decode steps + "
        "`sagc.costs.TRAIN_TOKEN_WEIGHT` × trained padded tokens; `decode_steps` the decodes alone.\n"
    )


def length_tail_table(collected: Collected) -> Table:
    """The length tail of the largest fixed G's rollouts per model x algorithm, next to a real RL run's."""
    stats_ = list(REAL_RUN_TAIL)
    largest = reference_sizing(r.cell.sizing for r in collected.cells)
    rows_num = [{"model": "real run", "algorithm": "-", "sizing": "-", "seeds": "", **REAL_RUN_TAIL}]
    rows_txt = [["real run", "-", "-", "-", "-"] + [_tail_fmt(k, REAL_RUN_TAIL[k]) for k in stats_]]
    for model, algo, sizing, rs in groups(collected):
        if sizing != largest:
            continue
        traces = [Path(r.cell.train_dir) / LENGTHS_FILE for r in rs if r.complete]
        found = [t for t in traces if t.is_file()]
        groups_ = [g for t in found for step in read_trace(t) for g in step.lengths]
        tail = tail_table(groups_)
        rows_num.append({"model": model, "algorithm": algo, "sizing": sizing, "seeds": len(found), **tail})
        rows_txt.append([model, algo, sizing, f"{len(found)}/{len(rs)}", str(tail["blocks"])]
                        + [_tail_fmt(k, tail[k]) for k in stats_])  # fmt: skip
    headers = ["Model", "Algorithm", "Sizing", "Seeds", f"Blocks of {TAIL_GROUP_SIZE}"] + stats_
    notes = [
        f"Every step of every seed's lengths.jsonl of the largest fixed G ({largest}), seeds pooled, cut "
        f"into blocks of {TAIL_GROUP_SIZE} completions of one prompt (sagc.lengths.tail_table); the first row "
        "is a real RL run's (sagc.lengths.REAL_RUN_TAIL). Shares in %; sd of log length and the between-"
        "prompt share of its variance as numbers."
    ] + missing_notes(collected)
    return Table("length_tail", pd.DataFrame(rows_num), headers, rows_txt, notes)


def _tail_fmt(key: str, value: float) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return MISSING
    return f"{value:.2f}" if key.startswith(("sd_", "between")) else f"{value * 100:.1f}"


def pass_gain_family(collected: Collected) -> list[verdicts.Claim]:
    """Exploratory family: at the largest fixed G, does RL raise avg@n more than pass@n (per seed)?"""
    largest = reference_sizing(r.cell.sizing for r in collected.cells)
    base = {b.base.model: b.eval for b in collected.base if b.eval and not b.missing}
    alpha = collected.grid.claims.alpha
    claims = []
    for model, algo, sizing, rs in groups(collected):
        if sizing != largest or model not in base:
            continue
        for task in verdicts.tasks_of(collected):
            if task not in base[model]:
                continue
            b = base[model][task]
            vals = [(r.eval[task]["accuracy"] - b["accuracy"]) - (r.eval[task]["pass_at_n"] - b["pass_at_n"])
                    for r in rs if r.complete and r.eval and task in r.eval]  # fmt: skip
            claims.append(verdicts.Claim(model, algo, sizing, "base", f"{task} avg@n gain exceeds pass@n gain",
                                         "above", paired.seed_interval(vals), "",
                                         family=f"{verdicts.EXPLORATORY} pass@n"))  # fmt: skip
    return verdicts.family(claims, alpha) if claims else []


def _pass_gain_notes(collected: Collected) -> list[str]:
    fam = pass_gain_family(collected)
    if not fam:
        return []
    held = sum(c.verdict == verdicts.HOLDS for c in fam)
    p = max((c.p_holm for c in fam if not math.isnan(c.p_holm)), default=math.nan)
    per = "; ".join(f"{c.model} {c.algorithm.upper()} {c.claim.split(' ')[0]} {c.shown()} ({c.verdict})" for c in fam)
    return [
        f"Exploratory family (not pre-registered): at {fam[0].controller}, the avg@n gain over the base model "
        f"exceeds the pass@n gain (per seed, gain difference): {per}. Holm over the {len(fam)}: {held} hold, "
        f"largest adjusted p {'-' if math.isnan(p) else format(p, '.3g')}."
    ]


def write_tables(collected: Collected, directory: str | Path | None = None) -> list[Path]:
    """Write every table to ``directory`` (default: the grid's ``tables_dir``)."""
    directory = Path(directory if directory is not None else collected.grid.tables_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = efficiency_table(collected).write(directory)
    paths += downstream_table(collected).write(directory)
    paths += length_tail_table(collected).write(directory)
    for name, frame in (("efficiency_cells", efficiency_cells(collected)),
                        ("downstream_cells", downstream_cells(collected))):  # fmt: skip
        frame.to_csv(directory / f"{name}.csv", index=False, float_format="%.6g")
        paths.append(directory / f"{name}.csv")
    claims = primary.headline_claims(collected)
    (directory / "headline.md").write_text(headline_markdown(collected, claims))
    verdicts.headline_frame(claims).to_csv(directory / "headline.csv", index=False, float_format="%.6g")
    paths += [directory / "headline.md", directory / "headline.csv"]
    return paths
