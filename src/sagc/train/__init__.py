"""The SAGC-enabled TRL trainer and the training-cell entry point (docs/trainer.md).

Importing this package is cheap; TRL is imported on first use of the trainer names.
"""

from sagc.train.config import TrainConfig, load_config

__all__ = ["TrainConfig", "load_config", "SAGCGRPOTrainer", "SAGCTrainingArguments", "run_cell"]


def __getattr__(name: str):
    if name in ("SAGCGRPOTrainer", "SAGCTrainingArguments"):
        from sagc.train import trainer

        return getattr(trainer, name)
    if name == "run_cell":
        from sagc.train.run import run_cell

        return run_cell
    raise AttributeError(f"module 'sagc.train' has no attribute {name!r}")
