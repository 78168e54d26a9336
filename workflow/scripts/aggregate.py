# Thin: write the grid description, then let sagc.aggregate read the runs and write.
import json
import sys

from sagc.aggregate.cli import main

sys.stderr = sys.stdout = open(snakemake.log[0], "w")
with open(snakemake.output.grid, "w") as fh:
    json.dump(snakemake.params.grid, fh, indent=2)
main(["--grid", snakemake.output.grid])
