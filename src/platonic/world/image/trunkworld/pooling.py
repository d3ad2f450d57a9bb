"""open_clip's "abs_attn" image head (timm's AttentionPool2d, token pooling), computing only what its output reads.

On a (B, C, h, w) map with spatial tokens x_1..x_n (n = hw) and timm's position embedding resampled to the map
(p_0, p_1..p_n), timm forms t_0 = mean_i x_i + p_0 and t_i = x_i + p_i, runs q, k, v and the attention for all
1 + n tokens, projects all of them and keeps token 0. Its output reads only

    out = proj( attention(q(t_0), k(t_0..t_n), v(t_0..t_n)) )                                       (B, d)

so `token_pool` takes q of t_0 alone, k and v of the n spatial tokens, and k(t_0), v(t_0) from theirs (k, v
are affine):

    k(t_i) = W_k x_i + b_k + W_k p_i,   k(t_0) = mean_i k(t_i) + W_k (p_0 - mean_i p_i)    (v likewise)

The position terms (W_q p_0, W_k p_i) are products of their own, broadcast over the batch: where the maps are
frozen (the pre-training's cached features) the backward pass then runs no product for their gradient, a third
of the pool's matrix work (recipe trunk-4).

It is timm's function (float32 rounding apart: about 4e-7 on unit-scale outputs) with 56 % of its
multiply-adds on Lite1's 1280-wide pool over a 2 x 2 map, where the trunk world's pre-training and sources of
lite1-attn spend most of their time. Evaluation keeps timm's own forward (`tower.Above.forward`), so a built model
encodes bit for bit as open_clip runs it; only the build's training loops go through `training_head`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _attention_pool_class():
    try:
        from timm.layers import AttentionPool2d
    except ImportError:  # no timm: no model has the pool
        return None
    return AttentionPool2d


def takes_token_pool(module: nn.Module) -> bool:
    """Whether `module` is a timm AttentionPool2d that `token_pool` computes: token pooling from the mean token (no
    class token) and a plain packed qkv Linear (a LoRA- or otherwise wrapped qkv runs timm's forward)."""
    pool_class = _attention_pool_class()
    return (pool_class is not None and type(module) is pool_class and module.pool_type == "token"
            and module.cls_token is None and type(module.qkv) is nn.Linear)


def token_pool(pool: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """timm AttentionPool2d `pool` (`takes_token_pool`) on maps x (B, C, h, w) -> (B, d), as pool(x) computes it."""
    from timm.layers import resample_abs_pos_embed

    batch, _, h, w = x.shape
    heads, head_dim = pool.num_heads, pool.head_dim
    width = heads * head_dim
    tokens = x.flatten(2).transpose(1, 2)  # (B, n, C)
    pos = resample_abs_pos_embed(pool.pos_embed.unsqueeze(0), (h, w), old_size=pool.feat_size,
                                 num_prefix_tokens=1)[0]  # (1 + n, C), as timm resamples it
    weight, bias = pool.qkv.weight, pool.qkv.bias
    q_bias, kv_bias = (None, None) if bias is None else (bias[:width], bias[width:])
    q = F.linear(tokens.mean(1), weight[:width], q_bias) + F.linear(pos[0], weight[:width])  # (B, E): q(t_0)
    # (B, n, 2E): k, v of t_1..t_n, the position term apart: frozen maps then need no gradient of their own
    kv = F.linear(tokens, weight[width:], kv_bias) + F.linear(pos[1:], weight[width:])
    kv0 = kv.mean(1) + F.linear(pos[0] - pos[1:].mean(0), weight[width:])  # (B, 2E): k, v of t_0
    kv = torch.cat([kv0.unsqueeze(1), kv], dim=1).reshape(batch, h * w + 1, 2, heads, head_dim).permute(2, 0, 3, 1, 4)
    out = F.scaled_dot_product_attention(q.reshape(batch, heads, 1, head_dim), kv[0], kv[1])  # scale head_dim^-0.5
    return pool.proj(pool.drop(out.reshape(batch, width)))


def training_head(head: nn.Module, features: torch.Tensor) -> torch.Tensor:
    """open_clip's timm head (an nn.Sequential: pool, then drop / proj / mlp) on trunk features, its token attention
    pool through `token_pool`; any other head as it runs itself."""
    if not isinstance(head, nn.Sequential):
        return head(features)
    for layer in head:
        features = token_pool(layer, features) if takes_token_pool(layer) else layer(features)
    return features
