"""The SLURM profile: the cluster's names are placeholders set in one place each; every job
gets an account and the partition that fits what it asks for (a job that asks for GPUs the
GPU partition, every other job the CPU one, whatever the world), and what each rule asks for
is its own, small need unless the config raises it (configs/paper.yaml)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
PLACEHOLDER = re.compile(r"<YOUR_[A-Z_]+>")
GPU, CPU, ACCOUNT = "<YOUR_GPU_PARTITION>", "<YOUR_CPU_PARTITION>", "<YOUR_ACCOUNT>"
TINY_RULES = {"tiny_data", "tiny_tokenizer", "tiny_base_model", "tiny_stragglers"}


def _yaml_text() -> str:
    """The profile without its comments."""
    return "\n".join(line.split("#", 1)[0] for line in PROFILE.read_text().splitlines())


def _dry_run(tmp_path: Path, config: Path, *, profile: bool = True) -> list[tuple[str, dict[str, str]]]:
    """Every job of a dry run as (rule, its rendered resources)."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "--configfile", str(config), "--directory", str(tmp_path)]
    if profile:
        cmd += ["--profile", str(PROFILE.parent)]
    else:
        cmd += ["--cores", "2"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    jobs = []
    for rule, rendered in re.findall(r"^(?:local)?rule (\w+):.*?^\s+resources: (.*?)$", out, re.M | re.S):
        jobs.append((rule, dict(item.split("=", 1) for item in rendered.split(", "))))
    assert jobs, out[-4000:]
    return jobs


def _paper_variant(tmp_path: Path, name: str, **changes) -> Path:
    data = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    for key, value in changes.items():
        data[key] = {**(data.get(key) or {}), **value}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _asks_for_gpu(resources: dict[str, str]) -> bool:
    return int(resources.get("gpu", 0)) > 0 or resources.get("gres", "").startswith("gpu")


def test_each_placeholder_is_set_in_one_place_and_documented():
    text = _yaml_text()
    found = PLACEHOLDER.findall(text)
    assert set(found) == {ACCOUNT, GPU, CPU}, "the profile names the cluster's account and partitions"
    for name in set(found):
        assert found.count(name) == 1, f"{name} is written {found.count(name)} times: once is enough"
    header = PROFILE.read_text().split("executor:")[0]
    assert set(PLACEHOLDER.findall(header)) == set(found), "the header lists every placeholder"
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"


def test_the_cluster_page_names_the_same_placeholders():
    section = (REPO / "docs" / "cluster.md").read_text()
    assert set(PLACEHOLDER.findall(section)) == set(PLACEHOLDER.findall(_yaml_text()))


def test_the_profile_defaults_are_small_and_keep_the_logs():
    """A rule that states nothing gets a small job; the SLURM logs, which hold the training
    jobs' "trained <cell>" lines, survive a successful job."""
    profile = yaml.safe_load(PROFILE.read_text())
    defaults = profile["default-resources"]
    assert defaults["slurm_partition"] == CPU and defaults["slurm_gpu_partition"] == GPU
    assert defaults["mem_mb"] <= 2000 and defaults["runtime"] <= 30 and defaults["cpus_per_task"] == 1
    assert profile["slurm-keep-successful-logs"] is True
    # no partition per rule: a rule's partition depends on the config; no train slurm_extra:
    # the train rule derives its --signal from the config (launch.stop_step_s + stop_save_s)
    assert not profile.get("set-resources"), profile.get("set-resources")


def test_paper_jobs_get_an_account_and_the_partition_of_what_they_ask_for(tmp_path):
    jobs = [(rule, res) for rule, res in _dry_run(tmp_path, REPO / "configs" / "paper.yaml") if rule != "all"]
    rules = {rule for rule, _ in jobs}
    assert {
        "train",
        "evaluate_cell",
        "evaluate_base",
        "resolve_hub_model",
        "stage_train_data",
        "stage_benchmarks",
        "aggregate",
        "simulate",
    } <= rules
    assert len(jobs) >= 40
    for rule, res in jobs:
        assert res["slurm_account"] == ACCOUNT, rule
        gpu_rule = rule in {"train", "evaluate_cell", "evaluate_base"}
        assert _asks_for_gpu(res) == gpu_rule, f"{rule}: {res}"
        assert res["slurm_partition"] == (GPU if gpu_rule else CPU), f"{rule}: {res}"
        if not gpu_rule:  # staging, the model check, aggregation, the simulator: small
            assert int(res["mem_mb"]) <= 4000 and int(res["runtime"]) <= 60 and res["cpus_per_task"] == "1", rule
    train = [res for rule, res in jobs if rule == "train"]
    assert len(train) == 16
    for res in train:  # launch: 4 processes on one node, one GPU each; paper.yaml's resources
        assert (res["gpu"], res["nodes"], res["tasks_per_gpu"]) == ("4", "1", "0"), res
        assert (res["mem_mb"], res["runtime"], res["cpus_per_task"]) == ("256000", "2880", "32"), res
        assert res["slurm_extra"] == "--signal=USR1@600"
    for res in (res for rule, res in jobs if rule.startswith("evaluate_")):
        assert (res["gpu"], res["mem_mb"], res["runtime"], res["cpus_per_task"]) == ("1", "64000", "240", "8"), res


def test_cells_on_several_nodes_ask_per_node_and_a_rules_own_partition_wins(tmp_path):
    """gres=gpu:N (several nodes) is a GPU request too; a partition the config names for a
    rule is kept."""
    config = _paper_variant(
        tmp_path,
        "two-nodes",
        launch={"nodes": 2},
        resources={
            "evaluate": {"gpu": 1, "mem_mb": 64000, "runtime": 240, "cpus_per_task": 8, "slurm_partition": "inference"}
        },
    )
    jobs = _dry_run(tmp_path, config)
    train = [res for rule, res in jobs if rule == "train"]
    assert train and all((r["gres"], r["nodes"], r["slurm_partition"]) == ("gpu:4", "2", GPU) for r in train), train
    assert all("gpu" not in r for r in train), "gres per node, not --gpus in all"
    evaluate = [res for rule, res in jobs if rule.startswith("evaluate_")]
    assert evaluate and all(r["slurm_partition"] == "inference" for r in evaluate), evaluate


def test_tiny_world_jobs_are_small_and_run_on_the_cpu_partition(tmp_path):
    """The default grid (tiny world, CPU): no job asks for a GPU, so all of them, training and
    evaluation included, go to the CPU partition, each with its rule's small needs."""
    jobs = [(rule, res) for rule, res in _dry_run(tmp_path, REPO / "configs" / "default.yaml") if rule != "all"]
    assert TINY_RULES <= {rule for rule, _ in jobs}
    seeds = yaml.safe_load((REPO / "configs" / "default.yaml").read_text())["seeds"]
    assert len([rule for rule, _ in jobs if rule == "train"]) == 2 * 2 * 4 * len(seeds)
    for rule, res in jobs:
        assert res["slurm_partition"] == CPU and not _asks_for_gpu(res), f"{rule}: {res}"
        assert res["slurm_account"] == ACCOUNT, rule
        assert res["cpus_per_task"] == "1", f"{rule}: {res}"
        assert int(res["runtime"]) <= 30, f"{rule}: {res}"
        limit = 3000 if rule in TINY_RULES | {"train", "evaluate_cell", "evaluate_base"} else 2000
        assert 1000 <= int(res["mem_mb"]) <= limit, f"{rule}: {res}"


@pytest.mark.parametrize("config", ["paper", "default"])
def test_without_the_profile_every_rule_states_its_needs_and_gets_no_partition(tmp_path, config):
    """A local run (no profile, so no defaults but Snakemake's): every job still shows the time
    and CPUs its rule states, and no partition; the GPU jobs keep their GPUs."""
    jobs = [
        (rule, res)
        for rule, res in _dry_run(tmp_path, REPO / "configs" / f"{config}.yaml", profile=False)
        if rule != "all"
    ]
    for rule, res in jobs:
        assert "runtime" in res and "cpus_per_task" in res and "mem_mb" in res, f"{rule} states no needs: {res}"
        assert "slurm_partition" not in res, f"{rule}: {res}"
    train = [res for rule, res in jobs if rule == "train"]
    assert train and all(r.get("gpu") == ("4" if config == "paper" else None) for r in train), train[:1]
