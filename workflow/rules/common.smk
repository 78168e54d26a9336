# Config checks, the grid and the helpers every stage uses. Logic lives in sagc.pipeline.
import contextlib
import json
import os
import signal
import sys

from sagc.aggregate.outputs import (
    FIGURE_NAMES,
    TABLE_NAMES,
    figure_outputs,
    table_outputs,
)
from sagc import warm
from sagc.aggregate import plan
from sagc.pipeline import Grid, disk, launch, preview, wandb_sync
from sagc.pipeline.cells import (
    aggregate_grid,
    cli_flags,
    eval_cell_config,
    measure_prompts,
    straggler_tau,
    resolved_cell,
)
from sagc.pipeline.config import prepare
from sagc.pipeline.env import configure_job_environment
from sagc.pipeline.evaluation import staged_benchmarks
from sagc.pipeline.grid import Cell, base_seed
from sagc.pipeline.world import world_of

# The one typed config every helper reads (sagc.pipeline.schema.PipelineConfig). Fails here,
# before any job, naming the file and the key.
CONFIG = prepare(config, ", ".join(map(str, workflow.overwrite_configfiles)) or "configs/default.yaml")

# SLURM's early warning (--signal=USR1@..., profiles/slurm) reaches every process of a job
# step, this Snakemake included, which has no handler for it and would die: ignore it here
# (jobs inherit that); the trainers install their own handler and checkpoint on it.
with contextlib.suppress(ValueError):  # not the main thread (an API caller's)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)

GRID = Grid.from_config(CONFIG)
ROOT = GRID.root
WORLD = world_of(CONFIG)  # tiny or hub: what differs between them (sagc.pipeline.world)
CELL_DIR = "{model}/{algo}/{sizing}/seed{seed}"

for line in WORLD.load_lines(CONFIG, GRID):
    print(line, file=sys.stderr)

# The pre-registered primary claims and their planned power (sagc.aggregate.plan).
print("\n".join(plan.dry_run_lines(CONFIG)), file=sys.stderr)

# What the training cells write (a DiskSpaceWarning when the results' filesystem lacks it)
# and, when cluster jobs would log to W&B online, how to log offline and upload afterwards.
print(disk.check_disk(CONFIG, GRID), file=sys.stderr)
wandb_sync.check_wandb(CONFIG, GRID)

configure_job_environment(
    workflow.basedir,
    ROOT,
    CONFIG.wandb.mode,
    WORLD.cpu_isa(CONFIG),
)


# A tiny-world job spends about as long importing torch, transformers, TRL and lm-eval as
# it computes. A local run therefore starts one interpreter that imports them once, and the
# rules' `python -m sagc.warm -m MODULE` runs each job in a fork of it (sagc.warm). Cluster
# jobs, and any job the server cannot take, run `python -m MODULE` in a fresh interpreter.
onstart:
    if workflow.local_exec:  # a cell on several nodes needs SLURM: refused before any job
        launch.check_local_run(CONFIG)
    if WORLD.warm_jobs and workflow.local_exec:
        warm.start(log=f"{ROOT}/logs/warm.log")


onsuccess:
    warm.stop()


onerror:
    warm.stop()


wildcard_constraints:
    model="|".join(map(str, GRID.models)),
    algo="|".join(GRID.algorithms),
    sizing="|".join(GRID.sizings),
    seed=r"\d+",


def cell_of(wc):
    return Cell(wc.model, wc.algo, wc.sizing, int(wc.seed))


def res(rule_name, **defaults):
    """Cluster resources of a rule: the config's `resources.<rule>` over the rule's defaults
    (what a job of the tiny world needs: small), on the partition that fits (`on_partition`)."""
    return on_partition({**defaults, **CONFIG.stated("resources").get(rule_name, {})})


