"""LoRA on a dual encoder's tower through peft: attach it, and check that every wrapped layer runs.

Some towers read a layer's weight directly instead of calling the layer (open_clip's ResNet attention
pool passes `q_proj.weight` to `F.multi_head_attention_forward`), so peft's LoRA layer there would
never run and train nothing, silently. `require_lora_runs` catches that with one backward pass.
"""

from __future__ import annotations

import torch

from .errors import InvalidInputError


def attach_lora(tower: torch.nn.Module, targets: list[str], rank: int, alpha: float, spec: str, seed: int | None = None):
    """peft `get_peft_model(tower, LoraConfig(r, alpha, targets))`, injected into `tower` in place.

    `seed` fixes the adapter's initialisation (peft draws A at random; B starts at zero).
    """
    from peft import LoraConfig, get_peft_model

    if not targets:
        raise InvalidInputError(f"{spec}: its tower has no layers LoRA can wrap (attention projections, MLP Linears or "
                                "convolutions); use the closed form or full fine-tuning, or name the modules to wrap")
    if seed is not None:
        torch.manual_seed(seed)
    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0, bias="none")
    try:
        return get_peft_model(tower, config)
    except ValueError as exc:
        raise InvalidInputError(f"{spec}: LoRA cannot wrap {list(targets)} ({exc}); name other target modules") from None


def lora_layer_names_without_grad(peft_model) -> list[str]:
    """Names of LoRA layers whose parameters got no gradient in the last backward pass."""
    silent = set()
    for name, p in peft_model.named_parameters():
        if p.requires_grad and p.grad is None and ("lora_A" in name or "lora_B" in name):
            silent.add(name.split(".lora_")[0].removeprefix("base_model.model."))
    return sorted(silent)


def require_lora_runs(peft_model, loss: torch.Tensor, spec: str) -> None:
    """Backward `loss` once and refuse LoRA layers that the forward pass never ran (gradients cleared after)."""
    if not loss.requires_grad:
        raise InvalidInputError(f"{spec}: none of the LoRA layers runs in the tower's forward pass (the tower reads "
                                "their weights directly); name other target modules")
    loss.backward()
    silent = lora_layer_names_without_grad(peft_model)
    peft_model.zero_grad(set_to_none=True)
    if silent:
        raise InvalidInputError(f"{spec}: the LoRA layers on {', '.join(silent[:4])}{' …' if len(silent) > 4 else ''} "
                                "never run in the tower's forward pass (it reads their weights directly), so they "
                                "cannot learn; name other target modules")
