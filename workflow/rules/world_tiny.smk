# Stage 1, the tiny world: base models and the prompts they are trained on, built from code
# and a seed.

rule tiny_data:
    """Synthetic multi-step arithmetic with step-by-step solutions: train / eval splits
    and a held-out split of longer chains, from a seed."""
    output:
        train=f"{ROOT}/data/train.jsonl",
        eval=f"{ROOT}/data/eval.jsonl",
        heldout=f"{ROOT}/data/heldout.jsonl",
    params:
        out=lambda wc, output: os.path.dirname(output.train),
        flags=cli_flags(CONFIG.tiny.data),
    resources:
        **res("tiny_data", mem_mb=1000, runtime=10, cpus_per_task=1),
    log:
        f"{ROOT}/logs/tiny_data.log",
    benchmark:
        f"{ROOT}/benchmarks/tiny_data.tsv",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m sagc.tiny data --out {params.out:q} {params.flags} > {log:q} 2>&1"

rule tiny_tokenizer:
    """A byte-level BPE tokenizer trained offline on the task text (eos/pad, ChatML)."""
    input:
        rules.tiny_data.output.train,
    output:
        directory(f"{ROOT}/data/tokenizer"),
    params:
        data=lambda wc, input: os.path.dirname(input[0]),
    resources:
        **res("tiny_tokenizer", mem_mb=1000, runtime=10, cpus_per_task=1),
    log:
        f"{ROOT}/logs/tiny_tokenizer.log",
    benchmark:
        f"{ROOT}/benchmarks/tiny_tokenizer.tsv",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m sagc.tiny tokenizer --data {params.data:q} --out {output:q} > {log:q} 2>&1"

rule tiny_base_model:
    """A tiny model of the paper model's architecture class, warm-started (SFT) on a
    mixture of solution behaviours: wrong ones for RL to remove, and a rare, long
    self-check that repairs mistakes, the per-rollout tail that straggles."""
    input:
        data=rules.tiny_data.output.train,
        tokenizer=rules.tiny_tokenizer.output,
    output:
        model=directory(f"{ROOT}/models/{{model}}/base"),
        info=f"{ROOT}/models/{{model}}/base.json",
    params:
        data=lambda wc, input: os.path.dirname(input.data),
        arch=lambda wc: CONFIG.models[wc.model].arch,
        seed=lambda wc: base_seed(wc.model, CONFIG.tiny.world_seed, CONFIG.models[wc.model].draw),
        # tiny.model's flags, then the model's own tiny_model flags over them
        flags=lambda wc: cli_flags({**CONFIG.tiny.model, **CONFIG.models[wc.model].tiny_model}),
    threads: 1
    resources:
        **res("tiny_base_model", mem_mb=2000, runtime=30, cpus_per_task=1),
    log:
        f"{ROOT}/logs/tiny_base_model_{{model}}.log",
    benchmark:
        f"{ROOT}/benchmarks/tiny_base_model/{{model}}.tsv",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m sagc.warm -m sagc.tiny base-model --arch {params.arch:q} --data {params.data:q}"
        " --tokenizer {input.tokenizer:q} --out {output.model:q} --seed {params.seed}"
        " --threads {threads} {params.flags} > {log:q} 2>&1"
        " && cp {output.model:q}/build.json {output.info:q}"

rule tiny_stragglers:
    """How often a step straggles at each fixed G under the base model (the phenomenon
    the grid measures), with the length distribution and the share of each behaviour."""
    input:
        model=f"{ROOT}/models/{{model}}/base",
        data=rules.tiny_data.output.train,
    output:
        f"{ROOT}/models/{{model}}/stragglers.json",
    params:
        data=lambda wc, input: os.path.dirname(input.data),
        tau=straggler_tau(CONFIG),
        prompts=measure_prompts(CONFIG),
        max_len=CONFIG.train.max_completion_length,
        temperature=CONFIG.train.temperature,
        flags=cli_flags(CONFIG.tiny.measure),
    resources:
        **res("tiny_stragglers", mem_mb=2000, runtime=20, cpus_per_task=1),
    log:
        f"{ROOT}/logs/tiny_stragglers_{{model}}.log",
    benchmark:
        f"{ROOT}/benchmarks/tiny_stragglers/{{model}}.tsv",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m sagc.warm -m sagc.tiny measure --model {input.model:q} --data {params.data:q}"
        " --tau {params.tau} --prompts-per-step {params.prompts} --out {output:q}"
        " --max-completion-length {params.max_len} --temperature {params.temperature}"
        " {params.flags} > {log:q} 2>&1"
