"""Audio towers of the audio world's zoo and their fixed front ends: small ordinary torch modules.

Front ends (no parameters; `AudioWorldModel.prepare_probes` runs them, so every model hears the same
canonical 16 kHz samples through `canonical.resample`):

    log_mel(wave (B, T), rate, n_fft, hop, n_mels) -> (B, 1, n_mels, frames)   Hann STFT, HTK mel, log,
                                                                               minus the clip's mean
    waveform at the model's rate                    -> (B, 1, T')

Towers map their input to unnormalised embeddings (B, d), in the way the paper's CLAP models differ
(tower type, width, depth):

| tower         | input            | body                                         | ends in                                    | edit site           |
|---------------|------------------|----------------------------------------------|--------------------------------------------|---------------------|
| `MelCNN`      | log-mel (1, F, T)| stride-2 GroupNorm basic blocks (conv1 / conv2), 3 stages | z = head(avgpool) (Linear with bias)    | LinearSite          |
| `MelPatchViT` | log-mel (1, F, T)| mel patches (pf x pt), CLS, pre-LN blocks    | z = LN(cls) @ proj, proj (w, d)            | ProjectionParameter |
| `MelPatchMAP` | log-mel (1, F, T)| mel patches, pre-LN blocks                   | residual attention-pool head, no final linear: z = a + fc2(gelu(fc1(LN(a)))) | HeadAffineSite(fc2) |
| `WaveConv`    | waveform (1, T') | strided Conv1d stem, ConvNeXt-1d blocks (dwconv, pw1 / pw2) | z = LN(avgpool), no linear: identity d x d appended | AppendedLinearSite |

The transformer blocks, attention (q_proj / k_proj / v_proj / out_proj), the attention-pool head and
the basic residual block are shared with the image world (`platonic.world.common.blocks`).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from ...edit import AppendedLinearSite
from ...errors import InvalidInputError
from ..common.blocks import BasicBlock, Block, MAPHead

# -- front ends -------------------------------------------------------------------------------------

@functools.cache
def mel_filterbank(rate: int, n_fft: int, n_mels: int, fmin: float = 20.0, fmax: float | None = None) -> torch.Tensor:
    """(n_mels, n_fft // 2 + 1) float32 triangular HTK-mel filters (each peaks at 1)."""
    fmax = fmax or rate / 2

    def mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    edges_mel = torch.linspace(mel(fmin), mel(fmax), n_mels + 2, dtype=torch.float64)
    edges = 700.0 * (10.0 ** (edges_mel / 2595.0) - 1.0)
    freqs = torch.linspace(0, rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (freqs[None] - lo) / (mid - lo)
    down = (hi - freqs[None]) / (hi - mid)
    return torch.clamp(torch.minimum(up, down), min=0.0).float()


def log_mel(wave: torch.Tensor, rate: int, n_fft: int, hop: int, n_mels: int) -> torch.Tensor:
    """wave (B, T) float -> (B, 1, n_mels, 1 + T // hop) log-mel power, centred per clip, scaled by 1/4.

    x = log(mel(|STFT|^2) + 1e-6); x - mean over (mel, time) of the clip; / 4. Deterministic on CPU.
    """
    window = torch.hann_window(n_fft, dtype=wave.dtype, device=wave.device)
    spec = torch.stft(wave, n_fft, hop_length=hop, window=window, center=True, return_complex=True).abs().pow(2)
    fb = mel_filterbank(rate, n_fft, n_mels).to(device=wave.device, dtype=wave.dtype)
    x = torch.log(torch.einsum("mf,bft->bmt", fb, spec) + 1e-6)
    x = (x - x.mean(dim=(1, 2), keepdim=True)) / 4.0
    return x.unsqueeze(1)


# -- towers -------------------------------------------------------------------------------------------

class MelCNN(nn.Module):
    """Log-mel CNN (stride-2 stem, then GroupNorm basic blocks of stride 2); z = head(avgpool), Linear with bias.

    (B, 1, F, T) -> (B, d).
    """

    def __init__(self, widths=(16, 32, 64), embed_dim: int = 128):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, widths[0], 3, 2, 1, bias=False), nn.GroupNorm(8, widths[0]), nn.ReLU())
        layers, cin = [], widths[0]
        for i, w in enumerate(widths):
            layers.append(BasicBlock(cin, w, 2))
            cin = w
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(cin, embed_dim, bias=True)

    def forward(self, x):
        return self.head(self.layers(self.stem(x)).mean(dim=(2, 3)))


