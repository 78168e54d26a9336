"""The two worlds a pipeline config can name (``world: tiny | hub``): where they differ, the
workflow asks ``world_of(config)`` (docs/architecture.md, "One source of truth")."""

from __future__ import annotations

from sagc.pipeline.evaluation import evaluation_plan_line
from sagc.pipeline.grid import Grid
from sagc.pipeline.schema import ModelSpec, PipelineConfig


class World:
    """What a world decides; the methods take the checked pipeline config and its grid."""

    name: str
    #: The ``models.<model>`` key that names a base model, with an example for the error.
    model_key: tuple[str, str]
    #: The base models are built by the pipeline (not loaded from a cache).
    builds_models: bool
    #: A local run forks the jobs from one warm interpreter (``sagc.warm``).
    warm_jobs: bool

    def problems(self, config: PipelineConfig) -> list[str]:
        """What the config lacks for this world, each naming its key."""
        key, example = self.model_key
        return [
            f"config key 'models.{model}.{key}': required for world '{self.name}' ({example})"
            for model, spec in config.models.items()
            if getattr(spec, key) is None
        ]

    def base_model_path(self, config: PipelineConfig, grid: Grid, model: str) -> str:
        """What a training cell loads its base model from."""
        raise NotImplementedError

    def base_model_revision(self, spec: ModelSpec) -> str | None:
        """The revision a training cell loads (None: a local folder has none)."""
        return None

    def base_model_eval(self, config: PipelineConfig, grid: Grid, model: str) -> dict[str, str]:
        """How an evaluation job names a base model: ``{"model": DIR}`` or ``{"model_json": FILE}``."""
        return {"model": self.base_model_path(config, grid, model)}

    def eval_data_dir(self, grid: Grid) -> str:
        """The folder the evaluation tasks read their data from."""
        raise NotImplementedError

    def eval_data_files(self, grid: Grid) -> list[str]:
        """The files an evaluation job waits for."""
        raise NotImplementedError

    def straggler_reports(self, grid: Grid) -> dict[str, str]:
        """Per base model, its straggler report (``sagc.tiny.measure``), where it has one."""
        return {}

    def cpu_isa(self, config: PipelineConfig) -> str | None:
        """The instruction set every job computes with (None: the machine's own)."""
        return None

    def load_lines(self, config: PipelineConfig, grid: Grid) -> list[str]:
        """What the workflow prints about this world when it loads (a dry run too)."""
        return []


class TinyWorld(World):
    name = "tiny"
    model_key = ("arch", "qwen2 or llama")
    builds_models = True
    warm_jobs = True

    def base_model_path(self, config, grid, model):
        return f"{grid.root}/models/{model}/base"

    def eval_data_dir(self, grid):
        return grid.data_dir

    def eval_data_files(self, grid):
        return [f"{grid.data_dir}/eval.jsonl", f"{grid.data_dir}/heldout.jsonl"]

    def straggler_reports(self, grid):
        return {m: f"{grid.root}/models/{m}/stragglers.json" for m in grid.models}

    def cpu_isa(self, config):
        return config.tiny.cpu_isa


class HubWorld(World):
    name = "hub"
    model_key = ("hub_id", "e.g. Qwen/Qwen2.5-3B")
    builds_models = False
    warm_jobs = False

    def problems(self, config):
        hub = config.hub
        missing = (
            []
            if hub.train_dataset or hub.train_source
            else ["config key 'hub.train_dataset': world 'hub' needs a training dataset (or hub.train_source)"]
        )
        return super().problems(config) + missing

    def base_model_path(self, config, grid, model):
        return config.models[model].hub_id

    def base_model_revision(self, spec):
        return spec.revision

    def base_model_eval(self, config, grid, model):
        # the evaluation needs a folder, not a hub id: the snapshot resolve_hub_model found
        return {"model_json": grid.base_model_json(model)}

    def eval_data_dir(self, grid):
        return f"{grid.data_dir}/benchmarks"

    def eval_data_files(self, grid):
        return [f"{grid.data_dir}/benchmarks/staged.json"]

    def load_lines(self, config, grid):
        return [evaluation_plan_line(config, grid)]


WORLDS: dict[str, World] = {w.name: w for w in (TinyWorld(), HubWorld())}


def world_of(config: PipelineConfig) -> World:
    """The world a (schema-checked) pipeline config names."""
    return WORLDS[config.world]
