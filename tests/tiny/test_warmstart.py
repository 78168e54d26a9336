"""The warm start really teaches a real (tiny) model the task; bad settings fail clearly."""

import pytest
import torch

from sagc.tiny.measure import SampleParams, accuracy, sample_completions
from sagc.tiny.models import ModelSize, build_model
from sagc.tiny.task import TaskParams, generate_splits
from sagc.tiny.tokenizer import load_tokenizer
from sagc.tiny.warmstart import WarmStartParams, warm_start

# An easy corner of the task family (mod 4, one operator, 2-4 steps: 12 arithmetic facts)
# keep this test to well under a minute; the default recipe is the same code and model shape
# with more steps on the full task (which takes minutes). A smaller 2-layer model stayed
# near chance here even after 300 steps.
EASY = TaskParams(modulus=4, operators="+", median_steps=2.5, min_steps=2, max_steps=4, heldout_min_steps=5,
                  heldout_max_steps=6, n_train=500, n_eval=48, n_heldout=1)
SMALL = ModelSize(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128)
CHANCE = 0.25  # one digit out of four


@pytest.mark.slow
def test_warm_start_beats_chance_and_stops_with_eos(tiny_tokenizer_dir):
    torch.set_num_threads(1)
    splits = generate_splits(EASY, seed=11)
    tok = load_tokenizer(tiny_tokenizer_dir)
    model = build_model("llama", tok, ModelSize(), seed=11)  # the default shape
    sample = SampleParams(max_new_tokens=48)
    before = accuracy(model, tok, splits["eval"], sample, greedy=True)
    report = warm_start(model, tok, splits["train"],
                        WarmStartParams(steps=250, batch_size=16, learning_rate=3e-3, warmup_steps=10,
                                        ramble_frac=0.0), seed=11)
    after = accuracy(model, tok, splits["eval"], sample, greedy=True)
    assert before["accuracy"] == 0.0
    assert after["format_rate"] >= 0.9  # learnt the format: one final box, then eos
    assert after["truncated_frac"] <= 0.1
    assert after["accuracy"] >= 1.5 * CHANCE, after  # seen: 0.48 (seed 11)
    assert report["final_loss"] < 1.0


@pytest.mark.parametrize(
    "kwargs, name",
    [({"steps": -1}, "steps"), ({"batch_size": 0}, "batch_size"), ({"learning_rate": 0.0}, "learning_rate"),
     ({"ramble_frac": 1.0}, "ramble_frac"), ({"ramble_continue": -0.1}, "ramble_continue"),
     ({"max_length": 8}, "max_length")],
)
def test_bad_warm_start_parameters_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        WarmStartParams(**kwargs).validate()


def test_empty_training_set_is_rejected(tiny_tokenizer_dir):
    tok = load_tokenizer(tiny_tokenizer_dir)
    with pytest.raises(ValueError, match="at least one"):
        warm_start(build_model("qwen2", tok, SMALL), tok, [], WarmStartParams(steps=1))


def test_sample_completions_lengths_count_eos_and_cap(tiny_qwen2_dir, tiny_data_dir):
    from sagc.tiny.models import load_model
    from sagc.tiny.task import load_split

    tok, model = load_tokenizer(tiny_qwen2_dir), load_model(tiny_qwen2_dir)
    prompts = [r["prompt"] for r in load_split(tiny_data_dir, "train")[:6]]
    torch.manual_seed(0)
    texts, lengths = sample_completions(model, tok, prompts, SampleParams(max_new_tokens=24))
    assert len(texts) == len(lengths) == 6
    assert all(1 <= n <= 24 for n in lengths)
    assert all(isinstance(t, str) and tok.eos_token not in t for t in texts)
