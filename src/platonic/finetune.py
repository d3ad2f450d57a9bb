"""Fine-tuning a dual encoder's image (or audio) tower against its frozen prompt head; OrthoReg.

The classification head is the model's own normalised prompt embeddings G (M, d), frozen:

    logits = s * normalise(z(x)) G^T,   L = CE(logits, y) + lambda * sum_l ||dW_l^T dW_l - I||_F

with the OrthoReg term (method.md §2) over every trainable 2-D parameter's update dW = W - W_0
(recomputed each step; the Gram matrix on the smaller side; the norm *not* squared), or over
dW = (alpha / r) B A for LoRA layers. Modes: "full" (the whole tower and its edit site), "attention"
(attention projections only, ATT-FT), "lora" (peft LoRA on the tower's attention q/v projections).
`ascent=True` maximises the loss instead (the gradient-ascent negation baseline).
"""

from __future__ import annotations

import math
from typing import Iterable, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidInputError
from .lora import attach_lora, lora_layer_names_without_grad
from .models import DualEncoder
from .progress import track

ATTENTION_WORDS = ("attn", "attention", "q_proj", "k_proj", "v_proj", "out_proj", "qkv", "query", "key", "value")


class FinetuneConfig(BaseModel):
    """Settings of one fine-tune (defaults: the task_vectors recipe, scaled down)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["full", "attention", "lora"] = "full"
    steps: int = Field(200, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-4, gt=0)
    weight_decay: float = Field(0.1, ge=0)
    warmup_steps: int = Field(0, ge=0)
    grad_clip: float | None = 1.0
    logit_scale: float = Field(100.0, gt=0)
    lora_rank: int = Field(4, ge=1)
    lora_alpha: float = Field(8.0, gt=0)
    orthoreg: float = Field(0.0, ge=0)
    ascent: bool = False
    seed: int = 0


def orthoreg_penalty(deltas: Iterable[torch.Tensor]) -> torch.Tensor:
    """sum_l ||Gram(dW_l) - I||_F, Gram = dW dW^T if dW has fewer rows than columns, else dW^T dW.

    1-D tensors (biases, norms) are skipped. Not squared, as in the OrthoReg authors' code.
    """
    total = None
    for dW in deltas:
        if dW.ndim != 2:
            continue
        rows, cols = dW.shape
        gram = dW @ dW.T if rows < cols else dW.T @ dW
        term = torch.linalg.matrix_norm(gram - torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device))
        total = term if total is None else total + term
    if total is None:
        raise InvalidInputError("OrthoReg found no 2-D parameter updates to regularise")
    return total


def _trainable(ft: DualEncoder, mode: str) -> list[tuple[str, torch.nn.Parameter]]:
    named = dict(ft.tower.named_parameters())
    for name, t in ft.edit_site.tensors().items():  # e.g. HF visual_projection lives outside the tower
        if isinstance(t, torch.nn.Parameter) and all(t is not p for p in named.values()):
            named[f"edit_site.{name}"] = t
    if mode == "attention":
        named = {k: v for k, v in named.items() if any(w in k for w in ATTENTION_WORDS)}
        if not named:
            raise InvalidInputError(f"{ft.spec}: no attention parameters found for mode='attention'")
    return list(named.items())


def _lora_deltas(tower: torch.nn.Module) -> list[torch.Tensor]:
    """dW = scaling * B A of every LoRA layer (peft), for OrthoReg."""
    out = []
    for module in tower.modules():
        if hasattr(module, "lora_A") and hasattr(module, "lora_B"):
            for key in module.lora_A:
                A, B = module.lora_A[key].weight, module.lora_B[key].weight
                out.append(module.scaling[key] * (B @ A))
    return out


def finetune(model: DualEncoder, inputs: torch.Tensor, labels: torch.Tensor, prompts, config: FinetuneConfig | None = None,
             progress: bool = True) -> tuple[DualEncoder, list[float]]:
    """A fine-tuned copy of `model` and the loss of every step. `inputs` are canonical probes (n, ...)."""
    config = config or FinetuneConfig()
    if len(inputs) != len(labels) or len(inputs) == 0:
        raise InvalidInputError(f"fine-tuning needs as many labels as inputs (got {len(inputs)} inputs, {len(labels)} labels)")
    if int(labels.max()) >= len(prompts) or int(labels.min()) < 0:
        raise InvalidInputError(f"labels must index the {len(prompts)} prompts")
    torch.manual_seed(config.seed)
    ft = model.copy_for_new_weights()
    head = torch.nn.functional.normalize(ft.encode_texts(list(prompts)).to(ft.device, torch.float32), dim=1)

    peft_model = None
    if config.mode == "lora":
        peft_model = attach_lora(ft.tower, ft.lora_target_modules, config.lora_rank, config.lora_alpha, ft.spec)
        params = [p for p in ft.tower.parameters() if p.requires_grad]
        initial = None
    else:
        named = _trainable(ft, config.mode)
        for p in ft.module.parameters():
            p.requires_grad_(False)
        params = [p for _, p in named]
        for p in params:
            p.requires_grad_(True)
        initial = [p.detach().clone() for p in params] if config.orthoreg else None

    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress_frac = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        return 0.5 * (1 + math.cos(math.pi * progress_frac))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    gen = torch.Generator().manual_seed(config.seed)
    order, cursor, losses = torch.randperm(len(inputs), generator=gen), 0, []
    ft.tower.train()
    for _ in track(range(config.steps), description=f"fine-tuning ({config.mode})", enabled=progress):
        if cursor + config.batch_size > len(order):
            order, cursor = torch.randperm(len(inputs), generator=gen), 0
        idx = order[cursor : cursor + config.batch_size]
        cursor += config.batch_size
        z = ft._forward_tower(ft.prepare_probes(inputs[idx]))
        logits = config.logit_scale * torch.nn.functional.normalize(z.float(), dim=1) @ head.T
        loss = torch.nn.functional.cross_entropy(logits, labels[idx].to(logits.device))
        if config.ascent:
            loss = -loss
        if config.orthoreg:
            deltas = _lora_deltas(ft.tower) if peft_model is not None else [p - p0 for p, p0 in zip(params, initial)]
            loss = loss + config.orthoreg * orthoreg_penalty(deltas)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if peft_model is not None and not losses:
            silent = lora_layer_names_without_grad(peft_model)
            if silent:
                raise InvalidInputError(f"{ft.spec}: the LoRA layers on {', '.join(silent[:4])} never run in the tower's "
                                        "forward pass, so they cannot learn; use mode='full' or 'attention'")
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.detach()))
    ft.tower.eval()
    if peft_model is not None:
        peft_model.merge_and_unload()
    for p in ft.module.parameters():
        p.requires_grad_(False)
    return ft, losses
