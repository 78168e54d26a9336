"""The memory plan (sagc.pipeline.memory) against figures worked out by hand from the
models' published config.json shapes, and the paper config's plan on the 141 GB card.

Hand figures: parameters from the layer shapes (q/k/v/o projections, the gated MLP, two
RMSNorms a layer, tied embeddings, Qwen2's q/k/v biases); 4 bytes an fp32 parameter; AdamW
two fp32 moments; DDP one flat fp32 bucket per parameter; vLLM's share of the driver's total
(an H200 reports 143,771 MiB)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sagc.pipeline.memory import (
    GIB,
    MEASURED_SCHEMA,
    PAPER_MODEL_CONFIGS,
    Architecture,
    Margins,
    estimate,
)

REPO = Path(__file__).resolve().parents[2]
H200_GIB = 143_771 / 1024  # the driver's total: what vLLM multiplies its share by
RUNTIME = 2 * GIB

# Published shapes (config.json): hidden, layers, heads x head_dim, KV heads, MLP, vocabulary.
LLAMA_N = (
    128_256 * 3_072  # tied embedding
    + 28
    * (
        3_072 * 3_072 * 2
        + 3_072 * 8 * 128 * 2  # q, o; k, v (8 KV heads x 128)
        + 3 * 3_072 * 8_192
        + 2 * 3_072
    )  # gate, up, down; two norms
    + 3_072
)  # final norm
QWEN_N = (
    151_936 * 2_048
    + 36
    * (
        2_048 * 2_048 * 2
        + 2_048 * 2 * 128 * 2
        + (2_048 + 2 * 256)  # q, o; k, v; q/k/v biases
        + 3 * 2_048 * 11_008
        + 2 * 2_048
    )
    + 2_048
)


def arch(hub_id: str) -> Architecture:
    return Architecture.from_config(PAPER_MODEL_CONFIGS[hub_id])


LLAMA, QWEN = arch("meta-llama/Llama-3.2-3B"), arch("Qwen/Qwen2.5-3B")


def plan(a: Architecture, **kw):
    args = dict(
        master_weights="fp32",
        reference_model=True,
        micro_batch=8,
        tokens_per_row=5_120,
        vllm_fraction=0.58,
        card_gib=H200_GIB,
        vllm_sleep=True,
        strategy="ddp",
        processes=4,
        margins=Margins(margin_gib=0.0),
    )
    return estimate(a, **{**args, **kw})


def test_parameters_and_ddp_buckets_are_the_published_models():
    assert (LLAMA.params, QWEN.params) == (LLAMA_N, QWEN_N)
    assert plan(LLAMA).ddp_buckets / GIB == pytest.approx(12.0, abs=0.05)  # 4 bytes a parameter
    assert plan(QWEN).ddp_buckets / GIB == pytest.approx(11.5, abs=0.05)


def test_the_step_2_llama_grpo_generation_phase_of_the_old_share_does_not_fit_an_h200():
    """fp32 policy 12.0 + fp32 reference 12.0 + AdamW 23.9 + DDP buckets 12.0 + 2 GiB context,
    then vLLM wakes into 0.58 of the card's 140.4 GiB: ~143 GiB."""
    hand = 4 * LLAMA_N + 4 * LLAMA_N + 8 * LLAMA_N + 4 * LLAMA_N + RUNTIME + 0.58 * 143_771 * 2**20
    est = plan(LLAMA)
    assert est.generating == pytest.approx(hand, rel=1e-9)
    assert est.generating > H200_GIB * GIB and not est.fits
    # vLLM's share is a share of the driver's total, not of a rounded card size
    assert est.vllm_share == pytest.approx(0.58 * 143_771 * 2**20)


def test_the_loss_pass_counts_ddps_second_gradient_copy_unless_grads_are_bucket_views():
    off, on = plan(LLAMA), plan(LLAMA, bucket_view=True)
    assert off.ddp_buckets == on.ddp_buckets == 4 * LLAMA_N  # kept for the run either way
    assert off.gradients == 4 * LLAMA_N and on.gradients == 0  # .grad: a copy, or views into the buckets
    assert off.total - on.total == 4 * LLAMA_N
    one = plan(LLAMA, processes=1)  # no DDP: no buckets, .grad alone
    assert one.ddp_buckets == 0 and one.gradients == 4 * LLAMA_N


def test_fsdp2_keeps_unsharded_gradients_while_it_accumulates():
    est = plan(QWEN, strategy="fsdp2", processes=4)
    assert est.ddp_buckets == 0
    assert est.gradients == 4 * QWEN_N + 4 * QWEN_N / 4  # unsharded accumulation + the sharded result
    assert est.optimizer == 8 * QWEN_N / 4
    # the weights: a quarter, plus the units in flight (embedding, two layers)
    layer = 2_048 * 2_048 * 2 + 2_048 * 2 * 128 * 2 + (2_048 + 2 * 256) + 3 * 2_048 * 11_008 + 2 * 2_048
    assert est.weights == 4 * (QWEN_N / 4 + 151_936 * 2_048 + 2 * layer)


