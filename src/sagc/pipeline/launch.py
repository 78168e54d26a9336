"""How a training cell is started (one process, or ``accelerate launch`` on one node or several),
the train rule's resources and the launch checks; docs/cluster.md, "How a cell is launched"."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagc import warm
from sagc.pipeline.schema import PipelineConfig
from sagc.ports import free_port
from sagc.train.config import DeviceSection, LaunchSection

#: The accelerate config files, one per strategy, relative to the repository.
ACCELERATE_CONFIGS = Path("configs/accelerate")
#: The strategies that need DeepSpeed.
DEEPSPEED_STRATEGIES = ("zero2", "zero3")
#: The main process's port: set by the job (``job_environment``), read by the command.
PORT_ENV = "SAGC_LAUNCH_PORT"
PORT_BASE, PORT_SPAN = 20000, 10000  # below Linux's ephemeral ports (32768 and up)
#: Seconds the elastic agent waits for the trainers to checkpoint after a signal (torch's: 30 s).
SHUTDOWN_GRACE_S = 900
#: The torch whose elastic agent reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT (older ones kill after 30 s).
ELASTIC_SHUTDOWN_TORCH = (2, 12)
#: The pipeline's launch keys that say what a stop on a signal needs (not the trainer's).
STOP_KEYS = ("stop_step_s", "stop_save_s")
TRAIN_MODULE = "sagc.train"
#: The cell's resolved config, written into its output folder by the train job.
CELL_FILE = "cell.json"


def cell_launch(cell: Mapping[str, Any]):
    """The cell's ``LaunchSection`` (all defaults when it has none: one process)."""
    return LaunchSection.from_dict(cell.get("launch"))


def cell_uses_cpu(cell: Mapping[str, Any]) -> bool:
    """Whether a cell's processes run on CPU (its ``device.use_cpu``, or the trainer's default)."""
    return bool((cell.get("device") or {}).get("use_cpu", DeviceSection.default("use_cpu")))


def accelerate_config(repo: str | os.PathLike, strategy: str) -> str:
    """The strategy's accelerate config file, relative to the working directory when under it."""
    path = Path(repo).resolve() / ACCELERATE_CONFIGS / f"{strategy}.yaml"
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def command(
    cell: Mapping[str, Any],
    cell_file: str,
    *,
    repo: str | os.PathLike,
    cpus_per_node: int = 1,
    module: str = TRAIN_MODULE,
) -> str:
    """The shell command that trains ``cell`` from ``cell_file``; its shell expands the port and SLURM
    variables (``job_environment``); ``cpus_per_node``: the train rule's ``cpus_per_task``."""
    launch = cell_launch(cell)
    target = shlex.join(["-m", module, "--config", cell_file])
    if launch.processes == 1:
        return f"python {target}"
    accelerate = shlex.join(["accelerate", "launch", "--config_file", accelerate_config(repo, launch.strategy)])
    accelerate += f" --num_processes {launch.processes} --num_machines {launch.nodes}"
    port = f"--main_process_port ${PORT_ENV}"
    if launch.nodes == 1:
        return f"{accelerate} {port} {target}"
    # One `accelerate launch` per node, rank 0 on the job's first host. --overlap: the job's own
    # step (which runs this command) holds the first node's CPUs and GPUs.
    first_host = '"$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"'
    node = f"exec {accelerate} --machine_rank $SLURM_NODEID --main_process_ip {first_host} {port} {target}"
    srun = f"srun --nodes {launch.nodes} --ntasks-per-node 1 --cpus-per-task {cpus_per_node} --overlap"
    return f"{srun} --kill-on-bad-exit 1 {shlex.join(['bash', '-c', node])}"


def job_environment(cell: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the main process's port, the elastic agent's signals
    and grace, and for several nodes the node list (the SLURM executor's job step drops it)."""
    env = dict(os.environ if env is None else env)
    launch = cell_launch(cell)
    job = env.get("SLURM_JOB_ID")
    if launch.nodes > 1:
        check_slurm(launch.nodes, env)
        if not env.get("SLURM_JOB_NODELIST"):
            env["SLURM_JOB_NODELIST"] = _job_nodelist(job)
    if not env.get(PORT_ENV):
        env[PORT_ENV] = str(PORT_BASE + int(job) % PORT_SPAN if job and job.isdigit() else free_port())
    # torch's elastic agent (under accelerate launch) passes these on to the trainers (SIGUSR1:
    # SLURM's warning) and waits this long for them to checkpoint
    env.setdefault("PET_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1")
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_GRACE_S))
    return env


def check_slurm(nodes: int, env: Mapping[str, str]) -> None:
    """``ValueError`` when a cell needs several nodes and ``env`` is outside a SLURM allocation."""
    if nodes > 1 and not env.get("SLURM_JOB_ID"):
        raise ValueError(
            f"launch.nodes={nodes}: a cell on several nodes runs inside a SLURM allocation (SLURM_JOB_ID is "
            "not set here); run the pipeline with --profile profiles/slurm (or inside salloc), or set "
            "launch.nodes to 1 to train on this machine"
        )


def check_local_run(config: PipelineConfig) -> None:
    """Before a local run's first job: ``check_slurm`` for its cells."""
    check_slurm(config.launch.nodes, os.environ)


def _job_nodelist(job: str) -> str:
    out = subprocess.run(
        ["squeue", "--noheader", "--jobs", job, "--format", "%N"], capture_output=True, text=True, check=False
    )
    nodes = out.stdout.strip()
    if out.returncode or not nodes:
        raise ValueError(f"cannot find the nodes of SLURM job {job} (squeue: {out.stderr.strip() or 'no output'})")
    return nodes


