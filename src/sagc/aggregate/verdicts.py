"""The headline: every controller's claims against the fixed group sizes, with verdicts
corrected for multiplicity.

The claims of a controller (a non-fixed sizing) of one model and algorithm:

* against the largest fixed G (``g16`` in the default grid), the paper's comparison:
  *fewer stragglers* (whole-run straggler rate), *cheaper* (decode steps: the summed
  latency of the synchronous decodes, the same on every machine for the same rollouts)
  and *accuracy not worse* on every evaluation task (margin ``ACCURACY_MARGIN``; the
  strict score, avg@n of the boxed answer, ``sagc.evaluate.scoring.METRIC``);
* *meets the budget*: its second-half straggler rate is at most the controller's δ (the
  paper's constraint, where a controller should have converged);
* against the best static G under the budget — the largest fixed G whose straggler rate
  under the *base* model is at most δ, read from the world's straggler report before any
  training (``best_static``) — *accuracy not worse*: what SAGC should buy over the safe
  static choice. Skipped where that G is the largest one (the claim is already there).

Every claim is one two-sided t test over seeds (``sagc.aggregate.paired``) against its
null value (0, 1× for a speed-up, −margin for "not worse", δ for the budget). The
headline's claims form one family: their p-values are Holm-adjusted together
(``statsmodels``' ``multipletests``). A claim **holds** when its adjusted p is below
``ALPHA`` and the estimate lies on the claimed side, **fails** when the adjusted p is below
``ALPHA`` and the estimate lies on the other side, and is **inconclusive** otherwise. So a
"not worse" claim fails only when the whole interval (unadjusted: at least) lies below
−margin, and "meets the budget" fails only when it lies above δ. Each claim also carries
the smallest effect its seeds could have detected (80 % power at the family's first Holm
step, ``ALPHA`` / family size): where that is larger than the effect of interest, an
inconclusive verdict says "not powered", not "no effect".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from sagc import metrics
from sagc.aggregate import paired
from sagc.aggregate.collect import CellResult, Collected
from sagc.aggregate.stats import reference_sizing
from sagc.controller import fixed_group_size

HOLDS, FAILS, INCONCLUSIVE, MISSING = "holds", "fails", "inconclusive", "missing"
#: Family-wise error rate of the headline (two-sided, so each 95 % interval matches a test).
ALPHA = 1 - paired.LEVEL
#: Non-inferiority margin of "accuracy not worse" (absolute accuracy: 5 points).
ACCURACY_MARGIN = 0.05


@dataclass(frozen=True)
class Claim:
    """One headline claim: ``controller`` against ``reference`` (or the budget) for one
    model and algorithm. ``side``: the claimed side of the interval's null value ("below"
    or "above")."""

    model: str
    algorithm: str
    controller: str
    reference: str
    claim: str
    side: str
    interval: paired.Interval
    detail: str
    p_holm: float = math.nan
    verdict: str = INCONCLUSIVE
    mde: float = math.nan

    @property
    def pair(self) -> str:
        return f"{self.model} {self.algorithm.upper()}, {self.controller} vs {self.reference}"

    def line(self) -> str:
        p = "" if math.isnan(self.p_holm) else f"; Holm-adjusted p {self.p_holm:.3g}"
        mde = "" if math.isnan(self.mde) else f"; detectable effect {self._mde_text()}"
        return (f"{self.pair} ({self.interval.n} seeds): {self.claim}: **{self.verdict}** — "
                f"{self.detail}{p}{mde}")  # fmt: skip

    def _mde_text(self) -> str:
        if self.interval.log:
            return f"{self.mde:.2f}×"
        return f"{self.mde * 100:.1f} pts"

    def row(self) -> dict:
        iv = self.interval
        return {"model": self.model, "algorithm": self.algorithm, "controller": self.controller,
                "reference": self.reference, "claim": self.claim, "verdict": self.verdict,
                "estimate": iv.estimate, "low": iv.low, "high": iv.high, "null": iv.null,
                "seeds": iv.n, "p": iv.p, "p_holm": self.p_holm, "mde": self.mde}  # fmt: skip


def decide(iv: paired.Interval, side: str, p_adjusted: float, alpha: float = ALPHA) -> str:
    """holds / fails / inconclusive from an adjusted p-value and the estimate's side."""
    if side not in ("below", "above"):
        raise ValueError(f"side must be 'below' or 'above', got {side!r}")
    if not (p_adjusted < alpha) or math.isnan(iv.estimate):
        return INCONCLUSIVE
    on_side = iv.estimate < iv.null if side == "below" else iv.estimate > iv.null
    return HOLDS if on_side else FAILS


