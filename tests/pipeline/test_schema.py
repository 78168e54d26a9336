"""The pipeline's JSON schema is generated from the typed model, and agrees with the code."""

from dataclasses import fields
from pathlib import Path

import yaml

from sagc.controller import POLICIES, SAGCConfig, sizing_pattern
from sagc.pipeline.schema import SCHEMA_FILE, TRAIN_FILLED, config_schema, main, schema_text
from sagc.train.config import DeviceSection, TrainSection
from tests.shipped_configs import SHIPPED, layers_id, raw_config

REPO = Path(__file__).resolve().parents[2]


def test_checked_in_schema_is_generated_from_the_model():
    assert (REPO / SCHEMA_FILE).read_text() == schema_text(), \
        "workflow/schemas/config.schema.yaml is out of date: run python -m sagc.pipeline.schema"


def test_check_mode_flags_a_stale_file(tmp_path):
    stale = tmp_path / "schema.yaml"
    stale.write_text("{}\n")
    assert main(["--check", "--path", str(stale)]) == 1
    assert main(["--path", str(stale)]) == 0 and main(["--check", "--path", str(stale)]) == 0


def test_train_and_device_blocks_are_the_trainers_sections():
    props = config_schema()["properties"]
    assert set(props["train"]["properties"]) == set(TrainSection.model_fields) - {"seed"}
    assert set(props["device"]["properties"]) == set(DeviceSection.model_fields)
    # the schema fills in the trainer's own defaults, and only these train keys
    filled = {k: p["default"] for k, p in props["train"]["properties"].items() if "default" in p}
    assert filled == {k: TrainSection.default(k) for k in TRAIN_FILLED}
    for key in DeviceSection.model_fields:
        assert props["device"]["properties"][key]["default"] == DeviceSection.default(key), key


def test_rollout_budget_alone_is_a_valid_train_block():
    train = config_schema()["properties"]["train"]
    assert train["required"] == ["steps"]


def test_sizings_and_policy_blocks_come_from_the_registry():
    props = config_schema()["properties"]
    assert props["sizings"]["items"]["pattern"] == sizing_pattern()
    for policy in POLICIES.values():
        assert policy.block in props and policy.variants_block in props
    assert set(props["sagc"]["properties"]) == {f.name for f in fields(SAGCConfig)} - {"seed"}


def test_defaults_are_not_invented():
    """A key with no default in the code gets none in the schema: Snakemake's validate
    fills defaults into the config, and a filled key would change every cell's params."""
    text = yaml.safe_load((REPO / SCHEMA_FILE).read_text())
    sagc = text["properties"]["sagc"]["properties"]
    assert all("default" not in p for p in sagc.values())
    models = text["properties"]["models"]["additionalProperties"]["properties"]
    assert "default" not in models["arch"] and "default" not in models["hub_id"]


#: Values every key is probed with. Integral floats (1.0) are left out: JSON Schema counts
#: them as integers, the trainer does not; the pipeline's per-cell check names them.
PROBES = [-1, 0, 1, 2, 3, 0.5, 1.5, "x", "auto", "", None, True, [], ["s"], {}, {"a": 1}]

#: Probes refused only by a rule across keys (checked for every cell by the pipeline, and
#: in tests/train/test_config.py): exactly one of prompts_per_step / rollout_budget, and
#: use_vllm needing use_cpu false. "auto" is the pipeline's own value, resolved per cell.
CROSS_KEY = [("prompts_per_step", None), ("rollout_budget", None), ("use_vllm", True),
             ("gradient_accumulation_steps", "auto")]


def _agree(block_schema, section_from_dict, key, base):
    """The probes on which the schema's verdict and the section's differ."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(block_schema)
    disagree = []
    for value in PROBES:
        if any(key == k and type(value) is type(v) and value == v for k, v in CROSS_KEY):
            continue
        d = {**base, key: value}
        by_schema = validator.is_valid(d)
        try:
            section_from_dict(d)
            by_code = True
        except (ValueError, TypeError):
            by_code = False
        if by_schema != by_code:
            disagree.append((value, by_schema, by_code))
    return disagree


def test_train_block_accepts_exactly_what_the_trainer_accepts():
    """Probe every train key with the same values: the pipeline schema and the trainer's
    own section (``TrainSection``) accept and refuse the same ones."""
    block = config_schema()["properties"]["train"]
    problems = {}
    for key in block["properties"]:
        base = {"steps": 2, "prompts_per_step": 2} if key != "rollout_budget" else {"steps": 2}
        base.pop(key, None)
        if d := _agree(block, TrainSection.from_dict, key, base):
            problems[key] = d
    assert not problems, problems


def test_device_block_accepts_exactly_what_the_trainer_accepts():
    block = config_schema()["properties"]["device"]
    problems = {k: d for k in block["properties"] if (d := _agree(block, DeviceSection.from_dict, k, {}))}
    assert not problems, problems


def test_defaults_are_filled_as_snakemake_fills_them():
    """The pipeline fills the schema's defaults itself (one validation pass); the result is
    what Snakemake's own ``validate(set_default=True)`` gives, for every shipped config."""
    import copy

    from snakemake.utils import validate

    from sagc.pipeline.config import fill_defaults

    schema = yaml.safe_load((REPO / SCHEMA_FILE).read_text())
    for layers in SHIPPED:
        raw = raw_config(layers)
        ours, theirs = copy.deepcopy(raw), copy.deepcopy(raw)
        fill_defaults(ours, schema)
        validate(theirs, str(REPO / SCHEMA_FILE), set_default=True)
        assert ours == theirs, layers_id(layers)
        assert ours != raw, layers_id(layers)  # something was filled in
