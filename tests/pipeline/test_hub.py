"""The paper world's staging: local sources work offline, missing ones say what to do, and
the staging rules really reach the hub (every offline switch cleared)."""

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sagc.evaluate.stage import StageError, stage_benchmark
from sagc.evaluate.taskcfg import load_task_config
from sagc.hub_switches import HUB_OFFLINE_FLAGS
from sagc.pipeline.hub import (
    NotStagedError,
    offline_switches,
    render_prompt,
    resolve_model,
    stage_train_data,
)

REPO = Path(__file__).resolve().parents[2]


def test_training_prompts_use_the_evaluation_prompt(tmp_path):
    src = tmp_path / "problems.jsonl"
    rows = [{"problem": "What is 2+3?", "answer": "5"}, {"problem": "No answer", "answer": ""}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "train.jsonl"
    assert stage_train_data(None, "train", out, source=str(src)) == 1  # the unanswered row is dropped
    rec = json.loads(out.read_text())
    assert rec["answer"] == "5"
    assert "What is 2+3?" in rec["prompt"] and "\\boxed{}" in rec["prompt"]
    # the very template lm-eval renders for AIME
    template = load_task_config("aime24_boxed")["doc_to_text"]
    assert rec["prompt"] == render_prompt("What is 2+3?", template)


def test_missing_local_source_and_missing_columns(tmp_path):
    with pytest.raises(NotStagedError, match="hub.train_source"):
        stage_train_data(None, "train", tmp_path / "t.jsonl", source=str(tmp_path / "nope.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    with pytest.raises(ValueError, match="lacks column.*problem"):
        stage_train_data(None, "train", tmp_path / "t.jsonl", source=str(bad))


def test_offline_hub_dataset_says_how_to_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(NotStagedError, match="not in the local cache.*Stage it once with network") as err:
        stage_train_data("agentica-org/DeepScaleR-Preview-Dataset", "train", tmp_path / "t.jsonl")
    assert "switched off in this environment by HF_DATASETS_OFFLINE=1 and HF_HUB_OFFLINE=1" in str(err.value)
    assert "unreachable" not in str(err.value)


def _probe(prefix: str, env: dict) -> dict:
    """What the Hugging Face libraries make of the environment a command prefix leaves."""
    code = (
        "import json, huggingface_hub.constants as c, datasets.config as d; "
        "from sagc.pipeline.hub import offline_switches; "
        "print(json.dumps({'hub': c.HF_HUB_OFFLINE, 'datasets': d.HF_HUB_OFFLINE, "
        "'switches': offline_switches()}))"
    )
    cmd = f"{prefix} {shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    proc = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _job_env() -> dict:
    """Every job's environment: all offline switches on (sagc.pipeline.env)."""
    return {**os.environ, **{flag: "1" for flag in HUB_OFFLINE_FLAGS}}


def test_the_staging_rules_run_with_the_hub_switched_on(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "results/paper/data/train.jsonl",
            "results/paper/data/benchmarks/staged.json",
            "-n",
            "-p",
            "--directory",
            str(tmp_path),
            "--configfile",
            str(REPO / "configs" / "paper.yaml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    commands = dict(re.findall(r"^rule (\w+):.*?^Shell command: (.*?)$", proc.stdout + proc.stderr, re.M | re.S))
    assert set(commands) == {"stage_train_data", "stage_benchmarks"}
    env = _job_env()
    assert _probe("", env)["hub"] is True  # the probe sees the jobs' offline switches
    for rule, command in commands.items():
        prefix = command.split(" python -m ")[0]
        seen = _probe(prefix, env)
        assert seen == {"hub": False, "datasets": False, "switches": []}, f"rule {rule}: {prefix!r} leaves {seen}"


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"TRANSFORMERS_OFFLINE": "1"},
        {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "1"},
        {"HF_DATASETS_OFFLINE": "1"},
        {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "0"},
    ],
    ids=lambda e: ",".join(f"{k}={v}" for k, v in e.items()) or "none",
)
def test_offline_switches_read_the_environment_as_the_libraries_do(env):
    clean = {k: v for k, v in os.environ.items() if k not in HUB_OFFLINE_FLAGS}
    seen = _probe("", {**clean, **env})
    assert bool(seen["switches"]) == (seen["hub"] or seen["datasets"]), seen
    assert seen["switches"] == offline_switches(env)


def test_transformers_offline_alone_is_named_not_called_unreachable(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in HUB_OFFLINE_FLAGS}
    env.update(TRANSFORMERS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagc.pipeline.hub",
            "train-data",
            "--dataset",
            "org/not-cached",
            "--out",
            str(tmp_path / "train.jsonl"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "TRANSFORMERS_OFFLINE=1 (huggingface_hub reads it as HF_HUB_OFFLINE)" in proc.stderr
    assert (
        "env -u HF_HUB_OFFLINE -u HF_DATASETS_OFFLINE -u TRANSFORMERS_OFFLINE python -m sagc.pipeline.hub"
        in proc.stderr
    )
    assert "unreachable" not in proc.stderr
    assert not (tmp_path / "train.jsonl").exists()


def test_benchmark_staging_names_the_switch_that_blocks_it(tmp_path, monkeypatch):
    for flag in HUB_OFFLINE_FLAGS:
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    with pytest.raises(StageError) as err:
        stage_benchmark("aime24", tmp_path / "cache")
    assert "switched off in this environment by TRANSFORMERS_OFFLINE=1" in str(err.value)
    assert "unreachable" not in str(err.value)


def test_uncached_model_names_the_model_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(
        NotStagedError, match="model Qwen/Qwen2.5-3B .*not in the local cache; run with network.*HF_HOME"
    ):
        resolve_model("Qwen/Qwen2.5-3B")


def _hf_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The installed huggingface_hub's own ``hf`` console script, by its entry point."""
    (script,) = [
        ep
        for ep in importlib.metadata.distribution("huggingface_hub").entry_points
        if ep.group == "console_scripts" and ep.name == "hf"
    ]
    module, func = script.value.split(":")
    code = f"import sys; from {module} import {func} as main; sys.argv = ['hf', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_download_command_in_the_message_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(NotStagedError) as err:
        resolve_model("Qwen/Qwen2.5-3B", revision="main")
    (command,) = re.findall(r"`(hf [^`]+)`", str(err.value))
    words = shlex.split(command)
    assert words[:3] == ["hf", "download", "Qwen/Qwen2.5-3B"]
    options = [w for w in words if w.startswith("--")]
    helped = _hf_cli([words[1], "--help"], cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    for option in options:
        assert option in helped.stdout, f"`hf download` has no {option}"


def test_the_cluster_page_downloads_models_with_the_installed_cli(tmp_path):
    page = (REPO / "docs" / "cluster.md").read_text()
    assert "huggingface-cli" not in page
    commands = re.findall(r"^\s*(hf download [^\n&#]+)", page, re.M)
    assert commands, "docs/cluster.md downloads the models with `hf download`"
    helped = _hf_cli(["download", "--help"], cwd=tmp_path).stdout
    for command in commands:
        for option in [w for w in shlex.split(command) if w.startswith("--")]:
            assert option.split("=")[0] in helped, f"docs/cluster.md: `hf download` has no {option}"
