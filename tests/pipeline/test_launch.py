"""A cell on several GPUs and nodes, the launch side: the config's launch block reaches every
cell, the command that trains it parses with accelerate's own launcher and starts real gloo
processes on this CPU, the dry runs show the command and the SLURM resources, and what no job
could run fails before any job, naming the cell and the key."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import yaml

from sagc.pipeline import launch
from sagc.pipeline.cells import train_cell_config
from sagc.pipeline.config import ConfigError, prepare
from sagc.pipeline.grid import Cell, Grid
from sagc.pipeline.schema import config_schema
from sagc.train.config import STRATEGIES, LaunchSection, TrainConfig

REPO = Path(__file__).resolve().parents[2]
PAPER_CELL = Cell("qwen2.5-3b", "grpo", "g16", 0)


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def raw(name: str, **launch_keys) -> dict:
    config = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    if launch_keys:
        config["launch"] = {**(config.get("launch") or {}), **launch_keys}
    return config


def cell_of(config: dict, cell: Cell = PAPER_CELL) -> dict:
    config = prepare(config, "configs/test.yaml")
    return train_cell_config(config, Grid.from_config(config), cell)


def accelerate_args(words: list[str]):
    """``accelerate launch`` argv parsed by accelerate's own parser (exits on a flag it lacks)."""
    from accelerate.commands.launch import launch_command_parser

    assert words[:2] == ["accelerate", "launch"], words
    return launch_command_parser().parse_args(words[2:])


# --- the command -----------------------------------------------------------------------------


def test_one_process_cells_keep_the_plain_command_and_their_params():
    config = raw("default")
    cell = cell_of(config, Cell("tiny-qwen2", "grpo", "sagc", 2))
    assert "launch" not in cell, "a config without a launch block must give the cells it always gave"
    assert launch.command(cell, "c.json", repo=REPO) == "python -m sagc.train --config c.json"
    res = launch.rule_resources(prepare(raw("default"), "x"), {"mem_mb": 3000})
    assert res["nodes"] == 1 and "gpu" not in res and "gres" not in res


def test_four_gpus_on_one_node():
    cell = cell_of(raw("paper", processes_per_node=4))
    words = shlex.split(launch.command(cell, "results/c/cell.json", repo=REPO))
    args = accelerate_args([w.replace(f"${launch.PORT_ENV}", "29999") for w in words])
    assert args.num_processes == 4 and args.num_machines == 1 and args.main_process_port == 29999
    assert args.module and args.training_script == "sagc.train"
    assert args.training_script_args == ["--config", "results/c/cell.json"]
    assert not args.cpu and args.machine_rank is None
    config_file = Path(args.config_file)
    assert config_file.is_file() and config_file.name == "ddp.yaml"


