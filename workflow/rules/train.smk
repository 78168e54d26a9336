# Stage 2, training: one shared SAGC-enabled TRL trainer for every cell of the grid.

# The cell's nodes, one task each, one GPU per process (sagc.pipeline.launch); a tiny-world
# cell: its processes x train.torch_threads CPUs (1), well under 3 GB (a ci cell's peak RSS:
# 0.6 GB) and minutes. A cell that asks for GPUs goes to the GPU partition (on_partition).
TRAIN_RESOURCES = on_partition(launch.rule_resources(CONFIG, res("train", mem_mb=3000, runtime=30)))
# How a cell of several processes is started, printed once (a dry run shows it too).
for line in preview.train_lines(CONFIG, GRID, repo=workflow.basedir, cpus_per_node=TRAIN_RESOURCES["cpus_per_task"]):
    print(line, file=sys.stderr)


rule stop_tokens:
    """The cells' stop strings resolved against the model's tokenizer, once per model: a
    chat end token (a special token) ends generation at its id, the rest are cut as text
    (sagc.train.stops). A job, since a built world's tokenizer exists only after its own."""
    input:
        base=GRID.base_model_json("{model}"),
    output:
        f"{ROOT}/models/{{model}}/stops.json",
    params:
        model=lambda wc: WORLD.base_model_path(CONFIG, GRID, wc.model),
        revision=lambda wc: cli_flags({"revision": WORLD.base_model_revision(CONFIG.models[wc.model])}),
        stops=json.dumps(list(CONFIG.train.stop)),
    resources:
        **res("stop_tokens", mem_mb=1000, runtime=5, cpus_per_task=1),
    log:
        f"{ROOT}/logs/stop_tokens_{{model}}.log",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m sagc.warm -m sagc.train.stops --model {params.model:q} {params.revision}"
        " --stops {params.stops:q} --out {output:q} > {log:q} 2>&1"


rule train:
    """GRPO or DAPO on the world's prompts with the cell's group sizing: a fixed G, or
    SAGC picking G before every rollout from the lengths of the previous ones, in one
    process or data-parallel over the cell's GPUs and nodes (accelerate launch). Per-step
    metrics go to the cell's own W&B run; checkpoints hold the controller state, so a
    killed or preempted job rerun with --rerun-incomplete resumes where it stopped."""
    input:
        base=GRID.base_model_json("{model}"),
        data=f"{ROOT}/data/train.jsonl",
        stops=rules.stop_tokens.output[0],
    output:
        final=directory(f"{ROOT}/train/{CELL_DIR}/final"),
        done=f"{ROOT}/train/{CELL_DIR}/done.json",
    params:
        # The cell resolved (sagc.train.resolve; its stops are added from input.stops).
        # Canonical JSON: Snakemake reruns a cell whose params changed, and a dict's
        # key order (which follows the YAML file) must not count as a change.
        cell=lambda wc: json.dumps(resolved_cell(CONFIG, cell_of(wc))[0], sort_keys=True),
    # The cell's processes on one node, each with train.torch_threads threads.
    threads: launch.threads(CONFIG)
    resources:
        **TRAIN_RESOURCES,
    log:
        f"{ROOT}/logs/train/{CELL_DIR}.log",
    benchmark:
        f"{ROOT}/benchmarks/train/{CELL_DIR}.tsv",
    conda:
        "../../envs/train.yaml"
    script:
        "../scripts/train.py"
