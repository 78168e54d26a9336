# Stage 4, the paper's tables and figures from the cells' W&B runs and eval summaries.

rule aggregate:
    """Training efficiency (straggler rate, wall-clock, speed-up vs the largest fixed G,
    reward, mean G, padding efficiency, rollout share) and downstream accuracy / output
    length, mean +- std over seeds, with the figures of the paper."""
    input:
        done=[f"{GRID.train_dir(c)}/done.json" for c in GRID.cells()],
        cells=[f"{GRID.eval_dir(c)}/summary.json" for c in GRID.cells()],
        base=[f"{GRID.base_eval_dir(m)}/summary.json" for m in GRID.models]
        if EVAL.get("base_models", True)
        else [],
    output:
        **{
            f"{t}_{ext}": report(
                f"{GRID.tables_dir}/{t}.{ext}",
                caption=report_caption(t),
                category="Tables",
                labels={"table": t, "format": ext},
            )
            for t in TABLES
            for ext in ("csv", "md", "tex")
        },
        headline=report(
            f"{GRID.tables_dir}/headline.md",
            caption=report_caption("headline"),
            category="Tables",
            labels={"table": "headline", "format": "md"},
        ),
        **{
            f"{f}_png": report(
                f"{GRID.figures_dir}/{f}.png",
                caption=report_caption(f),
                category="Figures",
                labels={"figure": f},
            )
            for f in FIGURES
        },
        **{f"{f}_pdf": f"{GRID.figures_dir}/{f}.pdf" for f in FIGURES},
        grid=f"{GRID.tables_dir}/grid.json",
    params:
        grid=aggregate_grid(config, GRID),
    resources:
        **res("aggregate", mem_mb=4000, runtime=30),
    log:
        f"{ROOT}/logs/aggregate.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/aggregate.py"
