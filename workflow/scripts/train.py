# Thin: the pipeline validated every cell before any job started, so the job writes the
# cell's config next to its outputs, trains it exactly as `python -m sagc.train --config
# cell.json` would by hand (forked from the run's warm interpreter when it has one:
# sagc.warm), or under `accelerate launch` when the cell has several processes
# (sagc.pipeline.launch), and puts one line per finished cell on the terminal (per-step
# progress goes to the job's log).
import json
import sys
import time
from pathlib import Path

from sagc.pipeline import launch
from sagc.train.run import DONE_FILE

started = time.perf_counter()
cell = json.loads(snakemake.params.cell)
path = Path(cell["output_dir"]) / launch.CELL_FILE
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(cell, indent=2))
code = launch.run(cell, str(path), output=snakemake.log[0], repo=Path(snakemake.scriptdir).resolve().parents[1],
                  cpus_per_node=snakemake.resources.cpus_per_task)
if code == 0:
    done = json.loads((Path(cell["output_dir"]) / DONE_FILE).read_text())
    print(
        f"trained {cell['cell']['id']}: {done['steps']} steps, straggler rate "
        f"{done['straggler_rate']:.0%}, mean G {done['mean_group_size']:.1f}, training "
        f"{done['wallclock_s']:.1f} s, job {time.perf_counter() - started:.0f} s "
        f"(per-step log: {snakemake.log[0]})",
        flush=True,
    )
sys.exit(code)
