"""An offline byte-level BPE tokenizer trained on the tiny task's text, with Qwen2's pre-tokenization.

Special tokens: ``<|endoftext|>`` (eos, ends every completion), ``<|pad|>``, ``<|im_start|>`` /
``<|im_end|>`` (ChatML, for TRL's conversational paths); no bos. Load it with ``load_tokenizer``
(src/sagc/tiny/README.md, "Tokenizer pitfall").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from sagc.tiny.defaults import DEFAULT_VOCAB_SIZE

if TYPE_CHECKING:  # transformers is imported where a tokenizer is built
    from transformers import PreTrainedTokenizerFast

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (EOS_TOKEN, PAD_TOKEN, IM_START, IM_END)

#: ChatML, as in Qwen2; a generation prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

#: Qwen2's pre-tokenization regex (transformers.models.qwen2.tokenization_qwen2).
PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def train_tokenizer(texts: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it with eos/pad and the chat template."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 300:
        # 256 byte symbols + specials must fit, with some room for merges.
        raise ValueError(f"vocab_size must be an integer >= 300, got {vocab_size!r}")
    tok = Tokenizer(models.BPE(unk_token=None))
    # Exactly Qwen2's normalizer and pre-tokenizer, so that AutoTokenizer's Qwen2Tokenizer on a
    # qwen2 model folder gives ``load_tokenizer``'s ids.
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return wrap_tokenizer(tok)


def wrap_tokenizer(tok: Tokenizer) -> PreTrainedTokenizerFast:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=[IM_START, IM_END],
        padding_side="left",  # decoder-only generation pads on the left
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def save_tokenizer(tokenizer, out_dir: Path) -> Path:
    """``save_pretrained`` plus ``tokenizer_class: PreTrainedTokenizerFast`` in the config, so that
    ``AutoTokenizer`` (lm-eval's HF backend) gets the same token ids."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    cfg_path = out_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    return out_dir


def load_tokenizer(path: Path) -> PreTrainedTokenizerFast:
    """Load the tokenizer from a tokenizer folder or a model folder (it holds one too)."""
    path = Path(path)
    tj = path / "tokenizer.json"
    if not tj.is_file():
        raise ValueError(f"no tokenizer.json in {path} (build it with `python -m sagc.tiny tokenizer`)")
    return wrap_tokenizer(Tokenizer.from_file(str(tj)))
