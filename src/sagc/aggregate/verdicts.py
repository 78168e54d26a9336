"""Claims, their verdicts, Holm within a family, and the references (docs/aggregation.md, "Verdicts")."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from sagc.aggregate import paired
from sagc.aggregate.collect import CellResult, Collected
from sagc.aggregate.grid import fixed_sizes, reference_sizing

HOLDS, FAILS, INCONCLUSIVE = "holds", "fails", "inconclusive"
UNTESTABLE, NOT_TESTED, MISSING = "untestable", "not tested", "missing"
#: Family kinds, in the order the headline shows them.
PRIMARY, CONTROL, SECONDARY, EXPLORATORY = "primary", "control", "secondary", "exploratory"
#: The pooled claims' model and algorithm (every stratum together).
POOLED = "pooled"


@dataclass(frozen=True)
class Claim:
    """One headline claim: ``controller`` against ``reference`` for one model and algorithm, or pooled.
    ``side``: the claimed side of the null ("below" or "above")."""

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
    family: str = ""
    id: str = ""
    gate: str = ""
    power_planned: float = math.nan
    power_observed: float = math.nan

    @property
    def pooled(self) -> bool:
        return self.model == POOLED

    @property
    def pair(self) -> str:
        if self.pooled:
            return f"pooled over {self.interval.strata} model × algorithm strata, {self.controller} vs {self.reference}"
        return f"{self.model} {self.algorithm.upper()}, {self.controller} vs {self.reference}"

    def shown(self) -> str:
        """The estimate and its interval in the claim's units."""
        iv = self.interval
        if iv.log:
            return iv.text(".2f", suffix="×")
        if self.claim.startswith("second-half"):
            return iv.text(".1f", 100, " %")
        return iv.text("+.1f", 100, " pts")

    def line(self) -> str:
        iv = self.interval
        what = f"{self.id} " if self.id else ""
        design = f"{iv.n} seeds" + (f", {iv.strata} strata" if self.pooled else "")
        df = f", df {iv.df:g}" if math.isfinite(iv.df) else ""
        p = "" if math.isnan(self.p_holm) else f"; Holm-adjusted p {self.p_holm:.3g}"
        shown_mde = f"{self.mde:.2f}×" if iv.log else f"{self.mde * 100:.1f} pts"
        mde = "" if math.isnan(self.mde) else f"; detectable effect {shown_mde}"
        gate = f" ({self.gate})" if self.gate else ""
        return (f"{what}{self.pair} ({design}{df}): {self.claim}: **{self.verdict}**{gate} — {self.shown()}"
                f"{'; ' + self.detail if self.detail else ''}{p}{mde}")  # fmt: skip

    def row(self) -> dict:
        """The claim as a ``headline.csv`` row (``from_row`` reads it back)."""
        iv = self.interval
        return {"family": self.family, "id": self.id, "model": self.model, "algorithm": self.algorithm,
                "controller": self.controller, "reference": self.reference, "claim": self.claim,
                "side": self.side, "verdict": self.verdict, "gate": self.gate, "estimate": iv.estimate,
                "low": iv.low, "high": iv.high, "null": iv.null, "scale": "log" if iv.log else "linear",
                "seeds": iv.n, "strata": iv.strata, "sd": iv.sd, "se": iv.se, "df": iv.df, "p": iv.p,
                "p_holm": self.p_holm, "mde": self.mde, "power_planned": self.power_planned,
                "power_observed": self.power_observed, "detail": self.detail}  # fmt: skip

    @classmethod
    def from_row(cls, r) -> Claim:
        """The claim of a ``headline.csv`` row (a mapping or a namedtuple of ``row()``'s keys)."""
        get = r.get if hasattr(r, "get") else lambda k, d=None: getattr(r, k, d)
        text = lambda k: "" if not isinstance(get(k), str) else get(k)  # noqa: E731  (CSV: NaN for "")
        floats = {k: get(k) for k in ("estimate", "low", "high", "null", "p", "sd", "se", "df")}
        iv = paired.Interval(**floats, n=int(get("seeds")), log=get("scale") == "log", strata=int(get("strata")))
        return cls(get("model"), get("algorithm"), get("controller"), get("reference"), get("claim"),
                   text("side"), iv, text("detail"), get("p_holm"), get("verdict"), get("mde"), text("family"),
                   text("id"), text("gate"), get("power_planned"), get("power_observed"))  # fmt: skip


def decide(iv: paired.Interval, side: str, p_adjusted: float, alpha: float) -> str:
    """The verdict from an adjusted p-value and the estimate's side."""
    if side not in ("below", "above"):
        raise ValueError(f"side must be 'below' or 'above', got {side!r}")
    if iv.n == 0:
        return MISSING
    if not iv.testable or math.isnan(iv.estimate):
        return UNTESTABLE
    if not (p_adjusted < alpha):
        return INCONCLUSIVE
    on_side = iv.estimate < iv.null if side == "below" else iv.estimate > iv.null
    return HOLDS if on_side else FAILS


