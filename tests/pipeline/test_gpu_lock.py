"""The paper stack's committed locks agree with pyproject.toml (offline; CI's
`python .ci/gpu_lock.py check` also re-resolves them against the index)."""

import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from sagc.vllm_support import check_vllm_version

REPO = Path(__file__).resolve().parents[2]
LOCKS = [REPO / "requirements" / f"paper-py{v}.txt" for v in ("311", "312")]


def locked(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+)$", line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise AssertionError(f"{path.name}: not a plain pin: {line!r}")
    return pins


def paper_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["gpu"]]


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_the_lock_pins_every_paper_requirement_inside_its_range(lock):
    pins = locked(lock)
    for req in paper_requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{lock.name} lacks {req.name}: run `python .ci/gpu_lock.py update`"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{lock.name} pins {name}=={pins[name]}, pyproject.toml says {req}: run `python .ci/gpu_lock.py update`"
        )


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_the_lock_is_a_cuda_stack_with_a_supported_vllm(lock):
    pins = locked(lock)
    check_vllm_version(pins["vllm"])
    assert any(name.startswith("nvidia-cuda-runtime") for name in pins), "CUDA wheels for the GPU nodes"
    # The submit host needs the SLURM executor plugin in the same environment.
    assert "snakemake-executor-plugin-slurm" in pins


def test_the_cluster_page_installs_from_the_committed_locks():
    section = (REPO / "docs" / "cluster.md").read_text()
    named = set(re.findall(r"requirements/paper-py\d+\.txt", section))
    assert named == {f"requirements/{p.name}" for p in LOCKS}
    assert "pip install -r requirements/paper-py312.txt" in section
