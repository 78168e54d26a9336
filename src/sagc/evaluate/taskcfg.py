"""The packaged lm-eval task YAMLs, their ``sagc_*`` metadata, and the per-run copies pointing them at
local data with the run's generation settings (docs/evaluation.md, "Task YAMLs and their per-run copies")."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import Field

from sagc.config_models import Flag, OneOf, Section, Text
from sagc.evaluate.config import GenerationOverrides
from sagc.evaluate.normalizers import NORMALIZERS

TASKS_DIR = Path(__file__).parent / "tasks"
WORLDS = ("tiny", "hub")
#: The local copies of a benchmark that staging reads (``stage --source-dir``).
SOURCE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


class MissingDataError(FileNotFoundError):
    """A task's data file is not where the run expects it (message says how to make it)."""


class FunctionRef(str):
    """A ``!function module.name`` reference, kept as text so it survives a YAML round trip."""


class _Loader(yaml.SafeLoader): ...


class _Dumper(yaml.SafeDumper): ...


_Loader.add_constructor("!function", lambda loader, node: FunctionRef(loader.construct_scalar(node)))
_Dumper.add_representer(FunctionRef, lambda dumper, ref: dumper.represent_scalar("!function", str(ref)))


def task_yaml_paths(tasks_dir: Path = TASKS_DIR) -> dict[str, Path]:
    """Map every packaged task name to its YAML file."""
    out = {}
    for path in sorted(Path(tasks_dir).glob("*.yaml")):
        name = load_task_yaml_file(path).get("task")
        if not isinstance(name, str):
            raise ValueError(f"task YAML {path} has no 'task' name")
        out[name] = path
    return out


class Benchmark(Section):
    """A staged benchmark (``metadata.sagc_source`` plus its name): its source and normaliser."""

    section_key: ClassVar[str] = "metadata.sagc_source"
    name: Text  # metadata.sagc_benchmark: the cache file is <name>.jsonl
    dataset: Text = Field(description="Hub dataset id")
    config: Text | None = None
    split: Text
    normalizer: OneOf(tuple(NORMALIZERS)) = Field(description="a function of sagc.evaluate.normalizers")
    options: dict[Text, Any] = Field({}, description="the normaliser's keyword arguments")
    gated: Flag = Field(False, description="the Hub asks for accepted terms and a token")

    @property
    def source(self) -> str:
        return f"hf://datasets/{self.dataset}" + (f"/{self.config}" if self.config else "") + f" split={self.split}"


@dataclass(frozen=True)
class TaskMeta:
    """What the pipeline reads from a task YAML's metadata (docs/architecture.md)."""

    task: str
    path: Path
    world: str
    problems: int | None = None
    benchmark: Benchmark | None = None


def read_task_meta(path: Path) -> TaskMeta:
    """The metadata of the task YAML ``path``; a bad key raises a ``ValueError`` naming file and key."""
    cfg = load_task_yaml_file(path)
    meta = cfg.get("metadata") or {}

    def refuse(key: str, why: str) -> ValueError:
        return ValueError(f"task YAML {path}: metadata.{key} {why}")

    world = meta.get("sagc_world")
    if world not in WORLDS:
        raise refuse("sagc_world", f"must be one of {list(WORLDS)} (the world whose tasks it is), got {world!r}")
    name = meta.get("sagc_benchmark")
    if name is None:
        if world == "hub":
            raise refuse("sagc_benchmark", "is missing: a hub task reads a staged benchmark (its cache name)")
        return TaskMeta(cfg["task"], Path(path), world)
    if not isinstance(name, str) or not name:
        raise refuse("sagc_benchmark", f"must be a benchmark name, got {name!r}")
    data_files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if data_files != {"test": f"{name}.jsonl"}:
        raise ValueError(
            f"task YAML {path}: dataset_kwargs.data_files must be {{test: {name}.jsonl}} (the staged "
            f"cache of metadata.sagc_benchmark {name!r}), got {data_files!r}"
        )
    problems = meta.get("sagc_problems")
    if isinstance(problems, bool) or not isinstance(problems, int) or problems < 1:
        raise refuse("sagc_problems", f"must be the staged set's problem count (an integer >= 1), got {problems!r}")
    src = meta.get("sagc_source")
    if not isinstance(src, dict):
        raise refuse(
            "sagc_source",
            "is missing: the Hub source staging reads ({dataset, config, split, normalizer[, options, gated]})",
        )
    try:
        bench = Benchmark.from_dict({**src, "name": name})
    except ValueError as err:
        raise ValueError(f"task YAML {path}: {err}") from None
    return TaskMeta(cfg["task"], Path(path), world, problems, bench)


def task_metas(tasks_dir: Path = TASKS_DIR) -> dict[str, TaskMeta]:
    """Every packaged task's metadata by name, in file-name order; refuses two sources for one benchmark."""
    metas = {name: read_task_meta(path) for name, path in task_yaml_paths(tasks_dir).items()}
    seen: dict[str, TaskMeta] = {}
    for meta in metas.values():
        if meta.benchmark is None:
            continue
        other = seen.setdefault(meta.benchmark.name, meta)
        if other.benchmark != meta.benchmark:
            raise ValueError(
                f"task YAMLs {other.path} and {meta.path}: benchmark {meta.benchmark.name!r} is staged "
                "from two different sources (metadata.sagc_source)"
            )
    return metas


def world_tasks(world: str) -> list[str]:
    """The packaged tasks of ``world`` (``tiny`` or ``hub``): a config's default tasks."""
    return [name for name, meta in task_metas().items() if meta.world == world]


