"""The paper's training path on CPU: tiny random models with the real Qwen2.5 / Llama-3.2
architectures, the paper config's cells (bf16 flags, gradient checkpointing, the card's
precision setup; only vLLM swapped for HF generate), and training rollouts that stop at
the evaluation's stop string."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from sagc.pipeline.cells import train_cell_config
from sagc.pipeline.config import prepare
from sagc.pipeline.grid import Cell, Grid
from sagc.train.dynamic_sampling import FILTER_REWARD
from sagc.train.rollout import trim_at_stop
from tests.pipeline.test_paper_gpu import CARDS
from tests.train.paper_world import tiny_paper_model

REPO = Path(__file__).resolve().parents[2]
STOP = "\nUser:"
MAX_COMPLETION = 16


@pytest.fixture(scope="module")
def paper_world(tmp_path_factory):
    """Prompts in the paper's template, a BPE trained on them, and one tiny model per
    paper architecture (folder with tokenizer)."""
    from sagc.pipeline.hub import render_prompt
    from sagc.tiny.models import save_model
    from sagc.tiny.tokenizer import train_tokenizer

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("paper_world")
    rows = [{"prompt": render_prompt(f"What is {a} + {b}?"), "answer": str(a + b)} for a in range(4) for b in range(4)]
    data = root / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = train_tokenizer([r["prompt"] + f" so \\boxed{{{r['answer']}}}{STOP} next" for r in rows], vocab_size=400)
    models = {}
    for hub_id in ("Qwen/Qwen2.5-3B", "meta-llama/Llama-3.2-3B"):
        model = tiny_paper_model(hub_id, len(tok), tok.eos_token_id, tok.pad_token_id)
        model.generation_config.eos_token_id = tok.eos_token_id
        model.generation_config.pad_token_id = tok.pad_token_id
        models[hub_id] = save_model(model, tok, root / hub_id.split("/")[1])
    return {"data": data, "tokenizer": tok, "models": models}


def paper_cell(
    world: dict, tmp_path: Path, model: str, algorithm: str, sizing: str, card: str, **train: object
) -> dict:
    """A paper cell as the pipeline resolves it for ``card``, pointed at the tiny world and
    sized for CPU: CPU instead of the GPU, HF generate instead of vLLM, 1 short step."""
    config = yaml.safe_load((REPO / "configs/paper.yaml").read_text())
    # The card's share, or a fixed one: on one process an engine would hold all 512 rows of a
    # G = 16 step, more than auto can give it (and this cell generates with HF generate).
    config["device"].update({"vllm_gpu_memory_utilization": 0.3, **CARDS[card]})
    config["launch"] = {"processes_per_node": 1}  # one CPU process (the paper: one per GPU)
    config = prepare(config, "configs/paper.yaml")
    grid = Grid.from_config(config)
    cell = train_cell_config(config, grid, Cell(model, algorithm, sizing, 0))
    hub_id = config.models[model].hub_id
    cell["model"]["path"] = str(world["models"][hub_id])
    cell["model"]["revision"] = None
    cell["data"]["train"] = str(world["data"])
    cell["device"].update(use_cpu=True, use_vllm=False)  # bf16, precision, checkpointing: as the paper
    cell["train"].update(
        steps=1,
        prompts_per_step=2,
        max_completion_length=MAX_COMPLETION,
        gradient_accumulation_steps=2,
        torch_threads=1,
        **train,
    )
    cell["wandb"]["mode"] = "disabled"
    cell["output_dir"] = str(tmp_path / "out")
    del cell["resolved"]  # edited by hand: resolved again when loaded
    return cell


# -- stop strings --------------------------------------------------------------------------


def test_trim_cuts_before_the_stop_string_and_ends_with_eos(paper_world):
    tok = paper_world["tokenizer"]
    eos = tok.eos_token_id

    def decode(ids):
        return tok.decode(ids, skip_special_tokens=True)

    answered = "Add them: 2 + 3 = 5, so \\boxed{5}"
    rows = [
        tok.encode(answered + STOP + " What is 7 + 1?\nAssistant: 8"),  # runs on: cut
        tok.encode(answered) + [eos],  # finished: as is
        tok.encode("no stop here and no end"),
    ]  # truncated: as is
    logprobs = [[-0.5] * len(r) for r in rows]
    ids, lps, n_cut = trim_at_stop(rows, logprobs, [STOP], decode, eos)
    assert n_cut == 1
    assert ids[0][-1] == eos and STOP not in decode(ids[0])
    assert decode(ids[0]).rstrip("\n") == answered  # the answer, up to the stop string
    assert len(lps[0]) == len(ids[0]) and math.isnan(lps[0][-1]) and lps[0][0] == -0.5
    assert ids[1:] == rows[1:] and lps[1:] == logprobs[1:]
    # A stop string at the very start leaves an empty, finished completion.
    ids, _, _ = trim_at_stop([tok.encode(STOP + " x")], None, [STOP], decode, eos)
    assert ids == [[eos]]


def _stop_bias(tok) -> list:
    """``sequence_bias`` that makes a random model write the stop string often: every prefix
    of its token sequence favours the next token."""
    seq = tok.encode(STOP)
    return [[seq[: i + 1], 6.0] for i in range(len(seq))]


@pytest.mark.slow
def test_training_rollouts_stop_at_the_stop_string_and_count_as_finished(paper_world, tmp_path):
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    results = {}
    for stop in ([STOP], []):
        cell = paper_cell(
            paper_world,
            tmp_path / str(bool(stop)),
            "qwen2.5-3b",
            "grpo",
            "g4",
            "141GB",
            stop=stop,
            generation_kwargs={"sequence_bias": _stop_bias(paper_world["tokenizer"])},
        )
        trainer = build_trainer(TrainConfig.from_dict(cell, check_vllm=False))
        trainer.train()
        results[bool(stop)] = trainer.steps[0].row(), trainer.steps[0].lengths
    (row, lengths), (row_off, lengths_off) = results[True], results[False]
    # Without the stop string the random model runs to the cap: TRL counts the rows as clipped.
    assert row_off["trl/completions/clipped_ratio"] > 0.5
    assert max(max(g) for g in lengths_off) == MAX_COMPLETION
    # With it, the rows that wrote it are cut and end with EOS: finished, shorter.
    # (The biased model writes it in a seed-dependent share of rows: 0.375-0.625 seen.)
    assert row["trl/completions/stop_string_frac"] >= 0.25
    assert row["trl/completions/clipped_ratio"] <= 1 - row["trl/completions/stop_string_frac"]
    assert sum(map(sum, lengths)) < sum(map(sum, lengths_off))


@pytest.mark.slow
def test_training_rollouts_end_at_a_chat_end_token_and_count_as_finished(paper_world, tmp_path):
    """``<|im_end|>`` is a special token: decoding skips it, so only its id can stop a row.
    With the paper's stops a row ends at it (finished, its length ends there); with the text
    stop alone the row runs on to the cap, a straggler the model never meant to write."""
    from sagc.train.config import TrainConfig
    from sagc.train.run import build_trainer

    tok = paper_world["tokenizer"]
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end != tok.eos_token_id and "<|im_end|>" in tok.all_special_tokens
    paper_stops = yaml.safe_load((REPO / "configs/paper.yaml").read_text())["train"]["stop"]
    assert "<|im_end|>" in paper_stops
    results = {}
    for name, stop in (("paper", paper_stops), ("text only", [STOP])):
        cell = paper_cell(
            paper_world,
            tmp_path / name.replace(" ", "-"),
            "qwen2.5-3b",
            "grpo",
            "g4",
            "141GB",
            stop=stop,
            generation_kwargs={"sequence_bias": [[[im_end], 4.0]]},
        )
        trainer = build_trainer(TrainConfig.from_dict(cell, check_vllm=False))
        seen = []
        generate = trainer._generate

        def spy(prompts, generate=generate, seen=seen):
            out = generate(prompts)
            seen.extend(out[1])
            return out

        trainer._generate = spy
        trainer.train()
        results[name] = trainer.steps[0], seen
    (paper_step, paper_rows), (_, text_rows) = results["paper"], results["text only"]
    # The biased model writes <|im_end|> in most rows; without its id as a stop they run on.
    wrote = [r for r in text_rows if im_end in r]
    assert len(wrote) >= len(text_rows) // 2
    assert any(r.index(im_end) < len(r) - 1 for r in wrote)
    # With it, every row that holds it ends at it and is not truncated.
    assert all(r.index(im_end) == len(r) - 1 for r in paper_rows if im_end in r)
    ended = sum(r[-1] == im_end for r in paper_rows)
    assert ended >= len(paper_rows) // 2
    assert sum(paper_step.truncated) <= len(paper_rows) - ended
    assert sum(map(len, paper_rows)) < sum(map(len, text_rows))


# -- the paper path with the real architectures ----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("model, algorithm, sizing, card", [
    ("qwen2.5-3b", "grpo", "sagc", "141GB"),
    ("llama-3.2-3b", "dapo", "g4", "80GB"),
])  # fmt: skip
def test_real_architectures_train_through_the_paper_path_with_bf16(
    paper_world, tmp_path, model, algorithm, sizing, card
):
    from sagc.train.config import TrainConfig
    from sagc.train.precision import CompensatedAdamW
    from sagc.train.run import build_trainer

    cfg = TrainConfig.from_dict(paper_cell(paper_world, tmp_path, model, algorithm, sizing, card), check_vllm=False)
    assert cfg.device.bf16 and cfg.device.gradient_checkpointing and STOP in cfg.train.stop
    # A random model earns no correctness or format reward, so every advantage would be 0 and
    # nothing would move: a reward on the completion's length gives the update a direction.
    trainer = build_trainer(cfg, reward_funcs=[_text_length_reward])
    before = {n: p.detach().float().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert len(trainer.history) == 1 and trainer.args.bf16 and trainer.args.gradient_checkpointing
    dtype = {p.dtype for p in trainer.model.parameters()}
    if card == "80GB":
        assert dtype == {torch.bfloat16} and isinstance(trainer.optimizer.optimizer, CompensatedAdamW)
    else:
        assert dtype == {torch.float32}
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach().float())]
    assert any("layers.1.mlp" in n for n in changed), "the update moved no weights"
    assert math.isfinite(trainer.history[0]["loss"])
    assert trainer.history[0]["rollouts"] == 2 * trainer.history[0]["group_size"]


def _text_length_reward(prompts, completions, **kwargs) -> list[float]:
    return [len(c) / 100 for c in completions]


# DAPO's filter reads the correctness reward, found by its name: here the length reward
# stands in for it (it differs within a group, so every group is kept).
_text_length_reward.__name__ = FILTER_REWARD
