"""Command line of ``python -m sagc.evaluate`` (the Snakemake evaluate/stage rules call it)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from sagc.evaluate.config import EvalConfig
from sagc.evaluate.stage import stage
from sagc.evaluate.taskcfg import task_yaml_paths


def _csv(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def batch_size(value: str) -> int | str:
    """``--batch-size 8``, ``auto`` or ``auto:N``."""
    if value == "auto" or (value.startswith("auto:") and value[5:].isdigit()):
        return value
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise argparse.ArgumentTypeError(f"batch_size must be a positive integer, 'auto' or 'auto:N', got {value!r}")


def repeats(value: str) -> int | dict[str, int]:
    """``--repeats 4`` (every task) or ``--repeats aime24_boxed=64,gpqa_diamond_boxed=8``."""
    try:
        if "=" not in value:
            return int(value)
        pairs = [item.split("=", 1) for item in _csv(value)]
        return {task.strip(): int(n) for task, n in pairs}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or TASK=N,TASK=N, got {value!r}") from None


_PARSERS = {"tasks": _csv, "repeats": repeats, "batch_size": batch_size}


def _flag_type(key: str, annotation: Any) -> Callable[[str], Any]:
    """``_PARSERS``' parser, else the int or float inside the key's type, else ``str``."""
    if key in _PARSERS:
        return _PARSERS[key]
    pending = [annotation]
    while pending:
        t = pending.pop()
        if t in (int, float):
            return t
        pending += get_args(t)
    return str


def cell_from_args(args: argparse.Namespace) -> EvalConfig:
    """The evaluation cell of a ``run`` command line: ``--config``'s file, flags on top."""
    flags = {k: v for k, v in vars(args).items() if k in EvalConfig.model_fields and v is not None}
    if args.config is not None:
        return EvalConfig.from_file(args.config, **flags)
    return EvalConfig.from_dict(flags)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sagc.evaluate", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate one model with lm-eval and write summary.json")
    run.add_argument(
        "--config",
        type=Path,
        default=None,
        help="an evaluation cell (JSON, as the pipeline writes eval.json); flags replace its keys",
    )
    # One flag per key of EvalConfig; an unset flag stays None, so the file's or model's value applies.
    for key, info in EvalConfig.model_fields.items():
        flags = ["--" + key.replace("_", "-")] + (["--tp"] if key == "tensor_parallel_size" else [])
        if info.annotation is bool:
            how = {"action": "store_const", "const": True}
        else:
            how = {"type": _flag_type(key, info.annotation)}
        run.add_argument(*flags, dest=key, default=None, help=info.description, **how)

    st = sub.add_parser("stage", help="cache the paper benchmarks locally (needs network once)")
    st.add_argument("--benchmarks", type=_csv, required=True, help="aime24,amc23,gpqa_diamond")
    st.add_argument("--cache", type=Path, required=True)
    st.add_argument(
        "--source-dir",
        type=Path,
        default=None,
        help="stage from local copies <DIR>/<benchmark>.jsonl|.json|.csv|.parquet",
    )
    st.add_argument("--force", action="store_true", help="re-stage even if the cache file exists")

    sub.add_parser("tasks", help="list the packaged task names")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            from sagc.evaluate.runner import run_evaluation

            print(json.dumps(run_evaluation(cell_from_args(args)), indent=2))
        elif args.command == "stage":
            for name, path in stage(args.benchmarks, args.cache, args.source_dir, args.force).items():
                print(f"{name}: {path}")
        else:
            for name, path in task_yaml_paths().items():
                print(f"{name}\t{path}")
        return 0
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
