"""The optimizer of bf16 weights (``device.master_weights``): docs/trainer.md, "Weight precision under bf16"."""

from __future__ import annotations

from typing import Any

import torch


def optimizer_cls_and_kwargs(device: Any, args: Any) -> tuple[type, dict] | None:
    """``Trainer.optimizer_cls_and_kwargs`` for the setup (hyper-parameters from the
    ``TrainingArguments``), or None for the Trainer's own AdamW."""
    if device.weights_dtype == "float32":
        return None
    return CompensatedAdamW, dict(
        lr=args.learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
        weight_decay=args.weight_decay,
    )


class CompensatedAdamW(torch.optim.Optimizer):
    """AdamW with fp32 moments and Kahan-compensated updates: ``w + u + c`` is rounded to the
    weight's dtype and the rounding error kept as the next ``c`` (stored in that dtype, as
    optimi does). For fp32 weights it is plain AdamW."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        if lr <= 0 or eps <= 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or weight_decay < 0:
            raise ValueError(
                f"invalid CompensatedAdamW hyper-parameters: lr={lr}, betas={betas}, "
                f"eps={eps}, weight_decay={weight_decay}"
            )
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                    state["compensation"] = torch.zeros_like(p)
                state["step"] += 1
                t = state["step"]
                grad = p.grad.float()
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.lerp_(grad, 1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = (v / (1 - beta2**t)).sqrt_().add_(group["eps"])
                weight = p.detach().to(torch.float32, copy=True)  # never an alias of an fp32 p
                update = (m / (1 - beta1**t)).div_(denom).mul_(-group["lr"])
                if group["weight_decay"]:
                    update.add_(weight, alpha=-group["lr"] * group["weight_decay"])
                target = weight.add_(update).add_(state["compensation"].float())
                p.copy_(target)  # rounds to the weight's dtype
                state["compensation"].copy_(target.sub_(p.float()))
        return loss