def holm(claims: list[Claim], alpha: float = ALPHA) -> list[Claim]:
    """The claims with Holm-adjusted p-values over the whole list, their verdicts and their
    minimal detectable effects (at ``alpha`` / the number of tested claims)."""
    from statsmodels.stats.multitest import multipletests

    tested = [i for i, c in enumerate(claims) if math.isfinite(c.interval.p)]
    adjusted = {}
    if tested:
        _, p_adj, _, _ = multipletests([claims[i].interval.p for i in tested], alpha=alpha, method="holm")
        adjusted = dict(zip(tested, map(float, p_adj)))
    first_step = alpha / max(1, len(tested))
    out = []
    for i, c in enumerate(claims):
        p = adjusted.get(i, math.nan)
        out.append(replace(c, p_holm=p, verdict=decide(c.interval, c.side, p, alpha),
                           mde=c.interval.mde(alpha=first_step)))  # fmt: skip
    return out


# --------------------------------------------------------------------------- references


def base_straggler_rates(report: str | Path) -> dict[int, float]:
    """G -> straggler rate of the base model, from the world's ``stragglers.json``."""
    path = Path(report)
    try:
        raw = json.loads(path.read_text())
        return {int(r["group_size"]): float(r["straggler_rate"]) for r in raw["per_group_size"]}
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a straggler report with per_group_size[].group_size/straggler_rate: {exc}") from exc


def best_static(sizings, rates: dict[int, float], delta: float) -> str | None:
    """The largest fixed sizing whose base straggler rate is at most ``delta`` (the best
    static choice a user could make before training); the smallest fixed one when none is."""
    fixed = sorted((fixed_group_size(s), s) for s in sizings if fixed_group_size(s) is not None)
    measured = [(g, s) for g, s in fixed if g in rates]
    if not measured:
        return None
    safe = [(g, s) for g, s in measured if rates[g] <= delta]
    return (safe[-1] if safe else measured[0])[1]


# --------------------------------------------------------------------------- per-seed values


def histories(rs: list[CellResult]) -> dict[int, pd.DataFrame]:
    """Seed -> step-sorted history of every complete cell."""
    return {r.cell.seed: r.run.history.sort_values(metrics.STEP) for r in rs if r.complete}


def steps_of(history: pd.DataFrame, which: str, last_k: int = 5) -> pd.DataFrame:
    """The steps of a history that a statistic reads: all, second_half, first_quarter,
    last_quarter (by step number against the last step) or last_k."""
    step = pd.to_numeric(history[metrics.STEP])
    if which == "second_half":
        return history[metrics.in_second_half(step, step.max())]
    if which == "first_quarter":
        return history[step <= step.max() / 4]
    if which == "last_quarter":
        return history[step > step.max() * 3 / 4]
    if which == "last_k":
        return history.iloc[-last_k:]
    if which != "all":
        raise ValueError(f"unknown step selection {which!r}")
    return history


def seed_means(rs: list[CellResult], metric: str, which: str = "all", last_k: int = 5) -> dict[int, float]:
    """Seed -> the mean of a per-step metric over the selected steps of that seed's run."""
    out = {}
    for seed, h in histories(rs).items():
        vals = pd.to_numeric(steps_of(h, which, last_k)[metric], errors="coerce").dropna()
        if len(vals):
            out[seed] = float(vals.mean())
    return out


def paired_differences(ref_rs, ctrl_rs, metric: str, which: str = "all", last_k: int = 5) -> list[float]:
    """Per seed: mean of (ctrl - ref) over the steps both runs of that seed logged."""
    ref_h, ctrl_h = histories(ref_rs), histories(ctrl_rs)
    out = []
    for seed in sorted(ref_h.keys() & ctrl_h.keys()):
        a, b = paired.paired_steps(steps_of(ref_h[seed], which, last_k), steps_of(ctrl_h[seed], which, last_k), metric)
        if a.size:
            out.append(float(np.mean(b - a)))
    return out


