"""Loading and saving a model folder's tokenizer: the one loader training and evaluation use.

The tiny world's tokenizer is rebuilt by ``sagc.tiny.tokenizer`` (``AutoTokenizer`` would swap
the pre-tokenizer of a ``qwen2`` folder: docs/library-notes.md); a folder saved as
``PreTrainedTokenizerFast`` loads as that class; anything else goes through ``AutoTokenizer``.
"""

from __future__ import annotations

import json
from pathlib import Path

#: The tiny world's special tokens (``sagc.tiny.tokenizer``), how its folders are recognised.
TINY_EOS, TINY_PAD = "<|endoftext|>", "<|pad|>"


def _saved_config(folder: Path) -> dict | None:
    path = folder / "tokenizer_config.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def is_tiny_tokenizer(folder: str | Path) -> bool:
    """True for a folder holding the tiny world's tokenizer."""
    folder = Path(folder)
    cfg = _saved_config(folder) if folder.is_dir() else None
    return (
        cfg is not None
        and (folder / "tokenizer.json").is_file()
        and cfg.get("tokenizer_class") == "PreTrainedTokenizerFast"
        and cfg.get("eos_token") == TINY_EOS
        and cfg.get("pad_token") == TINY_PAD
    )


def load_tokenizer(
    source: str | Path, *, revision: str | None = None, trust_remote_code: bool = False, padding_side: str | None = None
):
    """The tokenizer of a model folder or hub id; one without a pad token pads with eos."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = Path(source)
    if folder.is_dir() and is_tiny_tokenizer(folder):
        from sagc.tiny.tokenizer import load_tokenizer as load_tiny

        tok = load_tiny(folder)
    elif folder.is_dir():
        cfg = _saved_config(folder)
        if cfg is None and not (folder / "tokenizer.json").is_file():
            raise FileNotFoundError(f"no tokenizer in model folder {folder} (tokenizer_config.json)")
        if (cfg or {}).get("tokenizer_class") in (None, "PreTrainedTokenizerFast"):
            tok = PreTrainedTokenizerFast.from_pretrained(str(folder))
        else:
            tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code, revision=revision)
    else:
        tok = AutoTokenizer.from_pretrained(str(source), trust_remote_code=trust_remote_code, revision=revision)
    if padding_side is not None:
        tok.padding_side = padding_side
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ValueError(f"tokenizer of {source} has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    return tok


def save_tokenizer(tokenizer, folder: str | Path, like: str | Path) -> None:
    """Save ``tokenizer`` into ``folder`` the way the one in ``like`` was saved (the tiny
    world's keeps its explicit ``tokenizer_class``, so it loads back as itself)."""
    if is_tiny_tokenizer(like):
        from sagc.tiny.tokenizer import save_tokenizer as save_tiny

        save_tiny(tokenizer, Path(folder))
    else:
        tokenizer.save_pretrained(str(folder))
