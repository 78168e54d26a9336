"""lm-eval's vLLM backend for real (vLLM's CPU build on a CPU machine): the same scores as
the HF backend at temperature 0, and output lengths from vLLM's own token ids and finish
reasons. Skipped where vLLM is not installed (``requirements/cpu-vllm.txt`` installs it)."""

import json

import pytest

from sagc.evaluate.runner import EvalConfig, run_evaluation

pytest.importorskip("vllm")
pytestmark = [pytest.mark.slow, pytest.mark.vllm]

#: Long enough for every greedy row of the fast fixture model to end with EOS.
MAX_GEN = 160


def _evaluate(backend, model_dir, data_dir, out, temperature=0.0, seed=0, max_gen=MAX_GEN):
    cfg = EvalConfig(
        model=model_dir,
        tasks=["tiny_arith"],
        data_dir=data_dir,
        out=out,
        backend=backend,
        limit=16,
        batch_size=16,
        seed=seed,
        dtype="float32",
        max_model_len=512,
        max_gen_toks=max_gen,
        temperature=temperature,
    )
    summary = run_evaluation(cfg)["tasks"]["tiny_arith"]
    rows = [json.loads(line) for line in open(out / "output_lengths.jsonl", encoding="utf-8")]
    return summary, sorted(rows, key=lambda r: r["doc_id"])


@pytest.fixture(scope="module")
def vllm_model_dir(tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory):
    """The fast fixture model with 2 heads of 32 dims: vLLM's CPU attention has no kernel
    for the shared fixture's 16-dim heads."""
    from tests.conftest import _fast_model

    return _fast_model(
        "qwen2",
        tiny_data_dir,
        tiny_tokenizer_dir,
        tmp_path_factory.mktemp("vllm") / "tiny-qwen2",
        num_heads=2,
        num_kv_heads=1,
    )


@pytest.fixture(autouse=True)
def _small_kv_cache(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the default takes 4


def test_vllm_matches_hf_at_temperature_zero_with_exact_lengths(tmp_path, vllm_model_dir, tiny_data_dir):
    # A cap between the greedy rows' own lengths, so that some rows hit it and others end
    # with EOS: both finish reasons are exercised, whatever lengths the fixture model has.
    _, free_rows = _evaluate("hf", vllm_model_dir, tiny_data_dir, tmp_path / "free")
    ended = sorted(r["n_tokens"] for r in free_rows if not r["truncated"])
    between = [n for n in range(ended[0] + 1, ended[-1]) if n not in ended]  # no row ends at the cap
    assert between, ended
    cap = min(between, key=lambda n: abs(n - ended[len(ended) // 2]))
    hf, hf_rows = _evaluate("hf", vllm_model_dir, tiny_data_dir, tmp_path / "hf", max_gen=cap)
    vl, vl_rows = _evaluate("vllm", vllm_model_dir, tiny_data_dir, tmp_path / "vllm", max_gen=cap)
    assert {r["source"] for r in vl_rows} == {"generated"}  # vLLM's counts, never re-encoded text
    assert vl["accuracy"] == hf["accuracy"] and vl["accuracy_lenient"] == hf["accuracy_lenient"]
    # Greedy decoding of the same fp32 weights: the same tokens, so the same count per row
    # (vLLM's token ids include the EOS that ended a row, as HF's recorder counts it) and the
    # same truncation (vLLM's finish reason "length" against HF's full budget without a stop).
    assert [(r["doc_id"], r["n_tokens"], r["truncated"]) for r in vl_rows] == [
        (r["doc_id"], r["n_tokens"], r["truncated"]) for r in hf_rows
    ]
    assert any(r["truncated"] for r in vl_rows) and not all(r["truncated"] for r in vl_rows)
    assert all(r["n_tokens"] == cap for r in vl_rows if r["truncated"])


def test_vllm_seeds_give_different_samples(tmp_path, vllm_model_dir, tiny_data_dir):
    runs = [
        _evaluate("vllm", vllm_model_dir, tiny_data_dir, tmp_path / f"s{seed}", temperature=1.0, seed=seed)
        for seed in (0, 1)
    ]
    texts = []
    for seed in (0, 1):
        samples = next((tmp_path / f"s{seed}" / "lm_eval").rglob("samples_tiny_arith_*.jsonl"))
        texts.append([json.loads(line)["resps"] for line in open(samples, encoding="utf-8")])
    assert texts[0] != texts[1]
    assert all(s["samples_per_problem"] == 1 for s, _ in runs)