class _MelPatchBody(nn.Module):
    """Mel patches (pf x pt, non-overlapping) -> tokens (B, n, w), learned positions, pre-LN blocks, final LN."""

    def __init__(self, n_mels: int, frames: int, patch: tuple[int, int], width: int, depth: int, heads: int, cls: bool):
        super().__init__()
        pf, pt = patch
        self.patch = nn.Conv2d(1, width, (pf, pt), (pf, pt))
        n = (n_mels // pf) * (frames // pt) + (1 if cls else 0)
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


class MelPatchViT(_MelPatchBody):
    """Transformer on log-mel patches (AST-like); z = LN(cls) @ proj, proj (w, d). (B, 1, F, T) -> (B, d)."""

    def __init__(self, n_mels: int, frames: int, patch=(8, 8), width: int = 64, depth: int = 3, heads: int = 4,
                 embed_dim: int = 128):
        super().__init__(n_mels, frames, tuple(patch), width, depth, heads, cls=True)
        self.proj = nn.Parameter(width**-0.5 * torch.randn(width, embed_dim))

    def forward(self, x):
        return self.tokens(x)[:, 0] @ self.proj


class MelPatchMAP(_MelPatchBody):
    """Transformer on log-mel patches ending in a residual attention-pool head (`MAPHead`); d = width.

    (B, 1, F, T) -> (B, d); no final linear map: the edit goes into the head's last affine fc2.
    """

    def __init__(self, n_mels: int, frames: int, patch=(8, 8), width: int = 96, depth: int = 4, heads: int = 4,
                 embed_dim: int = 96):
        if embed_dim != width:
            raise InvalidInputError(f"MelPatchMAP's embedding width is its token width: give embed_dim={width}, not {embed_dim}")
        super().__init__(n_mels, frames, tuple(patch), width, depth, heads, cls=False)
        self.head = MAPHead(width, heads)

    def forward(self, x):
        return self.head(self.tokens(x))


class ConvNeXt1dBlock(nn.Module):
    """x (B, c, T) -> x + gamma * pw2(gelu(pw1(LN(dwconv(x))))) over channels; pw1 / pw2 are Linears (LoRA targets)."""

    def __init__(self, c: int, kernel: int = 7):
        super().__init__()
        self.dwconv = nn.Conv1d(c, c, kernel, 1, kernel // 2, groups=c)
        self.norm = nn.LayerNorm(c)
        self.pw1 = nn.Linear(c, 2 * c)
        self.pw2 = nn.Linear(2 * c, c)
        self.gamma = nn.Parameter(0.1 * torch.ones(c))

    def forward(self, x):
        y = self.dwconv(x).transpose(1, 2)
        y = self.pw2(F.gelu(self.pw1(self.norm(y)))) * self.gamma
        return x + y.transpose(1, 2)


class WaveConv(nn.Module):
    """1-D conv net on the raw waveform (wav2vec-style strided stem, then ConvNeXt-1d blocks).

    (B, 1, T') -> (B, d), d = width; ends in the non-linear z = LN(mean over time), so the edit site is
    an appended d x d identity (`out`).
    """

    def __init__(self, stem=((32, 10, 5), (64, 8, 4), (96, 4, 4)), depth: int = 2, embed_dim: int = 96):
        super().__init__()
        width = stem[-1][0]
        if embed_dim != width:
            raise InvalidInputError(f"WaveConv's embedding width is its last stem width: give embed_dim={width}, not {embed_dim}")
        layers, cin = [], 1
        for cout, k, s in stem:
            layers += [nn.Conv1d(cin, cout, k, s, bias=False), nn.GroupNorm(8, cout), nn.GELU()]
            cin = cout
        self.stem = nn.Sequential(*layers)
        self.blocks = nn.Sequential(*(ConvNeXt1dBlock(width) for _ in range(depth)))
        self.out = nn.LayerNorm(width)
        AppendedLinearSite.install(self, "out", width)  # identity until an edit is folded

    def forward(self, x):
        return self.out(self.blocks(self.stem(x)).mean(dim=2))


TOWERS = {"mel_cnn": MelCNN, "mel_vit": MelPatchViT, "mel_map": MelPatchMAP, "wave_conv": WaveConv}
