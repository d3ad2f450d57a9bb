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
profile's `FinetuneConfig`s (see `platonic.world.image.build`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...edit import appended_identity_parameters
from ...progress import track
from ..common.losses import anisotropy, contrastive_loss, prompt_overlap, set_overlap
from .data import TASKS, ImageTaskData, all_sets, caption_pools
from .zoo import ModelSpec, WorldDualEncoder, build_module, normalise_pixels


@dataclass(frozen=True)
class PretrainConfig:
    """AdamW (betas 0.9 / 0.98) with warm-up and cosine decay; weight decay on 2-D parameters only."""

    steps: int
    batch: int
    lr: float
    weight_decay: float = 0.05


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