def test_a_scoring_chunk_of_tr_ls_size_would_not_fit_and_one_of_the_loss_passs_rows_does():
    """A Qwen sagc/g16 GRPO cell: TRL scores old and reference log-probs in chunks of
    per_device_train_batch_size, 64 rows x 5120 tokens (the micro-batch at G = 16), without
    gradient checkpointing: the residual stream and one layer's forward working set (q, o,
    norms: 4h; k, v: 2 x 256; gate, up, act, product: 4 x 11008) at 4 bytes, x 1.25."""
    per_token = (2_048 + 4 * 2_048 + 2 * 256 + 4 * 11_008) * 4 * 1.25
    whole, chunk = plan(QWEN, micro_batch=64, vllm_fraction=0.23), plan(QWEN, micro_batch=8, vllm_fraction=0.23)
    assert whole.scoring_activations == pytest.approx(64 * 5_120 * per_token)
    assert whole.scoring > H200_GIB * GIB  # ~157 GiB: out of memory before the loss pass
    assert chunk.scoring == pytest.approx(whole.scoring - 56 * 5_120 * per_token)
    assert chunk.scoring < chunk.total < H200_GIB * GIB


def _paper():
    from sagc.pipeline.config import prepare

    return prepare(yaml.safe_load((REPO / "configs/paper.yaml").read_text()), "configs/paper.yaml")


@pytest.fixture
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def test_every_paper_cell_fits_the_h200_in_every_phase_with_the_stated_margin(_in_repo, recwarn):
    from sagc.pipeline import memory, preview
    from sagc.pipeline.cells import train_cell_config
    from sagc.pipeline.grid import Grid

    config = _paper()
    assert config.device.gpu_memory_gib == pytest.approx(H200_GIB, abs=0.05)
    margin = config.device.memory_margin_gib
    assert margin > 0
    grid = Grid.from_config(config)
    for cell in grid.cells():
        p = train_cell_config(config, grid, cell)["resolved"]["memory"]
        for phase in ("generating_gib", "scoring_gib", "loss_pass_gib"):
            assert p[phase] <= H200_GIB, (cell.id, phase, p)
    lines = preview.memory_lines(config, grid)
    assert len(lines) == 4  # models x algorithms
    assert all(
        "generating" in line and "scoring" in line and "loss pass" in line and "of 140.4 GiB" in line for line in lines
    ), lines
    # the margin is in every phase: without it Llama GRPO's engine would get a larger share
    bare = config.model_copy(update={"device": config.device.model_copy(update={"memory_margin_gib": 0.0})})
    assert memory.vllm_share(bare, "llama-3.2-3b") > memory.vllm_share(config, "llama-3.2-3b")


def _measured(tmp_path: Path, **over) -> Path:
    report = {
        "schema": MEASURED_SCHEMA,
        "tiny": False,
        "models": {
            "Qwen/Qwen2.5-3B": {
                "loss_pass": {"activation_factor": 1.0},
                "scoring": {"activation_factor": 0.5},
                "runtime_gib": 1.5,
                "fragmentation_gib": 2.5,
            }
        },
    }
    report.update(over)
    path = tmp_path / "gpu_memory_check.json"
    path.write_text(json.dumps(report))
    return path


def test_a_measured_json_replaces_the_stated_margins(_in_repo, tmp_path):
    from sagc.pipeline import memory
    from sagc.train.presets import resolve_algorithm

    config = _paper()
    grpo = resolve_algorithm({"name": "grpo"}, 4096)
    stated = memory.cell_estimate(config, "qwen2.5-3b", grpo, 8)
    config.device = config.device.model_copy(update={"memory_measured": str(_measured(tmp_path))})
    measured = memory.cell_estimate(config, "qwen2.5-3b", grpo, 8)
    assert measured.activations == pytest.approx(stated.activations / 1.25)
    assert measured.scoring_activations == pytest.approx(stated.scoring_activations * 0.5 / 1.25)
    assert (measured.runtime, measured.margin) == (1.5 * GIB, 2.5 * GIB)
    assert memory.margins(config, "qwen2.5-3b").source == str(tmp_path / "gpu_memory_check.json")
    # a model it did not measure, or a --tiny run, is refused naming the key and file
    with pytest.raises(
        ValueError,
        match=r"device.memory_measured: .*gpu_memory_check.json holds no measurement "
        r"of models.llama-3.2-3b",
    ):
        memory.margins(config, "llama-3.2-3b")
    config.device = config.device.model_copy(update={"memory_measured": str(_measured(tmp_path, tiny=True))})
    with pytest.raises(ValueError, match="without --tiny"):
        memory.margins(config, "qwen2.5-3b")
