"""The sizing registry: one parser for sizing names, and a new policy is one registry line."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sagc.controller import (
    POLICIES,
    FixedGroupSize,
    Policy,
    SAGCConfig,
    SAGCController,
    fixed_group_size,
    parse_sizing,
    sizing_pattern,
)
from sagc.controller.registry import register
from sagc.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "fixed", "policy", "variant"),
    [
        ("g16", 16, None, None),
        ("g2", 2, None, None),
        ("sagc", None, "sagc", None),
        ("sagc-fast", None, "sagc", "fast"),
        ("sagc-tau_3", None, "sagc", "tau_3"),
    ],
)
def test_names_parse_to_their_policy(name, fixed, policy, variant):
    s = parse_sizing(name)
    assert s.fixed == fixed and s.variant == variant
    assert (s.policy.name if s.policy else None) == policy
    assert bool(re.match(sizing_pattern(), name))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("g1", "group size >= 2"),
        ("g0", "group size >= 2"),
        ("adaptive", "expected 'g<N>'"),
        ("sagc-", "expected 'g<N>'"),
        ("sagc-a.b", "expected 'g<N>'"),  # one variant pattern everywhere: no dots
        ("G16", "expected 'g<N>'"),
        (16, "expected 'g<N>'"),
    ],
)
def test_bad_names_are_refused_by_name(name, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_sizing(name)
    if isinstance(name, str):
        assert not re.match(sizing_pattern(), name) or name in ("g1", "g0")


def test_key_names_the_config_key():
    with pytest.raises(ValueError, match=r"^sizings must be .*, got 'x'$"):
        parse_sizing("x", key="sizings")


def test_fixed_group_size_reads_only_fixed_names():
    assert fixed_group_size("g32") == 32
    assert fixed_group_size("sagc") is None and fixed_group_size("sagc-g16") is None


def test_schema_pattern_is_the_registry_pattern():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["properties"]["sizings"]["items"]["pattern"] == sizing_pattern()


def test_cell_block_applies_variant_and_fixed_takes_measurement_keys():
    config = {"sagc": {"tau": 2.5, "delta": 0.2, "eta": 2.0}, "sagc_variants": {"fast": {"selection": "constrained"}}}
    assert parse_sizing("g8").cell_block(config) == {"tau": 2.5}
    assert parse_sizing("sagc").cell_block(config) == config["sagc"]
    assert parse_sizing("sagc-fast").cell_block(config) == {**config["sagc"], "selection": "constrained"}
    with pytest.raises(ValueError, match=r"'sagc-slow' needs 'sagc_variants.slow' \(known variants: \['fast'\]\)"):
        parse_sizing("sagc-slow").cell_block(config)


def test_build_seeds_and_measures_like_the_block():
    fixed = parse_sizing("g8").build({"tau": 3.0, "scope": "group"}, seed=5)
    assert isinstance(fixed, FixedGroupSize) and fixed.group_size == 8
    assert fixed.observe([[1, 1, 1, 2.9]]).straggler is False  # tau 3: 2.9 is no straggler
    ctrl = parse_sizing("sagc-x").build({"candidates": [2, 4]}, seed=7)
    assert isinstance(ctrl, SAGCController) and ctrl.config.seed == 7 and ctrl.candidates == (2, 4)


class HalvingController(SAGCController):
    """A stand-in for a new policy: SAGC that never goes above the middle candidate."""

    def next_group_size(self) -> int:
        g = super().next_group_size()
        return min(g, self.candidates[len(self.candidates) // 2])


@pytest.fixture
def new_policy():
    policy = register(
        Policy("sagc-half", block="sagc_half", config=SAGCConfig, build=HalvingController, inherits="sagc")
    )
    yield policy
    del POLICIES["sagc-half"]


def _cell(sizing: dict) -> dict:
    return {
        "cell": {"id": "m/grpo/x/seed0", "algorithm": "grpo", "sizing": sizing["name"]},
        "model": {"path": "m"},
        "data": {"train": "t.jsonl"},
        "output_dir": "out",
        "sizing": sizing,
    }


def test_a_new_policy_with_its_own_block_plugs_in_everywhere(new_policy):
    # the longest policy name wins: 'sagc-half' is the new policy, not a variant of sagc
    assert parse_sizing("sagc-half").policy is new_policy
    assert parse_sizing("sagc-half-big").variant == "big"
    assert parse_sizing("sagc-halfway").policy.name == "sagc"
    assert re.match(sizing_pattern(), "sagc-half-big")
    # the pipeline's blocks -> the cell's block (inherits sagc, then its own, then the variant)
    config = {
        "sagc": {"tau": 2.5, "candidates": [4, 8, 16]},
        "sagc_half": {"delta": 0.1},
        "sagc_half_variants": {"big": {"candidates": [8, 16, 32]}},
    }
    block = parse_sizing("sagc-half-big").cell_block(config)
    assert block == {"tau": 2.5, "candidates": [8, 16, 32], "delta": 0.1}
    # the trainer's cell config reads it under the policy's block and builds the policy
    cfg = TrainConfig.from_dict(_cell({"name": "sagc-half-big", "sagc_half": block}), check_vllm=False)
    assert cfg.sizing.group_sizes() == (8, 16, 32)
    assert cfg.to_dict()["sizing"] == {"name": "sagc-half-big", "sagc_half": block}
    sizer = cfg.sizing.build(seed=3)
    assert isinstance(sizer, HalvingController) and sizer.config.delta == 0.1
    with pytest.raises(ValueError, match=r"unknown key\(s\) in sizing: sizing.sagc"):
        TrainConfig.from_dict(_cell({"name": "sagc-half", "sagc": {}}), check_vllm=False)
    with pytest.raises(ValueError, match="sizing.sagc_half is invalid: SAGCConfig.delta"):
        TrainConfig.from_dict(_cell({"name": "sagc-half", "sagc_half": {"delta": 2}}), check_vllm=False)


def test_a_new_policy_block_is_checked_by_the_pipeline(new_policy):
    from sagc.pipeline.config import _sizing_problems

    blocks = {
        "sagc": {},
        "sagc_half": {"eta": -1},
        "sagc_half_variants": {"v": {"eta": 1.0, "selection": "greedy"}},
    }
    problems = _sizing_problems(["g4", "sagc-half"], blocks)
    assert any(p.startswith("config key 'sagc_half': SAGCConfig.eta") for p in problems), problems
    assert any(p.startswith("config key 'sagc_half_variants.v': SAGCConfig.selection") for p in problems), problems


def test_a_policy_named_by_strings_is_imported_on_first_use():
    """The controller imports nothing above it: sagc-prompt's classes are named, and
    imported when the registry first needs them."""
    code = (
        "import sys; from sagc.controller import POLICIES, parse_sizing; "
        "assert not [m for m in sys.modules if m.startswith('sagc.prompt_aware')]; "
        "p = POLICIES['sagc-prompt']; "
        "print(p.config.__module__, p.config.__name__, p.build.__module__, p.build.__name__, "
        "type(parse_sizing('sagc-prompt').build({})).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [
        "sagc.prompt_aware.config",
        "PromptSAGCConfig",
        "sagc.prompt_aware.policy",
        "build_prompt_sagc",
        "PromptAwareSAGC",
    ]


def test_registering_a_clash_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register(Policy("sagc", block="sagc", config=SAGCConfig, build=SAGCController))
    with pytest.raises(ValueError, match="clashes"):
        register(Policy("g3", block="x", config=SAGCConfig, build=SAGCController))


def test_measurement_takes_tau_and_scope_only():
    from sagc.controller import measurement

    m = measurement({"sagc": {"tau": 3.0, "scope": "group", "delta": 0.1}})
    assert (m.tau, m.scope, m.delta) == (3.0, "group", SAGCConfig().delta)
    assert measurement({}).tau == SAGCConfig().tau
