"""Aggregation: the cells' W&B runs and evaluation summaries to the paper's tables and figures (docs/aggregation.md)."""
