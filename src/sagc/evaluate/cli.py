"""Command line of ``python -m sagc.evaluate`` (the Snakemake evaluate/stage rules call it).

    python -m sagc.evaluate run (--model DIR | --model-json FILE) --tasks tiny_arith,tiny_arith_heldout \\
        --data-dir DIR --out DIR [--backend hf|vllm] [--limit N] [--max-gen-toks N] \\
        [--temperature T] [--top-p P] [--repeats N|TASK=N,..] [--batch-size N|auto] [--device cpu] \\
        [--seed N] [--cell ID] [--threads N] [--apply-chat-template] \\
        [--tp N] [--gpu-memory-utilization F] [--max-model-len N] [--dtype D]
    python -m sagc.evaluate stage --benchmarks aime24,amc23,gpqa_diamond --cache DIR \\
        [--source-dir DIR] [--force] [--amc-year 2023]
    python -m sagc.evaluate tasks

Generation flags left out keep the task YAML's defaults. Errors exit with status 2 and a
one-line message on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _csv(value: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def batch_size(value: str) -> int | str:
    from sagc.evaluate.runner import parse_batch_size

    try:
        return parse_batch_size(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def repeats(value: str) -> int | dict[str, int]:
    """``--repeats 4`` (every task) or ``--repeats aime24_boxed=64,gpqa_diamond_boxed=8``."""
    try:
        if "=" not in value:
            return int(value)
        pairs = [item.split("=", 1) for item in _csv(value)]
        return {task.strip(): int(n) for task, n in pairs}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or TASK=N,TASK=N, got {value!r}") from None


def model_folder(args: argparse.Namespace) -> Path:
    """The folder to evaluate: ``--model``, or the ``path`` recorded in ``--model-json``."""
    if args.model is not None:
        return args.model
    try:
        record = json.loads(Path(args.model_json).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--model-json {args.model_json}: cannot read a model record ({exc})") from None
    path = record.get("path") if isinstance(record, dict) else None
    if not isinstance(path, str) or not path:
        raise ValueError(f"--model-json {args.model_json}: no 'path' of a local model folder in it")
    return Path(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sagc.evaluate", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate one model with lm-eval and write summary.json")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", type=Path, help="model folder (weights + tokenizer)")
    source.add_argument("--model-json", type=Path,
                        help="a resolved model's record (the hub world's models/<model>/base.json): "
                             "evaluate the local snapshot folder in its 'path'")
    run.add_argument("--tasks", type=_csv, required=True, help="comma-separated task names")
    run.add_argument("--data-dir", type=Path, required=True,
                     help="folder with the tasks' data files (tiny-world splits or benchmark cache)")
    run.add_argument("--out", type=Path, required=True, help="output folder")
    run.add_argument("--backend", choices=("hf", "vllm"), default="hf")
    run.add_argument("--cell", default="", help="cell id recorded in summary.json")
    run.add_argument("--limit", type=int, default=None, help="documents per task (default: all)")
    run.add_argument("--max-gen-toks", type=int, default=None)
    run.add_argument("--temperature", type=float, default=None, help="0 = greedy")
    run.add_argument("--top-p", type=float, default=None)
    run.add_argument("--repeats", type=repeats, default=None,
                     help="samples per problem (avg@n, pass@n): N for every task, or TASK=N,TASK=N")
    run.add_argument("--batch-size", type=batch_size, default=8,
                     help="rows per batch, or 'auto' / 'auto:N' (lm-eval finds the largest that fits)")
    run.add_argument("--device", default="cpu")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    run.add_argument("--apply-chat-template", action="store_true",
                     help="wrap prompts in the tokenizer's chat template (instruct models)")
    run.add_argument("--tp", type=int, default=1, help="vLLM tensor parallel size")
    run.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM memory fraction")
    run.add_argument("--max-model-len", type=int, default=None, help="vLLM max model length")
    run.add_argument("--dtype", default="auto", help="vLLM weights dtype (auto, bfloat16, float32)")

    st = sub.add_parser("stage", help="cache the paper benchmarks locally (needs network once)")
    st.add_argument("--benchmarks", type=_csv, required=True, help="aime24,amc23,gpqa_diamond")
    st.add_argument("--cache", type=Path, required=True)
    st.add_argument("--source-dir", type=Path, default=None,
                    help="stage from local copies <DIR>/<benchmark>.jsonl|.json|.csv|.parquet")
    st.add_argument("--force", action="store_true", help="re-stage even if the cache file exists")
    st.add_argument("--amc-year", type=int, default=2023)

    sub.add_parser("tasks", help="list the packaged task names")
    return parser


def _run(args: argparse.Namespace) -> int:
    from sagc.evaluate.runner import EvalConfig, run_evaluation
    from sagc.evaluate.taskcfg import GenerationOverrides

    if args.threads is not None:
        import torch

        torch.set_num_threads(max(1, args.threads))
    cfg = EvalConfig(
        model_dir=model_folder(args),
        tasks=args.tasks,
        data_dir=args.data_dir,
        out_dir=args.out,
        backend=args.backend,
        cell=args.cell,
        limit=args.limit,
        generation=GenerationOverrides(
            max_gen_toks=args.max_gen_toks, temperature=args.temperature,
            top_p=args.top_p, repeats=args.repeats,
        ),
        batch_size=args.batch_size,
        device=args.device,
        seed=args.seed,
        apply_chat_template=args.apply_chat_template,
        tensor_parallel_size=args.tp,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
    )
    summary = run_evaluation(cfg)
    print(json.dumps(summary, indent=2))
    return 0


def _stage(args: argparse.Namespace) -> int:
    from sagc.evaluate.stage import stage

    paths = stage(args.benchmarks, args.cache, args.source_dir, args.force, args.amc_year)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "stage":
            return _stage(args)
        from sagc.evaluate.taskcfg import task_yaml_paths

        for name, path in task_yaml_paths().items():
            print(f"{name}\t{path}")
        return 0
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
