# Thin: write the cell's resolved config next to its outputs and run the trainer on it.
import json
import sys
from pathlib import Path

from sagc.train.run import main

sys.stderr = sys.stdout = open(snakemake.log[0], "a")
cell = json.loads(snakemake.params.cell)
path = Path(cell["output_dir"]) / "cell.json"
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(cell, indent=2))
sys.exit(main(["--config", str(path)]))
