# Cluster-scale what-ifs: the straggler simulator (CPU, seconds).


rule simulate:
    """Synchronous step times under a calibrated length model for every sizing, and a
    tau x delta sweep of SAGC: what the controller saves before spending GPU-hours."""
    input:
        simulate_config(),
    output:
        tables=[f"{ROOT}/sim/{t}" for t in SIM_TABLES],
        sizing=report(
            f"{GRID.figures_dir}/sim_sizing.png",
            caption=report_caption("sim_sizing"),
            category="Simulator",
        ),
        sweep=report(
            f"{GRID.figures_dir}/sim_sweep.png",
            caption=report_caption("sim_sweep"),
            category="Simulator",
        ),
        pdfs=[f"{GRID.figures_dir}/{f}.pdf" for f in SIM_FIGURES],
    params:
        tables=lambda wc, output: os.path.dirname(output.tables[0]),
        figures=lambda wc, output: os.path.dirname(output.sizing),
    resources:
        **res("simulate", mem_mb=1000, runtime=20, cpus_per_task=1),
    log:
        f"{ROOT}/logs/simulate.log",
    benchmark:
        f"{ROOT}/benchmarks/simulate.tsv",
    conda:
        "../../envs/analysis.yaml"
    shell:
        "python -m sagc.simulate run --config {input:q} --out-table {params.tables:q}"
        " --out-figures {params.figures:q} > {log:q} 2>&1"
