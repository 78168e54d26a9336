# Stage 4, the paper's tables and figures from the cells' W&B runs and eval summaries.


rule aggregate:
    """Training efficiency (straggler rate, wall-clock, speed-up vs the largest fixed G,
    reward, mean G, padding efficiency, rollout share) and downstream accuracy / output
    length, mean +- std over seeds, with the figures of the paper."""
    input:
        aggregate_inputs(),
    output:
        tables=[
            report(
                f"{GRID.tables_dir}/{t}.md",
                caption=report_caption(t),
                category="Tables",
                labels={"table": t},
            )
            for t in TABLE_NAMES
        ]
        + [
            report(
                f"{GRID.tables_dir}/headline.md",
                caption=report_caption("headline"),
                category="Tables",
                labels={"table": "headline"},
            ),
            report(
                f"{GRID.tables_dir}/missing.json",
                caption=report_caption("missing"),
                category="Tables",
                labels={"table": "missing cells"},
            ),
        ],
        figures=[
            report(
                f"{GRID.figures_dir}/{f}.png",
                caption=report_caption(f),
                category="Figures",
                labels={"figure": f},
            )
            for f in FIGURE_NAMES
        ],
        other=[
            f
            for f in aggregate_outputs()
            if not f.endswith((".md", "missing.json")) and not f.endswith(".png")
        ],
        grid=f"{GRID.tables_dir}/grid.json",
    params:
        grid=lambda wc: json.dumps(aggregate_grid(CONFIG, GRID), sort_keys=True),
    resources:
        **res("aggregate", mem_mb=2000, runtime=20, cpus_per_task=1),
    log:
        f"{ROOT}/logs/aggregate.log",
    benchmark:
        f"{ROOT}/benchmarks/aggregate.tsv",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate.py"
