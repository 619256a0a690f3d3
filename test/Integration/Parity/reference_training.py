"""Training as the Tessel runtime defines it: the learning-rate schedule (lr_at), the
parameter classes weight decay falls on (parameter_class), the optimizer (make_optimizer) and
one optimizer step with gradient accumulation and clipping (train_step, StepResult).

reference.py imports every name here; its callers use them from there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Sequence, Tuple

import torch
import torch.nn as nn

from reference_spec import TrainConfig


# ---------------------------------------------------------------------------------------------
# Training: schedule, optimizer, one step with accumulation and clipping
# ---------------------------------------------------------------------------------------------


def lr_at(step: int, t: TrainConfig) -> float:
    """The learning rate of step `step` (counted from 1). The horizon is the spec's
    train.steps even when a run is cut short with --steps."""
    if t.schedule == "constant":
        return t.lr
    if t.warmup > 0 and step <= t.warmup:
        return t.lr * step / t.warmup
    span = t.steps - t.warmup
    p = (step - t.warmup) / span if span > 0 else 1.0
    p = min(max(p, 0.0), 1.0)
    if t.schedule == "cosine":
        return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + math.cos(math.pi * p))
    if t.schedule == "linear":
        return t.lr + (t.min_lr - t.lr) * p
    raise ValueError(f"unknown schedule {t.schedule!r}")


# What each parameter of the models above is, by its name, as a reader of the models sees it:
# the token and position tables are embeddings; the norms' scales (and the hand-written RMS
# norm's g) are gains; the rest of the one-dim-per-feature vectors are biases; everything
# else is a weight matrix.
EMBEDDINGS = {"wte", "wpe", "tok_embeddings"}
GAINS = {"ln1_g", "ln2_g", "lnf_g", "attention_norm", "ffn_norm", "norm", "g"}
BIASES = {"ln1_b", "ln2_b", "lnf_b", "bq", "bk", "bv", "bo", "b_fc", "b_proj"}


def parameter_class(name: str) -> str:
    leaf = name.rsplit(".", 1)[-1]
    if leaf in EMBEDDINGS:
        return "embeddings"
    if leaf in GAINS:
        return "gains"
    if leaf in BIASES:
        return "biases"
    return "weights"


def make_optimizer(model: nn.Module, t: TrainConfig) -> torch.optim.Optimizer:
    """The optimizer over every parameter, in two groups as nanoGPT makes them: weight decay
    on the classes the recipe names, none on the others."""
    decayed, kept = [], []
    for name, p in model.named_parameters():
        (decayed if parameter_class(name) in t.decay else kept).append(p)
    groups = [{"params": decayed, "weight_decay": t.weight_decay},
              {"params": kept, "weight_decay": 0.0}]
    if t.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas, eps=t.eps)
    if t.optimizer == "adam":
        return torch.optim.Adam(groups, lr=t.lr, betas=t.betas, eps=t.eps)
    if t.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=t.lr, momentum=t.momentum)
    raise ValueError(f"unknown optimizer {t.optimizer!r}")


@dataclass
class StepResult:
    loss: float  # mean of the micro-batch losses, before the update
    lr: float
    grad_norm: float  # global L2 norm of the accumulated gradient, before clipping
    grads: Dict[str, torch.Tensor] = field(default_factory=dict)  # before clipping, if kept


def train_step(model: nn.Module, opt: torch.optim.Optimizer, step: int, t: TrainConfig,
               micro_batches: Sequence[Tuple[torch.Tensor, torch.Tensor]],
               keep_grads: bool = False, autocast: bool = False) -> StepResult:
    """One optimizer step: forward/backward over each micro-batch with its loss scaled by
    1/accumulation (so the gradients sum to the gradient of the step's mean loss), global-norm
    clipping, then the optimizer update at the scheduled learning rate. With `autocast` the
    forward pass runs under torch.autocast("cpu", bfloat16): PyTorch's bf16 mixed precision
    (products in bf16, fp32 parameters, gradients and optimizer state)."""
    lr = lr_at(step, t)
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=False)
    n = len(micro_batches)
    losses = []
    for tokens, targets in micro_batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(tokens, targets).float()
        (loss / n).backward()
        losses.append(loss.item())
    grads = {}
    if keep_grads:
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    params = list(model.parameters())
    if t.clip > 0:
        # coefficient clip / (norm + 1e-6), clamped at 1
        norm = torch.nn.utils.clip_grad_norm_(params, t.clip)
    else:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad)
                                                     for p in params]))
    opt.step()
    return StepResult(loss=float(sum(losses) / n), lr=lr, grad_norm=float(norm), grads=grads)
