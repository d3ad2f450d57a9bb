"""Image towers and text heads of the world's zoo: small ordinary torch modules.

All towers map a batch (B, 3, s, s) float (normalised) to unnormalised embeddings (B, d):

| tower      | body                                  | ends in                                   | edit site            |
|------------|---------------------------------------|-------------------------------------------|----------------------|
| `ViT`      | patch conv, CLS token, pre-LN blocks  | z = LN(cls) @ proj, proj (w, d)           | ProjectionParameter  |
| `MAPViT`   | patch conv, pre-LN blocks             | residual attention-pool head, no final linear: z = a + fc2(gelu(fc1(LN(a)))) | HeadAffineSite(fc2) |
| `ResNet`   | GroupNorm basic blocks, 3 stages      | z = head(avgpool) (Linear with bias)      | LinearSite           |
| `ConvNeXt` | patchify stem, dw7x7 + MLP blocks     | z = head(LN(avgpool)) (bias-free Linear)  | LinearSite           |
| `Mixer`    | MLP-Mixer token/channel blocks        | z = LN(avgpool), no linear: identity d x d appended | AppendedLinearSite |

Attention layers name their projections q_proj / k_proj / v_proj / out_proj (LoRA targets q/v).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...edit import AppendedLinearSite
from ...errors import InvalidInputError
from ..common.blocks import BasicBlock, Block, MAPHead


class _ViTBody(nn.Module):
    def __init__(self, img: int, patch: int, width: int, depth: int, heads: int, cls: bool):
        super().__init__()
        self.patch = nn.Conv2d(3, width, patch, patch)
        n = (img // patch) ** 2 + (1 if cls else 0)
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, width)) if cls else None
        self.pos = nn.Parameter(0.02 * torch.randn(1, n, width))
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.ln_post = nn.LayerNorm(width)

    def tokens(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)
        if self.cls is not None:
            t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1)
        t = t + self.pos
        for blk in self.blocks:
            t = blk(t)
        return self.ln_post(t)


class ViT(_ViTBody):
    """Small ViT; z = LN(cls token) @ proj, proj (w, d)."""

    def __init__(self, img: int, patch: int, width: int, depth: int, heads: int, embed_dim: int):
        super().__init__(img, patch, width, depth, heads, cls=True)
        self.proj = nn.Parameter(width**-0.5 * torch.randn(width, embed_dim))

    def forward(self, x):
        return self.tokens(x)[:, 0] @ self.proj


class MAPViT(_ViTBody):
    """ViT without CLS whose tower ends in a `MAPHead`; d = width (no final linear map)."""

    def __init__(self, img: int, patch: int, width: int, depth: int, heads: int, embed_dim: int):
        if embed_dim != width:
            raise InvalidInputError(f"MAPViT's embedding width is its token width: give embed_dim={width}, not {embed_dim}")
        super().__init__(img, patch, width, depth, heads, cls=False)
        self.head = MAPHead(width, heads)

    def forward(self, x):
        return self.head(self.tokens(x))


class ResNet(nn.Module):
    """ResNet-like CNN (GroupNorm); z = head(avgpool(features)), head a Linear with bias."""

    def __init__(self, img: int, widths=(32, 64, 96), embed_dim: int = 96):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.GroupNorm(8, widths[0]), nn.ReLU())
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            layers.append(BasicBlock(cin, w, 1 if i == 0 else 2))
            cin = w
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, embed_dim, bias=True)

    def forward(self, x):
        return self.head(self.layers(self.stem(x)).mean(dim=(2, 3)))


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.dwconv = nn.Conv2d(c, c, 7, 1, 3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.pw1 = nn.Linear(c, 3 * c)
        self.pw2 = nn.Linear(3 * c, c)
        self.gamma = nn.Parameter(0.1 * torch.ones(c))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """ConvNeXt-like net; z = head(LN(avgpool)), head a bias-free Linear."""

    def __init__(self, img: int, widths=(48, 96), depths=(2, 2), embed_dim: int = 128):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 2, 2), LayerNorm2d(widths[0]))
        stages = []
        for i, (w, n) in enumerate(zip(widths, depths)):
            if i > 0:
                stages.append(nn.Sequential(LayerNorm2d(widths[i - 1]), nn.Conv2d(widths[i - 1], w, 2, 2)))
            stages.extend(CNBlock(w) for _ in range(n))
        self.stages = nn.Sequential(*stages)
        self.norm = nn.LayerNorm(widths[-1])
        self.head = nn.Linear(widths[-1], embed_dim, bias=False)

    def forward(self, x):
        return self.head(self.norm(self.stages(self.stem(x)).mean(dim=(2, 3))))


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, width: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.token_fc1 = nn.Linear(tokens, tokens)
        self.token_fc2 = nn.Linear(tokens, tokens)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x):  # (B, T, w)
        y = self.ln1(x).transpose(1, 2)
        x = x + self.token_fc2(F.gelu(self.token_fc1(y))).transpose(1, 2)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Mixer(nn.Module):
    """MLP-Mixer ending in a non-linear block z = LN(avgpool) (d = width); `out` carries the appended d x d linear."""

    def __init__(self, img: int, patch: int, width: int, depth: int, embed_dim: int):
        super().__init__()
        if embed_dim != width:
            raise InvalidInputError(f"Mixer's embedding width is its token width: give embed_dim={width}, not {embed_dim}")
        self.patch = nn.Conv2d(3, width, patch, patch)
        tokens = (img // patch) ** 2
        self.blocks = nn.Sequential(*(MixerBlock(tokens, width) for _ in range(depth)))
        self.out = nn.LayerNorm(width)
        AppendedLinearSite.install(self, "out", width)  # identity until an edit is folded

    def forward(self, x):
        t = self.blocks(self.patch(x).flatten(2).transpose(1, 2))
        return self.out(t.mean(dim=1))


TOWERS = {"vit": ViT, "map_vit": MAPViT, "resnet": ResNet, "convnext": ConvNeXt, "mixer": Mixer}