def paired_totals(ref_rs, ctrl_rs, metric: str) -> list[tuple[float, float]]:
    """Per seed: (summed ref cost, summed ctrl cost) over the steps both runs logged."""
    ref_h, ctrl_h = histories(ref_rs), histories(ctrl_rs)
    out = []
    for seed in sorted(ref_h.keys() & ctrl_h.keys()):
        a, b = paired.paired_steps(ref_h[seed], ctrl_h[seed], metric)
        if a.size:
            out.append((float(a.sum()), float(b.sum())))
    return out


def eval_dir(r: CellResult) -> str:
    return str(Path(r.cell.eval_summary).parent)


def accuracy_differences(ref_rs, ctrl_rs, task: str) -> list[float]:
    """Per seed: mean over the problems both evaluations hold of (ctrl - ref) avg@k."""
    ref = {r.cell.seed: r for r in ref_rs if r.complete}
    ctrl = {r.cell.seed: r for r in ctrl_rs if r.complete}
    out = []
    for seed in sorted(ref.keys() & ctrl.keys()):
        a, b = paired.paired_docs(paired.doc_scores(eval_dir(ref[seed]), task),
                                  paired.doc_scores(eval_dir(ctrl[seed]), task))  # fmt: skip
        if a.size:
            out.append(float(np.mean(b - a)))
    return out


# --------------------------------------------------------------------------- claims


def _pct(iv: paired.Interval) -> str:
    return iv.text("+.1f", 100, " pts")


def _pair_claims(model, algo, ctrl, ref, ref_rs, ctrl_rs, tasks, accuracy_only=False) -> list[Claim]:
    claims = []
    new = lambda claim, side, iv, detail: Claim(model, algo, ctrl, ref, claim, side, iv, detail)  # noqa: E731
    if not accuracy_only:
        rate_ref, rate_ctrl = seed_means(ref_rs, metrics.STRAGGLER), seed_means(ctrl_rs, metrics.STRAGGLER)
        fewer = paired.seed_interval(paired_differences(ref_rs, ctrl_rs, metrics.STRAGGLER))
        claims.append(new("fewer stragglers", "below", fewer,
                          f"straggler rate {np.mean(list(rate_ref.values())):.1%} → "
                          f"{np.mean(list(rate_ctrl.values())):.1%}, difference {_pct(fewer)}"))  # fmt: skip
        cost = paired.ratio_interval(paired_totals(ref_rs, ctrl_rs, metrics.DECODE_STEPS))
        cpu = paired.ratio_interval(paired_totals(ref_rs, ctrl_rs, metrics.CPU_SECONDS))
        wall = paired.ratio_interval(paired_totals(ref_rs, ctrl_rs, metrics.STEP_SECONDS))
        claims.append(new("cheaper (decode steps)", "above", cost,
                          f"cost speed-up {cost.text('.2f', suffix='×')}; CPU-time "
                          f"{cpu.text('.2f', suffix='×')}; wall-clock {wall.text('.2f', suffix='×')}"))  # fmt: skip
    for task in tasks:
        label = f"{task} accuracy not worse (margin {ACCURACY_MARGIN * 100:.0f} pts)"
        try:
            diffs = accuracy_differences(ref_rs, ctrl_rs, task)
        except FileNotFoundError as exc:
            claims.append(new(label, "above", paired.seed_interval([], -ACCURACY_MARGIN), f"no per-problem scores ({exc})"))
            continue
        iv = paired.seed_interval(diffs, null=-ACCURACY_MARGIN)
        claims.append(new(label, "above", iv, f"difference {_pct(iv)}"))
    return claims


def _budget_claim(model, algo, ctrl, ctrl_rs, delta) -> Claim:
    rates = seed_means(ctrl_rs, metrics.STRAGGLER, "second_half")
    iv = paired.seed_interval(list(rates.values()), null=delta).clipped(0.0, 1.0)
    return Claim(model, algo, ctrl, f"δ = {delta:g}", "meets the budget (2nd-half rate ≤ δ)", "below", iv,
                 f"second-half straggler rate {iv.text('.1f', 100, ' %')}")


def claim_groups(collected: Collected) -> dict[tuple[str, str, str], list[CellResult]]:
    """(model, algorithm, sizing) -> cell results, in grid order."""
    out: dict[tuple[str, str, str], list[CellResult]] = {}
    for r in collected.cells:
        out.setdefault((r.cell.model, r.cell.algorithm, r.cell.sizing), []).append(r)
    return out


def tasks_of(collected: Collected) -> list[str]:
    tasks = set()
    for r in list(collected.cells) + list(collected.base):
        tasks.update((r.eval or {}).keys())
    return sorted(tasks)


