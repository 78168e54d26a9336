"""``python -m sagc.tiny <command>``: the pipeline steps that build and check the tiny world.

Commands: ``data``, ``tokenizer``, ``base-model``, ``measure``; ``<command> --help`` lists
every flag and its default (bad values exit with a message naming the flag). What each
writes: src/sagc/tiny/README.md ("Pipeline steps").
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path

from sagc.tiny.build import build_base_model, build_data, build_tokenizer
from sagc.tiny.defaults import (
    DEFAULT_MAX_COMPLETION_LENGTH,
    DEFAULT_PROMPTS_PER_STEP,
    DEFAULT_TAU,
    DEFAULT_TEMPERATURE,
    DEFAULT_VOCAB_SIZE,
)
from sagc.tiny.models import ARCHS, ModelSize, load_model
from sagc.tiny.task import SPLITS, TaskParams, load_split
from sagc.tiny.tokenizer import load_tokenizer
from sagc.tiny.warmstart import WarmStartParams


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_dataclass_flags(p: argparse.ArgumentParser, cls, prefix: str = "") -> None:
    """One flag per dataclass field, default and type taken from the dataclass."""
    for f in fields(cls):
        name = prefix + f.name
        p.add_argument(_flag(name), dest=name, type=type(f.default), default=f.default, help=f"(default: {f.default})")


def _from_args(cls, args, prefix: str = ""):
    """Build and validate the dataclass; re-raise errors with the flag's name."""
    values = {f.name: getattr(args, prefix + f.name) for f in fields(cls)}
    try:
        return cls(**values).validate()
    except ValueError as e:
        flag = next((_flag(prefix + f.name) + ": " for f in fields(cls) if f"'{f.name}'" in str(e)), "")
        raise SystemExit(f"error: {flag}{e}") from None


def _positive_int(flag: str):
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be an integer, got {s!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be >= 1, got {v}")
        return v

    return parse


def _existing_dir(flag: str):
    def parse(s: str) -> Path:
        p = Path(s)
        if not p.is_dir():
            raise argparse.ArgumentTypeError(f"{flag}: folder not found: {s}")
        return p

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sagc.tiny", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("data", help="generate train/eval/heldout JSONL splits")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    _add_dataclass_flags(p, TaskParams)

    p = sub.add_parser("tokenizer", help="train the byte-level BPE tokenizer on the data")
    p.add_argument("--data", type=_existing_dir("--data"), required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)

    p = sub.add_parser("base-model", help="build + warm-start + evaluate + save a tiny model")
    p.add_argument("--arch", choices=ARCHS, required=True)
    p.add_argument("--data", type=_existing_dir("--data"), required=True)
    p.add_argument("--tokenizer", type=_existing_dir("--tokenizer"), required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-samples", type=int, default=128)
    p.add_argument("--threads", type=_positive_int("--threads"), default=1)
    p.add_argument("--log-every", type=int, default=50)
    _add_dataclass_flags(p, ModelSize)
    _add_dataclass_flags(p, WarmStartParams, prefix="warm_")

    p = sub.add_parser("measure", help="straggler rate per G and length distribution")
    p.add_argument("--model", type=_existing_dir("--model"), required=True)
    p.add_argument("--data", type=_existing_dir("--data"), required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--group-sizes", type=_positive_int("--group-sizes"), nargs="+", default=[4, 8, 16])
    p.add_argument("--steps", type=_positive_int("--steps"), default=30)
    p.add_argument("--tau", type=float, default=DEFAULT_TAU)
    p.add_argument("--prompts-per-step", type=_positive_int("--prompts-per-step"), default=DEFAULT_PROMPTS_PER_STEP)
    p.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    p.add_argument(
        "--max-completion-length", type=_positive_int("--max-completion-length"), default=DEFAULT_MAX_COMPLETION_LENGTH
    )
    p.add_argument("--split", choices=SPLITS, default="train")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=_positive_int("--threads"), default=1)
    return parser


def _emit(report: dict, path: Path | None = None) -> None:
    text = json.dumps(report, indent=2)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    print(text)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "data":
        params = _from_args(TaskParams, args)
        report = build_data(args.out, seed=args.seed, params=params)
        report["params"] = params.to_dict()
        _emit(report, args.out / "build.json")
    elif args.command == "tokenizer":
        if args.vocab_size < 300:
            raise SystemExit(f"error: --vocab-size must be >= 300, got {args.vocab_size}")
        _emit(build_tokenizer(args.data, args.out, vocab_size=args.vocab_size))
    elif args.command == "base-model":
        import torch

        if args.eval_samples < 0:
            raise SystemExit(f"error: --eval-samples must be >= 0, got {args.eval_samples}")
        size = _from_args(ModelSize, args)
        warm = _from_args(WarmStartParams, args, prefix="warm_")
        torch.set_num_threads(args.threads)
        report = build_base_model(
            args.arch,
            args.data,
            args.tokenizer,
            args.out,
            seed=args.seed,
            size=size,
            warm=warm,
            eval_samples=args.eval_samples,
            log_every=max(0, args.log_every),
        )
        _emit(report)
    elif args.command == "measure":
        import torch

        from sagc.tiny.measure import SampleParams, measure_group_sizes

        if not args.tau > 1:
            raise SystemExit(f"error: --tau must be > 1, got {args.tau}")
        if not args.temperature > 0:
            raise SystemExit(f"error: --temperature must be > 0, got {args.temperature}")
        torch.set_num_threads(args.threads)
        model, tok = load_model(args.model), load_tokenizer(args.model)
        report = measure_group_sizes(
            model,
            tok,
            load_split(args.data, args.split),
            list(args.group_sizes),
            args.steps,
            prompts_per_step=args.prompts_per_step,
            tau=args.tau,
            params=SampleParams(temperature=args.temperature, max_new_tokens=args.max_completion_length),
            seed=args.seed,
        )
        report["model"] = str(args.model)
        report["split"] = args.split
        _emit(report, args.out)
    return 0
