"""An open_clip timm tower on an EfficientNet trunk, cut below the trunk's last stage.

The build runs the frozen part once (`below`: stem and every stage but the last) and caches its activations;
pre-training and the sources then run only what is above them (`Above`): the last stage, the 1x1 head
convolution and its batch norm, the trunk's pooling, and open_clip's head. For every input x (B, 3, S, S),
normalised as the model's preprocessing does (`model_input`):

    visual(x) == Above(visual)(below(visual, x))        (B, d)

`Above` holds the tower's own modules (training it trains the model), or deep copies of them (`copy=True`), whose
state `state_in_model` names as the open_clip model does ("visual.trunk.blocks.6.0.conv_pw.weight", ...).
"""

from __future__ import annotations

import copy as copy_module

import torch
from torch import nn

from ....models.images import to_model_input
from ..openclip_models import OpenClipWorldSpec

BATCH = 256


def model_input(images: torch.Tensor, spec: OpenClipWorldSpec) -> torch.Tensor:
    """Canonical uint8 images (B, 3, s, s) -> the model's input (B, 3, S, S), S = spec.image_size: plain bilinear
    resize, then (x / 255 - mean) / std, as platonic's open_clip encoder prepares probes."""
    return to_model_input(images, spec.image_size, spec.mean, spec.std)


def below(visual: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(B, 3, S, S) model input -> (B, C, h, w), the activations entering the trunk's last stage."""
    trunk = visual.trunk
    x = trunk.bn1(trunk.conv_stem(x))
    for stage in trunk.blocks[:-1]:
        x = stage(x)
    return x


@torch.inference_mode()
def activations(visual: nn.Module, images: torch.Tensor, spec: OpenClipWorldSpec) -> torch.Tensor:
    """`below` of canonical uint8 images (n, 3, s, s), in batches of 256: (n, C, h, w) float32."""
    visual.eval()
    out = [below(visual, model_input(images[i:i + BATCH], spec)) for i in range(0, len(images), BATCH)]
    return torch.cat(out) if out else torch.zeros(0)


class Above(nn.Module):
    """The tower above the cached activations: (B, C, h, w) -> trunk features (`trunk_features`: (B, F) pooled, or
    the (B, F, h', w') map an attention-pool head reads) -> (B, d) through open_clip's head (`forward`)."""

    def __init__(self, visual: nn.Module, copy: bool = False):
        super().__init__()
        trunk = visual.trunk
        take = copy_module.deepcopy if copy else (lambda m: m)
        self.stage_index = len(trunk.blocks) - 1
        self.stage, self.conv_head, self.bn2 = take(trunk.blocks[-1]), take(trunk.conv_head), take(trunk.bn2)
        self.global_pool = take(trunk.global_pool)
        self.head = take(visual.head)

    def trunk_features(self, a: torch.Tensor) -> torch.Tensor:
        return self.global_pool(self.bn2(self.conv_head(self.stage(a))))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk_features(a))

    def model_name(self, name: str) -> str:
        """This module's parameter or buffer `name` under the open_clip model's name for it."""
        first, _, rest = name.partition(".")
        where = {"stage": f"visual.trunk.blocks.{self.stage_index}", "conv_head": "visual.trunk.conv_head",
                 "bn2": "visual.trunk.bn2", "global_pool": "visual.trunk.global_pool", "head": "visual.head"}[first]
        return f"{where}.{rest}"

    def state_in_model(self) -> dict[str, torch.Tensor]:
        """The state dict under the open_clip model's names (what a source file stores)."""
        return {self.model_name(k): v.detach().clone().contiguous() for k, v in self.state_dict().items()}
