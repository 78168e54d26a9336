"""Real lm-eval runs of the tiny-world tasks: a tiny HF model through the CLI, and a scripted
model with a known answer set through the same pipeline (task YAMLs, filters, scoring,
summary)."""

import glob
import json
import math

import pytest
from lm_eval.api.model import LM

from sagc.evaluate.cli import main
from sagc.evaluate.runner import EvalConfig, run_evaluation
from sagc.evaluate.summary import SUMMARY_FIELDS
from sagc.tiny.task import load_split
from sagc.tiny.tokenizer import load_tokenizer

pytestmark = pytest.mark.slow

MAX_GEN = 12


def _read_jsonl(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _run_cli(model_dir, data_dir, out, extra=()):
    argv = [
        "run",
        "--model",
        str(model_dir),
        "--tasks",
        "tiny_arith,tiny_arith_heldout",
        "--data-dir",
        str(data_dir),
        "--out",
        str(out),
        "--limit",
        "4",
        "--max-gen-toks",
        str(MAX_GEN),
        "--batch-size",
        "4",
        "--seed",
        "1",
        "--cell",
        "tiny-qwen2/grpo/sagc/seed0",
        *extra,
    ]
    assert main(argv) == 0
    return json.loads((out / "summary.json").read_text())


def test_cli_run_on_tiny_model_writes_lm_eval_outputs_and_summary(tmp_path, eval_model_dir, eval_data_dir):
    out = tmp_path / "eval"
    summary = _run_cli(eval_model_dir, eval_data_dir, out)
    assert summary["model"] == str(eval_model_dir)
    assert summary["cell"] == "tiny-qwen2/grpo/sagc/seed0"
    assert set(summary["tasks"]) == {"tiny_arith", "tiny_arith_heldout"}
    for fields in summary["tasks"].values():
        assert list(fields) == list(SUMMARY_FIELDS)
        assert fields["n_samples"] == 4
        assert 0.0 <= fields["accuracy"] <= 1.0 and 0.0 <= fields["truncation_rate"] <= 1.0
        assert 1.0 <= fields["mean_output_tokens"] <= MAX_GEN
    # lm-eval's own files
    results = glob.glob(str(out / "lm_eval" / "**" / "results_*.json"), recursive=True)
    assert len(results) == 1
    lm_results = json.load(open(results[0]))["results"]
    for task in summary["tasks"]:
        assert lm_results[task]["exact_match,all_samples"] == summary["tasks"][task]["accuracy"]
        samples = glob.glob(str(out / "lm_eval" / "**" / f"samples_{task}_2*.jsonl"), recursive=True)
        assert len(samples) == 1 and len(_read_jsonl(samples[0])) == 4
    # per-generation lengths were measured on generated tokens and agree with the summary
    rows = _read_jsonl(out / "output_lengths.jsonl")
    assert {r["source"] for r in rows} == {"generated"}
    for task, fields in summary["tasks"].items():
        mine = [r for r in rows if r["task"] == task]
        assert len(mine) == 4
        assert fields["mean_output_tokens"] == sum(r["n_tokens"] for r in mine) / 4
        assert fields["truncation_rate"] == sum(r["truncated"] for r in mine) / 4
        for r in mine:
            assert (r["n_tokens"] == MAX_GEN) if r["truncated"] else (r["n_tokens"] < MAX_GEN)


def test_model_that_stops_at_once_has_one_token_outputs(tmp_path, eval_model_dir, eval_data_dir):
    """A copy of the model whose generation config suppresses every token but EOS: every
    answer is just EOS.
    The text is empty, so re-tokenising it would say 0 tokens; the generated count is 1."""
    import shutil

    from transformers import GenerationConfig

    model_dir = tmp_path / "eos_model"
    shutil.copytree(eval_model_dir, model_dir)
    tok = load_tokenizer(model_dir)
    gc = GenerationConfig.from_pretrained(model_dir)
    gc.suppress_tokens = [i for i in range(len(tok)) if i != tok.eos_token_id]
    gc.save_pretrained(model_dir)
    summary = _run_cli(model_dir, eval_data_dir, tmp_path / "eval")
    for fields in summary["tasks"].values():
        assert fields["mean_output_tokens"] == 1.0
        assert fields["truncation_rate"] == 0.0
        assert fields["accuracy"] == 0.0


class ScriptedLM(LM):
    """Answers from a script: prompt -> list of completions, one per call (repeats)."""

    def __init__(self, script):
        super().__init__()
        self.script = {p: list(c) for p, c in script.items()}
        self.calls = []

    def generate_until(self, requests, disable_tqdm=False):
        out = []
        for req in requests:
            prompt = req.args[0]
            self.calls.append(req.args[1])
            out.append(self.script[prompt].pop(0))
        return out

    def loglikelihood(self, requests, disable_tqdm=False):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError


def _wrong(row):
    return row["solution"].rsplit("\\boxed{", 1)[0] + "\\boxed{" + str((int(row["answer"]) + 1) % 10) + "}"


def test_scripted_answers_score_as_expected(tmp_path, eval_model_dir, eval_data_dir):
    tok = load_tokenizer(eval_model_dir)
    eval_rows = load_split(eval_data_dir, "eval")[:12]
    held_rows = load_split(eval_data_dir, "heldout")[:5]
    # in-distribution: right unless i % 3 == 0 (wrong box), and doc 1 has no box -> 7/12
    answers = [_wrong(row) if i % 3 == 0 else row["solution"] for i, row in enumerate(eval_rows)]
    answers[1] = "I do not know."
    script = {row["prompt"]: [a] for row, a in zip(eval_rows, answers)}
    # held-out with 3 repeats: the first sample is right, the other two wrong -> 1/3 per doc
    for row in held_rows:
        script[row["prompt"]] = [row["solution"], _wrong(row), "no answer"]
    lm = ScriptedLM(script)
    cfg = EvalConfig(
        model=eval_model_dir,
        tasks=["tiny_arith"],
        data_dir=eval_data_dir,
        out=tmp_path / "a",
        limit=12,
        cell="scripted",
    )
    summary = run_evaluation(cfg, lm=lm, tokenizer=tok)["tasks"]["tiny_arith"]
    p, n = 7 / 12, 12
    assert summary["accuracy"] == pytest.approx(p)
    assert summary["accuracy_stderr"] == pytest.approx(math.sqrt(p * (1 - p) * n / (n - 1) / n))
    assert summary["n_samples"] == 12 and summary["truncation_rate"] == 0.0
    expected = sum(len(tok.encode(t, add_special_tokens=False)) for t in answers) / 12
    assert summary["mean_output_tokens"] == pytest.approx(expected)
    assert lm.calls[0]["max_gen_toks"] == 256 and lm.calls[0]["do_sample"] is False

    cfg = EvalConfig(
        model=eval_model_dir,
        tasks=["tiny_arith_heldout"],
        data_dir=eval_data_dir,
        out=tmp_path / "b",
        limit=5,
        repeats=3,
        temperature=0.7,
        max_gen_toks=40,
    )
    summary = run_evaluation(cfg, lm=ScriptedLM(script), tokenizer=tok)["tasks"]["tiny_arith_heldout"]
    assert summary["accuracy"] == pytest.approx(1 / 3)
    assert summary["n_samples"] == 5
    rows = [r for r in _read_jsonl(tmp_path / "b" / "output_lengths.jsonl")]
    assert len(rows) == 15 and {r["source"] for r in rows} == {"retokenized"}


def test_cli_reads_repeats_for_every_task_or_per_task():
    from sagc.evaluate.cli import repeats

    assert repeats("4") == 4
    assert repeats("aime24_boxed=64,gpqa_diamond_boxed=8") == {"aime24_boxed": 64, "gpqa_diamond_boxed": 8}
    with pytest.raises(Exception, match="TASK=N"):
        repeats("aime24_boxed=lots")
