# Stage 1, the hub world: the paper's models and prompts from the local Hugging Face cache,
# and the benchmarks its evaluation reads.

# The staging rules are the only jobs that reach the hub: all offline switches cleared.
from sagc.pipeline.hub import HUB_ACCESS_PREFIX

rule stage_train_data:
    """The RL training prompts of the paper config, converted once to the pipeline's
    JSONL (prompt, answer). Needs the network or a cached copy (HF_HOME)."""
    output:
        f"{ROOT}/data/train.jsonl",
    params:
        flags=cli_flags(
            {
                "dataset": CONFIG.hub.train_dataset,
                "split": CONFIG.hub.train_split,
                "source": CONFIG.hub.train_source,
            }
        ),
    # the training set converted to JSONL (datasets): memory for the set, no GPU
    resources:
        **res("stage_train_data", mem_mb=4000, runtime=60, cpus_per_task=1),
    log:
        f"{ROOT}/logs/stage_train_data.log",
    conda:
        "../../envs/train.yaml"
    shell:
        "{HUB_ACCESS_PREFIX} python -m sagc.pipeline.hub train-data {params.flags}"
        " --out {output:q} > {log:q} 2>&1"

rule resolve_hub_model:
    """Check that the model is in the local cache (download it first with network)."""
    output:
        f"{ROOT}/models/{{model}}/base.json",
    params:
        hub_id=lambda wc: CONFIG.models[wc.model].hub_id,
        revision=lambda wc: CONFIG.models[wc.model].revision,
    resources:
        **res("resolve_hub_model", mem_mb=1000, runtime=10, cpus_per_task=1),
    log:
        f"{ROOT}/logs/resolve_hub_model_{{model}}.log",
    conda:
        "../../envs/train.yaml"
    script:
        "../scripts/resolve_hub_model.py"


rule stage_benchmarks:
    """The benchmarks the evaluated tasks read (their YAMLs' metadata; the paper's: AIME
    2024, AMC 2023 and GPQA-diamond), staged once to a local folder (needs the network,
    a user-provided copy in hub.benchmark_source, and for a gated one a token)."""
    output:
        f"{ROOT}/data/benchmarks/staged.json",
    params:
        benchmarks=",".join(staged_benchmarks(CONFIG)),
        out=lambda wc, output: os.path.dirname(output[0]),
        source=lambda wc: cli_flags({"source_dir": CONFIG.hub.benchmark_source}),
    resources:
        **res("stage_benchmarks", mem_mb=4000, runtime=60, cpus_per_task=1),
    log:
        f"{ROOT}/logs/stage_benchmarks.log",
    conda:
        "../../envs/eval.yaml"
    shell:
        "{HUB_ACCESS_PREFIX} python -m sagc.evaluate stage"
        " --benchmarks {params.benchmarks} --cache {params.out:q} {params.source}"
        " > {log:q} 2>&1 && echo '{{\"cache\": \"{params.out}\"}}' > {output:q}"
