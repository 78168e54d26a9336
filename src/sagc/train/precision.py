"""Weight precision under bf16: what the model is loaded as and which optimizer updates it.

At the paper's learning rate an AdamW update is below half a bf16 ulp of a typical weight,
so weights stored in plain bf16 barely move. ``device.master_weights`` picks one of two
setups that avoid it: ``fp32`` master weights under bf16 autocast, or bf16 weights with
``CompensatedAdamW`` (Kahan summation). Why, and what each costs: docs/trainer.md
("Weight precision under bf16").
"""

from __future__ import annotations

from typing import Any

import torch


def optimizer_cls_and_kwargs(device: Any, args: Any) -> tuple[type, dict] | None:
    """``Trainer.optimizer_cls_and_kwargs`` for the setup, or None for the Trainer's own AdamW
    (fp32 master weights). ``args``: the ``TrainingArguments`` (learning rate, betas, eps,
    weight decay are taken from it, so both setups share the hyper-parameters)."""
    if device.weights_dtype == "float32":
        return None
    return CompensatedAdamW, dict(
        lr=args.learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
        weight_decay=args.weight_decay,
    )


class CompensatedAdamW(torch.optim.Optimizer):
    """AdamW for low-precision weights with Kahan-compensated updates.

    The moments are kept in fp32. For a weight ``w`` stored in bf16, the step computes the
    fp32 update ``u``, adds the compensation ``c`` (what earlier steps could not apply),
    rounds ``w + u + c`` to bf16 and keeps the rounding error as the new ``c`` (stored in the
    weight's dtype, as optimi and Zamirai et al., "Revisiting BFloat16 Training", do).
    For fp32 weights it is plain AdamW (the compensation stays zero).
    """

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
