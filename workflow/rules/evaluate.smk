# Stage 3, downstream evaluation with lm-eval: accuracy and output length per task.


# Each job gets its evaluation cell as a param and writes it next to its outputs as eval.json,
# which it runs as `python -m sagc.evaluate run --config eval.json` would by hand.
EVAL_COMMAND = (
    "mkdir -p {params.out:q} && printf '%s\\n' {params.cell:q} > {params.out:q}/eval.json &&"
    " python -m sagc.warm -m sagc.evaluate run --config {params.out:q}/eval.json > {log:q} 2>&1"
)


rule evaluate_cell:
    """lm-eval on a trained cell's final model."""
    input:
        done=f"{ROOT}/train/{CELL_DIR}/done.json",
        final=f"{ROOT}/train/{CELL_DIR}/final",
        data=eval_data(),
    output:
        f"{ROOT}/eval/{CELL_DIR}/summary.json",
    params:
        cell=lambda wc, threads: eval_cell(cell_of(wc), threads),
        out=lambda wc, output: os.path.dirname(output[0]),
    threads: CONFIG.evaluate.threads
    resources:
        **res("evaluate", mem_mb=3000, runtime=30, cpus_per_task=CONFIG.evaluate.threads),
    log:
        f"{ROOT}/logs/eval/{CELL_DIR}.log",
    benchmark:
        f"{ROOT}/benchmarks/evaluate_cell/{CELL_DIR}.tsv",
    conda:
        "../../envs/eval.yaml"
    shell:
        EVAL_COMMAND


rule evaluate_base:
    """lm-eval on a base model: the reference row of the downstream table."""
    input:
        base=GRID.base_model_json("{model}"),
        data=eval_data(),
    output:
        f"{ROOT}/eval/{{model}}/base/summary.json",
    params:
        cell=lambda wc, threads: eval_cell(wc.model, threads),
        out=lambda wc, output: os.path.dirname(output[0]),
    threads: CONFIG.evaluate.threads
    resources:
        **res("evaluate", mem_mb=3000, runtime=30, cpus_per_task=CONFIG.evaluate.threads),
    log:
        f"{ROOT}/logs/eval/{{model}}_base.log",
    benchmark:
        f"{ROOT}/benchmarks/evaluate_base/{{model}}.tsv",
    conda:
        "../../envs/eval.yaml"
    shell:
        EVAL_COMMAND
