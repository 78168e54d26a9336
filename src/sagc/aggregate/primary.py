"""The headline's claims, family by family (docs/aggregation.md, "The headline's claims")."""

from __future__ import annotations

import math

import numpy as np

from sagc import metrics
from sagc.aggregate import paired, perseed, verdicts
from sagc.aggregate.collect import CellResult, Collected
from sagc.aggregate.grid import fixed_sizes, reference_sizing
from sagc.aggregate.registration import COSTS, PRIMARY, Primary, Registration
from sagc.aggregate.verdicts import CONTROL, EXPLORATORY, POOLED, SECONDARY, Claim, gated
from sagc.controller import fixed_group_size

#: Secondary family id -> (the primary it refines, what it tests).
SECONDARIES = {
    "S1": ("P1", "fewer stragglers, per pair"),
    "S2": ("P1", "meets the budget, per pair"),
    "S3": ("P2", "cheaper, per pair and in the other cost"),
    "S4": ("P3", "accuracy not worse, per pair and task"),
    "S5": ("P3", "shorter answers"),
    "S6": ("P4", "accuracy not worse than the best static G, per pair and task"),
}

Stratum = tuple[str, str]  # (model, algorithm)


class _Grid:
    """The collected grid seen by strata: cells by (model, algorithm, sizing)."""

    def __init__(self, collected: Collected):
        self.collected = collected
        self.reg: Registration = collected.grid.claims
        self.groups = verdicts.claim_groups(collected)
        self.refs = verdicts.references(collected)
        self.tasks = verdicts.tasks_of(collected)
        self.sizings = list(dict.fromkeys(r.cell.sizing for r in collected.cells))
        self.largest = reference_sizing(self.sizings)

    def strata(self, sizing: str) -> list[Stratum]:
        return [(m, a) for (m, a, s) in self.groups if s == sizing]

    def cells(self, stratum: Stratum, sizing: str) -> list[CellResult]:
        return self.groups.get((*stratum, sizing), [])


def _partial(detail: str, rs: list[CellResult]) -> str:
    absent = [r.cell.id for r in rs if not r.complete]
    return detail + (f" (partial; missing: {', '.join(absent)})" if absent else "")


def _pct(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v:.1%}"


def _pooled_claim(g: _Grid, p: Primary, ctrl: str, ref_of, strata: list[Stratum], family: str,
                  m: int) -> Claim:  # fmt: skip
    """One pooled claim of a primary's kind: ``ref_of(stratum)`` names its reference."""
    reg = g.reg
    values, used, notes = [], [], []
    for st in strata:
        ref = ref_of(st)
        ref_rs, ctrl_rs = g.cells(st, ref), g.cells(st, ctrl)
        used += ref_rs + ctrl_rs
        try:
            values.append(list(_per_seed(g, p, ref_rs, ctrl_rs).values()))
        except FileNotFoundError as exc:
            values.append([])
            notes.append(f"{st[0]} {st[1]}: no per-problem scores ({exc})")
    iv = paired.pooled_interval(values, null=p.null(reg))
    if p.log:
        iv = paired.as_ratio(iv)
    refs = sorted({ref_of(st) for st in strata})
    detail = _detail(g, p, ctrl, refs, strata, values) + "".join(f"; {n}" for n in notes)
    seeds_planned = [len(g.cells(st, ctrl)) for st in strata]  # complete or not: the plan's design
    planned = paired.planned_power(p.planned_distance(reg), p.planned(reg).sd, seeds_planned, reg.alpha / m)
    observed = paired.power_at(p.planned_distance(reg), iv.se, iv.df, reg.alpha / m)
    reference = "/".join(refs) if p.key != "not_worse_best_static" else "best static G"
    return Claim(POOLED, POOLED, ctrl, reference, p.label(reg, ctrl, reference), p.side, iv,
                 _partial(detail, used), family=family, id=p.id, power_planned=planned,
                 power_observed=observed)  # fmt: skip


