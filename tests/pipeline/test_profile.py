"""The SLURM profile: the cluster's names are placeholders set in one place each, and every
paper job gets an account and the partition that fits it (GPU jobs the GPU partition)."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
PLACEHOLDER = re.compile(r"<YOUR_[A-Z_]+>")


def _yaml_text() -> str:
    """The profile without its comments."""
    return "\n".join(line.split("#", 1)[0] for line in PROFILE.read_text().splitlines())


def test_each_placeholder_is_set_in_one_place_and_documented():
    text = _yaml_text()
    found = PLACEHOLDER.findall(text)
    assert found, "the profile names the cluster's account and partitions as placeholders"
    for name in set(found):
        assert found.count(name) == 1, f"{name} is written {found.count(name)} times: use a YAML alias"
    header = PROFILE.read_text().split("executor:")[0]
    assert set(PLACEHOLDER.findall(header)) == set(found), "the header lists every placeholder"
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"


def test_the_readme_names_the_same_placeholders():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## The paper grid on a cluster")[1].split("\n## ")[0]
    assert set(PLACEHOLDER.findall(section)) == set(PLACEHOLDER.findall(_yaml_text()))


def test_paper_jobs_get_an_account_and_the_right_partition(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--profile", str(PROFILE.parent),
         "--configfile", str(REPO / "configs" / "paper.yaml"), "--directory", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    jobs = re.findall(r"^rule (\w+):.*?^\s+resources: (.*?)$", out, re.M | re.S)
    assert len(jobs) >= 40
    for rule, resources in jobs:
        if rule == "all":
            continue
        assert "slurm_account=<YOUR_ACCOUNT>" in resources, rule
        gpu = re.search(r"\bgpu=[1-9]\d*\b|\bgres=gpu", resources) is not None
        partition = "<YOUR_GPU_PARTITION>" if gpu else "<YOUR_CPU_PARTITION>"
        assert f"slurm_partition={partition}" in resources, f"{rule}: {resources}"
