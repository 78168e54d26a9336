# Stage 2, training: one shared SAGC-enabled TRL trainer for every cell of the grid.


rule train:
    """GRPO or DAPO on the world's prompts with the cell's group sizing: a fixed G, or
    SAGC picking G before every rollout from the lengths of the previous ones. Per-step
    metrics go to the cell's own W&B run; checkpoints hold the controller state, so a
    killed job rerun with --rerun-incomplete resumes where it stopped."""
    input:
        base=GRID.base_model_json("{model}"),
        data=f"{ROOT}/data/train.jsonl",
    output:
        final=directory(f"{ROOT}/train/{CELL_DIR}/final"),
        done=f"{ROOT}/train/{CELL_DIR}/done.json",
    params:
        # Canonical JSON: Snakemake reruns a cell whose params changed, and a dict's
        # key order (which follows the YAML file) must not count as a change.
        cell=lambda wc: json.dumps(train_cell_config(config, GRID, cell_of(wc)), sort_keys=True),
    threads: train_setting(config, "torch_threads") or 1
    resources:
        **res("train", mem_mb=3000, runtime=30),
    log:
        f"{ROOT}/logs/train/{CELL_DIR}.log",
    benchmark:
        f"{ROOT}/benchmarks/train/{CELL_DIR}.tsv",
    conda:
        "../../envs/train.yaml"
    script:
        "../scripts/train.py"