def _per_seed(g: _Grid, p: Primary, ref_rs, ctrl_rs) -> dict[int, float]:
    if p.key == "fewer_stragglers":
        return perseed.paired_differences(ref_rs, ctrl_rs, metrics.STRAGGLER)
    if p.key == "cheaper":
        return perseed.cost_log_ratios(ref_rs, ctrl_rs, g.reg.cost)
    return perseed.mean_over_tasks([perseed.accuracy_differences(ref_rs, ctrl_rs, t) for t in g.tasks])


def _detail(g: _Grid, p: Primary, ctrl: str, refs: list[str], strata, values) -> str:
    per = ", ".join(f"{m} {a.upper()} {p.show(float(np.mean(v))) if v else 'n/a'}"
                    for (m, a), v in zip(strata, values))  # fmt: skip
    if p.key == "fewer_stragglers":

        def rate(s):
            means = [list(perseed.seed_means(g.cells(st, s), metrics.STRAGGLER).values()) for st in strata]
            return np.mean([np.mean(m or [np.nan]) for m in means])

        return f"straggler rate {_pct(rate(refs[0]))} → {_pct(rate(ctrl))}; per stratum {per}"
    if p.key.startswith("not_worse"):
        return f"tasks {', '.join(g.tasks)} (mean over tasks); per stratum {per}"
    return f"per stratum {per}"


def primary_family(g: _Grid, ctrl: str, family: str = verdicts.PRIMARY) -> list[Claim]:
    """P1-P4 for ``ctrl`` (P4 over the strata whose best static G is not the largest), Holm as one family."""
    strata = g.strata(ctrl)
    if not strata or g.largest is None:
        return []
    best = {st: g.refs[st[0]]["best_static"] for st in strata}
    p4_strata = [st for st in strata if best[st] not in (None, g.largest)]
    kinds = [PRIMARY["P1"], PRIMARY["P2"], PRIMARY["P3"]] + ([PRIMARY["P4"]] if p4_strata else [])
    m = len(kinds)
    claims = []
    for p in kinds:
        if p.id == "P4":
            claims.append(_pooled_claim(g, p, ctrl, lambda st: best[st], p4_strata, family, m))
        else:
            claims.append(_pooled_claim(g, p, ctrl, lambda st: g.largest, strata, family, m))
    return verdicts.family(claims, g.reg.alpha)


def _pair(st: Stratum, ctrl: str, ref: str, claim: str, side: str, iv, detail: str, sid: str) -> Claim:
    return Claim(st[0], st[1], ctrl, ref, claim, side, iv, detail, family=f"{SECONDARY} {sid}", id=sid)


