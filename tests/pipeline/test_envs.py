"""The rules' conda environments pin the same versions as pyproject.toml."""

from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def pyproject_requirements():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    reqs = [Requirement(r) for r in data["project"]["dependencies"]]
    for extra in data["project"]["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return {r.name.lower().replace("_", "-"): r for r in reqs}


def env_requirements(path):
    env = yaml.safe_load(path.read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return [Requirement(r) for r in pip]


ENVS = sorted((REPO / "envs").glob("*.yaml"))


def test_there_are_envs_for_train_eval_and_analysis():
    assert {p.stem for p in ENVS} >= {"train", "eval", "analysis"}


@pytest.mark.parametrize("path", ENVS, ids=lambda p: p.name)
def test_env_pins_match_pyproject(path):
    project = pyproject_requirements()
    for req in env_requirements(path):
        name = req.name.lower().replace("_", "-")
        assert name in project, f"{path.name}: {req.name} is not a dependency in pyproject.toml"
        assert req.specifier == project[name].specifier, f"{path.name}: {req} but pyproject.toml says {project[name]}"


def test_every_rule_env_exists():
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        for line in smk.read_text().splitlines():
            if line.strip().startswith('"../../envs/'):
                rel = line.strip().strip('",')
                assert (smk.parent / rel).resolve().exists(), f"{smk.name}: {rel} missing"
