"""The paper world: real models and training prompts from the Hugging Face cache.

Staged once with network (``train-data``); afterwards only the local cache is read (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sagc.evaluate.taskcfg import load_task_config

# HUB_ACCESS_PREFIX and offline_switches: also imported from here by the rules and tests
from sagc.hub_switches import HUB_ACCESS_PREFIX, hub_switched_off_reason, offline_switches

DEFAULT_TRAIN_DATASET = "agentica-org/DeepScaleR-Preview-Dataset"


class NotStagedError(RuntimeError):
    """A model or dataset the pipeline needs is not available offline."""


def prompt_template() -> str:
    """The R1-style prompt of the paper's evaluation tasks (``{{problem}}`` placeholder)."""
    return load_task_config("aime24_boxed")["doc_to_text"]


def render_prompt(problem: str, template: str | None = None) -> str:
    import jinja2

    return jinja2.Template(template or prompt_template()).render(problem=problem)


def stage_train_data(dataset: str | None, split: str, out: str | Path, source: str | None = None) -> int:
    """Write ``out`` (JSONL: prompt, answer, problem) from a local JSON/JSONL ``source`` with
    ``problem`` and ``answer`` columns, or else the hub ``dataset``; the rows written."""
    import datasets

    if source and not Path(source).exists():
        raise NotStagedError(f"hub.train_source {source!r} does not exist")
    name = dataset or DEFAULT_TRAIN_DATASET
    try:
        if source:
            ds = datasets.load_dataset("json", data_files=str(source), split="train")
        else:
            ds = datasets.load_dataset(name, split=split)
    except Exception as err:  # datasets raises several types when offline
        switches = offline_switches()
        why = hub_switched_off_reason(switches) if switches else f"downloading it failed ({type(err).__name__}: {err})"
        raise NotStagedError(
            f"training dataset {name!r} (split {split!r}) is not in the local cache, and {why}. "
            f"Stage it once with network: `{HUB_ACCESS_PREFIX} python -m sagc.pipeline.hub "
            f"train-data --dataset {name} --split {split} --out {out}`, or set HF_HOME to a cache "
            f"that holds it, or give a local JSONL with problem/answer columns as hub.train_source."
        ) from err
    missing = {"problem", "answer"} - set(ds.column_names)
    if missing:
        raise ValueError(f"training dataset {source or dataset!r} lacks column(s) {sorted(missing)}")
    template = prompt_template()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w") as fh:
        for row in ds:
            if row["answer"] in (None, ""):
                continue
            rec = {
                "prompt": render_prompt(row["problem"], template),
                "answer": str(row["answer"]),
                "problem": row["problem"],
            }
            fh.write(json.dumps(rec) + "\n")
            n += 1
    return n


def resolve_model(hub_id: str, revision: str = "main") -> str:
    """Local snapshot folder of ``hub_id`` from the cache, or a clear ``NotStagedError``."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(hub_id, revision=revision, local_files_only=True)
    except Exception as err:
        raise NotStagedError(
            f"model {hub_id} (revision {revision}) is not in the local cache; run with network once (`hf download "
            f"{hub_id} --revision {revision}`) or set HF_HOME to a cache that holds it"
        ) from err


def main(argv: list[str] | None = None) -> int:
    """``train-data``: the staging rule's command."""
    parser = argparse.ArgumentParser(prog="python -m sagc.pipeline.hub", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train-data", help="convert the RL training set to the pipeline's JSONL")
    train.add_argument("--dataset", default=DEFAULT_TRAIN_DATASET, help="hub dataset id")
    train.add_argument("--split", default="train")
    train.add_argument("--source", default=None, help="a local JSON/JSONL file instead of the hub")
    train.add_argument("--out", required=True)
    ns = parser.parse_args(argv)
    try:
        n = stage_train_data(ns.dataset, ns.split, ns.out, ns.source)
    except (NotStagedError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {n} prompts to {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
