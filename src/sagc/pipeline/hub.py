"""The paper world: real models and training prompts from the Hugging Face cache.

Nothing here downloads at training time. ``stage_train_data`` converts the RL training set
once (it needs the network, or a copy in ``HF_HOME``, or a local file); ``resolve_model``
only checks the local cache and fails with the command that fills it.

Training set (the paper's summaries do not name one): DeepScaleR-Preview
(``agentica-org/DeepScaleR-Preview-Dataset``, ~40k competition problems from AIME, AMC,
Omni-MATH and STILL with verified final answers; columns ``problem``, ``answer``), a
standard set for GRPO/DAPO on math. Its prompts are rendered with the very template of
the AIME evaluation task, so training and evaluation ask in the same words.
"""

from __future__ import annotations

import json
from pathlib import Path

DEFAULT_TRAIN_DATASET = "agentica-org/DeepScaleR-Preview-Dataset"


class NotStagedError(RuntimeError):
    """A model or dataset the pipeline needs is not available offline."""


def prompt_template() -> str:
    """The R1-style prompt of the paper's evaluation tasks (``{{problem}}`` placeholder)."""
    from sagc.evaluate.taskcfg import load_task_config

    return load_task_config("aime24_boxed")["doc_to_text"]


def render_prompt(problem: str, template: str | None = None) -> str:
    import jinja2

    return jinja2.Template(template or prompt_template()).render(problem=problem)


def stage_train_data(dataset: str | None, split: str, out: str | Path, source: str | None = None) -> int:
    """Write ``out`` (JSONL: prompt, answer, problem) from a local file or a hub dataset.

    ``source``: a local JSON/JSONL file with ``problem`` and ``answer`` columns (wins over
    ``dataset``). Returns the number of rows written.
    """
    import datasets

    try:
        if source:
            if not Path(source).exists():
                raise NotStagedError(f"hub.train_source {source!r} does not exist")
            ds = datasets.load_dataset("json", data_files=str(source), split="train")
        else:
            ds = datasets.load_dataset(dataset or DEFAULT_TRAIN_DATASET, split=split)
    except NotStagedError:
        raise
    except Exception as err:  # datasets raises several types when offline
        raise NotStagedError(
            f"training dataset {dataset!r} (split {split!r}) is not in the local cache and the "
            f"hub is unreachable ({type(err).__name__}: {err}). Stage it once with network: "
            f"`HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 python -c \"import datasets; "
            f"datasets.load_dataset('{dataset}', split='{split}')\"`, or set HF_HOME to a cache "
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
            rec = {"prompt": render_prompt(row["problem"], template), "answer": str(row["answer"]),
                   "problem": row["problem"]}
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
            f"model {hub_id} (revision {revision}) is not in the local cache; run with network "
            f"once (`huggingface-cli download {hub_id} --revision {revision}`) or set HF_HOME "
            f"to a cache that holds it"
        ) from err
