"""A cell is resolved once: the pipeline writes the algorithm preset, the step layout at every
G and the memory plan into the cell's ``cell.json``, a workflow job adds the stops resolved
against the tokenizer, and the job and the trainer read those values as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sagc.pipeline.cells import train_cell_config
from sagc.pipeline.config import prepare
from sagc.pipeline.grid import Cell, Grid
from sagc.train import config as train_config
from sagc.train import stops
from sagc.train import trainer as trainer_module
from sagc.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[2]
IM_END = "<|im_end|>"


def pipeline_cell(cell: Cell | None = None) -> dict:
    """A default-grid cell as the train job reads it (through JSON, as Snakemake's params);
    tiny-qwen2/dapo/sagc/seed2 unless ``cell`` says otherwise."""
    cell = cell or Cell("tiny-qwen2", "dapo", "sagc", 2)
    config = prepare(yaml.safe_load((REPO / "configs/default.yaml").read_text()), "configs/default.yaml")
    return json.loads(json.dumps(train_cell_config(config, Grid.from_config(config), cell), sort_keys=True))


def _refuse(*args, **kwargs):
    raise AssertionError("derived again")


def test_cell_json_holds_the_preset_and_the_layout_at_every_g():
    resolved = pipeline_cell()["resolved"]
    algo = resolved["algorithm"]
    # DAPO's preset, nothing left to a library default: the overlong buffer is 20 % of the 112-token cap
    assert (algo["loss_type"], algo["epsilon_high"], algo["minibatches"], algo["overlong_buffer"]) == (
        "dapo",
        0.28,
        2,
        22,
    )
    layout = resolved["layout"]
    # P = 2 prompts at every G, split into DAPO's 2 mini-batches: 2 optimizer updates a step
    assert {g: (s["prompts"], s["rollouts"], s["micro_batch"]) for g, s in layout["shapes"].items()} == {
        "4": (2, 8, 4),
        "8": (2, 16, 8),
        "16": (2, 32, 16),
    }
    assert (layout["steps_per_generation"], layout["updates_per_rollout"]) == (2, 2)
    assert resolved["stops"] is None  # added by the train job from the stop_tokens rule
    assert resolved["memory"] is None  # CPU: no card to plan for


def test_the_job_reads_the_resolution_and_derives_nothing(monkeypatch):
    cell = pipeline_cell()
    monkeypatch.setattr(train_config, "resolve_algorithm", _refuse)
    monkeypatch.setattr(train_config, "step_shapes", _refuse)
    cfg = TrainConfig.from_dict(cell)
    assert cfg.resolved.layout.shapes[16].micro_batch == 16 and cfg.resolved.algorithm.name == "dapo"
    assert json.loads(json.dumps(cfg.to_dict()["resolved"], sort_keys=True)) == cell["resolved"]  # as it was
    del cell["resolved"]  # a cell without the block is resolved when it is loaded
    with pytest.raises(AssertionError, match="derived again"):
        TrainConfig.from_dict(cell)


def test_a_cell_edited_after_it_was_resolved_is_refused():
    cell = pipeline_cell()
    cell["train"]["prompts_per_step"] = 4  # the layout says 2
    with pytest.raises(ValueError, match="resolved was resolved from other settings"):
        TrainConfig.from_dict(cell)
    del cell["resolved"]
    assert TrainConfig.from_dict(cell).resolved.layout.shapes[16].rollouts == 64


def test_resolved_stops_must_be_the_cells_stops():
    cell = pipeline_cell()
    cell["resolved"]["stops"] = {"token_ids": {IM_END: 3}, "texts": []}  # train.stop is empty
    with pytest.raises(ValueError, match=r"resolved.stops covers \['<\|im_end\|>'\], train.stop is \[\]"):
        TrainConfig.from_dict(cell)


def test_auto_accumulation_without_a_card_is_refused_by_name(make_cell, tmp_path):
    cell = make_cell(tmp_path)
    cell["train"]["gradient_accumulation_steps"] = "auto"
    with pytest.raises(ValueError, match="train.gradient_accumulation_steps=auto needs device.gpu_memory_gib"):
        TrainConfig.from_dict(cell)


def test_the_paper_cells_carry_their_memory_plan():
    config = prepare(yaml.safe_load((REPO / "configs/paper.yaml").read_text()), "configs/paper.yaml")
    grid = Grid.from_config(config)
    for cell in grid.cells():
        d = train_cell_config(config, grid, cell)
        plan, layout = d["resolved"]["memory"], d["resolved"]["layout"]
        assert plan["rows_per_pass"] == d["train"]["micro_batch_rows"] == layout["micro_batch_rows"], cell.id
        assert plan["loss_pass_gib"] <= plan["card_gib"] and plan["generating_gib"] <= plan["card_gib"], cell.id
        assert plan["vllm_share"] == d["device"]["vllm_gpu_memory_utilization"], cell.id


# -- the trainer ------------------------------------------------------------------------------


def _stops_file(train_world, tmp_path, stop: list[str]) -> dict:
    out = tmp_path / "stops.json"
    assert stops.main(["--model", str(train_world["model"]), "--stops", json.dumps(stop), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_the_stop_tokens_job_splits_the_stops_by_the_tokenizer(train_world, tmp_path):
    from sagc.tokenizers import load_tokenizer

    im_end = load_tokenizer(train_world["model"]).convert_tokens_to_ids(IM_END)
    assert _stops_file(train_world, tmp_path, [IM_END, "\nUser:"]) == {
        "token_ids": {IM_END: im_end},
        "texts": ["\nUser:"],
    }
    assert _stops_file(train_world, tmp_path, []) == {"token_ids": {}, "texts": []}


@pytest.mark.slow
def test_the_trainer_reads_the_resolved_layout_and_stops(make_cell, train_world, tmp_path, monkeypatch):
    from sagc.train.run import build_trainer

    stop = [IM_END, "\nUser:"]
    cell = make_cell(tmp_path / "cell", algorithm="dapo")
    cell["train"]["stop"] = stop
    resolved = TrainConfig.from_dict(cell).to_dict()
    split = _stops_file(train_world, tmp_path, stop)
    im_end = split["token_ids"][IM_END]

    built = {}
    for name, how in (("tokenizer's", split), ("all as text", {"token_ids": {}, "texts": stop})):
        resolved["resolved"]["stops"] = how
        cfg = TrainConfig.from_dict(resolved)
        with monkeypatch.context() as m:  # the trainer does not split the stops again
            m.setattr(trainer_module, "split_stops", _refuse)
            built[name] = trainer = build_trainer(cfg)
        assert trainer.prompts_at == {g: s.prompts for g, s in cfg.resolved.layout.shapes.items()}
        assert trainer.updates_per_rollout == cfg.resolved.layout.updates_per_rollout == 2
    assert im_end in built["tokenizer's"].eos_token_ids and built["tokenizer's"]._stop_texts == ["\nUser:"]
    # the trainer took the resolution it was given, even one that differs from its tokenizer's
    assert im_end not in built["all as text"].eos_token_ids and built["all as text"]._stop_texts == stop
    # without resolved stops (a cell written by hand) the trainer splits them itself
    resolved["resolved"]["stops"] = None
    with monkeypatch.context() as m, pytest.raises(AssertionError, match="derived again"):
        m.setattr(trainer_module, "split_stops", _refuse)
        build_trainer(TrainConfig.from_dict(resolved))
