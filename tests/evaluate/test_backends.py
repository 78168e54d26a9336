"""Backends: the tokenizer lm-eval's HF model uses, and vLLM argument plumbing without vllm."""

import pytest

from sagc.evaluate.backends import load_tokenizer, make_hf_lm, vllm_model_args
from sagc.evaluate.config import EvalSettings
from sagc.evaluate.recorder import GenerationRecorder
from sagc.evaluate.runner import EvalConfig, run_evaluation
from sagc.tiny.task import load_split
from sagc.tiny.tokenizer import load_tokenizer as tiny_load_tokenizer
from sagc.vllm_support import vllm_installed


def test_hf_backend_tokenizes_like_training(eval_model_dir, eval_data_dir):
    lm, tok = make_hf_lm(eval_model_dir, GenerationRecorder(), batch_size=2)
    reference = tiny_load_tokenizer(eval_model_dir)  # what the trainer uses
    for row in load_split(eval_data_dir, "eval")[:5] + load_split(eval_data_dir, "heldout")[:3]:
        ids = reference(row["prompt"], add_special_tokens=False)["input_ids"]
        assert lm.tok_encode(row["prompt"]) == ids
        assert tok.encode(row["prompt"], add_special_tokens=False) == ids
    assert lm.eot_token_id == reference.eos_token_id


def test_load_tokenizer_names_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer"):
        load_tokenizer(tmp_path)


def test_vllm_model_args_string(tmp_path):
    cfg = EvalSettings.from_dict(
        {
            "tasks": ["tiny_arith"],
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.85,
            "max_model_len": 12288,
            "seed": 5,
        }
    )
    args = vllm_model_args(tmp_path / "m", cfg)
    parts = dict(p.split("=", 1) for p in args.split(","))
    assert parts == {
        "pretrained": str(tmp_path / "m"),
        "tokenizer": str(tmp_path / "m"),
        "tensor_parallel_size": "2",
        "gpu_memory_utilization": "0.85",
        "dtype": "auto",
        "seed": "5",
        "trust_remote_code": "False",
        "max_model_len": "12288",
    }
    assert "max_model_len" not in vllm_model_args(tmp_path / "m", EvalSettings.from_dict({"tasks": ["tiny_arith"]}))


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"max_model_len": 0}, "max_model_len"),
    ],
)
def test_vllm_keys_reject_bad_values(kwargs, key):
    with pytest.raises(ValueError, match=key):
        EvalSettings.from_dict({"tasks": ["tiny_arith"], **kwargs})


@pytest.mark.skipif(vllm_installed(), reason="checks the message shown when vllm is absent")
def test_vllm_backend_fails_fast_without_vllm(tmp_path, eval_model_dir, eval_data_dir):
    cfg = EvalConfig(
        model=eval_model_dir, tasks=["tiny_arith"], data_dir=eval_data_dir, out=tmp_path / "out", backend="vllm"
    )
    with pytest.raises(RuntimeError, match=r"pip install -e '\.\[gpu\]'"):
        run_evaluation(cfg)
    assert not (tmp_path / "out").exists()  # failed before writing or loading anything
