"""The paper world's staging: local sources work offline, missing ones say what to do."""

import json

import pytest

from sagc.evaluate.taskcfg import load_task_config
from sagc.pipeline.hub import NotStagedError, render_prompt, resolve_model, stage_train_data


def test_training_prompts_use_the_evaluation_prompt(tmp_path):
    src = tmp_path / "problems.jsonl"
    rows = [{"problem": "What is 2+3?", "answer": "5"}, {"problem": "No answer", "answer": ""}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "train.jsonl"
    assert stage_train_data(None, "train", out, source=str(src)) == 1  # the unanswered row is dropped
    rec = json.loads(out.read_text())
    assert rec["answer"] == "5"
    assert "What is 2+3?" in rec["prompt"] and "\\boxed{}" in rec["prompt"]
    # the very template lm-eval renders for AIME
    template = load_task_config("aime24_boxed")["doc_to_text"]
    assert rec["prompt"] == render_prompt("What is 2+3?", template)


def test_missing_local_source_and_missing_columns(tmp_path):
    with pytest.raises(NotStagedError, match="hub.train_source"):
        stage_train_data(None, "train", tmp_path / "t.jsonl", source=str(tmp_path / "nope.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    with pytest.raises(ValueError, match="lacks column.*problem"):
        stage_train_data(None, "train", tmp_path / "t.jsonl", source=str(bad))


def test_offline_hub_dataset_says_how_to_stage(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(NotStagedError, match="not in the local cache.*Stage it once with network"):
        stage_train_data("agentica-org/DeepScaleR-Preview-Dataset", "train", tmp_path / "t.jsonl")


def test_uncached_model_names_the_model_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(NotStagedError, match="model Qwen/Qwen2.5-3B .*not in the local cache; run with network.*HF_HOME"):
        resolve_model("Qwen/Qwen2.5-3B")
