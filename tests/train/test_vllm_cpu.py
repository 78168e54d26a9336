"""The trainer's colocated vLLM path for real, on vLLM's CPU build: SAGC changes G through
vLLM, after a weight sync vLLM scores as the policy, DAPO's refill rounds go through vLLM,
two seeds sample differently. Skipped where vLLM is not installed
(``requirements/cpu-vllm.txt``)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("vllm")
pytestmark = [pytest.mark.slow, pytest.mark.vllm]

CANDIDATES = [4, 8, 16]


@pytest.fixture(scope="module")
def vllm_model_dir(tiny_data_dir, tiny_tokenizer_dir, tmp_path_factory):
    """The fast fixture model with 2 heads of 32 dims (vLLM's CPU attention has no kernel
    for 16-dim heads)."""
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
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB


def _cell(model_dir, data_dir, out, algorithm="grpo", **train):
    return {
        "cell": {"id": f"test/{algorithm}/sagc/seed0", "algorithm": algorithm, "sizing": "sagc"},
        "model": {"path": str(model_dir)},
        "data": {"train": str(data_dir / "train.jsonl")},
        "train": {
            "steps": 3,
            "prompts_per_step": 2,
            "max_prompt_length": 64,
            "max_completion_length": 40,
            "learning_rate": 5e-3,
            "save_steps": 100,
            "seed": 11,
            **train,
        },
        "algorithm": {"name": algorithm},
        "sizing": {"name": "sagc", "sagc": {"candidates": CANDIDATES, "tau": 2.0, "delta": 0.3, "eta": 8.0}},
        "wandb": {"mode": "disabled"},
        "device": {"use_cpu": True, "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3},
        "output_dir": str(out),
    }


def test_sagc_changes_g_through_colocated_vllm(vllm_model_dir, tiny_data_dir, tmp_path):
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    trainer = build_trainer(TrainConfig.from_dict(_cell(vllm_model_dir, tiny_data_dir, tmp_path / "grpo")))
    trainer.train()
    history = trainer.history
    assert [h["step"] for h in history] == [1, 2, 3]
    assert all(h["group_size"] in CANDIDATES for h in history)
    for h in history:  # every row of the step came from one vLLM generate call of P x G rows
        assert [c["rows"] for c in h["calls"]] == [2 * h["group_size"]] and h["rollouts"] == 2 * h["group_size"]


def test_after_a_sync_vllm_scores_as_the_policy(vllm_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    """vLLM's log-probs of a sequence equal the policy's after the policy moved and was
    synced. vLLM runs in float32 here (TRL lets it pick bfloat16 on CPU), so any
    difference beyond rounding is a weight that did not arrive."""
    import torch
    import trl.generation.vllm_generation as trl_vllm
    from vllm import LLM, SamplingParams

    from sagc.train.config import TrainConfig
    from sagc.train.rollout import sync_weights
    from sagc.train.run import build_trainer

    class Float32LLM(LLM):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "dtype": "float32"})

    monkeypatch.setattr(trl_vllm, "LLM", Float32LLM)
    trainer = build_trainer(TrainConfig.from_dict(_cell(vllm_model_dir, tiny_data_dir, tmp_path / "sync")))
    tok = trainer.processing_class
    seq = tok(trainer.train_dataset[0]["prompt"], add_special_tokens=False).input_ids + [5, 6, 7, 8]

    def gap():
        with torch.no_grad():
            logp = torch.log_softmax(trainer.model(torch.tensor([seq])).logits[0].float(), -1)
        policy = [logp[i - 1, seq[i]].item() for i in range(1, len(seq))]
        out = trainer.vllm_generation.llm.generate(
            [{"prompt_token_ids": seq}], SamplingParams(max_tokens=1, prompt_logprobs=0)
        )[0]
        engine = [next(iter(d.values())).logprob for d in out.prompt_logprobs[1:]]
        return max(abs(a - b) for a, b in zip(policy, engine))

    assert gap() < 1e-4  # the same weights before any change
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    sync_weights(trainer.vllm_generation)
    assert gap() < 1e-4


def test_dapo_refill_rounds_go_through_vllm(vllm_model_dir, tiny_data_dir, tmp_path):
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    # Answers no rollout can box (not a residue): correctness is 0 in every group, so
    # dynamic sampling (which filters on correctness) drops every group and refills until
    # its cap in every step: 1 + ds_max_rounds vLLM calls of P x G rows each.
    data = tmp_path / "data"
    data.mkdir()
    rows = [json.loads(line) for line in (tiny_data_dir / "train.jsonl").read_text().splitlines()]
    (data / "train.jsonl").write_text("".join(json.dumps({**r, "answer": "none"}) + "\n" for r in rows))
    cfg = _cell(vllm_model_dir, data, tmp_path / "dapo", algorithm="dapo", steps=2)
    cfg["algorithm"].update(overlong_weight=0.0, ds_max_rounds=2)
    trainer = build_trainer(TrainConfig.from_dict(cfg))
    trainer.train()
    for h in trainer.history:
        assert h["generate_calls"] == 3 and h["ds_rounds"] == 2
        assert [c["rows"] for c in h["calls"]] == [2 * h["group_size"]] * 3


def test_two_seeds_are_two_samples_through_vllm(vllm_model_dir, tiny_data_dir, tmp_path):
    """One prompt text in the whole data set, so only the sampling seed can tell two cells
    apart: the same seed repeats its rollouts, another seed draws others (TRL alone seeds
    every colocated engine alike, and the two seeds would sample the same rows)."""
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    one = tmp_path / "one"
    one.mkdir()
    first = (tiny_data_dir / "train.jsonl").read_text().splitlines()[0]
    (one / "train.jsonl").write_text((first + "\n") * 40)

    def lengths(seed, name):
        cfg = _cell(vllm_model_dir, one, tmp_path / name, steps=1, seed=seed)
        cfg["cell"]["sizing"] = "g8"
        cfg["sizing"] = {"name": "g8", "sagc": {"tau": 2.0}}
        trainer = build_trainer(TrainConfig.from_dict(cfg))
        trainer.train()
        return [list(map(int, g)) for g in trainer.steps[0].lengths]

    a, again, other = lengths(11, "a"), lengths(11, "again"), lengths(12, "other")
    assert a == again
    assert a != other


def test_rollouts_end_at_a_chat_end_token_through_vllm(vllm_model_dir, tiny_data_dir, tmp_path):
    """``<|im_end|>`` as a stop: vLLM ends the row at its id (``stop_token_ids``), the row
    keeps the token and counts as finished; without it as a stop the row runs on."""
    from sagc.tokenizers import load_tokenizer
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    im_end = load_tokenizer(str(vllm_model_dir)).convert_tokens_to_ids("<|im_end|>")

    def rows(stop, name):
        cfg = _cell(
            vllm_model_dir,
            tiny_data_dir,
            tmp_path / name,
            steps=1,
            stop=stop,
            generation_kwargs={"logit_bias": {im_end: 6.0}},
        )
        cfg["cell"]["sizing"] = "g8"
        cfg["sizing"] = {"name": "g8", "sagc": {"tau": 2.0}}
        trainer = build_trainer(TrainConfig.from_dict(cfg))
        seen = []
        generate = trainer._generate

        def spy(prompts):
            out = generate(prompts)
            seen.extend(out[1])
            return out

        trainer._generate = spy
        trainer.train()
        return seen, trainer.steps[0]

    stopped, step = rows(["<|im_end|>"], "stop")
    ran_on, _ = rows([], "no-stop")
    assert any(im_end in r[:-1] for r in ran_on), "the bias never made a row write <|im_end|> mid-row"
    assert all(r.index(im_end) == len(r) - 1 for r in stopped if im_end in r)
    ended = [r[-1] == im_end for r in stopped]
    assert sum(ended) >= 2
    assert not any(t and e for t, e in zip(step.truncated, ended))


def test_two_ranks_each_with_a_colocated_engine_agree_on_g(vllm_model_dir, tiny_data_dir, tmp_path):
    """Two processes under ``accelerate launch`` (gloo), each generating its share of the
    step with its own colocated vLLM engine: the same G on both ranks at every step, each
    generate call the whole step's rows together, identical weights after training."""
    from tests.train.test_distributed import done_json, launch

    cell = _cell(vllm_model_dir, tiny_data_dir, tmp_path / "two", steps=3)
    res, ranks = launch(cell, tmp_path, "two")
    assert res.returncode == 0, res.stderr[-4000:]
    rounds = [[(x["step"], x["G"], len(x["ids"])) for x in r["rounds"]] for r in ranks]
    assert len(rounds) == 2 and rounds[0] == rounds[1]
    done = done_json(cell)
    assert [g for _, g, _ in rounds[0]] == done["group_sizes"]
    for h in done["history"]:
        assert [c["rows"] for c in h["calls"]] == [2 * h["group_size"]]  # both ranks' rows, one call each
    assert ranks[0]["weights_sha256"] == ranks[1]["weights_sha256"]


