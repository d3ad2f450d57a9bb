"""LoRA on a dual encoder's tower through peft: attach it, and check that every wrapped layer runs.

Some towers read a layer's weight directly instead of calling the layer (open_clip's ResNet attention
pool passes `q_proj.weight` to `F.multi_head_attention_forward`), so peft's LoRA layer there would
never run and train nothing, silently. `require_lora_runs` catches that with one backward pass.
"""

from __future__ import annotations

import functools

import torch

from ..errors import InvalidInputError


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


def lora_weight_deltas(tower: torch.nn.Module) -> list[torch.Tensor]:
    """dW (out, in) of every LoRA layer of a peft-wrapped `tower`, as its forward pass applies it.

    dW = scaling * B A, times `packed_out_proj_factor()` for the output projection inside a packed
    nn.MultiheadAttention, which peft applies more than once. OrthoReg's penalty acts on these.
    """
    from peft.tuners.lora.layer import MultiheadAttention as LoraMultiheadAttention

    inner_out_proj = {id(m.get_base_layer().out_proj) for m in tower.modules() if isinstance(m, LoraMultiheadAttention)}
    out = []
    for module in tower.modules():
        if hasattr(module, "lora_A") and hasattr(module, "lora_B"):
            factor = packed_out_proj_factor() if id(module) in inner_out_proj else 1.0
            for key in module.lora_A:
                A, B = module.lora_A[key].weight, module.lora_B[key].weight
                out.append((factor * module.scaling[key]) * (B @ A))
    return out


@functools.cache
def packed_out_proj_factor() -> float:
    """How many times this peft applies the out_proj LoRA of a packed nn.MultiheadAttention: 2 in peft
    0.21 (huggingface/peft PR 3774), 1 once fixed. Measured once on a tiny layer by merging it."""
    from peft import LoraConfig, get_peft_model

    class _One(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(4, 1)

    with torch.random.fork_rng():
        torch.manual_seed(0)
        probe = _One()
        before = probe.attn.out_proj.weight.detach().clone()
        wrapped = get_peft_model(probe, LoraConfig(r=1, lora_alpha=1, target_modules=["attn"]))
        inner = wrapped.base_model.model.attn.get_base_layer().out_proj
        with torch.no_grad():
            inner.lora_B["default"].weight.fill_(1.0)
            expected = inner.scaling["default"] * inner.lora_B["default"].weight @ inner.lora_A["default"].weight
            realised = wrapped.merge_and_unload().attn.out_proj.weight - before
    return float((realised * expected).sum() / (expected * expected).sum())
