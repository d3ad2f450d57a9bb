"""Layers both worlds' towers are built from: attention, a pre-norm transformer block, the residual
multi-head attention-pooling head of SigLIP's form, a ResNet basic block."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    """Multi-head attention; x (B, T, w) attends to context (B, S, w) (default: itself)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x, context=None):
        context = x if context is None else context
        B, T, C = x.shape
        S, h = context.shape[1], self.heads
        q = self.q_proj(x).view(B, T, h, C // h).transpose(1, 2)
        k = self.k_proj(context).view(B, S, h, C // h).transpose(1, 2)
        v = self.v_proj(context).view(B, S, h, C // h).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(o.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Pre-LN transformer block (B, T, w) -> (B, T, w)."""

    def __init__(self, dim: int, heads: int, mlp: int = 2):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp * dim)
        self.fc2 = nn.Linear(mlp * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class MAPHead(nn.Module):
    """Residual attention-pooling head (SigLIP-style): a = attn(probe, tokens); z = a + fc2(gelu(fc1(LN(a))))."""

    def __init__(self, width: int, heads: int, mlp: int = 2):
        super().__init__()
        self.probe = nn.Parameter(0.02 * torch.randn(1, 1, width))
        self.attn = Attention(width, heads)
        self.ln = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, mlp * width)
        self.fc2 = nn.Linear(mlp * width, width)

    def forward(self, tokens):
        a = self.attn(self.probe.expand(tokens.shape[0], -1, -1), context=tokens)[:, 0]
        return a + self.fc2(F.gelu(self.fc1(self.ln(a))))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.gn1 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.gn2 = nn.GroupNorm(8, cout)
        self.short = None if (cin == cout and stride == 1) else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        y = F.relu(self.gn1(self.conv1(x)))
        y = self.gn2(self.conv2(y))
        return F.relu(y + (x if self.short is None else self.short(x)))
