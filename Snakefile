"""Faster Synchronous On-Policy RL via Straggler-Aware Group Sizing: the reproduction.

Method, as a workflow:
  1. world     - the models and prompts: the embedded tiny world is built from code and a
                 seed (task data, tokenizer, tiny Qwen2/Llama models warm-started on the
                 task); the paper's world comes from the local Hugging Face cache.
  2. train     - every cell (model x algorithm x sizing x seed) runs the one SAGC-enabled
                 TRL trainer: GRPO or DAPO with a fixed group size G or with SAGC choosing
                 G each step from rollout lengths alone.
  3. evaluate  - every trained model, and every base model as the reference row, is
                 evaluated with lm-eval on reasoning benchmarks (accuracy, output length).
  4. aggregate - the cells' W&B logs and evaluation summaries become the paper's tables
                 and figures; the straggler simulator adds cluster-scale what-ifs.

Run:  snakemake --cores all                              (embedded default, CPU)
      snakemake --profile profiles/slurm --configfile configs/paper.yaml
"""

import os

from snakemake.utils import min_version

min_version("9.0")


# No --configfile: the embedded default. (A `configfile:` directive would *merge* a
# --configfile on top of it, mixing the tiny models into the paper grid.)
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "configs/default.yaml")


include: "workflow/rules/common.smk"
include: f"workflow/rules/world_{WORLD.name}.smk"  # the tiny world built, or the hub world staged
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/simulate.smk"


rule all:
    """The paper's tables and figures for the whole grid of the config."""
    default_target: True
    input:
        aggregate_outputs(),
        simulate_outputs(),
        world_reports(),
        cell_outputs(),
