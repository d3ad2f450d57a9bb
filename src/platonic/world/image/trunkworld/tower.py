"""A trunk world model's image tower cut in two: a frozen part below the cut and the part above it that trains.

The build runs the part below the cut once (`below`) and caches its activations; pre-training and the sources then
run only what is above them (`Above`). Four tower families have a cut (`cut_of`):

- open_clip's timm tower on an EfficientNet trunk (`visual.trunk`): below = stem and every stage but the last;
  above = the last stage, the 1x1 head convolution and its batch norm, the trunk's pooling, open_clip's head;
- open_clip's ModifiedResNet (a tower trained from scratch): below = the stem and layer1-3; above = layer4 and the
  attention pool;
- open_clip's VisionTransformer (a tower trained from scratch; class-token pooling, batch-first tokens): below = the
  patch and position embeddings, ln_pre and every residual block but the last; above = the last block, then ln_post
  on the class token and the projection;
- open_clip's timm tower on a timm VisionTransformer (the hybrid ViT of `timm_towers/`: a convolutional stem under
  the patch embedding): below = the patch embedding (stem included), class token and positions, norm_pre and every
  block but the last; above = the last block, the final norm and timm's pooling, open_clip's head.

For every input x (B, 3, S, S), normalised as the model's preprocessing does (`model_input`):

    visual(x) == Above(visual)(below(visual, x))        (B, d)

`Above` holds the tower's own modules (training it trains the model), or deep copies of them (`copy=True`), whose
state `state_in_model` names as the open_clip model does ("visual.trunk.blocks.6.0.conv_pw.weight",
"visual.layer4.0.conv1.weight", ...).
"""

from __future__ import annotations

import copy as copy_module
from dataclasses import dataclass

import torch
from torch import nn

from ....errors import InvalidInputError
from ....models.images import to_model_input
from ..openclip_models import OpenClipWorldSpec
from .pooling import training_head

BATCH = 256


@dataclass(frozen=True)
class TowerCut:
    """Where a tower family is cut. below: (visual) -> the modules below the cut, in order (what a frozen copy or a
    digest reads); above: (visual) -> [(name in `Above`, module, its name in the open_clip model)] in order;
    lora_targets: the module names peft's LoRA adapts above the cut; trained: what a full source trains, in words;
    channels_last: the build computes the activations below the cut in channels-last memory format (`activations`)."""

    family: str
    below: object
    above: object
    lora_targets: tuple[str, ...]
    trained: str
    channels_last: bool = False


def _efficientnet_below(visual) -> list[nn.Module]:
    trunk = visual.trunk
    return [trunk.conv_stem, trunk.bn1, *trunk.blocks[:-1]]


def _efficientnet_above(visual) -> list[tuple[str, nn.Module, str]]:
    trunk = visual.trunk
    last = len(trunk.blocks) - 1
    return [("stage", trunk.blocks[-1], f"visual.trunk.blocks.{last}"), ("conv_head", trunk.conv_head, "visual.trunk.conv_head"),
            ("bn2", trunk.bn2, "visual.trunk.bn2"), ("global_pool", trunk.global_pool, "visual.trunk.global_pool"),
            ("head", visual.head, "visual.head")]


def _resnet_below(visual) -> list[nn.Module]:
    stem = [visual.conv1, visual.bn1, visual.act1, visual.conv2, visual.bn2, visual.act2, visual.conv3, visual.bn3,
            visual.act3, visual.avgpool]
    return [nn.Sequential(*stem), visual.layer1, visual.layer2, visual.layer3]


def _resnet_above(visual) -> list[tuple[str, nn.Module, str]]:
    return [("stage", visual.layer4, "visual.layer4"), ("head", visual.attnpool, "visual.attnpool")]


class VitEmbeds(nn.Module):
    """A VisionTransformer's token embedding, its own parameters shared: (B, 3, S, S) -> (B, 1 + g^2, w) tokens
    (open_clip's `_embeds`: patch convolution, class token, positions, patch dropout, ln_pre)."""

    def __init__(self, visual):
        super().__init__()
        self.conv1, self.class_embedding = visual.conv1, visual.class_embedding
        self.positional_embedding = visual.positional_embedding
        self.patch_dropout, self.ln_pre = visual.patch_dropout, visual.ln_pre
        self._tower_class = type(visual)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._tower_class._embeds(self, x)  # open_clip's own code, on exactly these modules


class VitHead(nn.Module):
    """A VisionTransformer's head above its last block, its own parameters shared: (B, L, w) tokens ->
    ln_post(tokens[:, 0]) @ proj (B, d), as open_clip pools with pool_type "tok" and no attention pool."""

    def __init__(self, visual):
        super().__init__()
        self.ln_post, self.proj = visual.ln_post, visual.proj

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.ln_post(tokens)[:, 0] @ self.proj


