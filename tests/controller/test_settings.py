"""The controllers' config classes: each setting declared once (type, range, description),
the public API users build their own training on unchanged, the defaults the docs state."""

import ast
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from pydantic.fields import FieldInfo

from sagc import SAGCConfig, SAGCController
from sagc.prompt_aware.config import PromptSAGCConfig
from sagc.prompt_aware.predictor import PredictorConfig
from sagc.settings import declared, is_settings

REPO = Path(__file__).resolve().parents[2]
CLASSES = (SAGCConfig, PredictorConfig, PromptSAGCConfig)


def test_the_public_api_is_a_frozen_hashable_dataclass():
    cfg = SAGCConfig(candidates=[4, 8], tau=3, prior=[2, 1.5], seed=5)
    assert cfg.candidates == (4, 8) and cfg.prior == (2, 1.5)  # lists become tuples
    assert cfg.tau == 3 and type(cfg.tau) is int  # a number is kept as given (the cell's JSON)
    assert hash(cfg) == hash(SAGCConfig.from_dict(cfg.to_dict())) and cfg == SAGCConfig.from_dict(cfg.to_dict())
    assert cfg.to_dict()["candidates"] == [4, 8] and cfg.to_dict()["prior"] == [2, 1.5]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.tau = 2.0
    assert dataclasses.replace(cfg, seed=6).seed == 6
    with pytest.raises(ValueError, match="SAGCConfig.delta"):
        dataclasses.replace(cfg, delta=1.5)  # replace checks like construction
    assert SAGCConfig.tau == 2.0 and SAGCConfig.selection == "lagrangian"  # class attributes: the defaults
    assert SAGCConfig(candidates=np.arange(2, 6)).candidates == (2, 3, 4, 5)
    assert SAGCController(SAGCConfig(candidates=[16, 4, 8], initial=16)).group_size == 16
    assert SAGCConfig(candidates=(4, 8, 16)).sorted_candidates == (4, 8, 16)


def test_bad_values_raise_one_value_error_naming_the_key():
    with pytest.raises(ValueError, match=r"^SAGCConfig.tau must be > 1(\.0)?, got 0.5$"):
        SAGCConfig(tau=0.5)
    with pytest.raises(ValueError, match=r"^SAGCConfig.candidates\[0\] must be >= 2, got 1$"):
        SAGCConfig(candidates=[1, 8])
    with pytest.raises(ValueError, match="SAGCConfig.candidates must be a list, got 48"):
        SAGCConfig(candidates=48)  # not a TypeError
    with pytest.raises(ValueError, match=r"^sagc_prompt.quantile must be >= 0.5, got 0.2$"):
        PredictorConfig(quantile=0.2)
    with pytest.raises(ValueError, match=r"^sagc_prompt.sagc must be a SAGCConfig, got \{\}$"):
        PromptSAGCConfig(sagc={})
    # checks across fields stay in the class, after the declared ones
    with pytest.raises(ValueError, match=r"SAGCConfig.initial=5 is not one of the candidates \[4, 8, 16\]"):
        SAGCConfig(initial=5)
    with pytest.raises(ValueError, match=r"SAGCConfig.candidates has duplicates: \[4, 8, 8\]"):
        SAGCConfig(candidates=[4, 8, 8])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_setting_is_declared_with_a_one_line_description(cls):
    for key, hint in declared(cls).items():
        if is_settings(hint):
            continue
        infos = [m for m in hint.__metadata__ if isinstance(m, FieldInfo)]
        descriptions = [i.description for i in infos if i.description]
        assert len(descriptions) == 1 and "\n" not in descriptions[0], (cls.__name__, key)


def test_the_controller_page_states_the_declared_defaults():
    doc = (REPO / "docs" / "controller.md").read_text()
    section = doc[doc.index("Defaults (the paper leaves") : doc.index("Two options go beyond the paper; both")]
    stated = {k: ast.literal_eval(v) for k, v in re.findall(r"^- `(\w+) = (.+?)`", section, re.M)}
    assert len(stated) >= 8, stated
    defaults = SAGCConfig()
    for key, value in stated.items():
        assert getattr(defaults, key) == value, key
