"""Aggregation: from the cells' W&B runs and evaluation summaries to the paper's
tables (``results/<name>/tables/``) and figures (``paper_figures/<name>/``).

Modules: ``runlog`` (wandb 0.31 run-file records), ``reader`` (offline / online run
readers, one interface), ``grid`` (the grid JSON), ``collect`` (what exists, what is
missing), ``stats`` (definitions), ``perseed`` (one value per seed), ``paired`` (seed-level
and pooled intervals), ``power``, ``registration`` (the config's pre-registered claims),
``verdicts`` (claims, families, Holm), ``primary`` (the headline's families), ``tables``,
``figures``, ``palette``, ``outputs`` (the fixed file names), ``api`` (``aggregate``). CLIs:
``python -m sagc.aggregate --grid grid.json [--allow-partial]``, ``python -m
sagc.aggregate.compare A B`` (replication), ``python -m sagc.aggregate.plan RESULTS``
(planned power from a development-seed run).
"""