class TimmVitEmbeds(nn.Module):
    """A timm VisionTransformer's token embedding, its own modules and parameters shared: (B, 3, S, S) -> (B, L, w)
    tokens (timm's `forward_features` up to the blocks: patch_embed, `_pos_embed`, patch_drop, norm_pre)."""

    def __init__(self, trunk):
        super().__init__()
        self.patch_embed, self.pos_drop, self.patch_drop, self.norm_pre = (trunk.patch_embed, trunk.pos_drop,
                                                                          trunk.patch_drop, trunk.norm_pre)
        for name in ("cls_token", "reg_token", "pos_embed"):
            self.register_parameter(name, getattr(trunk, name))
        self.dynamic_img_size, self.no_embed_class = trunk.dynamic_img_size, trunk.no_embed_class
        self.num_prefix_tokens = trunk.num_prefix_tokens
        self._trunk_class = type(trunk)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._trunk_class._pos_embed(self, self.patch_embed(x))  # timm's own code, on exactly these modules
        return self.norm_pre(self.patch_drop(x))


class TimmVitPool(nn.Module):
    """A timm VisionTransformer above its blocks, its own modules shared: (B, L, w) tokens -> (B, w) pre-logits
    (norm, timm's `pool`: average or class token as `global_pool` says, fc_norm, head_drop)."""

    def __init__(self, trunk):
        super().__init__()
        self.norm, self.fc_norm, self.head_drop = trunk.norm, trunk.fc_norm, trunk.head_drop
        self.attn_pool = None  # `_timm_vit` refuses trunks with an attention pool
        self.global_pool, self.num_prefix_tokens = trunk.global_pool, trunk.num_prefix_tokens
        self.pool_include_prefix = trunk.pool_include_prefix
        self._trunk_class = type(trunk)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self._trunk_class.pool(self, self.norm(tokens))  # timm's own code, on exactly these modules
        return self.head_drop(self.fc_norm(x))


def _timm_vit_below(visual) -> list[nn.Module]:
    return [TimmVitEmbeds(visual.trunk), *visual.trunk.blocks[:-1]]


def _timm_vit_above(visual) -> list[tuple[str, nn.Module, str]]:
    last = len(visual.trunk.blocks) - 1
    return [("stage", visual.trunk.blocks[last], f"visual.trunk.blocks.{last}"),
            ("pool", TimmVitPool(visual.trunk), "visual.trunk"), ("head", visual.head, "visual.head")]


def _vit_below(visual) -> list[nn.Module]:
    return [VitEmbeds(visual), *visual.transformer.resblocks[:-1]]


def _vit_above(visual) -> list[tuple[str, nn.Module, str]]:
    last = len(visual.transformer.resblocks) - 1
    return [("stage", visual.transformer.resblocks[last], f"visual.transformer.resblocks.{last}"),
            ("head", VitHead(visual), "visual")]


# channels-last: oneDNN's depthwise convolutions on the CPU, about 1.8 x faster for Lite0 / Lite2 at 64 px (the
# students' cuts were not measured; they keep the format their recipe was built in)
EFFICIENTNET = TowerCut("efficientnet", _efficientnet_below, _efficientnet_above, ("conv_pw", "conv_pwl", "conv_head"),
                        "last stage + head", channels_last=True)
RESNET = TowerCut("modified-resnet", _resnet_below, _resnet_above, ("conv1", "conv2", "conv3"),
                  "layer4 + attention pool")
VIT = TowerCut("vit", _vit_below, _vit_above, ("attn",), "last residual block + ln_post + projection")
TIMM_VIT = TowerCut("timm-vit", _timm_vit_below, _timm_vit_above, ("attn.qkv", "attn.proj"),
                    "last block + final norm + projection")
# the cuts' own modules: they run the tower's parameters as open_clip (or timm) does
CUT_MODULES = (VitEmbeds, VitHead, TimmVitEmbeds, TimmVitPool)


def _plain_vit(visual) -> bool:
    return (getattr(visual, "attn_pool", None) is None and getattr(visual, "pool_type", None) == "tok"
            and not getattr(visual, "final_ln_after_pool", False) and visual.proj is not None
            and getattr(visual.transformer, "batch_first", False))


def _timm_vit(visual) -> bool:
    trunk = getattr(visual, "trunk", None)
    # no attention pool, and no classifier of the trunk's own (`TimmVitPool` stops at the pre-logits)
    return (type(trunk).__name__ == "VisionTransformer" and getattr(trunk, "attn_pool", None) is None
            and isinstance(getattr(trunk, "head", None), nn.Identity)
            and isinstance(getattr(visual, "head", None), nn.Sequential))


