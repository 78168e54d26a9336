"""Aggregation: from the cells' W&B runs and evaluation summaries to the paper's tables
(``results/<name>/tables/``) and figures (``paper_figures/<name>/``). The modules and CLIs:
docs/aggregation.md.
"""
