"""The pipeline's JSON schema is generated from the typed model, and agrees with the code."""

import dataclasses
import json
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Union

import annotated_types as at
import pytest
import yaml
from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from sagc.controller import POLICIES, SAGCConfig, sizing_pattern
from sagc.pipeline.schema import BLOCK_MODELS, SCHEMA_FILE, config_schema, main, schema_text
from sagc.settings import declared, is_settings
from sagc.train.config import DeviceSection, TrainSection

REPO = Path(__file__).resolve().parents[2]


def block(name: str, schema: dict | None = None) -> dict:
    """A top-level key's schema, its ``$ref`` resolved (the ``$defs`` kept for nested refs)."""
    schema = schema or config_schema()
    prop = schema["properties"][name]
    target = schema["$defs"][prop["$ref"].rsplit("/", 1)[1]] if "$ref" in prop else prop
    return {**target, "$defs": schema["$defs"]}


def test_checked_in_schema_is_generated_from_the_model():
    assert (REPO / SCHEMA_FILE).read_text() == schema_text(), (
        "workflow/schemas/config.schema.yaml is out of date: run python -m sagc.pipeline.schema"
    )


def test_check_mode_flags_a_stale_file(tmp_path):
    stale = tmp_path / "schema.yaml"
    stale.write_text("{}\n")
    assert main(["--check", "--path", str(stale)]) == 1
    assert main(["--path", str(stale)]) == 0 and main(["--check", "--path", str(stale)]) == 0


def test_train_and_device_blocks_are_the_trainers_sections():
    train, device = block("train")["properties"], block("device")["properties"]
    assert set(train) == set(TrainSection.model_fields) - {"seed"}  # each cell's seed: the grid's
    # and the memory plan's own keys, which no cell carries (sagc.pipeline.cells drops them)
    assert set(device) == set(DeviceSection.model_fields) | {"memory_margin_gib", "memory_measured"}
    # a default the schema states is the one the trainer applies to an absent key
    for section, props in ((TrainSection, train), (DeviceSection, device)):
        stated = {k: p["default"] for k, p in props.items() if "default" in p and k in section.model_fields}
        assert stated == {k: to_jsonable_python(section.default(k)) for k in stated}, section.__name__
    assert set(stated) == set(DeviceSection.model_fields)


def test_rollout_budget_alone_is_a_valid_train_block():
    assert block("train")["required"] == ["steps"]


def test_sizings_and_policy_blocks_come_from_the_registry():
    props = config_schema()["properties"]
    assert props["sizings"]["items"]["pattern"] == sizing_pattern()
    for policy in POLICIES.values():
        assert policy.block in props and policy.variants_block in props
    assert set(block("sagc")["properties"]) == {f.name for f in fields(SAGCConfig)} - {"seed"}


def test_policy_keys_state_no_default_of_their_own():
    """A policy key the config leaves out stays absent and the config class's default
    applies, so the schema states none (null) rather than a copy that could drift."""
    schema = yaml.safe_load((REPO / SCHEMA_FILE).read_text())
    for policy in POLICIES.values():
        if policy.block in BLOCK_MODELS:
            assert all(p.get("default") is None for p in block(policy.block, schema)["properties"].values())
    model = schema["$defs"]["ModelSpec"]["properties"]
    assert model["arch"]["default"] is None and model["hub_id"]["default"] is None


#: Values every key is probed with. Integral floats (1.0) are left out: JSON Schema counts
#: them as integers, the trainer does not; the pipeline's per-cell check names them.
PROBES = [-1, 0, 1, 2, 3, 0.5, 1.5, "x", "auto", "", None, True, [], ["s"], {}, {"a": 1}]

#: Probes refused only by a rule across keys (checked for every cell by the pipeline, and
#: in tests/train/test_config.py): exactly one of prompts_per_step / rollout_budget, and
#: use_vllm needing use_cpu false. "auto" is the pipeline's own value, resolved per cell.
CROSS_KEY = [
    ("prompts_per_step", None),
    ("rollout_budget", None),
    ("use_vllm", True),
    ("gradient_accumulation_steps", "auto"),
    ("vllm_gpu_memory_utilization", "auto"),
]


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
    train = block("train")
    problems = {}
    for key in train["properties"]:
        base = {"steps": 2, "prompts_per_step": 2} if key != "rollout_budget" else {"steps": 2}
        base.pop(key, None)
        if d := _agree(train, TrainSection.from_dict, key, base):
            problems[key] = d
    assert not problems, problems


def test_device_block_accepts_exactly_what_the_trainer_accepts():
    device = block("device")
    problems = {
        k: d
        for k in device["properties"]
        if k in DeviceSection.model_fields and (d := _agree(device, DeviceSection.from_dict, k, {}))
    }
    assert not problems, problems


# -- the policy blocks enforce the ranges their config classes declare ---------------------------

#: JSON Schema's keyword for each kind of declared bound.
_KEYWORDS = {
    at.Gt: "exclusiveMinimum",
    at.Ge: "minimum",
    at.Lt: "exclusiveMaximum",
    at.Le: "maximum",
    at.MinLen: "minItems",
    at.MaxLen: "maxItems",
}


