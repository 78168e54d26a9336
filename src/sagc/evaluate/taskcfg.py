"""The packaged lm-eval task YAMLs, and the per-run copies that point them at local data.

The YAMLs in ``sagc/evaluate/tasks/`` name their data files relatively (``eval.jsonl``,
``aime24.jsonl``). lm-eval would resolve such a path against the working directory
(docs/library-notes.md), so every run writes its own copy of the requested YAMLs into ``OUT/tasks/`` with
absolute ``data_files`` under ``--data-dir`` and the run's generation settings, then hands
that folder to lm-eval as its include path. The copy doubles as the record of exactly what
was evaluated.

Evaluation never downloads: a missing data file is an error that says how to make it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

TASKS_DIR = Path(__file__).parent / "tasks"

#: The embedded default's tasks (tiny world, CPU) and the paper config's tasks.
LOCAL_TASKS = ("tiny_arith", "tiny_arith_heldout")
PAPER_TASKS = ("aime24_boxed", "amc23_boxed", "gpqa_diamond_boxed")


class MissingDataError(FileNotFoundError):
    """A task's data file is not where the run expects it (message says how to make it)."""


class FunctionRef(str):
    """A ``!function module.name`` reference, kept as text so it survives a YAML round trip."""


class _Loader(yaml.SafeLoader):
    pass


class _Dumper(yaml.SafeDumper):
    pass


_Loader.add_constructor("!function", lambda loader, node: FunctionRef(loader.construct_scalar(node)))
_Dumper.add_representer(FunctionRef, lambda dumper, ref: dumper.represent_scalar("!function", str(ref)))


@dataclass(frozen=True)
class GenerationOverrides:
    """Run-level generation settings; ``None`` keeps the task YAML's default.

    ``repeats`` (n samples per problem, for avg@n and pass@n): one n for every task, or a
    mapping task -> n (tasks it leaves out keep their YAML's n)."""

    max_gen_toks: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    repeats: int | Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        if self.max_gen_toks is not None and self.max_gen_toks < 1:
            raise ValueError(f"max_gen_toks must be >= 1, got {self.max_gen_toks}")
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        per_task = self.repeats if isinstance(self.repeats, Mapping) else {"*": self.repeats}
        for task, n in per_task.items():
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
                where = "repeats" if task == "*" else f"repeats.{task}"
                raise ValueError(f"{where} must be an integer >= 1, got {n!r}")

    def repeats_for(self, task: str) -> int | None:
        """The run's n for ``task``, or None to keep the YAML's."""
        if isinstance(self.repeats, Mapping):
            return self.repeats.get(task)
        return self.repeats


def task_yaml_paths() -> dict[str, Path]:
    """Map every packaged task name to its YAML file."""
    out = {}
    for path in sorted(TASKS_DIR.glob("*.yaml")):
        name = load_task_yaml_file(path).get("task")
        if not isinstance(name, str):
            raise ValueError(f"task YAML {path} has no 'task' name")
        out[name] = path
    return out