def benchmarks() -> dict[str, Benchmark]:
    """Every staged benchmark a packaged task reads, by name."""
    return {m.benchmark.name: m.benchmark for m in task_metas().values() if m.benchmark is not None}


def task_benchmarks(tasks: list[str]) -> list[str]:
    """The benchmarks ``tasks`` read, in task order, each once: what to stage for them."""
    metas = task_metas()
    unknown = [t for t in tasks if t not in metas]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; packaged tasks: {sorted(metas)}")
    return list(dict.fromkeys(metas[t].benchmark.name for t in tasks if metas[t].benchmark is not None))


def load_task_yaml_file(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        cfg = yaml.load(fh, Loader=_Loader)
    if not isinstance(cfg, dict):
        raise ValueError(f"task YAML {path} is not a mapping")
    return cfg


def load_task_config(name: str) -> dict[str, Any]:
    """The packaged config of task ``name`` (``!function`` entries as ``FunctionRef``)."""
    paths = task_yaml_paths()
    if name not in paths:
        raise ValueError(f"unknown task {name!r}; packaged tasks: {sorted(paths)}")
    return load_task_yaml_file(paths[name])


def stage_hint(bench: Benchmark, cache: Path) -> str:
    """The command line that stages ``bench`` into ``cache`` (used in error messages)."""
    hint = (
        f"python -m sagc.evaluate stage --benchmarks {bench.name} --cache {cache} (downloads {bench.source}"
        f" once; needs network), or add --source-dir DIR holding a local copy {bench.name}{'|'.join(SOURCE_SUFFIXES)}"
    )
    if bench.gated:
        hint += (
            f". {bench.dataset} is gated on the Hugging Face Hub: accept its terms and"
            " set HF_TOKEN before staging, or pass --source-dir with a local copy"
        )
    return hint


def resolve_data_files(cfg: dict[str, Any], data_dir: Path) -> dict[str, Any]:
    """A copy of ``cfg`` whose relative ``data_files`` live under ``data_dir``; ``MissingDataError``
    names a missing file and how to produce it."""
    cfg = copy.deepcopy(cfg)
    name = cfg.get("task", "?")
    data_files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if cfg.get("dataset_path") != "json" or not isinstance(data_files, dict):
        raise ValueError(f"task {name!r}: expected dataset_path 'json' with a data_files mapping")
    data_dir = Path(data_dir).expanduser().resolve()
    metas = task_metas()
    benchmark = metas[name].benchmark if name in metas else None
    resolved = {}
    for split, rel in data_files.items():
        path = Path(rel) if Path(rel).is_absolute() else data_dir / rel
        if not path.is_file():
            if benchmark:
                how = stage_hint(benchmark, data_dir)
                what = f"benchmark {benchmark.name!r} is not staged"
            else:
                how = "produce the tiny-world data first (the pipeline's tiny data step, sagc.tiny)"
                what = f"tiny-world split {rel!r} is missing"
            raise MissingDataError(f"task {name!r}: {what}: {path} does not exist. Evaluation never downloads; {how}.")
        resolved[split] = str(path)
    cfg["dataset_kwargs"] = {**cfg["dataset_kwargs"], "data_files": resolved}
    return cfg


def apply_overrides(cfg: dict[str, Any], gen: GenerationOverrides) -> dict[str, Any]:
    """A copy of ``cfg`` with the run's generation settings applied."""
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
        raise ValueError(
            f"repeats names task(s) {sorted(set(gen.repeats) - set(tasks))} that are not evaluated (tasks: {tasks})"
        )
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


#: Output tokens/s of one GPU decoding a 3B model under vLLM: an assumed order of magnitude, not measured.
ASSUMED_DECODE_TOKENS_PER_GPU_S = 10_000


@dataclass(frozen=True)
class TaskPlan:
    """What one model's evaluation of a task generates at most: every sample to the cap."""

    task: str
    problems: int
    samples: int  # per problem (n of avg@n, pass@n)
    max_gen_toks: int


def evaluation_plan(tasks: list[str], gen: GenerationOverrides, limit: int | None = None) -> list[TaskPlan]:
    """Per task, the generations of one model's evaluation (``metadata.sagc_problems``, ``limit``, ``gen``)."""
    plans = []
    metas = task_metas()
    for name in tasks:
        cfg = apply_overrides(load_task_config(name), gen)
        problems = metas[name].problems
        if problems is None:
            raise ValueError(f"task {name!r} states no metadata.sagc_problems (its problem count)")
        plans.append(
            TaskPlan(name, min(int(problems), limit or int(problems)), int(cfg.get("repeats", 1)), max_gen_toks_of(cfg))
        )
    return plans


def describe_plan(plans: list[TaskPlan], models: int) -> str:
    """The dry run's line: samples, worst-case tokens and GPU-hours at the assumed decode rate."""
    tokens = models * sum(p.problems * p.samples * p.max_gen_toks for p in plans)
    hours = tokens / ASSUMED_DECODE_TOKENS_PER_GPU_S / 3600
    parts = ", ".join(f"{p.task} {p.problems} x {p.samples} samples x <= {p.max_gen_toks} tok" for p in plans)
    return (
        f"evaluation plan: {models} models x ({parts}) = at most {tokens / 1e6:.0f}M generated tokens, "
        f"~{hours:.1f} GPU-hours at an assumed {ASSUMED_DECODE_TOKENS_PER_GPU_S} tokens/s per GPU "
        "(an upper bound: every sample to its cap)"
    )