def references(collected: Collected) -> dict[str, dict[str, str | None]]:
    """Model -> {"largest": sizing, "best_static": sizing or None} (see the module docstring)."""
    grid = collected.grid
    sizings = list(dict.fromkeys(r.cell.sizing for r in collected.cells))
    out = {}
    for model in dict.fromkeys(r.cell.model for r in collected.cells):
        best = None
        report = grid.straggler_reports.get(model)
        if report is not None and grid.delta is not None:
            best = best_static(sizings, base_straggler_rates(report), grid.delta)
        out[model] = {"largest": reference_sizing(sizings), "best_static": best}
    return out


def headline_claims(collected: Collected) -> list[Claim]:
    """Every controller's claims (module docstring), Holm-adjusted as one family."""
    groups = claim_groups(collected)
    tasks = tasks_of(collected)
    refs = references(collected)
    grid = collected.grid
    claims: list[Claim] = []
    missing: list[Claim] = []
    for (model, algo, ctrl), ctrl_rs in groups.items():
        if fixed_group_size(ctrl) is not None:
            continue
        largest, best = refs[model]["largest"], refs[model]["best_static"]
        for ref, accuracy_only in ((largest, False), (best, True)):
            if ref is None or (accuracy_only and ref == largest):
                continue
            ref_rs = groups[(model, algo, ref)]
            if not histories(ref_rs).keys() & histories(ctrl_rs).keys():
                absent = ", ".join(r.cell.id for r in ref_rs + ctrl_rs if not r.complete)
                missing.append(Claim(model, algo, ctrl, ref, "comparison", "below",
                                     paired.seed_interval([]), f"no complete pair ({absent})", verdict=MISSING))
                continue
            found = _pair_claims(model, algo, ctrl, ref, ref_rs, ctrl_rs, tasks, accuracy_only)
            if accuracy_only:
                found = [replace(c, claim=c.claim.replace("accuracy", "accuracy (best static G)", 1)) for c in found]
            claims.extend(_partial(found, ref_rs + ctrl_rs))
        delta = grid.budgets.get(ctrl, grid.delta)
        if delta is not None and histories(ctrl_rs):
            claims.extend(_partial([_budget_claim(model, algo, ctrl, ctrl_rs, delta)], ctrl_rs))
    return holm(claims) + missing


def _partial(claims: list[Claim], rs: list[CellResult]) -> list[Claim]:
    absent = [r.cell.id for r in rs if not r.complete]
    if not absent:
        return claims
    return [replace(c, detail=c.detail + f" (partial; missing: {', '.join(absent)})") for c in claims]


def headline_frame(claims: list[Claim]) -> pd.DataFrame:
    """One row per claim (``headline.csv``): what the replication command compares."""
    return pd.DataFrame([c.row() for c in claims])


def _short(c: Claim) -> str:
    iv = c.interval
    if c.verdict == MISSING or iv.n == 0:
        return MISSING
    if iv.log:
        shown = iv.text(".2f", suffix="×")
    elif c.claim.startswith("meets"):
        shown = iv.text(".0f", 100, " %")
    else:
        shown = iv.text("+.1f", 100)
    return f"**{c.verdict}**, {shown}" if c.verdict != INCONCLUSIVE else f"{c.verdict}, {shown}"


def summary_markdown(claims: list[Claim]) -> list[str]:
    """Markdown rows: one row per controller (model, algorithm), one column per kind of
    claim, each cell the verdict and the interval (points for rates and accuracy)."""
    kinds = list(dict.fromkeys(_kind(c) for c in claims if c.verdict != MISSING))
    rows = ["| Pair | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    pairs: dict[tuple[str, str, str], dict[str, str]] = {}
    for c in claims:
        if c.verdict != MISSING:
            pairs.setdefault((c.model, c.algorithm, c.controller), {})[_kind(c)] = _short(c)
    for (model, algo, ctrl), cells in pairs.items():
        rows.append(f"| {model} {algo.upper()} {ctrl} | " + " | ".join(cells.get(k, "-") for k in kinds) + " |")
    return rows


def _kind(c: Claim) -> str:
    if c.claim.startswith("meets"):
        return "meets the budget (2nd-half rate)"
    ref = "best static G" if "(best static G)" in c.claim else c.reference
    what = c.claim.replace(" (best static G)", "").split(" (margin")[0]
    return f"{what} vs {ref}"
