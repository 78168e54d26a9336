"""The pre-registered claims of the config's ``claims:`` (docs/aggregation.md, "The pre-registered primaries")."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import Field

from sagc.config_models import Flag, Number, OneOf, Section, Text

#: The costs a config may register (``sagc.costs.step_cost``, or decode steps alone).
COSTS = ("step_cost", "decode_steps")


class Planned(Section):
    """A primary's planned true effect and the spread of its per-seed values (on the claim's
    test scale: rate or accuracy points as fractions, a speed-up as log(ratio))."""

    effect: Number() = Field(..., description="planned true value of the per-seed statistic")
    sd: Number(gt=0.0) = Field(..., description="planned standard deviation of the per-seed values in a stratum")


class Plan(Section):
    """The planned effect and spread of each primary (``python -m sagc.aggregate.plan`` on a
    development-seed run prints the block to paste)."""

    fewer_stragglers: Planned = Field(
        Planned(effect=-0.10, sd=0.12),
        description="P1: straggler-rate difference, controller minus reference (fraction)",
    )
    cheaper: Planned = Field(Planned(effect=0.10, sd=0.10), description="P2: log(reference cost / controller cost)")
    not_worse: Planned = Field(
        Planned(effect=0.0, sd=0.05), description="P3: accuracy difference, controller minus reference (fraction)"
    )
    not_worse_best_static: Planned = Field(
        Planned(effect=0.0, sd=0.05),
        description="P4: accuracy difference, controller minus the best static G (fraction)",
    )


class Registration(Section):
    """The headline's pre-registered claims (sagc.aggregate.registration)."""

    controller: Text = Field(
        "sagc",
        description=(
            "The sizing whose claims form the primary family (a controller of the grid's sizings); other "
            "controllers of the grid get the same claims as an exploratory family."
        ),
    )
    alpha: Number(gt=0.0, lt=0.5) = Field(
        0.05,
        description=(
            "Family-wise error rate of the primary family (Holm); each secondary family is Holm-adjusted at "
            "it too, and tested only when its primary holds."
        ),
    )
    cost: OneOf(COSTS) = Field(
        "step_cost",
        description=(
            "The cost P2 registers: step_cost = decode steps + sagc.costs.TRAIN_TOKEN_WEIGHT x trained "
            "padded tokens (sagc.costs.step_cost); decode_steps = the decodes alone. The other one is "
            "reported as a secondary."
        ),
    )
    accuracy_margin: Number(gt=0.0, lt=1.0) = Field(
        0.05, description="Non-inferiority margin of 'accuracy not worse' (absolute accuracy)."
    )
    accuracy_margin_reason: Text = Field(
        "about a third of what RL gains over the base model in the tiny world (+11 to +19 pts at g16)",
        description="Why the margin is what it is (printed in the headline).",
    )
    budget_margin: Number(ge=0.0, lt=1.0) = Field(
        0.05,
        description=(
            "epsilon of the budget claim 'second-half straggler rate <= delta + epsilon': the controller's "
            "dual ascent drives the rate to delta, so 'below delta' is a null the truth sits at."
        ),
    )
    budget_margin_reason: Text = Field(
        "less than one straggling step of the 16 in a 32-step run's second half (6.25 pts)",
        description="Why epsilon is what it is (printed in the headline).",
    )
    power_target: Number(gt=0.0, lt=1.0) = Field(
        0.8, description="The power each primary should have at its planned effect (the dry run flags the ones below)."
    )
    plan: Plan = Field(Plan(), description="Planned effect and spread per primary (plan_provisional says whence).")
    plan_provisional: Flag = Field(
        True,
        description=(
            "true: the plan's numbers are placeholders, not measured on development seeds (flagged in the "
            "dry run and the headline)."
        ),
    )
    gpu_hours_per_cell: Number(gt=0.0) | None = Field(
        None,
        description=(
            "Assumed GPU-hours of one training cell, for the dry run's cost of an extra seed (null: not "
            "stated, e.g. a CPU world)."
        ),
    )


@dataclass(frozen=True)
class Primary:
    """One primary claim: its id, its ``Plan`` key, its words and its test's shape."""

    id: str
    key: str
    what: str
    side: str  # "below" or "above" the null
    log: bool = False

    def null(self, reg: Registration) -> float:
        return -reg.accuracy_margin if self.key.startswith("not_worse") else 0.0

    def planned(self, reg: Registration) -> Planned:
        return getattr(reg.plan, self.key)

    def planned_distance(self, reg: Registration) -> float:
        """The planned effect's distance from the null, positive on the claimed side."""
        d = self.planned(reg).effect - self.null(reg)
        return d if self.side == "above" else -d

    def label(self, reg: Registration, controller: str, reference: str) -> str:
        if self.key == "cheaper":
            return f"{controller} cheaper than {reference} ({reg.cost})"
        if self.key.startswith("not_worse"):
            return (f"{controller} accuracy not worse than {reference} "
                    f"(margin {reg.accuracy_margin * 100:g} pts)")  # fmt: skip
        return f"{controller} {self.what} than {reference}"

    def show(self, value: float) -> str:
        return f"{math.exp(value):.2f}×" if self.log else f"{value * 100:+.1f} pts"

    def show_sd(self, sd: float) -> str:
        return f"{sd:.3f} (log)" if self.log else f"{sd * 100:.1f} pts"


PRIMARIES = (
    Primary("P1", "fewer_stragglers", "fewer stragglers", "below"),
    Primary("P2", "cheaper", "cheaper", "above", log=True),
    Primary("P3", "not_worse", "accuracy not worse", "above"),
    Primary("P4", "not_worse_best_static", "accuracy not worse", "above"),
)
PRIMARY = {p.id: p for p in PRIMARIES}
