"""Tokenizer round trip and Auto* loading; base models build, save, reload and generate."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, Qwen2ForCausalLM

from sagc.tiny.models import ModelSize, build_model, n_parameters, save_model
from sagc.tiny.task import load_split
from sagc.tiny.tokenizer import EOS_TOKEN, PAD_TOKEN, load_tokenizer


def _texts(data_dir):
    rows = load_split(data_dir, "train")[:50] + load_split(data_dir, "heldout")[:5]
    return [r["prompt"] + r["solution"] for r in rows] + ["Check again:\n  tabs\tand ünïcode 0123"]


def test_tokenizer_round_trip_and_specials(tiny_tokenizer_dir, tiny_data_dir):
    tok = load_tokenizer(tiny_tokenizer_dir)
    assert tok.eos_token == EOS_TOKEN and tok.pad_token == PAD_TOKEN
    assert tok.eos_token_id != tok.pad_token_id
    for text in _texts(tiny_data_dir):
        assert tok.decode(tok(text)["input_ids"]) == text
    # Digits are one token each: "e=7+4=1" is 7 tokens, so lengths track the step count.
    assert len(tok("e=7+4=1")["input_ids"]) == 7
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="tokenizer.json"):
        load_tokenizer(tmp_path)


@pytest.mark.parametrize("fixture, cls", [("tiny_qwen2_dir", Qwen2ForCausalLM), ("tiny_llama_dir", LlamaForCausalLM)])
def test_auto_classes_load_the_folder_with_the_same_token_ids(request, fixture, cls, tiny_data_dir):
    """lm-eval loads with AutoTokenizer/AutoModel: ids must equal load_tokenizer's (a qwen2
    folder gets a Qwen2Tokenizer; our pre-tokenizer is Qwen2's, so the ids agree)."""
    folder = request.getfixturevalue(fixture)
    ours, auto = load_tokenizer(folder), AutoTokenizer.from_pretrained(folder)
    for text in _texts(tiny_data_dir):
        assert auto(text)["input_ids"] == ours(text)["input_ids"]
    assert (auto.eos_token_id, auto.pad_token_id) == (ours.eos_token_id, ours.pad_token_id)
    assert json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model) is cls
    assert model.generation_config.eos_token_id == ours.eos_token_id
    assert model.generation_config.pad_token_id == ours.pad_token_id


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_build_save_reload_generate(arch, tiny_tokenizer_dir, tmp_path):
    tok = load_tokenizer(tiny_tokenizer_dir)
    size = ModelSize(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    model = build_model(arch, tok, size, seed=3)
    assert n_parameters(model) < 50_000
    save_model(model, tok, tmp_path / arch)
    again = AutoModelForCausalLM.from_pretrained(tmp_path / arch)
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    enc = tok(["a=1\nb=a+2\n", "c=3\n"], return_tensors="pt", padding=True)
    torch.manual_seed(0)
    out = again.generate(**enc, max_new_tokens=5, do_sample=False)
    assert out.shape == (2, enc["input_ids"].shape[1] + 5)
    # Seeded init: same seed, same weights.
    twin = build_model(arch, tok, size, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters()))
    assert again.config.max_position_embeddings >= 512


def test_default_models_are_two_architectures_of_similar_size(tiny_tokenizer_dir):
    tok = load_tokenizer(tiny_tokenizer_dir)
    qwen, llama = build_model("qwen2", tok), build_model("llama", tok)
    assert isinstance(qwen, Qwen2ForCausalLM) and isinstance(llama, LlamaForCausalLM)
    assert qwen.model.layers[0].self_attn.q_proj.bias is not None  # Qwen2: biased qkv
    assert llama.model.layers[0].self_attn.q_proj.bias is None
    assert 0.3e6 < n_parameters(qwen) < 1e6 and 0.3e6 < n_parameters(llama) < 1e6


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"hidden_size": 30}, "hidden_size"),
        ({"num_kv_heads": 3}, "num_heads"),
        ({"num_layers": 0}, "num_layers"),
        ({"max_position_embeddings": 32}, "max_position_embeddings"),
    ],
)
def test_bad_model_sizes_name_the_parameter(kwargs, name, tiny_tokenizer_dir):
    tok = load_tokenizer(tiny_tokenizer_dir)
    with pytest.raises(ValueError, match=name):
        build_model("qwen2", tok, ModelSize(**kwargs))


def test_unknown_arch_is_rejected(tiny_tokenizer_dir):
    with pytest.raises(ValueError, match="arch"):
        build_model("gpt2", load_tokenizer(tiny_tokenizer_dir))


def test_a_letters_world_tokenizer_merges_each_value_with_its_sign(tmp_path):
    """Values written as letters merge with the sign before them (a step line of 5 tokens, not
    8), and a qwen2 folder's AutoTokenizer still gives load_tokenizer's ids (lm-eval's path)."""
    from sagc.tiny.build import build_data, build_tokenizer
    from sagc.tiny.task import TaskParams

    build_data(tmp_path / "data", seed=0, params=TaskParams(n_train=400, n_eval=20, n_heldout=10, values="letters"))
    build_tokenizer(tmp_path / "data", tmp_path / "tok")
    ours = load_tokenizer(tmp_path / "tok")
    assert [ours.decode([i]) for i in ours("e=h+e=b\n")["input_ids"]] == ["e", "=h", "+e", "=b", "\n"]
    size = ModelSize(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    save_model(build_model("qwen2", ours, size, seed=0), ours, tmp_path / "qwen2")
    auto = AutoTokenizer.from_pretrained(tmp_path / "qwen2")
    for text in _texts(tmp_path / "data"):
        assert ours.decode(ours(text)["input_ids"]) == text
        assert auto(text)["input_ids"] == ours(text)["input_ids"]
