# Thin: the pipeline validated and resolved every cell before any job started, so the job
# adds the model's resolved stops (rule stop_tokens), writes the cell's config next to its
# outputs, trains it exactly as `python -m sagc.train --config cell.json` would by hand
# (forked from the run's warm interpreter when it has one: sagc.warm), or under `accelerate
# launch` when the cell has several processes (sagc.pipeline.launch), and puts one line per
# finished cell on the terminal (per-step progress goes to the job's log).
#
# Where things go, also under SLURM (where the job's stdout is its SLURM log, not the
# terminal):
# - the per-step log is the cell's `train.log`, appended by every attempt (a resumed cell
#   keeps the steps of the attempt before it); the job's declared log is a link to it, made
#   afresh by each attempt (Snakemake deletes a job's log before it runs the job);
# - the line for a finished cell goes to stdout and is appended to results/<name>/logs/progress.log
#   (one line per cell, with the time), and a failed attempt leaves a line there too.
import json
import os
import sys
import time
from pathlib import Path

from sagc.pipeline import Grid, launch
from sagc.train.run import DONE_FILE

ATTEMPT_LOG = "train.log"
PROGRESS_LOG = "progress.log"

started = time.perf_counter()
cell = json.loads(snakemake.params.cell)
cell["resolved"]["stops"] = json.loads(Path(snakemake.input.stops).read_text())
path = Path(cell["output_dir"]) / launch.CELL_FILE
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(cell, indent=2))
cell_id = cell["cell"]["id"]
job_log = Path(snakemake.log[0])
attempt_log = path.parent / ATTEMPT_LOG
progress = Path(Grid.from_config(snakemake.config).root) / "logs" / PROGRESS_LOG
slurm_job = os.environ.get("SLURM_JOB_ID")
where = f", SLURM job {slurm_job}" if slurm_job else ""


def note(line: str) -> None:
    """One line in the grid's progress file (small appends: whole lines, also from parallel jobs)."""
    progress.parent.mkdir(parents=True, exist_ok=True)
    with open(progress, "a") as fh:
        fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")


with open(attempt_log, "a") as fh:
    fh.write(f"=== {cell_id}: attempt started {time.strftime('%Y-%m-%d %H:%M:%S')}{where} ===\n")
job_log.parent.mkdir(parents=True, exist_ok=True)
job_log.unlink(missing_ok=True)
try:  # the same file under both names: `tail -f` either
    os.link(attempt_log, job_log)
except OSError:  # another filesystem, or no hard links there
    job_log.symlink_to(os.path.relpath(attempt_log.resolve(), job_log.parent.resolve()))

code = launch.run(
    cell,
    str(path),
    output=str(attempt_log),
    repo=Path(snakemake.scriptdir).resolve().parents[1],
    cpus_per_node=snakemake.resources.cpus_per_task,
)
if code == 0:
    done = json.loads((Path(cell["output_dir"]) / DONE_FILE).read_text())
    resumed = f", resumed from {Path(done['resumed_from']).name}" if done.get("resumed_from") else ""
    line = (
        f"trained {cell_id}: {done['steps']} steps, straggler rate "
        f"{done['straggler_rate']:.0%}, mean G {done['mean_group_size']:.1f}, training "
        f"{done['wallclock_s']:.1f} s, job {time.perf_counter() - started:.0f} s "
        f"(per-step log: {snakemake.log[0]})"
    )
    print(line, flush=True)
    note(line.replace(" (per-step", f"{resumed}{where} (per-step"))
else:
    note(
        f"stopped {cell_id}: exit {code} after {time.perf_counter() - started:.0f} s{where}; a retry or "
        f"a rerun resumes from its last checkpoint (per-step log: {snakemake.log[0]})"
    )
sys.exit(code)
