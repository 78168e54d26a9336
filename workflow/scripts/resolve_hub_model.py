# Thin: the logic is sagc.pipeline.hub.resolve_model.
import json
import sys

from sagc.pipeline.hub import resolve_model

sys.stderr = sys.stdout = open(snakemake.log[0], "w")
p = snakemake.params
path = resolve_model(p.hub_id, p.revision)
with open(snakemake.output[0], "w") as fh:
    json.dump({"hub_id": p.hub_id, "revision": p.revision, "path": path}, fh, indent=2)
