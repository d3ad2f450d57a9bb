"""Pre-training losses both worlds use: the CLIP / SigLIP contrastive loss over image-caption pairs, and the
terms that put different pre-training sets (`set_overlap`) and their class-name captions (`prompt_overlap`)
into different directions, and that spread a batch over more directions (`anisotropy`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def contrastive_loss(zi: torch.Tensor, zt: torch.Tensor, caps: torch.Tensor, logit: nn.Module, loss: str) -> torch.Tensor:
    """zi (B, d), zt (B, d) unnormalised; caps (B,) caption ids (equal ids are positives)."""
    zi, zt = F.normalize(zi, dim=-1), F.normalize(zt, dim=-1)
    same = (caps[:, None] == caps[None, :]).to(zi.dtype)
    logits = logit.scale * zi @ zt.T
    if loss == "clip":
        target = same / same.sum(1, keepdim=True)
        return 0.5 * (torch.sum(-target * F.log_softmax(logits, 1), 1).mean() + torch.sum(-target * F.log_softmax(logits.T, 1), 1).mean())
    # sigmoid (SigLIP) loss, balanced: per image, the mean loss over its positives plus the mean over its
    # negatives. The plain sum over pairs (bias -10, scale 10) stayed at chance in this world's short
    # pre-training (measured, docs/lab/2026-12-02-world-levers-and-effective-rank.md); balancing the two terms made it learn.
    z = logits + logit.bias
    pos = -(F.logsigmoid(z) * same).sum(1) / same.sum(1)
    neg = -(F.logsigmoid(-z) * (1 - same)).sum(1) / (1 - same).sum(1).clamp_min(1)
    return (pos + neg).mean()


def _mean_pairwise_cosine(mats: list[torch.Tensor]) -> torch.Tensor:
    """(2 / (K (K - 1))) sum_{i<j} <M_i, M_j>_F / (||M_i||_F ||M_j||_F) over K >= 2 matrices (0 if K < 2)."""
    unit = [m / m.norm().clamp_min(1e-12) for m in mats]
    pairs = [(unit[i] * unit[j]).sum() for i in range(len(unit)) for j in range(i + 1, len(unit))]
    return torch.stack(pairs).mean() if pairs else mats[0].new_zeros(())


def set_overlap(z: torch.Tensor, set_ids: torch.Tensor) -> torch.Tensor:
    """How much the pre-training sets of a batch share directions.

    z (B, d) image embeddings (unnormalised), set_ids (B,). With unit rows Z_k of set k,
    M_k = Z_k^T Z_k / n_k (d, d) is the set's second moment; the overlap is the mean pairwise cosine
    of the M_k (`_mean_pairwise_cosine`): 0 when the sets occupy orthogonal subspaces, 1 when alike.
    """
    z = F.normalize(z, dim=-1)
    mats = [z[set_ids == k].T @ z[set_ids == k] / int((set_ids == k).sum()) for k in set_ids.unique()]
    return _mean_pairwise_cosine(mats)


def prompt_overlap(text: nn.Module, caption_emb: torch.Tensor, name_ids: list[torch.Tensor]) -> torch.Tensor:
    """How much the class-name captions of different pre-training sets share directions.

    caption_emb (V, 384); name_ids[k] (C_k, P) ids of set k's class-naming captions. With E_k the unit
    text embeddings of those captions minus their mean (C_k P, d), C_k = E_k^T E_k; the overlap is the
    mean pairwise cosine of the C_k. Centring matters: a shift shared by all of a task's prompts changes
    none of its predictions, so only the class-separating directions need to differ between tasks.
    """
    grams = []
    for ids in name_ids:
        e = F.normalize(text(caption_emb[ids.flatten()]), dim=-1)
        e = e - e.mean(0)
        grams.append(e.T @ e)
    return _mean_pairwise_cosine(grams)


def anisotropy(z: torch.Tensor) -> torch.Tensor:
    """d / PR of a batch's image embeddings: 1 when they spread evenly over all d directions, d when on one.

    z (B, d) unnormalised. With C the trace-normalised covariance of the unit rows (d, d), eigenvalues
    lambda: d * sum lambda^2 / (sum lambda)^2 = d * ||C||_F^2, PR = (sum lambda)^2 / sum lambda^2.
    """
    u = F.normalize(z, dim=-1)
    u = u - u.mean(0)
    c = u.T @ u
    c = c / c.diagonal().sum()
    return c.shape[0] * (c ** 2).sum()
