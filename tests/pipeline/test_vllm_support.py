"""One vLLM check for training and evaluation: installed, and inside TRL's supported window.

A vLLM of a given version is faked by a bare package plus a ``dist-info`` that carries only
that version: the check reads the version and nothing else of vLLM.
"""

import inspect
import json
import re
from pathlib import Path

import pytest
import yaml

from sagc import vllm_support
from sagc.evaluate.runner import EvalConfig, run_evaluation
from sagc.pipeline.cells import train_cell_config
from sagc.pipeline.config import load_config
from sagc.pipeline.grid import Grid
from sagc.train.config import TrainConfig
from sagc.vllm_support import TRL_VLLM_MAX, TRL_VLLM_MIN, VLLMUnavailableError, check_vllm_version, require_vllm

REPO = Path(__file__).resolve().parents[2]
WINDOW = f"{TRL_VLLM_MIN} to {TRL_VLLM_MAX}"


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """Install a stand-in ``vllm`` distribution of the given version on sys.path."""

    def install(version: str) -> None:
        root = tmp_path / f"site-{version}"
        (root / "vllm").mkdir(parents=True)
        (root / "vllm" / "__init__.py").write_text("")
        info = root / f"vllm-{version}.dist-info"
        info.mkdir()
        info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        monkeypatch.syspath_prepend(str(root))

    return install


def paper_cell() -> dict:
    config = load_config(REPO / "configs" / "paper.yaml")
    grid = Grid.from_config(config)
    cell = train_cell_config(config, grid, next(iter(grid.cells())))
    assert cell["device"]["use_vllm"], "the paper config trains with vLLM rollouts"
    return cell


def test_window_is_the_one_the_installed_trl_checks():
    import importlib

    source = inspect.getsource(importlib.import_module("trl.import_utils").is_vllm_available)
    found = re.search(r'Version\("([\d.]+)"\)\s*<=\s*_vllm_base_version\s*<=\s*Version\("([\d.]+)"\)', source)
    assert found, "TRL's vLLM version check changed shape: re-read it and update sagc.vllm_support"
    assert (TRL_VLLM_MIN, TRL_VLLM_MAX) == found.groups()


@pytest.mark.parametrize("version", ["0.22.0", "0.30.0", "0.30.0+cu129", "0.31.0", "0.31.0.post1"])
def test_versions_inside_the_window_pass(version):
    check_vllm_version(version)


@pytest.mark.parametrize("version", ["0.21.9", "0.31.1", "0.32.0", "0.33.0rc1", "1.0.0"])
def test_versions_outside_the_window_are_refused_with_the_range(version):
    with pytest.raises(VLLMUnavailableError) as err:
        check_vllm_version(version, "device.use_vllm=true")
    assert f"vllm {version} is installed" in str(err.value) and WINDOW in str(err.value)


def test_an_unreadable_version_is_named():
    with pytest.raises(VLLMUnavailableError, match="cannot read the vllm version 'not-a-version'"):
        check_vllm_version("not-a-version")


def test_the_workflow_check_refuses_only_an_installed_unsupported_vllm(fake_vllm):
    if not vllm_support.vllm_installed():
        vllm_support.check_installed_vllm("configs/paper.yaml uses vLLM")  # a laptop's dry run
    fake_vllm("0.32.0")
    with pytest.raises(
        VLLMUnavailableError, match=f"configs/paper.yaml uses vLLM but vllm 0.32.0 is installed.*{WINDOW}"
    ):
        vllm_support.check_installed_vllm("configs/paper.yaml uses vLLM")


def test_training_and_evaluation_share_the_one_check():
    import sagc.evaluate.backends
    import sagc.train.config

    assert sagc.train.config.require_vllm is sagc.evaluate.backends.require_vllm is require_vllm


def test_a_paper_cell_refuses_an_unsupported_vllm_before_loading_anything(fake_vllm, tmp_path, capsys):
    from sagc.train.run import main

    cell = paper_cell()
    fake_vllm("0.33.0")
    with pytest.raises(ValueError) as err:
        TrainConfig.from_dict(cell)
    assert "device.use_vllm=true but vllm 0.33.0 is installed" in str(err.value)
    assert WINDOW in str(err.value)

    # The job itself: exit code 2 and the message, nothing trained or written.
    path = tmp_path / "cell.json"
    path.write_text(json.dumps({**cell, "output_dir": str(tmp_path / "out")}))
    assert main(["--config", str(path)]) == 2
    assert WINDOW in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_paper_cell_accepts_a_supported_vllm(fake_vllm):
    fake_vllm("0.30.0+cu129")
    assert TrainConfig.from_dict(paper_cell()).device.use_vllm


def test_a_paper_cell_without_vllm_says_how_to_install_it():
    if vllm_support.vllm_installed():
        pytest.skip("vllm is installed here")
    with pytest.raises(ValueError, match=r"not installed.*requirements/paper-py3XX\.txt.*device\.use_vllm=false"):
        TrainConfig.from_dict(paper_cell())


def test_evaluation_refuses_an_unsupported_vllm_before_writing_anything(fake_vllm, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "data").mkdir()
    fake_vllm("0.21.0")
    cfg = EvalConfig(
        model=tmp_path / "model",
        tasks=["aime24_boxed"],
        data_dir=tmp_path / "data",
        out=tmp_path / "out",
        backend="vllm",
    )
    with pytest.raises(RuntimeError, match=re.escape(WINDOW)):
        run_evaluation(cfg)
    assert not (tmp_path / "out").exists()


def test_the_pinned_vllm_lies_inside_the_window():
    import tomllib
    from packaging.requirements import Requirement

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    (vllm,) = [Requirement(r) for r in extra if Requirement(r).name == "vllm"]
    (pinned,) = [s.version for s in vllm.specifier if s.operator == "=="]
    check_vllm_version(pinned)
    for env in ("train", "eval"):
        pip = next(
            d["pip"]
            for d in yaml.safe_load((REPO / "envs" / f"{env}.yaml").read_text())["dependencies"]
            if isinstance(d, dict)
        )
        assert f"vllm=={pinned}" in pip, f"envs/{env}.yaml must carry the paper stack's vllm"


def test_the_config_check_refuses_a_vllm_outside_the_window_before_any_job(fake_vllm):
    fake_vllm("0.33.0")
    with pytest.raises(ValueError, match=rf"paper.yaml uses vLLM.*{re.escape(WINDOW)}"):
        load_config(REPO / "configs" / "paper.yaml")
    load_config(REPO / "configs" / "default.yaml")  # no vLLM in the tiny world: not checked