def _secondaries(g: _Grid, ctrl: str) -> dict[str, list[Claim]]:
    reg, ref = g.reg, g.largest
    out: dict[str, list[Claim]] = {sid: [] for sid in SECONDARIES}
    other = next(c for c in COSTS if c != reg.cost)
    delta = g.collected.grid.budgets.get(ctrl, g.collected.grid.delta)
    strata = g.strata(ctrl)
    for st in strata:
        ref_rs, ctrl_rs = g.cells(st, ref), g.cells(st, ctrl)
        rs = ref_rs + ctrl_rs
        fewer = paired.seed_interval(list(perseed.paired_differences(ref_rs, ctrl_rs, metrics.STRAGGLER).values()))
        out["S1"].append(_pair(st, ctrl, ref, "fewer stragglers", "below", fewer, _partial("", rs), "S1"))
        if delta is not None:
            bound = delta + reg.budget_margin
            rates = perseed.seed_means(ctrl_rs, metrics.STRAGGLER, "second_half")
            iv = paired.seed_interval(list(rates.values()), null=bound).clipped(0.0, 1.0)
            out["S2"].append(_pair(st, ctrl, f"δ + ε = {delta:g} + {reg.budget_margin:g}",
                                   "second-half straggler rate ≤ δ + ε", "below", iv,
                                   _partial("", ctrl_rs), "S2"))  # fmt: skip
        cost = perseed.speedup(ref_rs, ctrl_rs, reg.cost)
        cpu = perseed.speedup(ref_rs, ctrl_rs, metrics.CPU_SECONDS)
        wall = perseed.speedup(ref_rs, ctrl_rs, metrics.STEP_SECONDS)
        out["S3"].append(_pair(st, ctrl, ref, f"cheaper ({reg.cost})", "above", cost,
                               _partial(f"CPU-time {cpu.text('.2f', suffix='×')}; wall-clock "
                                        f"{wall.text('.2f', suffix='×')}", rs), "S3"))  # fmt: skip
        for sid, r in (("S4", ref), ("S6", g.refs[st[0]]["best_static"])):
            if r is None or (sid == "S6" and r == ref):
                continue
            what = "accuracy not worse" if sid == "S4" else "accuracy not worse than the best static G"
            for task in g.tasks:
                label = f"{task} {what} (margin {reg.accuracy_margin * 100:g} pts)"
                try:
                    diffs = perseed.accuracy_differences(g.cells(st, r), ctrl_rs, task)
                except FileNotFoundError as exc:
                    out[sid].append(_pair(st, ctrl, r, label, "above", paired.seed_interval([], -reg.accuracy_margin),
                                          f"no per-problem scores ({exc})", sid))  # fmt: skip
                    continue
                iv = paired.seed_interval(list(diffs.values()), null=-reg.accuracy_margin)
                out[sid].append(_pair(st, ctrl, r, label, "above", iv, _partial("", g.cells(st, r) + ctrl_rs), sid))
    if strata:
        logs = [list(perseed.cost_log_ratios(g.cells(st, ref), g.cells(st, ctrl), other).values()) for st in strata]
        iv = paired.as_ratio(paired.pooled_interval(logs))
        out["S3"].append(
            _pair((POOLED, POOLED), ctrl, ref, f"cheaper ({other}, not registered)", "above", iv, "", "S3")
        )
        lengths = [list(perseed.output_length_log_ratios(g.cells(st, ref), g.cells(st, ctrl), g.tasks).values())
                   for st in strata]  # fmt: skip
        out["S5"].append(_pair((POOLED, POOLED), ctrl, ref, "shorter answers (evaluation output length, ref / ctrl)",
                               "above", paired.as_ratio(paired.pooled_interval(lengths)), "", "S5"))  # fmt: skip
    return out


def secondary_families(g: _Grid, ctrl: str, primaries: list[Claim]) -> list[Claim]:
    by_id = {c.id: c for c in primaries}
    out = []
    for sid, claims in _secondaries(g, ctrl).items():
        if claims:
            out += gated(claims, by_id.get(SECONDARIES[sid][0]), g.reg.alpha)
    return out


def positive_control(g: _Grid) -> list[Claim]:
    """The smallest fixed G straggles less than the largest, pooled over the strata, alone at alpha."""
    fixed = fixed_sizes(g.sizings)
    if len(fixed) < 2:
        return []
    small, large = fixed[0][1], fixed[-1][1]
    strata = [st for st in g.strata(small) if g.cells(st, large)]
    values = [list(perseed.paired_differences(g.cells(st, large), g.cells(st, small), metrics.STRAGGLER).values())
              for st in strata]  # fmt: skip
    iv = paired.pooled_interval(values)
    rs = [r for st in strata for r in g.cells(st, small) + g.cells(st, large)]
    claim = Claim(POOLED, POOLED, small, large, f"{small} fewer stragglers than {large} (positive control)", "below",
                  iv, _partial("", rs), family=CONTROL, id="C1")  # fmt: skip
    return verdicts.family([claim], g.reg.alpha)


def headline_claims(collected: Collected) -> list[Claim]:
    """Every claim of the headline, family by family."""
    g = _Grid(collected)
    controllers = [s for s in g.sizings if fixed_group_size(s) is None]
    claims: list[Claim] = []
    if g.reg.controller in controllers:
        primaries = primary_family(g, g.reg.controller)
        claims += primaries + positive_control(g) + secondary_families(g, g.reg.controller, primaries)
    else:
        claims += positive_control(g)
    for ctrl in controllers:
        if ctrl != g.reg.controller:
            claims += primary_family(g, ctrl, family=f"{EXPLORATORY} {ctrl}")
    return claims
