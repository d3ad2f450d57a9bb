"""Pre-training the zoo: CLIP softmax or SigLIP sigmoid loss on image-caption pairs.

Pre-training pairs each image of the world's train splits with a caption that names its class only
part of the time (`ModelSpec.name_rate`); otherwise it names a group ("footwear", "a capital vowel")
or the domain, or nothing ("a picture."). Images sharing one caption string in a batch are all
positives for it (soft targets for CLIP, +1 labels for SigLIP), so duplicate generic captions are not
false negatives.

Two optional terms (`ModelSpec.image_orthogonality`, `prompt_orthogonality`) push the pre-training
sets into different directions of the embedding space, so that a task's closed-form operator, which
maps into the span of that task's prompts, leaves the other tasks alone (docs/world.md, "Putting the
tasks in different directions").

The world's fine-tuned sources are not trained here: they are `platonic.finetuning.finetune` runs with the
profile's `FinetuneConfig`s (see `platonic.world.build`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..edit import appended_identity_parameters
from ..progress import track
from .data import TASKS, ImageTaskData, all_sets, caption_pools
from .zoo import ModelSpec, WorldDualEncoder, build_module, normalise_pixels


@dataclass(frozen=True)
class PretrainConfig:
    """AdamW (betas 0.9 / 0.98) with warm-up and cosine decay; weight decay on 2-D parameters only."""

    steps: int
    batch: int
    lr: float
    weight_decay: float = 0.05


def set_determinism(threads: int = 1) -> None:
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def _schedule(step: int, total: int, warmup_frac: float = 0.05) -> float:
    warm = max(1, int(total * warmup_frac))
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


# -- pre-training ---------------------------------------------------------------------------------

PRETRAIN_SETS = tuple(TASKS) + ("symbols", "objects")  # the controls' train splits: other fonts, other icon themes


class CaptionSampler:
    """Draws (images, caption ids) batches from the pre-training mixture of one model."""

    def __init__(self, spec: ModelSpec, data: dict[str, ImageTaskData], vocab: list[str], seed: int):
        index = {c: i for i, c in enumerate(vocab)}
        self.sets = [data[n].train for n in PRETRAIN_SETS]
        sets = all_sets()
        self.name_ids, self.hint_ids = [], []
        for n in PRETRAIN_SETS:
            pools = caption_pools(sets[n])
            self.name_ids.append(torch.tensor([[index[c] for c in caps] for caps in pools["name"]]))
            self.hint_ids.append(torch.tensor([[index[c] for c in caps] for caps in pools["hint"]]))
        from .tasks import GENERIC_CAPTIONS

        self.generic_ids = torch.tensor([index[c] for c in GENERIC_CAPTIONS])
        w = torch.tensor([spec.mixture.get(n, 1.0) for n in PRETRAIN_SETS], dtype=torch.float64)
        self.weights = w / w.sum()
        self.name_rate, self.hint_rate = spec.name_rate, spec.hint_rate
        self.gen = torch.Generator().manual_seed(seed)

    def sample(self, batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(images (B, 3, S, S) uint8, caption ids (B,), pre-training set index of each row (B,))."""
        g = self.gen
        which = torch.multinomial(self.weights, batch, replacement=True, generator=g)
        kinds = torch.rand(batch, generator=g)
        pick = torch.randint(0, 4, (batch,), generator=g)
        imgs, caps, set_ids = [], [], []
        for k in range(len(self.sets)):
            rows = (which == k).nonzero().flatten()
            if rows.numel() == 0:
                continue
            s = self.sets[k]
            idx = torch.randint(0, len(s), (rows.numel(),), generator=g)
            labels = s.labels[idx]
            name = self.name_ids[k][labels, pick[rows]]
            hint = self.hint_ids[k][labels, pick[rows]]
            gen = self.generic_ids[pick[rows] % len(self.generic_ids)]
            kr = kinds[rows]
            cap = torch.where(kr < self.name_rate, name, torch.where(kr < self.name_rate + self.hint_rate, hint, gen))
            imgs.append(s.images[idx])
            caps.append(cap)
            set_ids.append(torch.full((rows.numel(),), k))
        return torch.cat(imgs), torch.cat(caps), torch.cat(set_ids)


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


def pretrain(spec: ModelSpec, data: dict[str, ImageTaskData], vocab: list[str], caption_emb: torch.Tensor, cfg: PretrainConfig,
             seed: int, progress: bool = False) -> tuple[WorldDualEncoder, dict]:
    """Pre-train one zoo model; returns (module, stats). caption_emb (V, 384) MiniLM embeddings of `vocab`.

    loss = contrastive + spec.image_orthogonality * set_overlap(batch images)
                       + spec.prompt_orthogonality * prompt_overlap(class-name captions of every set)
                       + spec.isotropy * anisotropy(batch images)
    """
    module = build_module(spec, seed)
    for p in appended_identity_parameters(module):  # the mixer's appended identity stays identity
        p.requires_grad_(False)
    params = [p for p in module.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg.lr, betas=(0.9, 0.98))
    sampler = CaptionSampler(spec, data, vocab, seed + 1)
    module.train()
    losses = []
    for step in track(range(cfg.steps), description=f"pre-training {spec.name}", enabled=progress):
        for group in opt.param_groups:
            group["lr"] = cfg.lr * _schedule(step, cfg.steps)
        imgs, caps, set_ids = sampler.sample(cfg.batch)
        zi = module.image(normalise_pixels(imgs, spec.input_size))
        zt = module.text(caption_emb[caps])
        loss = contrastive_loss(zi, zt, caps, module.logit, spec.loss)
        if spec.image_orthogonality:
            loss = loss + spec.image_orthogonality * set_overlap(zi, set_ids)
        if spec.prompt_orthogonality:
            loss = loss + spec.prompt_orthogonality * prompt_overlap(module.text, caption_emb, sampler.name_ids)
        if spec.isotropy:
            loss = loss + spec.isotropy * anisotropy(zi)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    module.eval()
    tail = losses[-max(1, len(losses) // 10):]
    return module, {"final_loss": sum(tail) / len(tail), "first_loss": losses[0] if losses else None,
                    "logit_scale": float(module.logit.scale.detach())}