def test_two_nodes_of_four_gpus_under_slurm(tmp_path):
    config = raw("paper", processes_per_node=4, nodes=2)
    cell = cell_of(config)
    words = shlex.split(launch.command(cell, "results/c/cell.json", repo=REPO, cpus_per_node=32))
    at = words.index("bash")
    srun, (dash_c, node) = words[:at], words[at + 1 :]
    flags = dict(zip(srun[1::2], srun[2::2]))
    assert srun[0] == "srun" and flags["--nodes"] == "2" and flags["--ntasks-per-node"] == "1"
    assert flags["--cpus-per-task"] == "32" and "--overlap" in srun  # shares the job step's node
    assert dash_c == "-c" and node.startswith("exec accelerate launch ")  # the agent gets the signals
    # The node's shell expands it as each node does (rank 1 here): its words, printed instead
    # of run, with a stand-in `scontrol` that lists the job's hosts as `show hostnames` does.
    (tmp_path / "scontrol").write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "gpu007\\ngpu008\\n"\n')
    (tmp_path / "scontrol").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "SLURM_NODEID": "1",
        "SLURM_JOB_NODELIST": "gpu[007-008]",
        launch.PORT_ENV: "21234",
    }
    printed = subprocess.run(
        ["bash", "-c", node.replace("exec ", "exec printf '%s\\n' ", 1)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    args = accelerate_args(printed)
    assert args.num_processes == 8 and args.num_machines == 2 and args.machine_rank == 1
    assert args.main_process_ip == "gpu007" and args.main_process_port == 21234
    assert args.module and args.training_script == "sagc.train"
    assert args.training_script_args == ["--config", "results/c/cell.json"] and Path(args.config_file).is_file()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_has_its_accelerate_config(strategy):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import DistributedType

    path = REPO / launch.accelerate_config(REPO, strategy)
    loaded = load_config_from_file(str(path))
    expected = {
        "ddp": DistributedType.MULTI_GPU,
        "fsdp2": DistributedType.FSDP,
        "zero2": DistributedType.DEEPSPEED,
        "zero3": DistributedType.DEEPSPEED,
    }[strategy]
    assert loaded.distributed_type == expected
    keys = yaml.safe_load(path.read_text())
    # the command line gives these, per cell and per node
    assert not {"num_processes", "num_machines", "machine_rank", "main_process_ip", "main_process_port"} & set(keys)
    if strategy == "fsdp2":
        fsdp = keys["fsdp_config"]
        assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
        assert fsdp["fsdp_state_dict_type"] == "FULL_STATE_DICT"  # final/ must be a plain HF model
    if strategy in ("zero2", "zero3"):
        ds = keys["deepspeed_config"]
        assert ds["zero_stage"] == int(strategy[-1])
        assert "gradient_accumulation_steps" not in ds  # "auto": the cell's value
    if strategy == "zero3":
        assert keys["deepspeed_config"]["zero3_init_flag"] and keys["deepspeed_config"]["zero3_save_16bit_model"]


# --- the job environment ---------------------------------------------------------------------


def test_ports_differ_between_slurm_jobs_and_are_free_locally():
    cell = {"launch": {"processes_per_node": 2}}
    ports = {int(launch.job_environment(cell, {"SLURM_JOB_ID": str(j)})[launch.PORT_ENV]) for j in (4711, 4712)}
    assert len(ports) == 2 and all(launch.PORT_BASE <= p < launch.PORT_BASE + launch.PORT_SPAN for p in ports)
    local = int(launch.job_environment(cell, {})[launch.PORT_ENV])
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", local))  # free
    assert launch.job_environment(cell, {launch.PORT_ENV: "23000"})[launch.PORT_ENV] == "23000"


def test_several_nodes_outside_slurm_fail_naming_the_fix():
    cell = {"launch": {"nodes": 2, "processes_per_node": 4}, "device": {"use_cpu": False}}
    with pytest.raises(ValueError, match=r"launch.nodes=2: .*SLURM allocation.*--profile profiles/slurm"):
        launch.job_environment(cell, {})
    env = launch.job_environment(cell, {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu[1-2]"})
    assert env["SLURM_JOB_NODELIST"] == "gpu[1-2]"


def test_a_local_run_of_a_multi_node_config_fails_before_any_job(tmp_path):
    configfile = tmp_path / "ci2.yaml"
    configfile.write_text(yaml.safe_dump(raw("ci", nodes=2)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "1",
            "--configfile",
            str(configfile),
            "--directory",
            str(tmp_path / "run"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "launch.nodes=2: a cell on several nodes runs inside a SLURM allocation" in proc.stdout + proc.stderr
    assert not (tmp_path / "run" / "results").exists(), "no job may run"


# --- real processes on this CPU --------------------------------------------------------------

PROBE = textwrap.dedent("""
    import os, signal, sys, time
    from accelerate import PartialState
    state = PartialState(cpu=True)
    got = []
    signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
    rank = os.environ["RANK"]
    open(f"ready{rank}", "w").write(f"{state.num_processes} {state.backend} {state.distributed_type}")
    deadline = time.time() + 120
    while not got and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # the running step
    open(f"stopped{rank}", "w").write(str(got))
    sys.exit(75 if got else 1)
""")

DRIVER = textwrap.dedent("""
    import json, sys
    from sagc import warm
    from sagc.pipeline import launch
    cell = json.loads(sys.argv[1])
    env = launch.job_environment(cell)
    cmd = launch.command(cell, "cell.json", repo=sys.argv[2], module="probe")
    print(cmd, flush=True)
    sys.exit(warm.run_forwarding(["bash", "-c", "exec " + cmd], env=env))
""")


def wait_for(paths, proc, timeout=180):
    deadline = time.time() + timeout
    while not all(p.exists() for p in paths):
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the processes did not start"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_cpu_cell_of_two_processes_trains_over_gloo_and_stops_on_sigusr1(tmp_path):
    """The command the pipeline renders for a CPU cell of 2 processes starts 2 ranks that
    join one gloo group (no --cpu: accelerate's flag would start one); SIGUSR1 to the job
    reaches both through accelerate's agent, which waits for them to stop."""
    cell = cell_of(raw("default", processes_per_node=2), Cell("tiny-qwen2", "grpo", "sagc", 2))
    assert "--cpu" not in shlex.split(launch.command(cell, "c.json", repo=REPO))
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "driver.py").write_text(DRIVER)
    import json

    proc = subprocess.Popen(
        [sys.executable, "driver.py", json.dumps(cell), str(REPO)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for([tmp_path / "ready0", tmp_path / "ready1"], proc)
        for rank in (0, 1):
            assert (tmp_path / f"ready{rank}").read_text() == "2 gloo DistributedType.MULTI_CPU"
        proc.send_signal(signal.SIGUSR1)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    for rank in (0, 1):
        assert (tmp_path / f"stopped{rank}").read_text() == f"[{int(signal.SIGUSR1)}]"
    assert proc.returncode == 1, proc.stdout.read()  # the agent's status after its workers stopped


CHILD = textwrap.dedent("""
    import signal, sys, time
    got = []
    for sig in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(sig, lambda s, f: got.append(s))
    open("ready", "w").close()
    while not got:
        time.sleep(0.05)
    sys.exit(75)
""")


def _job(tmp_path, shell: str):
    (tmp_path / "child.py").write_text(CHILD)
    code = f"from sagc import warm; import sys; sys.exit(warm.run_forwarding(['bash', '-c', {shell!r}]))"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path)
    wait_for([tmp_path / "ready"], proc, timeout=60)
    return proc


def test_sigterm_is_forwarded_and_the_childs_status_returned(tmp_path):
    proc = _job(tmp_path, f"exec {sys.executable} child.py")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 75


def test_slurms_warning_to_every_process_of_the_step_leaves_the_launchers_alive(tmp_path):
    """SLURM sends --signal to every process of the job step: a shell between the job and
    the trainer (it does not handle SIGUSR1) must survive it while the trainer acts."""
    proc = _job(tmp_path, f"{sys.executable} child.py; exit $?")  # bash stays the parent
    tree = [proc.pid] + [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert len(tree) == 3
    for pid in tree:
        os.kill(pid, signal.SIGUSR1)
    assert proc.wait(timeout=30) == 75


@pytest.mark.slow
def test_the_workflow_survives_slurms_warning(tmp_path):
    """The signal reaches the Snakemake process running the job too: it ignores it (and its
    jobs inherit that) rather than dying of it."""
    configfile = tmp_path / "ci.yaml"
    configfile.write_text(yaml.safe_dump(raw("ci")))
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "1",
            "--configfile",
            str(configfile),
            "--directory",
            str(run),
            "results/ci/data/train.jsonl",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for([run / "results/ci/logs/tiny_data.log"], proc)
        os.killpg(proc.pid, signal.SIGUSR1)  # every process of the "step"
        out, _ = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert (run / "results/ci/data/train.jsonl").is_file()


# --- the pipeline config ---------------------------------------------------------------------


def test_the_launch_block_and_the_strategy_reach_every_cell_and_its_micro_batch():
    # One vLLM share for both (auto sizes it for an engine's share of the step: 4x the rows on one GPU)
    config = raw("paper", processes_per_node=4)
    config["models"]["llama-3.2-3b"]["strategy"] = "fsdp2"
    config["device"]["vllm_gpu_memory_utilization"] = 0.3
    config = prepare(config, "configs/test.yaml")
    grid = Grid.from_config(config)
    alone_config = raw("paper", processes_per_node=1)
    alone_config["device"]["vllm_gpu_memory_utilization"] = 0.3
    one = prepare(alone_config, "x")
    for cell in grid.cells():
        cfg = TrainConfig.from_dict(train_cell_config(config, grid, cell), check_vllm=False)
        assert cfg.launch.processes == 4
        assert cfg.launch.strategy == ("fsdp2" if cell.model == "llama-3.2-3b" else "ddp")
        alone = TrainConfig.from_dict(train_cell_config(one, Grid.from_config(one), cell), check_vllm=False)
        # the per-GPU micro-batch is what the card holds: no larger on 4 DDP processes (DDP adds
        # its gradient buckets; FSDP2 shards the weights and AdamW), the step's rows the same
        mine, its = cfg.resolved.layout, alone.resolved.layout
        assert cfg.launch.strategy != "ddp" or mine.max_micro_batch <= its.max_micro_batch, cell.id
        assert (
            cfg.train.gradient_accumulation_steps * mine.max_micro_batch * 4
            == alone.train.gradient_accumulation_steps * its.max_micro_batch
        ), cell.id


def test_the_schema_takes_the_launch_block_from_the_trainer():
    schema = config_schema()
    props = schema["$defs"]["LaunchBlock"]["properties"]
    assert set(props) == (set(LaunchSection.model_fields) - {"strategy"}) | set(
        launch.STOP_KEYS
    )  # the stop estimates: the pipeline's (the train rule's --signal), no cell's
    assert all(props[k]["default"] == LaunchSection.default(k) for k in ("nodes", "processes_per_node"))
    assert schema["$defs"]["ModelSpec"]["properties"]["strategy"]["enum"] == list(STRATEGIES)


@pytest.mark.parametrize(
    "name, layout, expected_g",
    [
        ("default", {"processes_per_node": 3}, 4),  # a fixed accumulation: the trainer's layout check
        ("paper", {"processes_per_node": 3}, 4),  # gradient_accumulation_steps: auto
    ],
)
def test_a_step_that_does_not_split_across_the_processes_fails_naming_cell_and_g(name, layout, expected_g):
    with pytest.raises(ConfigError) as err:
        prepare(raw(name, **layout), f"configs/{name}.yaml")
    msg = str(err.value)
    line = next(line for line in msg.splitlines() if f"G={expected_g} " in line)
    assert "launch processes x" in line and "3 x" in line
    assert re.search(rf"\(cells: [^)]*/g{expected_g}/seed\d", line), line
    assert f"configs/{name}.yaml" in msg


@pytest.mark.skipif(launch.deepspeed_installed(), reason="DeepSpeed is installed here")
@pytest.mark.parametrize("strategy", ["zero2", "zero3"])
def test_zero_without_deepspeed_fails_with_the_install_message(strategy):
    config = raw("paper", processes_per_node=4)
    config["models"]["qwen2.5-3b"]["strategy"] = strategy
    with pytest.raises(ConfigError) as err:
        prepare(config, "configs/paper.yaml")
    msg = str(err.value)
    assert f"config key 'models.qwen2.5-3b.strategy': {strategy} is DeepSpeed ZeRO" in msg
    assert "pip install deepspeed" in msg and "choose ddp or fsdp2" in msg


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (
            lambda c: c["launch"].update(processes_per_node=1) or c["models"]["qwen2.5-3b"].update(strategy="fsdp2"),
            "fsdp2 shares the model across processes, and launch gives each cell one",
        ),
        (
            lambda c: (
                c["device"].update(use_cpu=True, bf16=False, use_vllm=False, gpu_memory_gib=None)
                or c["train"].update(gradient_accumulation_steps=1)
                or c["models"]["qwen2.5-3b"].update(strategy="fsdp2")
            ),
            "on CPU (device.use_cpu=true) accelerate ignores it",
        ),
        (lambda c: c["resources"]["train"].update(gpu=4), "config key 'resources.train.gpu'"),
    ],
)
def test_launch_settings_no_job_could_run_are_refused(mutate, expected):
    # (ZeRO with bf16_kahan: the cell config's rule, tests/train/test_config.py; here the
    # missing DeepSpeed would be named first.)
    config = raw("paper", processes_per_node=4)
    mutate(config)
    with pytest.raises(ConfigError, match=re.escape(expected)):
        prepare(config, "configs/paper.yaml")


# --- dry runs --------------------------------------------------------------------------------


def dry_run(tmp_path, config: dict, *extra) -> str:
    configfile = tmp_path / "paper.yaml"
    configfile.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--configfile",
            str(configfile),
            "--directory",
            str(tmp_path / "run"),
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def train_resources(out: str) -> list[dict[str, str]]:
    blocks = re.findall(r"^rule train:.*?^\s+resources: (.*?)$", out, re.M | re.S)
    return [dict(kv.split("=", 1) for kv in block.split(", ")) for block in blocks]


def test_dry_run_of_the_paper_config_on_four_gpus(tmp_path):
    out = dry_run(tmp_path, raw("paper", processes_per_node=4))
    lines = re.findall(r"^train: each (\S+) cell on 4 GPUs, ddp; (\S+): (.*)$", out, re.M)
    assert {m for m, _, _ in lines} == {"qwen2.5-3b", "llama-3.2-3b"}
    for _model, cell_id, cmd in lines:
        args = accelerate_args([w.replace(f"${launch.PORT_ENV}", "1") for w in shlex.split(cmd)])
        assert args.num_processes == 4 and args.num_machines == 1
        assert args.training_script_args == ["--config", f"results/paper/train/{cell_id}/cell.json"]
    res = train_resources(out)
    assert len(res) == 16
    assert all(r["gpu"] == "4" and r["nodes"] == "1" and r["tasks_per_gpu"] == "0" for r in res), res[0]


def test_dry_run_of_the_paper_config_on_two_nodes_with_the_slurm_profile(tmp_path):
    out = dry_run(tmp_path, raw("paper", processes_per_node=4, nodes=2), "--profile", str(REPO / "profiles/slurm"))
    lines = re.findall(r"^train: each (\S+) cell on 2 nodes x 4 GPUs, ddp; \S+: (srun .*)$", out, re.M)
    assert len(lines) == 2
    assert all("--num_processes 8 --num_machines 2 --machine_rank $SLURM_NODEID" in cmd for _, cmd in lines)
    res = train_resources(out)
    assert len(res) == 16
    for r in res:
        assert r["nodes"] == "2" and r["gres"] == "gpu:4" and "gpu" not in r, r  # 4 GPUs on each node
        assert r["cpus_per_task"] == "32" and r["slurm_extra"] == "--signal=USR1@600"
    assert_sbatch_asks_for_two_nodes_of_four_gpus(res[0])


def assert_sbatch_asks_for_two_nodes_of_four_gpus(resources: dict[str, str]) -> None:
    """The installed SLURM executor's own submit-string functions, given the train job's
    resources as the dry run resolved them."""
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    class Resources(dict):
        __getattr__ = dict.__getitem__

    # what the executor reads of a job: its resources and threads
    job = SimpleNamespace(
        resources=Resources({k: int(v) if v.isdigit() else v for k, v in resources.items()}), threads=32
    )
    params = {
        "run_uuid": "u",
        "slurm_logfile": "l",
        "comment_str": "c",
        "account": "-A a",
        "partition": "-p p",
        "workdir": ".",
    }
    call = get_submit_command(job, params) + set_gres_string(job)
    flags = call.split()
    assert "--nodes=2" in flags and "--gres=gpu:4" in flags and "--cpus-per-task=32" in flags, call
    assert not any(f.startswith(("--gpus", "--ntasks")) for f in flags), call  # one task per node
    assert "--signal=USR1@600" in flags and "-t" in flags