def _limit(bound):
    """The number a bound states (``Gt(1)`` -> 1, ``MinLen(2)`` -> 2)."""
    return getattr(bound, dataclasses.fields(bound)[0].name)


def _scalar(hint):
    """The plain type under ``Annotated`` and ``Optional`` (``float``, ``int``, ``tuple``...)."""
    while typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (Union, types.UnionType):
        return _scalar(next(a for a in typing.get_args(hint) if a is not type(None)))
    return typing.get_origin(hint) or hint


def _declared_bounds(hint, where="value"):
    """``(where, bound, scalar type)`` for each bound of a declared type, read from its
    ``Annotated`` metadata; ``where`` is "item" for a bound on a tuple's items."""
    inner, metadata = (
        (typing.get_args(hint)[0], hint.__metadata__) if typing.get_origin(hint) is Annotated else (hint, ())
    )
    out = [
        (where, b, _scalar(inner))
        for m in metadata
        for b in (m.metadata if isinstance(m, FieldInfo) else [m])
        if type(b) in _KEYWORDS
    ]
    args = [a for a in typing.get_args(inner) if a is not type(None) and a is not Ellipsis]
    if typing.get_origin(inner) is tuple:
        return out + _declared_bounds(args[0], "item")
    if typing.get_origin(inner) in (Union, types.UnionType):
        return out + [b for a in args for b in _declared_bounds(a, where)]
    return out


def _probes(bound, scalar):
    """(just outside, just inside) the bound: a number, or a list length for MinLen / MaxLen."""
    b = _limit(bound)
    step = 1 if scalar is not float else 1e-6
    return {
        at.Gt: (b, b + step),
        at.Ge: (b - step, b),
        at.Lt: (b, b - step),
        at.Le: (b + step, b),
        at.MinLen: (b - step, b),
        at.MaxLen: (b + step, b),
    }[type(bound)]


def _block_declarations(cls):
    """The flat block's keys with their declared types and defaults (nested classes in place)."""
    out = {}
    for key, hint in declared(cls).items():
        if is_settings(hint):
            out.update(_block_declarations(hint))
        else:
            out[key] = (hint, cls.__dataclass_fields__[key].default)
    return out


def _range_cases():
    for policy in POLICIES.values():
        if policy.block not in BLOCK_MODELS:
            continue
        for key, (hint, default) in _block_declarations(policy.config).items():
            for where, bound, scalar in _declared_bounds(hint):
                for verdict, probe in zip((False, True), _probes(bound, scalar)):
                    if isinstance(bound, (at.MinLen, at.MaxLen)):
                        value = (list(default) * (probe + 1))[:probe]
                    elif where == "item":
                        value = [probe, *list(default)[1:]]
                    else:
                        value = probe
                    yield pytest.param(policy, key, value, verdict, id=f"{policy.block}.{key}={value!r}")


@pytest.mark.parametrize("policy, key, value, accepted", list(_range_cases()))
def test_declared_ranges_are_what_the_schema_blocks_enforce(policy, key, value, accepted):
    """For every bound a config class declares: a value just outside it is refused, one just
    inside accepted, by the config class, by its generated block model and by the checked-in
    JSON schema alike (probes derived from the declarations, not a copy of the numbers)."""
    import jsonschema

    def by_config():
        try:
            policy.config.from_dict({key: value})
            return True
        except ValueError as e:
            assert key in str(e), e  # the message names the key
            return False

    def by_model():
        try:
            BLOCK_MODELS[policy.block].model_validate_json(json.dumps({key: value}))  # as the pipeline does
            return True
        except ValidationError:
            return False

    schema = block(policy.block, yaml.safe_load((REPO / SCHEMA_FILE).read_text()))
    by_schema = jsonschema.Draft202012Validator(schema).is_valid({key: value})
    assert (by_config(), by_model(), by_schema) == (accepted,) * 3


def test_the_schema_blocks_state_exactly_the_declared_ranges():
    """The reverse direction: every range keyword of a policy block (on a key or on its
    items) is one its config class declares, and every declared one is there."""
    checked = set()
    for policy in POLICIES.values():
        if policy.block not in BLOCK_MODELS:
            continue
        props = block(policy.block)["properties"]
        declared_keys = _block_declarations(policy.config)
        assert set(props) == set(declared_keys) - {"seed"}, policy.block
        for key, (hint, _) in declared_keys.items():
            want = {(where, _KEYWORDS[type(b)], _limit(b)) for where, b, _ in _declared_bounds(hint)}
            prop = props.get(key, {})
            branches = [prop, *prop.get("anyOf", [])]  # an optional key's bounds sit on its non-null branch
            got = {
                (where, kw, node[kw])
                for b in branches
                for where, node in (("value", b), ("item", b.get("items", {})))
                for kw in _KEYWORDS.values()
                if kw in node
            }
            assert got == want, (policy.block, key)
            checked |= {(policy.block, key)} if want else set()
    assert {("sagc", "tau"), ("sagc", "candidates"), ("sagc_prompt", "quantile")} <= checked
