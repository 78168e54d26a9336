# Thin: the logic is sagc.pipeline.hub.stage_train_data.
import os
import sys

from sagc.pipeline.hub import stage_train_data

sys.stderr = sys.stdout = open(snakemake.log[0], "w")
# Staging is the one step allowed to reach the hub.
for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.pop(var, None)
p = snakemake.params
n = stage_train_data(p.dataset, p.split, snakemake.output[0], p.source)
print(f"wrote {n} prompts to {snakemake.output[0]}")