def cut_of(visual: nn.Module) -> TowerCut:
    """The cut of an open_clip image tower: EfficientNet trunks (timm), timm VisionTransformers without an attention
    pool, ModifiedResNet and a plain VisionTransformer (class-token pooling, a projection, no attention pool); others
    are refused."""
    if hasattr(visual, "trunk") and hasattr(visual.trunk, "blocks") and hasattr(visual.trunk, "conv_head"):
        return EFFICIENTNET
    if _timm_vit(visual):
        return TIMM_VIT
    if all(hasattr(visual, a) for a in ("stem", "layer3", "layer4", "attnpool")):
        return RESNET
    if all(hasattr(visual, a) for a in ("_embeds", "transformer", "ln_post", "proj")) and _plain_vit(visual):
        return VIT
    raise InvalidInputError(f"no cut is defined for the image tower {type(visual).__name__}; the trunk world cuts "
                            "timm EfficientNet trunks, timm VisionTransformers without an attention pool or a "
                            "classifier of their own, "
                            "open_clip's ModifiedResNet and its VisionTransformer with "
                            "class-token pooling, a projection and no attention pool")


def model_input(images: torch.Tensor, spec: OpenClipWorldSpec) -> torch.Tensor:
    """Canonical uint8 images (B, 3, s, s) -> the model's input (B, 3, S, S), S = spec.image_size: plain bilinear
    resize, then (x / 255 - mean) / std, as platonic's open_clip encoder prepares probes."""
    return to_model_input(images, spec.image_size, spec.mean, spec.std)


def below(visual: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(B, 3, S, S) model input -> the activations entering the part above the cut: the cut's modules below it, in
    order. (B, C, h, w) maps for the convolutional towers, (B, 1 + g^2, w) tokens for a ViT."""
    for module in cut_of(visual).below(visual):
        x = module(x)
    return x


@torch.inference_mode()
def activations(visual: nn.Module, images: torch.Tensor, spec: OpenClipWorldSpec) -> torch.Tensor:
    """`below` of canonical uint8 images (n, 3, s, s), in batches of 256: (n, C, h, w) maps or (n, L, w) tokens,
    float32, contiguous. A cut with `channels_last` runs a channels-last copy of the modules below it (the same maps,
    float32 rounding apart); `visual` is left as it is."""
    visual.eval()
    cut = cut_of(visual)
    layout = torch.channels_last if cut.channels_last else torch.contiguous_format
    modules = cut.below(visual)
    if cut.channels_last:
        modules = [copy_module.deepcopy(m).to(memory_format=layout) for m in modules]
    out = []
    for i in range(0, len(images), BATCH):
        x = model_input(images[i:i + BATCH], spec).contiguous(memory_format=layout)
        for module in modules:
            x = module(x)
        out.append(x.contiguous())
    return torch.cat(out) if out else torch.zeros(0)


class Above(nn.Module):
    """The tower above the cached activations: (B, C, h, w) maps or (B, L, w) tokens -> trunk features
    (`trunk_features`: every part but the head; (B, F) pooled, the (B, F, h', w') map an attention-pool head reads, or
    a ViT's (B, L, w) tokens) -> (B, d) through the head (`forward`). Its parts are named as the cut names them ("stage", ..., "head")."""

    def __init__(self, visual: nn.Module, copy: bool = False):
        super().__init__()
        self.cut = cut_of(visual)
        take = copy_module.deepcopy if copy else (lambda m: m)
        self._where = {}
        for name, module, where in self.cut.above(visual):
            self.add_module(name, take(module))
            self._where[name] = where

    def trunk_features(self, a: torch.Tensor) -> torch.Tensor:
        for name in list(self._where)[:-1]:
            a = getattr(self, name)(a)
        return a

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk_features(a))

    def training_forward(self, a: torch.Tensor) -> torch.Tensor:
        """`forward` with a timm token attention pool computed by `pooling.token_pool` (the same function, about half
        the multiply-adds; float32 rounding apart): what the build's sources train through."""
        return training_head(self.head, self.trunk_features(a))

    def model_name(self, name: str) -> str:
        """This module's parameter or buffer `name` under the open_clip model's name for it."""
        first, _, rest = name.partition(".")
        return f"{self._where[first]}.{rest}"

    def state_in_model(self) -> dict[str, torch.Tensor]:
        """The state dict under the open_clip model's names (what a source file stores)."""
        return {self.model_name(k): v.detach().clone().contiguous() for k, v in self.state_dict().items()}
