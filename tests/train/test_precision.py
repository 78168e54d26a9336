"""bf16 weight precision: the paper's optimizer setup moves weights at the paper's learning
rate, for each card size; plain bf16 weights (the setup it replaces) do not."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from sagc.pipeline.cells import train_cell_config
from sagc.pipeline.config import prepare
from sagc.pipeline.grid import Grid
from sagc.train.config import TrainConfig
from sagc.train.precision import CompensatedAdamW, optimizer_cls_and_kwargs
from sagc.train.presets import grpo_config_kwargs
from tests.pipeline.test_paper_gpu import CARDS
from tests.train.paper_world import tiny_paper_model

REPO = Path(__file__).resolve().parents[2]
STEPS = 200


def paper_setup(card: str):
    """The first paper cell's device section and ``GRPOConfig`` for ``card`` (on CPU here)."""
    from trl import GRPOConfig

    config = yaml.safe_load((REPO / "configs/paper.yaml").read_text())
    config["device"].update(CARDS[card])
    config = prepare(config, "configs/paper.yaml")
    grid = Grid.from_config(config)
    cfg = TrainConfig.from_dict(train_cell_config(config, grid, next(iter(grid.cells()))), check_vllm=False)
    kw = grpo_config_kwargs(cfg, cfg.resolved.algorithm, cfg.resolved.layout)
    kw.update(use_cpu=True, use_vllm=False, output_dir="unused")
    return cfg.device, GRPOConfig(**kw)


def train_steps(model, optimizer, bf16_autocast: bool) -> dict[str, torch.Tensor]:
    """STEPS updates on a fixed batch; returns each weight matrix's change (fp32)."""
    before = {n: p.detach().float().clone() for n, p in model.named_parameters() if p.dim() == 2}
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (4, 32), generator=gen)
    for _ in range(STEPS):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16_autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return {n: p.detach().float() - before[n] for n, p in model.named_parameters() if n in before}


def moved(deltas: dict[str, torch.Tensor]) -> tuple[float, float]:
    flat = torch.cat([d.flatten() for d in deltas.values()])
    return float((flat != 0).float().mean()), float(flat.abs().mean())


@pytest.fixture(scope="module")
def fp32_reference():
    torch.manual_seed(0)
    model = tiny_paper_model("Qwen/Qwen2.5-3B", vocab_size=320)
    return moved(train_steps(model, torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0), False))


@pytest.mark.parametrize("card", sorted(CARDS))
def test_paper_optimizer_setup_moves_weights_at_the_paper_learning_rate(card, fp32_reference):
    from transformers import Trainer

    device, args = paper_setup(card)
    assert args.learning_rate == 1e-6 and args.bf16
    dtype = args.model_init_kwargs["dtype"]
    model = tiny_paper_model("Qwen/Qwen2.5-3B", vocab_size=320, dtype=dtype)
    choice = optimizer_cls_and_kwargs(device, args) or Trainer.get_optimizer_cls_and_kwargs(args, model)
    cls, kwargs = choice
    optimizer = cls(model.parameters(), **kwargs)
    frac, mean_step = moved(train_steps(model, optimizer, bf16_autocast=args.bf16))
    ref_frac, ref_mean = fp32_reference
    assert ref_frac > 0.99
    assert frac > 0.95, f"{card}: only {frac:.1%} of the weights moved ({dtype}, {cls.__name__})"
    assert 0.7 < mean_step / ref_mean < 1.3, (card, mean_step, ref_mean)
    if card == "80GB":
        assert dtype == "bfloat16" and cls is CompensatedAdamW
    else:
        assert dtype == "float32"


def test_plain_bf16_weights_barely_move_which_is_what_the_setups_avoid():
    model = tiny_paper_model("Qwen/Qwen2.5-3B", vocab_size=320, dtype="bfloat16")
    frac, _ = moved(train_steps(model, torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0), True))
    assert frac < 0.2


def test_compensated_adamw_matches_adamw_on_fp32_weights():
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(64, 64))
    b = torch.nn.Parameter(a.detach().clone())
    opt_a = torch.optim.AdamW([a], lr=1e-3, weight_decay=0.01)
    opt_b = CompensatedAdamW([b], lr=1e-3, weight_decay=0.01)
    for _ in range(20):
        g = torch.randn(64, 64)
        a.grad, b.grad = g.clone(), g.clone()
        opt_a.step()
        opt_b.step()
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
