"""Measure on one GPU what the memory plan (``sagc.pipeline.memory``) assumes, for both paper
models, and write one JSON that the plan can read instead of its stated margins
(``device.memory_measured``).

On the GPU machine (one GPU, no network, no vLLM; ~3-5 minutes on an H200)::

    # TRL travels as a wheel (pip download trl==1.16.0 --no-deps -d wheels/), then there:
    pip install --no-deps wheels/*.whl
    PYTHONPATH=src python benchmarks/gpu_memory_check.py --out results/gpu_memory_check
    # bring results/gpu_memory_check/gpu_memory_check.json back (a few kB)

``--tiny`` runs the same code on CPU: 2-layer models of the same architecture classes over
gloo, a few rows of 64 tokens, no memory figures (null), the split-pass comparison real;
its JSON has the same schema (``tests/train/test_gpu_memory_check.py``).

Per model (Qwen2.5-3B, Llama-3.2-3B: random weights, the published shapes and vocabulary,
``PAPER_MODEL_CONFIGS``), as a paper cell's process holds it: an fp32 policy (gradient
checkpointing) and an fp32 reference model, bf16 autocast, TRL's fused LM head, DDP over
NCCL with world size 1 (the reducer is built all the same). The rows of a pass are the
paper config's resolved ``rows_per_pass`` for the model's GRPO cells, at the length cap
(1024 + 4096 tokens). Measured, in order of a step, against the plan's unmargined figures:

- ``runtime_gib``: what the driver reports used beyond PyTorch's allocator (CUDA context,
  cuBLAS and NCCL), after DDP's first broadcast;
- ``reducer``: what wrapping in DDP allocates (its gradient buckets), bucket view off (as
  accelerate builds it) and on; ``gradients``: what a backward pass leaves allocated beyond
  that (``.grad``: a second copy, or views into the buckets);
- ``loss_pass``: the peak of one forward and backward pass; its activations (the peak less
  what was allocated before, the gradients and the autocast weight copies) over the plan's
  activation estimate: ``activation_factor``; ``fragmentation_gib``: reserved less allocated
  at that peak;
- ``after_step``: the free memory after an AdamW step (gradients freed) against the planned
  vLLM share of this card (``vllm_share`` x the driver's total);
- ``scoring``: the peak of a no-grad reference-model pass over the same rows, checkpointing
  off, as TRL scores; its activations over the plan's scoring estimate.

Then on 2 processes (gloo, on the GPU when there is one), a small model of the paper's
Qwen2 shape: one micro-batch's gradient in one pass, against the same micro-batch split
in two passes accumulated with ``no_sync`` and synchronised on the last (what
``SAGCGRPOTrainer.compute_loss`` does); ``split_passes.equal`` when they agree within
tolerance.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from sagc.pipeline.memory import (  # noqa: E402
    GIB,
    MEASURED_SCHEMA,
    PAPER_MODEL_CONFIGS,
    VLLM_WORKSPACE_GIB,
    Architecture,
)

#: The paper config's model names of each hub id (its resolved rows per pass and vLLM share).
PAPER_NAMES = {"Qwen/Qwen2.5-3B": "qwen2.5-3b", "meta-llama/Llama-3.2-3B": "llama-3.2-3b"}
TINY_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
TINY_ROWS, TINY_TOKENS = 2, 64
SPLIT_ROWS, SPLIT_TOKENS = 4, 128
SPLIT_TOLERANCE = 1e-5  # relative to the largest gradient entry (fp32, no autocast)


def _gib(n: float | None) -> float | None:
    return None if n is None else round(n / GIB, 3)


def model_config(hub_id: str, tiny: bool):
    from transformers import AutoConfig

    fields = dict(PAPER_MODEL_CONFIGS[hub_id])
    if tiny:
        fields.update(TINY_SHAPE)
        fields.pop("rope_scaling", None)
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def paper_plan(hub_id: str) -> dict[str, Any]:
    """The paper config's resolved plan of the model's GRPO cells (rows per pass, vLLM share)."""
    import yaml

    from sagc.pipeline.cells import train_cell_config
    from sagc.pipeline.config import prepare
    from sagc.pipeline.grid import Grid

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        config = prepare(yaml.safe_load(Path("configs/paper.yaml").read_text()), "configs/paper.yaml")
        grid = Grid.from_config(config)
        cell = next(c for c in grid.cells() if c.model == PAPER_NAMES[hub_id] and c.algorithm == "grpo")
        return train_cell_config(config, grid, cell)["resolved"]["memory"]
    finally:
        os.chdir(cwd)


class Memory:
    """The device's allocator and driver figures (all None on CPU)."""

    def __init__(self, device) -> None:
        import torch

        self.torch, self.cuda = torch, device.type == "cuda"

    def allocated(self) -> int | None:
        return self.torch.cuda.memory_allocated() if self.cuda else None

    def reset_peak(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()

    def peak(self) -> tuple[int | None, int | None]:
        if not self.cuda:
            return None, None
        self.torch.cuda.synchronize()
        return self.torch.cuda.max_memory_allocated(), self.torch.cuda.max_memory_reserved()

    def driver(self) -> tuple[int | None, int | None]:
        """(free, total) as the driver reports them."""
        return self.torch.cuda.mem_get_info() if self.cuda else (None, None)

    def runtime(self) -> int | None:
        if not self.cuda:
            return None
        free, total = self.driver()
        return total - free - self.torch.cuda.memory_reserved()

    def release(self) -> None:
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()


def _sub(a, b):
    return None if a is None or b is None else a - b


def _batch(rows: int, tokens: int, vocab: int, device, seed: int):
    """Random ids, every position a scored completion token but the first quarter (the prompt)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, tokens), generator=g).to(device)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[:, : tokens // 4] = -100
    return ids, mask, labels


def _log_prob_loss(model, ids, mask, labels):
    """A GRPO-like loss: the mean of the scored tokens' log-probs (TRL's fused LM head)."""
    import torch

    with torch.autocast(device_type=ids.device.type, dtype=torch.bfloat16):
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    log_probs = out.log_probs  # each position's next token: the labels shifted by one
    return -log_probs[labels[:, 1:] != -100].float().mean()


def measure_model(hub_id: str, device, tiny: bool) -> dict[str, Any]:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    mem = Memory(device)
    cfg = model_config(hub_id, tiny)
    arch = Architecture.from_config(cfg.to_dict())
    if tiny:
        rows, tokens, share = TINY_ROWS, TINY_TOKENS, None
    else:
        plan = paper_plan(hub_id)
        rows, tokens, share = plan["rows_per_pass"], plan["tokens_per_row"], plan["vllm_share"]
    n = arch.params
    t0 = time.perf_counter()
    with torch.device(device):
        torch.manual_seed(0)
        policy = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        reference = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    for m in (policy, reference):
        add_fused_lm_head(m, temperature=1.0)
    policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy.config.use_cache = False
    reference.eval()
    out: dict[str, Any] = {
        "params": n,
        "params_by_estimator": arch.params,
        "rows_per_pass": rows,
        "tokens_per_row": tokens,
    }

    reducer = {}
    gradients = {}
    loss_pass: dict[str, Any] = {}
    after_step: dict[str, Any] = {}
    for view in (False, True):
        mem.release()
        before = mem.allocated()
        ddp = DDP(policy, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=view)
        key = "bucket_view_on_gib" if view else "bucket_view_off_gib"
        reducer[key] = _gib(_sub(mem.allocated(), before))
        if not view:
            out["runtime_gib"] = _gib(mem.runtime())
        ids, mask, labels = _batch(rows, tokens, cfg.vocab_size, device, seed=1)
        held = mem.allocated()
        mem.reset_peak()
        ddp.train()
        _log_prob_loss(ddp, ids, mask, labels).backward()
        peak, reserved = mem.peak()
        gradients[key] = _gib(_sub(mem.allocated(), held))
        if not view:  # the loss pass as accelerate runs it: the activations beyond grads and copies
            grads = _sub(mem.allocated(), held)
            planned = rows * tokens * arch.activation_elements_per_token(True) * 4
            acts = None if peak is None else peak - held - grads - 2 * n
            loss_pass = {
                "peak_gib": _gib(peak),
                "activations_gib": _gib(acts),
                "planned_activations_gib": _gib(planned),
                "activation_factor": None if acts is None else round(acts / planned, 3),
            }
            out["fragmentation_gib"] = _gib(_sub(reserved, peak))
            opt = torch.optim.AdamW(policy.parameters(), lr=1e-6)
            opt.step()
            opt.zero_grad(set_to_none=True)
            mem.release()
            free, total = mem.driver()
            planned_share = None if share is None else share * total
            after_step = {
                "free_gib": _gib(free),
                "driver_total_gib": _gib(total),
                "vllm_share": share,
                "planned_vllm_share_gib": _gib(planned_share),
                "fits": None if free is None or planned_share is None else free >= planned_share,
            }
            held = mem.allocated()
            mem.reset_peak()
            with torch.no_grad():  # TRL's scoring pass: no grad, no checkpointing
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                    reference(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
            peak, _ = mem.peak()
            planned = rows * tokens * arch.scoring_elements_per_token() * 4
            acts = None if peak is None else peak - held - 2 * n
            out["scoring"] = {
                "peak_gib": _gib(peak),
                "activations_gib": _gib(acts),
                "planned_activations_gib": _gib(planned),
                "activation_factor": None if acts is None else round(acts / planned, 3),
            }
            del opt
        else:
            policy.zero_grad(set_to_none=True)
        del ddp, ids, mask, labels
    out.update(
        reducer=reducer | {"planned_gib": _gib(4 * n)},
        gradients=gradients | {"planned_off_gib": _gib(4 * n), "planned_on_gib": 0.0},
        loss_pass=loss_pass,
        after_step=after_step,
        seconds=round(time.perf_counter() - t0, 1),
    )
    del policy, reference
    mem.release()
    return out


def _split_rank(rank: int, world: int, init: str, device_type: str, result: str) -> None:
    """One rank of the split-pass comparison (torch.multiprocessing.spawn)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    device = torch.device(device_type, 0) if device_type == "cuda" else torch.device("cpu")
    cfg = model_config("Qwen/Qwen2.5-3B", tiny=True)
    with torch.device(device):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    add_fused_lm_head(model, temperature=1.0)
    ddp = DDP(model, device_ids=[0] if device_type == "cuda" else None)
    ids, mask, labels = _batch(SPLIT_ROWS, SPLIT_TOKENS, cfg.vocab_size, device, seed=100 + rank)

    def loss(part):  # each pass's share of the micro-batch's token mean
        out = ddp(input_ids=ids[part], attention_mask=mask[part], labels=labels[part], fused_lm_head=True)
        return -out.log_probs[labels[part, 1:] != -100].sum() / (labels[:, 1:] != -100).sum()

    loss(slice(None)).backward()  # one pass over the micro-batch
    whole = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    half = SPLIT_ROWS // 2
    with ddp.no_sync():  # the first pass accumulates locally, the last one synchronises
        loss(slice(0, half)).backward()
    loss(slice(half, None)).backward()
    split = [p.grad.detach() for p in model.parameters()]
    scale = max(float(g.abs().max()) for g in whole)
    diff = max(float((a - b).abs().max()) for a, b in zip(whole, split))
    if rank == 0:
        Path(result).write_text(json.dumps({"max_abs_diff": diff, "max_rel_diff": diff / scale}))
    dist.barrier()
    dist.destroy_process_group()


