"""Prompt-aware straggler control: predict each prompt's completion lengths (``predictor``),
gather the long ones into dedicated rounds (``schedule``, tail batching), and size groups per
round kind (``policy``, the ``sagc-prompt`` sizings built from ``config``'s ``sagc_prompt``
block). Design and measured numbers: docs/prompt-aware.md. The package sits above the
controller and imports nothing here, so that importing one module does not import the others.
"""