def pipeline_launch(config: PipelineConfig, model: str) -> dict[str, Any]:
    """The ``launch`` section of ``model``'s cells: the stated launch keys and the model's strategy."""
    out = {k: v for k, v in config.stated("launch").items() if k not in STOP_KEYS}
    strategy = config.models[model].strategy
    if strategy is not None:
        out["strategy"] = strategy
    return out


def stop_warning_s(config: PipelineConfig) -> int:
    """Seconds of SLURM's warning before a train job's time limit: a step and a checkpoint save."""
    return config.launch.stop_step_s + config.launch.stop_save_s


def threads(config: PipelineConfig) -> int:
    """Cores of a train job on one node: its processes x ``train.torch_threads``."""
    return config.launch.processes_per_node * (config.train.torch_threads or 1)


def rule_resources(config: PipelineConfig, base: Mapping[str, Any]) -> dict[str, Any]:
    """The train rule's resources: ``base`` (``resources.train``) and what the launch section implies:
    its nodes (always: ``--gpus=N`` alone may spread), one GPU per process, SLURM's early warning."""
    res = dict(base)
    launch = config.launch
    res["nodes"] = launch.nodes
    res["slurm_extra"] = " ".join(filter(None, [res.get("slurm_extra"), f"--signal=USR1@{stop_warning_s(config)}"]))
    res.setdefault("cpus_per_task", threads(config))
    if config.device.use_cpu:
        if launch.nodes > 1:  # the executor sets --ntasks=1 for a job without GPUs otherwise
            res["tasks"] = launch.nodes
        return res
    # the executor adds --ntasks-per-gpu=1 by default (plugin 2.6.1): N tasks, not one per node
    res["tasks_per_gpu"] = 0
    if launch.nodes == 1:
        res["gpu"] = launch.processes_per_node  # sbatch --gpus: the job's total
    else:  # sbatch --gres, per node
        model = res.pop("gpu_model", None)
        res["gres"] = ":".join(["gpu", *([model] if model else []), str(launch.processes_per_node)])
    return res


class PreemptionWarning(UserWarning):
    """A stop on SLURM's warning could end before the checkpoint is complete."""


def stop_problems(config: PipelineConfig, torch_version: str | None = None) -> list[str]:
    """Why a train job stopped by SLURM's warning might not leave a complete checkpoint, one line each."""
    warning = stop_warning_s(config)
    need = f"launch.stop_step_s + launch.stop_save_s = {warning} s"
    problems = []
    train_resources = config.resources.get("train")
    runtime = train_resources.runtime if train_resources is not None else None
    if runtime is not None and warning >= runtime * 60:
        problems.append(
            f"{need} is not less than the train job's time limit (resources.train.runtime = {runtime} "
            "min): SLURM's warning would come at the start; raise the runtime"
        )
    if config.launch.processes == 1:
        return problems
    if warning > SHUTDOWN_GRACE_S:
        problems.append(
            f"{need} exceeds the {SHUTDOWN_GRACE_S} s the launcher's elastic agent waits for the "
            "trainers after passing a signal on (TORCH_ELASTIC_SHUTDOWN_TIMEOUT): it would kill them "
            "before the checkpoint is complete"
        )
    version = torch_version or _installed_torch()
    if version and tuple(int(p) for p in re.findall(r"\d+", version)[:2]) < ELASTIC_SHUTDOWN_TORCH:
        problems.append(
            f"torch {version}: a cell of several processes (launch) runs under accelerate launch, whose elastic "
            f"agent reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT only from torch "
            f"{'.'.join(map(str, ELASTIC_SHUTDOWN_TORCH))} on; this one kills the trainers 30 s after SLURM's "
            "warning, mid-step or mid-save, so a stopped job resumes from an older checkpoint: install the "
            "pinned torch (requirements/paper-py312.txt)"
        )
    return problems


def _installed_torch() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def deepspeed_installed() -> bool:
    return importlib.util.find_spec("deepspeed") is not None


def config_problems(config: PipelineConfig) -> list[str]:
    """What a config's launch settings ask for that no job could run, one line each naming the key."""
    problems = []
    if getattr(config.resources.get("train"), "gpu", None) is not None:
        problems.append(
            "config key 'resources.train.gpu': a training cell takes one GPU per process, so its "
            "GPUs follow from launch.processes_per_node (per node) and launch.nodes; set those "
            "instead (the train rule asks SLURM for them)"
        )
    # what a strategy needs of the cell is TrainConfig's check; here: the environment
    for model, spec in config.models.items():
        strategy = spec.strategy
        if strategy in DEEPSPEED_STRATEGIES and not deepspeed_installed():
            problems.append(
                f"config key 'models.{model}.strategy': {strategy} is DeepSpeed ZeRO, and DeepSpeed is "
                "not installed in this environment: pip install deepspeed (where the jobs run), or "
                "choose ddp or fsdp2"
            )
    return problems


def run(
    cell: Mapping[str, Any], cell_file: str, *, output: str, repo: str | os.PathLike, cpus_per_node: int = 1
) -> int:
    """Train ``cell`` (written to ``cell_file``), its output appended to ``output``; the exit status."""
    if cell_launch(cell).processes == 1:
        return warm.run([TRAIN_MODULE, "--config", cell_file], output=output)
    env = job_environment(cell)
    cmd = command(cell, cell_file, repo=repo, cpus_per_node=cpus_per_node)
    # this interpreter's environment first: its `accelerate`, whatever the job's PATH
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    with open(output, "ab") as fh:
        fh.write(f"launch: {cmd}\n({PORT_ENV}={env[PORT_ENV]})\n".encode())
        fh.flush()
        return warm.run_forwarding(["bash", "-c", f"exec {cmd}"], env=env, stdout=fh, stderr=fh)