# Partitions by need. The profile (profiles/slurm) names each partition once: its default
# `slurm_partition` is the CPU partition, which every job gets unless it asks for GPUs, and
# `slurm_gpu_partition` (a default resource no executor reads) the GPU one. Whether a job
# asks for GPUs follows from the config (the train rule's from `launch` on a GPU config,
# evaluation's from `resources.evaluate.gpu`), so the choice is made here, per job, and not in
# the profile: a profile's `set-resources` is fixed per rule and would send the training of a
# CPU config (the tiny world) to the GPU partition too.
def gpu_partition():
    """The profile's GPU partition (`slurm_gpu_partition`, as --default-resources gives it);
    None without one (a local run, another profile)."""
    defaults = workflow.resource_settings.default_resources
    value = defaults.get("slurm_gpu_partition") if defaults else None
    value = getattr(value, "raw", value)  # a parsed default resource keeps what was written
    return None if value in (None, "") else str(value).strip("'\"")


def wants_gpu(resources):
    return int(resources.get("gpu") or 0) > 0 or str(resources.get("gres") or "").startswith("gpu")


def on_partition(resources):
    """`resources` with the GPU partition when they ask for GPUs (`gpu`, or `gres` gpu:...) and
    set no partition of their own; every other job keeps the profile's default partition."""
    partition = gpu_partition()
    if partition and wants_gpu(resources) and "slurm_partition" not in resources:
        return {**resources, "slurm_partition": partition}
    return resources


def world_reports():
    """The world's straggler measurement per base model (the tiny world's; none for the hub)."""
    return list(WORLD.straggler_reports(GRID).values())


def eval_data():
    """The local files the evaluation tasks read."""
    return WORLD.eval_data_files(GRID)


def eval_cell(target, threads):
    """One evaluation job's cell (`sagc.evaluate.config.EvalConfig`) for a trained cell or a
    base model's name, as canonical JSON: Snakemake reruns a job whose params changed, and a
    dict's key order (which follows the YAML file) must not count as a change."""
    return json.dumps(eval_cell_config(CONFIG, GRID, target, threads=threads), sort_keys=True)


def report_caption(name):
    return f"../report/{name}.rst"


def aggregate_outputs():
    return table_outputs(GRID.tables_dir) + figure_outputs(GRID.figures_dir)


def cell_outputs():
    """Every cell's finished run and evaluation summary, and the base models' summaries.

    The default target `all` asks for them too: Snakemake does not remake a missing
    intermediate file whose downstream outputs are up to date, so without this a deleted
    cell folder would leave "Nothing to be done" and tables that still show it."""
    files = [f"{GRID.train_dir(c)}/done.json" for c in GRID.cells()]
    files += [f"{GRID.eval_dir(c)}/summary.json" for c in GRID.cells()]
    if CONFIG.evaluate.base_models:
        files += [f"{GRID.base_eval_dir(m)}/summary.json" for m in GRID.models]
    return files


def aggregate_inputs():
    """`cell_outputs()`. With `aggregate.allow_partial` only the ones present now:
    `snakemake aggregate` then tabulates what exists and marks the rest as missing (after
    a `--keep-going` run in which some cells failed)."""
    files = cell_outputs() + world_reports()  # the reports pick the best static G
    if CONFIG.aggregate.allow_partial:
        return [f for f in files if os.path.exists(f)]
    return files


SIM_TABLES = ["summary.csv", "summary.json", "sweep.csv"]
SIM_FIGURES = ["sim_sizing", "sim_sweep"]


def simulate_config():
    """The simulator config: the config's `simulate.config`, else the packaged one
    calibrated to the paper's headline."""
    from importlib.resources import files

    return CONFIG.simulate.config or str(
        files("sagc.simulate") / "configs" / "paper_calibrated.yaml"
    )


def simulate_outputs():
    if not CONFIG.simulate.enabled:
        return []
    return [f"{ROOT}/sim/{t}" for t in SIM_TABLES] + [
        f"{GRID.figures_dir}/{f}.{ext}" for f in SIM_FIGURES for ext in ("png", "pdf")
    ]
