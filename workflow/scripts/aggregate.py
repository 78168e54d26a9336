# Thin: write the grid description, then let sagc.aggregate read the runs and write.
import json
import sys

from sagc.aggregate.__main__ import main

sys.stderr = sys.stdout = open(snakemake.log[0], "w")
with open(snakemake.output.grid, "w") as fh:
    json.dump(json.loads(snakemake.params.grid), fh, indent=2)
sys.exit(main(["--grid", snakemake.output.grid]))