def load_task_yaml_file(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        cfg = yaml.load(fh, Loader=_Loader)  # noqa: S506 - SafeLoader plus one tag
    if not isinstance(cfg, dict):
        raise ValueError(f"task YAML {path} is not a mapping")
    return cfg


def load_task_config(name: str) -> dict[str, Any]:
    """The packaged config of task ``name`` (``!function`` entries as ``FunctionRef``)."""
    paths = task_yaml_paths()
    if name not in paths:
        raise ValueError(f"unknown task {name!r}; packaged tasks: {sorted(paths)}")
    return load_task_yaml_file(paths[name])


def stage_hint(benchmark: str, cache: Path) -> str:
    """The command line that stages ``benchmark`` into ``cache`` (used in error messages)."""
    hint = (
        f"python -m sagc.evaluate stage --benchmarks {benchmark} --cache {cache}"
        " (downloads once; needs network), or add --source-dir DIR to stage from a local copy"
    )
    if benchmark == "gpqa_diamond":
        hint += (
            ". GPQA is gated on the Hugging Face Hub: accept the terms of Idavidrein/gpqa and"
            " set HF_TOKEN before staging, or pass --source-dir with gpqa_diamond.csv"
        )
    return hint


def resolve_data_files(cfg: dict[str, Any], data_dir: Path) -> dict[str, Any]:
    """Return a copy of ``cfg`` whose relative ``data_files`` live under ``data_dir``.

    Raises ``MissingDataError`` naming the missing path and how to produce it.
    """
    cfg = copy.deepcopy(cfg)
    name = cfg.get("task", "?")
    data_files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if cfg.get("dataset_path") != "json" or not isinstance(data_files, dict):
        raise ValueError(f"task {name!r}: expected dataset_path 'json' with a data_files mapping")
    data_dir = Path(data_dir).expanduser().resolve()
    benchmark = (cfg.get("metadata") or {}).get("sagc_benchmark")
    resolved = {}
    for split, rel in data_files.items():
        path = Path(rel) if Path(rel).is_absolute() else data_dir / rel
        if not path.is_file():
            if benchmark:
                how = stage_hint(benchmark, data_dir)
                what = f"benchmark {benchmark!r} is not staged"
            else:
                how = "produce the tiny-world data first (the pipeline's tiny data step, sagc.tiny)"
                what = f"tiny-world split {rel!r} is missing"
            raise MissingDataError(
                f"task {name!r}: {what}: {path} does not exist. Evaluation never downloads; {how}."
            )
        resolved[split] = str(path)
    cfg["dataset_kwargs"] = {**cfg["dataset_kwargs"], "data_files": resolved}
    return cfg


def apply_overrides(cfg: dict[str, Any], gen: GenerationOverrides) -> dict[str, Any]:
    """Return a copy of ``cfg`` with the run's generation settings applied."""
    cfg = copy.deepcopy(cfg)
    kwargs = dict(cfg.get("generation_kwargs") or {})
    if gen.max_gen_toks is not None:
        kwargs["max_gen_toks"] = int(gen.max_gen_toks)
    if gen.temperature is not None:
        kwargs["temperature"] = float(gen.temperature)
        # Greedy exactly when the temperature is 0 (HF rejects do_sample with T=0).
        kwargs["do_sample"] = gen.temperature > 0
    if gen.top_p is not None:
        kwargs["top_p"] = float(gen.top_p)
    if not kwargs.get("do_sample"):
        kwargs.pop("top_p", None)  # meaningless (and warned about) under greedy decoding
    cfg["generation_kwargs"] = kwargs
    if gen.repeats_for(cfg.get("task")) is not None:
        cfg["repeats"] = int(gen.repeats_for(cfg.get("task")))
    return cfg


def max_gen_toks_of(cfg: dict[str, Any]) -> int:
    value = (cfg.get("generation_kwargs") or {}).get("max_gen_toks")
    if value is None:
        raise ValueError(f"task {cfg.get('task')!r} sets no generation_kwargs.max_gen_toks")
    return int(value)


def write_run_tasks(
    tasks: list[str], data_dir: Path, out_dir: Path, gen: GenerationOverrides
) -> dict[str, dict[str, Any]]:
    """Write the effective YAML of every task into ``out_dir`` and return the configs."""
    if not tasks:
        raise ValueError("no task given")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"a task is listed twice: {tasks}")
    if isinstance(gen.repeats, Mapping) and set(gen.repeats) - set(tasks):
        raise ValueError(f"repeats names task(s) {sorted(set(gen.repeats) - set(tasks))} that are not "
                         f"evaluated (tasks: {tasks})")
    configs = {}
    for name in tasks:
        cfg = apply_overrides(resolve_data_files(load_task_config(name), data_dir), gen)
        max_gen_toks_of(cfg)
        configs[name] = cfg
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.yaml"):
        stale.unlink()  # a rerun with fewer tasks must not leave the old ones registered
    for name, cfg in configs.items():
        with open(out_dir / f"{name}.yaml", "w", encoding="utf-8") as fh:
            yaml.dump(cfg, fh, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
    return configs


#: Output tokens per second one GPU decodes for a 3B model under vLLM with many sequences
#: in flight: an assumed order of magnitude for the plan below, not a measurement here.
ASSUMED_DECODE_TOKENS_PER_GPU_S = 10_000


@dataclass(frozen=True)
class TaskPlan:
    """What one model's evaluation of a task generates at most: every sample to the cap."""

    task: str
    problems: int
    samples: int  # per problem (n of avg@n, pass@n)
    max_gen_toks: int

    @property
    def max_tokens(self) -> int:
        return self.problems * self.samples * self.max_gen_toks


def evaluation_plan(tasks: list[str], gen: GenerationOverrides, limit: int | None = None) -> list[TaskPlan]:
    """Per task, the generations of one model's evaluation, from the task YAMLs' problem
    counts (``metadata.sagc_problems``), the run's ``limit`` and its generation settings."""
    plans = []
    for name in tasks:
        cfg = apply_overrides(load_task_config(name), gen)
        problems = (cfg.get("metadata") or {}).get("sagc_problems")
        if problems is None:
            raise ValueError(f"task {name!r} states no metadata.sagc_problems (its problem count)")
        plans.append(TaskPlan(name, min(int(problems), limit or int(problems)), int(cfg.get("repeats", 1)),
                              max_gen_toks_of(cfg)))
    return plans


def describe_plan(plans: list[TaskPlan], models: int) -> str:
    """One paragraph for the dry run: samples and worst-case tokens, and GPU-hours at the
    assumed decode rate."""
    tokens = models * sum(p.max_tokens for p in plans)
    hours = tokens / ASSUMED_DECODE_TOKENS_PER_GPU_S / 3600
    parts = ", ".join(f"{p.task} {p.problems} x {p.samples} samples x <= {p.max_gen_toks} tok" for p in plans)
    return (f"evaluation plan: {models} models x ({parts}) = at most {tokens / 1e6:.0f}M generated tokens, "
            f"~{hours:.1f} GPU-hours at an assumed {ASSUMED_DECODE_TOKENS_PER_GPU_S} tokens/s per GPU "
            "(an upper bound: every sample to its cap)")