def split_passes(device_type: str) -> dict[str, Any]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "split.json"
        init = f"file://{Path(tmp) / 'rendezvous'}"
        mp.spawn(_split_rank, args=(2, init, device_type, str(result)), nprocs=2, join=True)
        found = json.loads(result.read_text())
    return {
        "processes": 2,
        "backend": "gloo",
        "rows": SPLIT_ROWS,
        "tokens_per_row": SPLIT_TOKENS,
        "passes": [SPLIT_ROWS // 2, SPLIT_ROWS // 2],
        **found,
        "tolerance": SPLIT_TOLERANCE,
        "equal": found["max_rel_diff"] <= SPLIT_TOLERANCE,
    }


def run(tiny: bool) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    import transformers
    import trl

    cuda = torch.cuda.is_available() and not tiny
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not tiny and not cuda:
        raise SystemExit("gpu_memory_check.py: no GPU here; --tiny runs the same code on CPU")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:  # DDP of world size 1, as the plan's processes hold it
        dist.init_process_group(
            "nccl" if cuda else "gloo", init_method=f"file://{tmp}/rendezvous", rank=0, world_size=1
        )
        try:
            models = {hub_id: measure_model(hub_id, device, tiny) for hub_id in PAPER_MODEL_CONFIGS}
        finally:
            dist.destroy_process_group()
    total = torch.cuda.mem_get_info()[1] if cuda else None
    return {
        "schema": MEASURED_SCHEMA,
        "tiny": tiny,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__},
        "driver_total_gib": _gib(total),
        "vllm_workspace_gib": VLLM_WORKSPACE_GIB,
        "models": models,
        "split_passes": split_passes("cuda" if cuda else "cpu"),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for gpu_memory_check.json")
    parser.add_argument("--tiny", action="store_true", help="the same code on CPU, 2-layer models")
    ns = parser.parse_args(argv)
    report = run(ns.tiny)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_memory_check.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))
    return 0 if report["split_passes"]["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
