"""Planned power: the dry run's lines for a config, and the plan read off a finished run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from sagc.aggregate import plan
from sagc.aggregate.paired import Interval, planned_power
from sagc.aggregate.registration import Registration
from sagc.aggregate.verdicts import Claim, headline_frame
from sagc.pipeline.config import fill_defaults
from sagc.pipeline.schema import pipeline_model

REPO = Path(__file__).resolve().parents[2]


def _raw(name: str) -> dict:
    return yaml.safe_load((REPO / "configs" / name).read_text())


def _typed(config: dict):
    """The typed config with the model's defaults, as the Snakefile has it (without the checks
    that resolve every cell: the dry run's lines read the claims and the grid alone)."""
    fill_defaults(config)
    return pipeline_model().model_validate_json(json.dumps(config))


def _config(name: str):
    return _typed(_raw(name))


def test_default_dry_run_states_the_family_and_its_power():
    lines = plan.dry_run_lines(_config("default.yaml"))
    text = "\n".join(lines)
    n = len(yaml.safe_load((REPO / "configs/default.yaml").read_text())["seeds"])
    assert f"sagc vs g16, pooled over 4 model x algorithm strata x {n} seeds (df {4 * (n - 1)})" in text
    assert [line.split()[0] for line in lines[1:5]] == ["P1", "P2", "P3", "P4"]
    # The default's plan was measured on development seeds: marked provisional only if the
    # config says so.
    provisional = yaml.safe_load((REPO / "configs/default.yaml").read_text())["claims"]["plan_provisional"]
    assert ("PROVISIONAL plan" in text) == provisional
    # Power never falls with more seeds, for any primary (the by-seed line), and rises for
    # every primary not already at 1 with the fewest seeds.
    by_seed = lines[5].split(": ", 1)[1].split(", ")
    columns = zip(*[[float(v) for v in entry.split(": ")[1].split("/")] for entry in by_seed])
    for power in map(list, columns):
        assert power == sorted(power)
        assert power[0] == 1.0 or power[0] < power[-1]


def test_paper_dry_run_states_what_its_seeds_can_test_and_cost():
    config = _config("paper.yaml")
    text = "\n".join(plan.dry_run_lines(config))
    assert "x 1 seeds (df 0)" in text and "power n/a (df 0: one seed per stratum)" in text
    cells = len(config.models) * len(config.algorithms) * len(config.sizings)
    hours = config.claims.gpu_hours_per_cell
    assert f"each extra seed: {cells} training cells x {hours:g} GPU-hours" in text
    assert f"= {cells * hours:,.0f} GPU-hours" in text


def test_a_controller_that_is_not_in_the_grid_is_refused_naming_the_key():
    raw = _raw("default.yaml")
    raw["claims"]["controller"] = "sagc-fats"
    with pytest.raises(ValueError, match=r"claims.controller.*'sagc-fats'.*\['sagc'\]"):
        plan.dry_run_lines(_typed(raw))
    raw["sizings"] = ["g16"]  # a world check: no controller, no family, no error
    assert plan.dry_run_lines(_typed(raw)) == [
        "pre-registered claims: no primary family (the grid trains no controller)"
    ]


def _run(tmp_path, p1_effect=-0.06, p1_sd=0.09, n=8, strata=4, p1_null=0.0) -> Path:
    """A finished run's headline.csv with a pooled P1 (rate) and P2 (speed-up), of ``n``
    seeds in ``strata`` strata, P1 tested against ``p1_null``."""
    df = n - strata
    p1 = Interval(p1_effect, -0.1, -0.02, n, p1_null, 0.01, p1_sd, False, p1_sd / 2, df, strata)
    p2 = Interval(math.exp(0.05), 1.0, 1.1, n, 1.0, 0.2, 0.12, True, 0.06, df, strata)
    claims = [Claim("pooled", "pooled", "sagc", "g16", "sagc fewer stragglers than g16", "below", p1, "",
                    family="primary", id="P1"),
              Claim("pooled", "pooled", "sagc", "g16", "sagc cheaper than g16 (step_cost)", "above", p2, "",
                    family="primary", id="P2")]  # fmt: skip
    (tmp_path / "tables").mkdir(parents=True)
    headline_frame(claims).to_csv(tmp_path / "tables" / "headline.csv", index=False)
    return tmp_path


def test_plan_reads_a_runs_primaries_and_prints_a_block_to_paste(tmp_path, capsys):
    run = _run(tmp_path)
    assert plan.main([str(run), "--seeds", "3", "6"]) == 0
    out = capsys.readouterr().out
    head, block = out.split("\nclaims:\n")
    # The block is a valid claims section carrying the run's estimates and spreads.
    reg = Registration.from_dict(yaml.safe_load("claims:\n" + block)["claims"])
    assert reg.plan_provisional is False
    assert (reg.plan.fewer_stragglers.effect, reg.plan.fewer_stragglers.sd) == (pytest.approx(-0.06), 0.09)
    assert (reg.plan.cheaper.effect, reg.plan.cheaper.sd) == (pytest.approx(0.05), 0.12)
    # Power at 6 seeds per stratum of the run's 4 strata, at alpha / 2 (two primaries).
    want = planned_power(0.06, 0.09, [6] * 4, 0.05 / 2)
    assert f"6: {want:.2f}" in head.splitlines()[1]


def test_several_runs_of_a_world_plan_as_one_with_the_pooled_spread(tmp_path, capsys):
    """A run with one bad seed widens the plan: its variance enters by its df, its effect by
    its seeds; runs with other strata or other nulls are not one world's plan and are refused."""
    calm = _run(tmp_path / "calm", p1_effect=-0.06, p1_sd=0.05, n=8)  # df 4
    rough = _run(tmp_path / "rough", p1_effect=-0.03, p1_sd=0.15, n=16)  # df 12
    assert plan.main([str(calm), str(rough), "--seeds", "5"]) == 0
    block = capsys.readouterr().out.split("\nclaims:\n")[1]
    pooled = Registration.from_dict(yaml.safe_load("claims:\n" + block)["claims"]).plan.fewer_stragglers
    assert pooled.effect == pytest.approx((8 * -0.06 + 16 * -0.03) / 24, rel=1e-3)
    assert pooled.sd == pytest.approx(math.sqrt((4 * 0.05**2 + 12 * 0.15**2) / 16), rel=1e-3)
    other = _run(tmp_path / "other", n=6, strata=3)
    assert plan.main([str(calm), str(other)]) == 2
    assert "other primaries or strata" in capsys.readouterr().err
    # The same claims against another null (a run registered with another margin) are refused too.
    shifted = _run(tmp_path / "shifted", p1_null=-0.02)
    assert plan.main([str(calm), str(shifted)]) == 2
    assert "other nulls (margins)" in capsys.readouterr().err


def test_plan_refuses_a_run_without_primaries(tmp_path, capsys):
    (tmp_path / "tables").mkdir()
    headline_frame([]).to_csv(tmp_path / "tables" / "headline.csv", index=False)
    assert plan.main([str(tmp_path)]) == 2
    assert "no primary claims" in capsys.readouterr().err