def test_rollouts_are_cut_at_a_text_stop_string_through_vllm(vllm_model_dir, tiny_data_dir, tmp_path):
    """A text stop ("\\n", after each line of the model's chain): vLLM ends the row at the
    token that completes it, the trainer cuts the row before it and ends it with EOS, so
    the row is finished and what the reward and the controller see stops there."""
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    cfg = _cell(vllm_model_dir, tiny_data_dir, tmp_path / "text", steps=1, stop=["\n"])
    cfg["cell"]["sizing"] = "g8"
    cfg["sizing"] = {"name": "g8", "sagc": {"tau": 2.0}}
    trainer = build_trainer(TrainConfig.from_dict(cfg))
    trainer.train()
    step = trainer.steps[0]
    assert step.row()["trl/completions/stop_string_frac"] > 0.5  # the model writes lines
    lengths = [n for g in step.lengths for n in g]
    # One line of the chain ("b=1+1=2", a token a character) and EOS, where a whole chain
    # of 2-5 such lines and its boxed answer runs to 20-40 tokens.
    assert max(lengths) <= 12 and not any(step.truncated), lengths


def test_a_step_that_overflows_vllms_kv_cache_shows_it(vllm_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    """A cache of a few blocks (vLLM's num_gpu_blocks_override) cannot hold a G=16 step's
    rows at once: the run still finishes (vLLM queues and preempts), and its steps say the
    cache bound; the same cell with vLLM's own cache says it did not."""
    import trl.generation.vllm_generation as trl_vllm
    from vllm import LLM

    from sagc.train.config import TrainConfig
    from sagc.train.rollout import KV_BOUND_METRIC, KV_CAPACITY_METRIC, KV_PEAK_METRIC
    from sagc.train.run import build_trainer

    def kv(blocks, name):
        class SmallCacheLLM(LLM):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **{**kwargs, **({"num_gpu_blocks_override": blocks} if blocks else {})})

        monkeypatch.setattr(trl_vllm, "LLM", SmallCacheLLM)
        cell = _cell(vllm_model_dir, tiny_data_dir, tmp_path / name, steps=2)
        cell["cell"]["sizing"] = "g16"
        cell["sizing"] = {"name": "g16", "sagc": {"tau": 2.0}}
        trainer = build_trainer(TrainConfig.from_dict(cell))
        trainer.train()
        assert [s.step for s in trainer.steps] == [1, 2]
        block = trainer.vllm_generation.llm.llm_engine.vllm_config.cache_config.block_size
        return block, [
            {k: s.row()[f"trl/{k}"] for k in (KV_PEAK_METRIC, KV_CAPACITY_METRIC, KV_BOUND_METRIC)}
            for s in trainer.steps
        ]

    block, small = kv(8, "small")  # 8 blocks: one row's worst case (64 + 40 tokens) fits, 32 rows do not
    assert all(
        r[KV_CAPACITY_METRIC] == 8 * block and r[KV_PEAK_METRIC] > 8 * block and r[KV_BOUND_METRIC] == 1.0
        for r in small
    )
    _, roomy = kv(None, "roomy")
    assert all(r[KV_CAPACITY_METRIC] > r[KV_PEAK_METRIC] and r[KV_BOUND_METRIC] == 0.0 for r in roomy)
