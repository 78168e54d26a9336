"""The typed config building blocks: strict integers, numbers kept as given, one clear message."""

import json

import pytest

from sagc.aggregate.grid import parse_grid
from sagc.train.config import DeviceSection, TrainSection


@pytest.mark.parametrize("value", [1.0, True, "3"])
def test_integers_refuse_integral_floats_bools_and_strings(value):
    with pytest.raises(ValueError, match=rf"^train.steps must be a positive integer, got {value!r}$"):
        TrainSection.from_dict({"steps": value})


def test_numbers_keep_an_integer_as_written():
    """The cell's fingerprint is its JSON: ``139`` must not come back as ``139.0``."""
    device = DeviceSection.from_dict({"use_cpu": False, "gpu_memory_gib": 139})
    assert json.dumps(device.model_dump()["gpu_memory_gib"]) == "139"
    assert TrainSection.from_dict({"temperature": 0.7}).temperature == 0.7
    with pytest.raises(ValueError, match="train.temperature must be a finite number, got True"):
        TrainSection.from_dict({"temperature": True})
    with pytest.raises(ValueError, match="train.temperature must be a finite number, got inf"):
        TrainSection.from_dict({"temperature": float("inf")})


def test_every_problem_is_one_clause_naming_its_key():
    with pytest.raises(ValueError) as err:
        TrainSection.from_dict({"steps": 0, "top_p": 2, "stepz": 1})
    clauses = str(err.value).split("; ")
    assert clauses[:2] == ["train.steps must be a positive integer, got 0", "train.top_p must be <= 1.0, got 2"]
    assert clauses[2].startswith("unknown key(s) in train: train.stepz (allowed: [")
    assert "validation error" not in str(err.value) and "pydantic" not in str(err.value)


def test_a_bad_list_item_is_not_also_reported_as_a_short_list():
    grid = {
        "name": "x",
        "tables_dir": "t",
        "figures_dir": "f",
        "cells": [
            {
                "id": "a",
                "model": "m",
                "algorithm": "grpo",
                "sizing": "g4",
                "seed": True,
                "train_dir": "r",
                "eval_summary": "e",
            }
        ],
    }
    with pytest.raises(ValueError) as err:
        parse_grid(grid, source="grid.json")
    assert str(err.value) == "grid.json: cells[0].seed must be an integer, got True"
