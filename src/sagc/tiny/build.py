"""Pipeline steps that build the tiny world from code and a seed (the CLI calls these)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from sagc.tiny.defaults import DEFAULT_VOCAB_SIZE
from sagc.tiny.task import TaskParams, iter_texts, load_split, write_splits
from sagc.tiny.warmstart import WarmStartParams, warm_start

# torch / transformers are imported where needed: the seconds-long `data` step does not pay for them.


def build_data(out_dir: Path, seed: int = 0, params: TaskParams | None = None) -> dict:
    """``out_dir/{train,eval,heldout}.jsonl`` + ``task.json``."""
    t0 = time.perf_counter()
    sizes = write_splits(Path(out_dir), (params or TaskParams()).validate(), seed)
    return {"sizes": sizes, "seconds": time.perf_counter() - t0}


def build_tokenizer(data_dir: Path, out_dir: Path, vocab_size: int = DEFAULT_VOCAB_SIZE) -> dict:
    """A tokenizer folder (``save_pretrained``) + ``build.json``."""
    from sagc.tiny.tokenizer import save_tokenizer, train_tokenizer

    t0 = time.perf_counter()
    tok = train_tokenizer(iter_texts(Path(data_dir)), vocab_size=vocab_size)
    save_tokenizer(tok, out_dir)
    report = {"vocab_size": len(tok), "requested_vocab_size": vocab_size, "seconds": time.perf_counter() - t0}
    (Path(out_dir) / "build.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def build_base_model(
    arch: str,
    data_dir: Path,
    tokenizer_dir: Path,
    out_dir: Path,
    seed: int = 0,
    size=None,
    warm=None,
    eval_samples: int = 128,
    log_every: int = 0,
) -> dict:
    """Build, warm-start, evaluate, save a self-contained model folder + ``build.json``; return the report.

    ``size``: ``ModelSize``; ``warm``: ``WarmStartParams`` (defaults when None). Accuracy: on
    ``eval_samples`` eval rows, greedy and at the training temperature.
    """
    import torch

    from sagc.tiny.measure import SampleParams, accuracy
    from sagc.tiny.models import MODEL_NAMES, ModelSize, build_model, n_parameters, save_model
    from sagc.tiny.tokenizer import load_tokenizer

    t0 = time.perf_counter()
    size = (size or ModelSize()).validate()
    warm = (warm or WarmStartParams()).validate()
    sample = SampleParams()
    if isinstance(eval_samples, bool) or not isinstance(eval_samples, int) or eval_samples < 0:
        raise ValueError(f"eval_samples must be a non-negative integer, got {eval_samples!r}")
    tok = load_tokenizer(tokenizer_dir)
    train_rows = load_split(data_dir, "train")
    model = build_model(arch, tok, size, seed=seed)
    meta = Path(data_dir) / "task.json"  # its modulus; the default when absent
    modulus = int(json.loads(meta.read_text())["params"]["modulus"]) if meta.is_file() else TaskParams().modulus
    warm_report = warm_start(model, tok, train_rows, warm, seed=seed, log_every=log_every, modulus=modulus)
    report = {
        "model": MODEL_NAMES[arch],
        "arch": arch,
        "architecture": type(model).__name__,
        "seed": seed,
        "n_parameters": n_parameters(model),
        "size": size.to_dict(),
        "warm_start": warm_report,
    }
    if eval_samples:
        rows = load_split(data_dir, "eval")[:eval_samples]
        torch.manual_seed(seed)
        random.seed(seed)
        report["accuracy_greedy"] = accuracy(model, tok, rows, sample, greedy=True)
        report["accuracy_sampled"] = accuracy(model, tok, rows, sample, greedy=False)
    report["seconds"] = time.perf_counter() - t0
    save_model(model, tok, out_dir, report)
    return report
