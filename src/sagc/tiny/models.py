"""Tiny base models of the paper's two architecture classes, built from a seed.

``tiny-qwen2``: ``Qwen2ForCausalLM`` (biased q/k/v projections, like Qwen2.5); ``tiny-llama``:
``LlamaForCausalLM`` (no biases, like Llama-3.2); both tie their embeddings, as the paper's 3B models do.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from sagc.tiny.tokenizer import save_tokenizer

ARCHS = ("qwen2", "llama")
#: Model names used by the pipeline (results/<name>/models/<model>/).
MODEL_NAMES = {"qwen2": "tiny-qwen2", "llama": "tiny-llama"}


@dataclass(frozen=True)
class ModelSize:
    """Shape of a tiny model (~0.43M parameters by default). ``max_position_embeddings`` must cover
    the longest held-out prompt plus the evaluation's completion cap."""

    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    max_position_embeddings: int = 512
    rope_theta: float = 10000.0

    def validate(self) -> ModelSize:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "int" and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"model parameter {f.name!r} must be a positive integer, got {v!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"model parameter 'hidden_size' ({self.hidden_size}) must be divisible by "
                f"'num_heads' ({self.num_heads})"
            )
        if (self.hidden_size // self.num_heads) % 2:
            raise ValueError("model parameter 'hidden_size' / 'num_heads' must be even (RoPE)")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"model parameter 'num_heads' ({self.num_heads}) must be divisible by "
                f"'num_kv_heads' ({self.num_kv_heads})"
            )
        if self.max_position_embeddings < 64:
            raise ValueError("model parameter 'max_position_embeddings' must be >= 64")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


def build_model(arch: str, tokenizer, size: ModelSize | None = None, seed: int = 0):
    """A randomly initialised model of ``arch`` ("qwen2" | "llama") for ``tokenizer``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    size = (size or ModelSize()).validate()
    config_cls, model_cls = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}[arch]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_layers,
        num_attention_heads=size.num_heads,
        num_key_value_heads=size.num_kv_heads,
        max_position_embeddings=size.max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": size.rope_theta},
    )
    torch.manual_seed(seed)
    model = model_cls(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
    )
    return model


def n_parameters(model) -> int:
    """Unique parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def save_model(model, tokenizer, out_dir: Path, report: dict | None = None) -> Path:
    """Save model + tokenizer into one self-contained folder (and ``build.json`` if given)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    save_tokenizer(tokenizer, out_dir)
    if report is not None:
        (out_dir / "build.json").write_text(json.dumps(report, indent=2) + "\n")
    return out_dir


def load_model(path: Path):
    """Load a tiny model folder with the standard ``AutoModelForCausalLM``."""
    from transformers import AutoModelForCausalLM

    path = Path(path)
    if not (path / "config.json").is_file():
        raise ValueError(f"no config.json in model folder {path}")
    return AutoModelForCausalLM.from_pretrained(path)
