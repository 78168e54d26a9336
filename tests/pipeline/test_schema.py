"""The pipeline's JSON schema is generated from the typed model, and agrees with the code."""

from dataclasses import fields
from pathlib import Path

import yaml

from sagc.controller import POLICIES, SAGCConfig, sizing_pattern
from sagc.pipeline.schema import SCHEMA_FILE, TRAIN_FILLED, config_schema, main, schema_text
from sagc.train.config import DeviceSection, TrainSection

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
    assert set(props["train"]["properties"]) == {f.name for f in fields(TrainSection)} - {"seed"}
    assert set(props["device"]["properties"]) == {f.name for f in fields(DeviceSection)}
    # the schema fills in the trainer's own defaults, and only these train keys
    filled = {k: p["default"] for k, p in props["train"]["properties"].items() if "default" in p}
    assert filled == {k: (list(v) if isinstance(v, tuple) else v)
                      for k, v in ((k, getattr(TrainSection, k)) for k in TRAIN_FILLED)}
    for f in fields(DeviceSection):
        assert props["device"]["properties"][f.name]["default"] == getattr(DeviceSection, f.name), f.name


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
