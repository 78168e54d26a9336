"""What one evaluation is told: ``EvalSettings`` (the pipeline's ``evaluate`` block) and ``EvalConfig``
(a job's ``eval.json``, the flags of ``python -m sagc.evaluate run``). Bad values raise a ``ValueError``
naming the key before a model or lm-eval is imported."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from sagc.config_models import Expect, Flag, Integer, Number, OneOf, PositiveInt, Section, Text

BACKENDS = ("hf", "vllm")

#: A file or folder: a non-empty string in the JSON, a ``Path`` too from Python.
PathText = Annotated[Text, BeforeValidator(lambda v: os.fspath(v) if isinstance(v, os.PathLike) else v)]

#: lm-eval's batch size: a positive integer, or ``auto`` / ``auto:N`` (search the largest that fits N times).
BatchSize = PositiveInt | Annotated[str, Field(strict=True, pattern=r"^auto(:[0-9]+)?$")]


class GenerationOverrides(Section):
    """Run-level generation settings; ``None`` keeps the task YAML's default."""

    max_gen_toks: PositiveInt | None = Field(
        None, description="generated tokens at most (the task YAML's cap otherwise)"
    )
    temperature: Number(ge=0.0) | None = Field(None, description="0 = greedy")
    top_p: Number(gt=0.0, le=1.0) | None = None
    repeats: PositiveInt | dict[Text, PositiveInt] | None = Field(
        None,
        description=(
            "samples per problem n (avg@n and pass@n, from the same samples): one n for every task, or task -> n "
            "(others keep their task YAML's n); use with temperature > 0"
        ),
    )

    @field_validator("repeats", mode="wrap")
    @classmethod
    def _repeats_in_words(cls, value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError:  # pydantic's report names each branch of the union
            raise ValueError(
                f"repeats must be a positive integer or a mapping task -> positive integer, got {value!r}"
            ) from None

    def repeats_for(self, task: str) -> int | None:
        """The run's n for ``task``, or None to keep the YAML's."""
        return self.repeats.get(task) if isinstance(self.repeats, dict) else self.repeats


class EvalSettings(GenerationOverrides):
    """How a model is evaluated: a pipeline config's ``evaluate`` block and every evaluation cell.
    Task names (and per-task repeats) are checked where the task YAMLs are read (``taskcfg``)."""

    section_key: ClassVar[str] = ""
    tasks: Annotated[list[Text], Expect("a non-empty list of task names")] = Field(
        ..., min_length=1, description="packaged task names (python -m sagc.evaluate tasks)"
    )
    backend: OneOf(BACKENDS) = Field("hf", description="hf: transformers (CPU); vllm: vLLM (GPU)")
    limit: PositiveInt | None = Field(None, description="documents per task (null: all)")
    batch_size: BatchSize = Field(
        8, description="rows per batch, or 'auto' / 'auto:N' (lm-eval finds the largest that fits)"
    )
    device: Text = Field("cpu", description="hf backend: the torch device")
    seed: Integer = Field(0, description="lm-eval's random, numpy, torch and few-shot seeds, and vLLM's")
    threads: PositiveInt | None = Field(None, description="torch CPU threads (null: torch's own choice)")
    apply_chat_template: Flag = Field(
        False, description="wrap prompts in the tokenizer's chat template (instruct models)"
    )
    tensor_parallel_size: PositiveInt = Field(1, description="vllm backend: GPUs per model")
    gpu_memory_utilization: Number(gt=0.0, le=1.0) = Field(0.9, description="vllm backend: memory fraction")
    max_model_len: PositiveInt | None = Field(None, description="vllm backend: max model length")
    dtype: Text = Field(
        "auto", description="vllm backend: weights dtype (auto keeps a bf16 checkpoint's; float32 to match hf on CPU)"
    )

    @field_validator("batch_size", mode="wrap")
    @classmethod
    def _batch_size_in_words(cls, value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise ValueError(f"batch_size must be a positive integer, 'auto' or 'auto:N', got {value!r}") from None

    @property
    def generation(self) -> GenerationOverrides:
        return GenerationOverrides(**{k: getattr(self, k) for k in GenerationOverrides.model_fields})


class EvalConfig(EvalSettings):
    """One evaluation job: the settings, the model, its data and output folders. ``model_json`` stands
    in for ``model`` where a base model's folder is known only once its job resolved it (hub world)."""

    model: PathText | None = Field(None, description="model folder (weights + tokenizer)")
    model_json: PathText | None = Field(
        None,
        description=(
            "a resolved model's record (the hub world's models/<model>/base.json): evaluate the local "
            "snapshot folder in its 'path'"
        ),
    )
    data_dir: PathText = Field(
        ..., description="folder with the tasks' data files (tiny-world splits or benchmark cache)"
    )
    out: PathText = Field(..., description="output folder")
    cell: str = Field("", description="cell id recorded in summary.json")

    @model_validator(mode="after")
    def _one_model(self) -> EvalConfig:
        if (self.model is None) == (self.model_json is None):
            raise ValueError(
                "exactly one of model (a folder) and model_json (a resolved model's record) must be "
                f"set, got model={self.model!r}, model_json={self.model_json!r}"
            )
        return self

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> EvalConfig:
        """The cell in the JSON file ``path``, keys in ``overrides`` replaced; errors name the file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read an evaluation cell ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: an evaluation cell must be a JSON object")
        try:
            return cls.from_dict({**data, **overrides})
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def model_folder(self) -> Path:
        """The folder to evaluate: ``model``, or the ``path`` recorded in ``model_json``."""
        if self.model is not None:
            return Path(self.model)
        try:
            record = json.loads(Path(self.model_json).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"model_json {self.model_json}: cannot read a model record ({exc})") from None
        path = record.get("path") if isinstance(record, dict) else None
        if not isinstance(path, str) or not path:
            raise ValueError(f"model_json {self.model_json}: no 'path' of a local model folder in it")
        return Path(path)
