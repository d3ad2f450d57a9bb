"""The attention layers of a tower, as the OrthoReg / ATT-FT authors' code sees them (method.md §2).

ATT-FT trains the *weight matrices* of the self-attention layers of the tower's blocks, nothing else:
the query, key, value and output projections (no biases, no norms, no MLP), and not the attention
inside a pooling head (open_clip's `attn_pool` / ResNet `attnpool`, SigLIP's MAP `head`, the world
MAPViT's `head`), which merely contains attention. LoRA-ATT puts LoRA on the same four projections.

Recognised layouts (module -> its weight matrices):

| layout                               | example                       | weights                                        |
|--------------------------------------|-------------------------------|------------------------------------------------|
| `nn.MultiheadAttention`              | open_clip ViT `attn`          | `in_proj_weight` (3w, w) (or q/k/v_proj_weight), `out_proj.weight` |
| Linear children q/k/v/out_proj       | transformers CLIP, world ViT  | `q_proj.weight`, `k_proj.weight`, `v_proj.weight`, `out_proj.weight` |
| Linear children qkv / proj           | timm ViT                      | `qkv.weight` (3w, w), `proj.weight`            |
"""

from __future__ import annotations

from torch import nn

from ..errors import InvalidInputError

SEPARATE = ("q_proj", "k_proj", "v_proj", "out_proj")
FUSED = ("qkv", "proj")


def in_pooling_head(name: str) -> bool:
    """True for a module path inside a pooling head: a component `head`, or one containing `pool`."""
    return any(part == "head" or "pool" in part for part in name.split("."))


def _children_linear(module: nn.Module, names) -> bool:
    return all(isinstance(getattr(module, n, None), nn.Linear) for n in names)


def attention_layers(tower: nn.Module, runs=None) -> list[tuple[str, nn.Module, str]]:
    """(module path, module, layout) of every block attention layer of `tower`, outside pooling heads, and where
    `runs(module)` is given, only those it says the tower's forward pass runs (`DualEncoder.runs_in_forward`).

    layout is "packed" (nn.MultiheadAttention), "separate" (q/k/v/out_proj) or "fused" (qkv/proj).
    """
    out = []
    for name, module in tower.named_modules():
        if in_pooling_head(name) or (runs is not None and not runs(module)):
            continue
        if isinstance(module, nn.MultiheadAttention):
            out.append((name, module, "packed"))
        elif _children_linear(module, SEPARATE):
            out.append((name, module, "separate"))
        elif _children_linear(module, FUSED):
            out.append((name, module, "fused"))
    return out


def _join(prefix: str, leaf: str) -> str:
    return f"{prefix}.{leaf}" if prefix else leaf


def attention_weight_names(tower: nn.Module, spec: str = "this model", runs=None) -> list[str]:
    """Names (as in `tower.named_parameters()`) of the attention weight matrices ATT-FT trains (of the layers
    `runs` keeps, `attention_layers`).

    Raises InvalidInputError when the tower has no block attention (a CNN or MLP-Mixer tower).
    """
    names = []
    for prefix, module, layout in attention_layers(tower, runs):
        if layout == "packed":
            own = ["in_proj_weight"] if module.in_proj_weight is not None else ["q_proj_weight", "k_proj_weight", "v_proj_weight"]
            names += [_join(prefix, n) for n in own] + [_join(prefix, "out_proj.weight")]
        else:
            names += [_join(prefix, f"{leaf}.weight") for leaf in (SEPARATE if layout == "separate" else FUSED)]
    if not names:
        raise InvalidInputError(f"{spec}: its tower has no transformer attention layers (q, k, v, out projections outside "
                                "a pooling head), so it cannot be fine-tuned attention-only (ATT-FT) or with LoRA-ATT; "
                                "use the flavours full or linear")
    return names


def attention_lora_modules(tower: nn.Module, spec: str = "this model", runs=None) -> list[str]:
    """Full module paths (peft `target_modules`) of LoRA-ATT: q, k, v and output projection of every block (that
    `runs` keeps, `attention_layers`).

    A packed nn.MultiheadAttention is one target (peft wraps its in_proj and out_proj together).
    """
    attention_weight_names(tower, spec, runs)  # the same refusal for towers without attention
    targets = []
    for prefix, _, layout in attention_layers(tower, runs):
        if layout == "packed":
            targets.append(prefix)
        else:
            targets += [_join(prefix, leaf) for leaf in (SEPARATE if layout == "separate" else FUSED)]
    return targets
