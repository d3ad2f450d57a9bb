"""Pre-training the audio zoo: the CLIP softmax loss on clip-caption pairs against the frozen MiniLM text tower.

Each clip of the audio world's train splits (every task and both controls) is paired with a caption
that names its class `AudioModelSpec.name_rate` of the time (one of four phrasings, one of them the
task's prompt template), a group or the domain `hint_rate` of the time ("a wind instrument", "a
direction"), and otherwise nothing ("a sound."); `tasks.caption_pools` lists them. Clips that share
a caption string in a batch are all positives for it. The loss and the two terms that put different
data sets in different directions are shared with the image world (`platonic.world.common.losses`):

    loss = contrastive(z_audio, z_text) + image_orthogonality * set_overlap(z_audio, set ids)
                                        + prompt_orthogonality * prompt_overlap(text head, class-naming captions)

The audio world's fine-tuned sources are `platonic.finetuning.finetune` runs (`platonic.world.audio.build`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...edit import appended_identity_parameters
from ...progress import track
from ..common.losses import contrastive_loss, prompt_overlap, set_overlap
from .dataset import AudioTaskData
from .tasks import GENERIC_CAPTIONS, all_sets, caption_pools
from .zoo import AudioModelSpec, AudioWorldDualEncoder, build_module, model_inputs

PRETRAIN_SETS = tuple(all_sets())  # the nine tasks and the two controls (their train splits)


@dataclass(frozen=True)
class AudioPretrainConfig:
    """AdamW (betas 0.9 / 0.98), warm-up (5 %) then cosine; weight decay on 2-D parameters only."""

    steps: int
    batch: int
    lr: float
    weight_decay: float = 0.05


def schedule(step: int, total: int, warmup_frac: float = 0.05) -> float:
    """Learning-rate factor of `step` of `total`: linear warm-up, then cosine to 0."""
    warm = max(1, int(total * warmup_frac))
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


class AudioCaptionSampler:
    """Draws (clips (B, 16000), caption ids (B,), set ids (B,)) from one model's pre-training mixture."""

    def __init__(self, spec: AudioModelSpec, data: dict[str, AudioTaskData], vocab: list[str], seed: int):
        index = {c: i for i, c in enumerate(vocab)}
        sets = all_sets()
        self.clips = [data[n].train.clips for n in PRETRAIN_SETS]
        self.labels = [data[n].train.labels for n in PRETRAIN_SETS]
        self.name_ids, self.hint_ids = [], []
        for n in PRETRAIN_SETS:
            pools = caption_pools(sets[n])
            self.name_ids.append(torch.tensor([[index[c] for c in caps] for caps in pools["name"]]))
            self.hint_ids.append(torch.tensor([[index[c] for c in caps] for caps in pools["hint"]]))
        self.generic_ids = torch.tensor([index[c] for c in GENERIC_CAPTIONS])
        w = torch.tensor([spec.mixture.get(n, 1.0) for n in PRETRAIN_SETS], dtype=torch.float64)
        self.weights = w / w.sum()
        self.name_rate, self.hint_rate = spec.name_rate, spec.hint_rate
        self.gen = torch.Generator().manual_seed(seed)

    def sample(self, batch: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g = self.gen
        which = torch.multinomial(self.weights, batch, replacement=True, generator=g)
        kinds = torch.rand(batch, generator=g)
        pick = torch.randint(0, 4, (batch,), generator=g)
        clips, caps, set_ids = [], [], []
        for k in range(len(self.clips)):
            rows = (which == k).nonzero().flatten()
            if rows.numel() == 0:
                continue
            idx = torch.randint(0, len(self.labels[k]), (rows.numel(),), generator=g)
            labels = self.labels[k][idx]
            name = self.name_ids[k][labels, pick[rows]]
            hint = self.hint_ids[k][labels, pick[rows]]
            gen = self.generic_ids[pick[rows] % len(self.generic_ids)]
            kr = kinds[rows]
            cap = torch.where(kr < self.name_rate, name, torch.where(kr < self.name_rate + self.hint_rate, hint, gen))
            clips.append(self.clips[k][idx])
            caps.append(cap)
            set_ids.append(torch.full((rows.numel(),), k))
        return torch.cat(clips), torch.cat(caps), torch.cat(set_ids)


def pretrain(spec: AudioModelSpec, data: dict[str, AudioTaskData], vocab: list[str], caption_emb: torch.Tensor,
             cfg: AudioPretrainConfig, seed: int, progress: bool = False) -> tuple[AudioWorldDualEncoder, dict]:
    """Pre-train one audio zoo model; returns (module, stats). caption_emb (V, 384) MiniLM embeddings of `vocab`."""
    module = build_module(spec, seed)
    for p in appended_identity_parameters(module):  # the appended identity site stays identity
        p.requires_grad_(False)
    params = [p for p in module.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg.lr, betas=(0.9, 0.98))
    sampler = AudioCaptionSampler(spec, data, vocab, seed + 1)
    module.train()
    losses = []
    for step in track(range(cfg.steps), description=f"pre-training audio {spec.name}", enabled=progress):
        for group in opt.param_groups:
            group["lr"] = cfg.lr * schedule(step, cfg.steps)
        clips, caps, set_ids = sampler.sample(cfg.batch)
        za = module.audio(model_inputs(spec, clips))
        zt = module.text(caption_emb[caps])
        loss = contrastive_loss(za, zt, caps, module.logit, spec.loss)
        if spec.image_orthogonality:
            loss = loss + spec.image_orthogonality * set_overlap(za, set_ids)
        if spec.prompt_orthogonality:
            loss = loss + spec.prompt_orthogonality * prompt_overlap(module.text, caption_emb, sampler.name_ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    module.eval()
    tail = losses[-max(1, len(losses) // 10):]
    return module, {"final_loss": sum(tail) / len(tail), "first_loss": losses[0] if losses else None,
                    "logit_scale": float(module.logit.scale.detach())}
