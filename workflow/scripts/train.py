# Thin: the pipeline validated every cell before any job started, so the job builds its
# config straight from the params, keeps a copy next to the outputs (to rerun the cell by
# hand: python -m sagc.train --config cell.json), trains, and puts one line per finished
# cell on the terminal (per-step progress goes to the job's log).
import json
import sys
import time
from pathlib import Path

from sagc.train.config import TrainConfig
from sagc.train.run import DONE_FILE, run_job

started = time.perf_counter()
sys.stderr = sys.stdout = open(snakemake.log[0], "a")
cell = json.loads(snakemake.params.cell)
path = Path(cell["output_dir"]) / "cell.json"
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(cell, indent=2))
code = run_job(TrainConfig.from_dict(cell))
if code == 0:
    done = json.loads((Path(cell["output_dir"]) / DONE_FILE).read_text())
    print(
        f"trained {cell['cell']['id']}: {done['steps']} steps, straggler rate "
        f"{done['straggler_rate']:.0%}, mean G {done['mean_group_size']:.1f}, training "
        f"{done['wallclock_s']:.1f} s, job {time.perf_counter() - started:.0f} s "
        f"(per-step log: {snakemake.log[0]})",
        file=sys.__stdout__,
        flush=True,
    )
sys.exit(code)
