"""Tiny random models with the paper models' real architectures, for CPU checks.

``tiny_paper_model`` takes the published ``config.json`` of Qwen2.5-3B / Llama-3.2-3B
(``sagc.pipeline.memory.PAPER_MODEL_CONFIGS``) and shrinks only the sizes (hidden size,
layers, heads, vocabulary): the architecture class, Qwen2's q/k/v biases, Llama-3's rope
scaling, tied embeddings, norm epsilons and the grouped-query attention stay as shipped.
"""

from __future__ import annotations

from sagc.pipeline.memory import PAPER_MODEL_CONFIGS

PAPER_HUB_IDS = tuple(PAPER_MODEL_CONFIGS)


def tiny_paper_config(hub_id: str, vocab_size: int, eos_id: int | None = None, pad_id: int | None = None):
    from transformers import AutoConfig

    published = dict(PAPER_MODEL_CONFIGS[hub_id])
    model_type = published.pop("model_type")
    published.pop("architectures", None)
    heads, kv_heads = (4, 1) if model_type == "qwen2" else (4, 2)  # 16:2 and 24:8 -> GQA kept
    small = dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        vocab_size=vocab_size,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    if "head_dim" in published:
        small["head_dim"] = 64 // heads
    return AutoConfig.for_model(model_type, **{**published, **small})


def tiny_paper_model(
    hub_id: str,
    vocab_size: int,
    eos_id: int | None = None,
    pad_id: int | None = None,
    seed: int = 0,
    dtype: str = "float32",
):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_paper_config(hub_id, vocab_size, eos_id, pad_id))
    return model.to(getattr(torch, dtype))