def holm_adjusted(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values, as statsmodels' ``multipletests(method="holm")`` (which
    runs a slow ``gc.collect()`` per call)."""
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    stepped = np.minimum(1.0, np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1)))
    out = np.empty_like(p)
    out[order] = stepped
    return out


def holm(claims: list[Claim], alpha: float) -> list[Claim]:
    """One family's verdicts, Holm-adjusted over its testable claims."""
    tested = [i for i, c in enumerate(claims) if c.interval.testable]
    adjusted = dict(zip(tested, map(float, holm_adjusted([claims[i].interval.p for i in tested]))))
    out = []
    for i, c in enumerate(claims):
        p = adjusted.get(i, math.nan)
        out.append(replace(c, p_holm=p, verdict=decide(c.interval, c.side, p, alpha)))
    return out


def family(claims: list[Claim], alpha: float) -> list[Claim]:
    """``holm``, with each claim's minimal detectable effect at the family's first Holm step."""
    first_step = alpha / max(1, sum(c.interval.testable for c in claims))
    return [replace(c, mde=c.interval.mde(alpha=first_step)) for c in holm(claims, alpha)]


def gated(claims: list[Claim], gate: Claim | None, alpha: float) -> list[Claim]:
    """A secondary family: Holm over it when its primary ``gate`` holds, otherwise *not tested*."""
    if gate is not None and gate.verdict == HOLDS:
        return [replace(c, gate=f"gate: {gate.id} holds") for c in family(claims, alpha)]
    why = f"gate: {gate.id} did not hold" if gate is not None else "gate: its primary is not in this grid"
    return [replace(c, verdict=MISSING if c.interval.n == 0 else NOT_TESTED, gate=why) for c in claims]


def base_straggler_rates(report: str | Path) -> dict[int, float]:
    """G -> straggler rate of the base model, from the world's ``stragglers.json``."""
    path = Path(report)
    try:
        raw = json.loads(path.read_text())
        return {int(r["group_size"]): float(r["straggler_rate"]) for r in raw["per_group_size"]}
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{path}: not a straggler report with per_group_size[].group_size/straggler_rate: {exc}"
        ) from exc


def best_static(sizings, rates: dict[int, float], delta: float) -> str | None:
    """The largest fixed sizing whose base straggler rate is at most ``delta``, else the smallest."""
    measured = [(g, s) for g, s in fixed_sizes(sizings) if g in rates]
    if not measured:
        return None
    safe = [(g, s) for g, s in measured if rates[g] <= delta]
    return (safe[-1] if safe else measured[0])[1]


def claim_groups(collected: Collected) -> dict[tuple[str, str, str], list[CellResult]]:
    """(model, algorithm, sizing) -> cell results, in grid order."""
    out: dict[tuple[str, str, str], list[CellResult]] = {}
    for r in collected.cells:
        out.setdefault((r.cell.model, r.cell.algorithm, r.cell.sizing), []).append(r)
    return out


def tasks_of(collected: Collected) -> list[str]:
    return sorted({task for r in [*collected.cells, *collected.base] for task in (r.eval or {})})


def references(collected: Collected) -> dict[str, dict[str, str | None]]:
    """Model -> {"largest": sizing, "best_static": sizing or None}."""
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


def headline_frame(claims: list[Claim]) -> pd.DataFrame:
    """One row per claim (``headline.csv``)."""
    columns = list(Claim("", "", "", "", "", "below", paired.seed_interval([]), "").row())
    return pd.DataFrame([c.row() for c in claims], columns=columns)


def _short(c: Claim) -> str:
    if c.verdict == MISSING or c.interval.n == 0:
        return MISSING
    verdict = f"**{c.verdict}**" if c.verdict in (HOLDS, FAILS) else c.verdict
    return f"{verdict}, {c.shown()}"


def _power(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.2f}"


def summary_markdown(claims: list[Claim]) -> list[str]:
    """Markdown rows: one per claim of the primary family and the positive control."""
    rows = ["| ID | Claim | Verdict, estimate [95 %] | Seeds (strata), df | Holm p | Planned power | Observed power |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for c in claims:
        if c.family not in (PRIMARY, CONTROL):
            continue
        iv = c.interval
        df = f"{iv.df:g}" if math.isfinite(iv.df) else "-"
        p = "-" if math.isnan(c.p_holm) else f"{c.p_holm:.3g}"
        rows.append(f"| {c.id} | {c.claim} | {_short(c)} | {iv.n} ({iv.strata}), {df} | {p} | "
                    f"{_power(c.power_planned)} | {_power(c.power_observed)} |")  # fmt: skip
    return rows


def family_counts(claims: list[Claim], family: str) -> tuple[int, int]:
    """(holding, testable) claims of one family."""
    fam = [c for c in claims if c.family == family]
    return sum(c.verdict == HOLDS for c in fam), sum(c.interval.testable for c in fam)
