"""Prompt-aware straggler control: a per-prompt length predictor, tail batching and the
``sagc-prompt`` policy (docs/prompt-aware.md)."""
