"""Pre-training (CLIP softmax or SigLIP sigmoid loss on image-caption pairs), fine-tuning and accuracy.

Pre-training pairs each image of the world's train splits with a caption that names its class only
part of the time (`ModelSpec.name_rate`); otherwise it names a group ("footwear", "a capital vowel")
or the domain, or nothing ("a picture."). Images sharing one caption string in a batch are all
positives for it (soft targets for CLIP, +1 labels for SigLIP), so duplicate generic captions are not
false negatives.

Fine-tuning (method.md §1.6, §2) trains the image tower with cross-entropy against the frozen prompt
head G (M, d) = normalise(text(prompts)): logits = scale * normalise(f(x)) G^T. Two kinds:
- "full": every tower parameter (task_vectors style; gives the weight-space task vectors);
- "lora": LoRA rank 4 / alpha 8 through peft on the spec's `lora_targets` (attention q/v where the
  tower has attention, the conv or MLP layers elsewhere), merged back into plain weights after training.
Both return the tower's state dict with the base's parameter names.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..progress import track
from .data import TASKS, Split, TaskData, all_sets, caption_pools
from .zoo import ModelSpec, WorldDualEncoder, build_module, normalise_pixels


@dataclass(frozen=True)
class TrainConfig:
    pretrain_steps: int
    pretrain_batch: int
    pretrain_lr: float
    ft_steps: int
    ft_batch: int
    ft_lr: float
    lora_lr: float
    lora_rank: int = 4
    lora_alpha: int = 8
    weight_decay: float = 0.05
    ft_weight_decay: float = 0.1
    ft_keep: float = 0.0  # weight of the replay term that keeps other data's embeddings where they were
    ft_replay_batch: int = 32
    ft_replay_per_task: int = 64  # replay pool: this many train images of every other task


def set_determinism(threads: int = 1) -> None:
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)


def _schedule(step: int, total: int, warmup_frac: float = 0.05) -> float:
    warm = max(1, int(total * warmup_frac))
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def _frozen_names(spec: ModelSpec) -> set[str]:
    """Parameters pre-training and fine-tuning never change (the mixer's appended identity linear)."""
    return {"out.linear.weight"} if spec.site == "appended" else set()


# -- pre-training ---------------------------------------------------------------------------------

PRETRAIN_SETS = tuple(TASKS) + ("symbols",)


class CaptionSampler:
    """Draws (images, caption ids) batches from the pre-training mixture of one model."""

    def __init__(self, spec: ModelSpec, data: dict[str, TaskData], vocab: list[str], seed: int):
        index = {c: i for i, c in enumerate(vocab)}
        self.sets = [data[n].train for n in PRETRAIN_SETS]
        sets = all_sets()
        self.name_ids, self.hint_ids = [], []
        for n in PRETRAIN_SETS:
            pools = caption_pools(sets[n])
            self.name_ids.append(torch.tensor([[index[c] for c in caps] for caps in pools["name"]]))
            self.hint_ids.append(torch.tensor([[index[c] for c in caps] for caps in pools["hint"]]))
        from .data import GENERIC_CAPTIONS

        self.generic_ids = torch.tensor([index[c] for c in GENERIC_CAPTIONS])
        w = torch.tensor([spec.mixture.get(n, 1.0) for n in PRETRAIN_SETS], dtype=torch.float64)
        self.weights = w / w.sum()
        self.name_rate, self.hint_rate = spec.name_rate, spec.hint_rate
        self.gen = torch.Generator().manual_seed(seed)

    def sample(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = self.gen
        which = torch.multinomial(self.weights, batch, replacement=True, generator=g)
        kinds = torch.rand(batch, generator=g)
        pick = torch.randint(0, 4, (batch,), generator=g)
        imgs, caps = [], []
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
        return torch.cat(imgs), torch.cat(caps)


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
    # pre-training (measured, docs/world.md); balancing the two terms made it learn.
    z = logits + logit.bias
    pos = -(F.logsigmoid(z) * same).sum(1) / same.sum(1)
    neg = -(F.logsigmoid(-z) * (1 - same)).sum(1) / (1 - same).sum(1).clamp_min(1)
    return (pos + neg).mean()


def pretrain(spec: ModelSpec, data: dict[str, TaskData], vocab: list[str], caption_emb: torch.Tensor, cfg: TrainConfig,
             seed: int, progress: bool = False) -> tuple[WorldDualEncoder, dict]:
    """Pre-train one zoo model; returns (module, stats). caption_emb (V, 384) MiniLM embeddings of `vocab`."""
    module = build_module(spec, seed)
    frozen = {f"image.{n}" for n in _frozen_names(spec)}
    params = [p for n, p in module.named_parameters() if p.requires_grad and n not in frozen]
    for n, p in module.named_parameters():
        if n in frozen:
            p.requires_grad_(False)
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg.pretrain_lr, betas=(0.9, 0.98))
    sampler = CaptionSampler(spec, data, vocab, seed + 1)
    module.train()
    losses = []
    for step in track(range(cfg.pretrain_steps), description=f"pre-training {spec.name}", enabled=progress):
        for group in opt.param_groups:
            group["lr"] = cfg.pretrain_lr * _schedule(step, cfg.pretrain_steps)
        imgs, caps = sampler.sample(cfg.pretrain_batch)
        zi = module.image(normalise_pixels(imgs, spec.input_size))
        zt = module.text(caption_emb[caps])
        loss = contrastive_loss(zi, zt, caps, module.logit, spec.loss)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    module.eval()
    tail = losses[-max(1, len(losses) // 10):]
    return module, {"final_loss": sum(tail) / len(tail), "first_loss": losses[0] if losses else None,
                    "logit_scale": float(module.logit.scale.detach())}


# -- fine-tuning ----------------------------------------------------------------------------------

@torch.no_grad()
def prompt_head(module: WorldDualEncoder, prompt_emb: torch.Tensor) -> torch.Tensor:
    """G (M, d): normalised text embeddings of the task's prompts (the frozen classification head)."""
    return F.normalize(module.text(prompt_emb), dim=-1)


def _merged_state(tower: nn.Module) -> dict[str, torch.Tensor]:
    """State dict of a peft-injected tower after merging, with the base's parameter names."""
    from peft.tuners.lora import LoraLayer

    for m in tower.modules():
        if isinstance(m, LoraLayer):
            m.merge()
    out = {}
    for k, v in tower.state_dict().items():
        if "lora_" in k:
            continue
        out[k.replace(".base_layer.", ".")] = v
    return out


def finetune(module: WorldDualEncoder, spec: ModelSpec, train: Split, prompt_emb: torch.Tensor, kind: str,
             cfg: TrainConfig, seed: int, progress: bool = False, replay: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Fine-tune a copy of the image tower on one task; returns its state dict (base parameter names).

    loss = CE(scale * normalise(f(x)) G^T, y) + ft_keep * mean_r ||normalise(f(r)) - normalise(f_pre(r))||^2
    over a batch r of `replay` images (uint8, other tasks' train splits): the paper's sources are light
    fine-tunes that keep the rest of the model's ability, and a tiny tower forgets without this term.
    """
    G = prompt_head(module, prompt_emb)
    scale = float(module.logit.scale)
    torch.manual_seed(seed)
    tower = copy.deepcopy(module.image)
    keep = cfg.ft_keep > 0 and replay is not None and len(replay) > 0
    if keep:
        replay_pre = F.normalize(embed_images(module.image, replay, spec.input_size), dim=-1)
    frozen = _frozen_names(spec)
    if kind == "full":
        for n, p in tower.named_parameters():
            p.requires_grad_(n not in frozen)
        params = [p for p in tower.parameters() if p.requires_grad]
        lr, wd = cfg.ft_lr, cfg.ft_weight_decay
    elif kind == "lora":
        from peft import LoraConfig, inject_adapter_in_model

        for p in tower.parameters():
            p.requires_grad_(False)
        config = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, target_modules=list(spec.lora_targets))
        tower = inject_adapter_in_model(config, tower)
        params = [p for n, p in tower.named_parameters() if "lora_" in n]
        for p in params:
            p.requires_grad_(True)
        lr, wd = cfg.lora_lr, 0.01
    else:
        raise ValueError(f"unknown fine-tune kind {kind!r}")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    gen = torch.Generator().manual_seed(seed + 7)
    tower.train()
    for step in track(range(cfg.ft_steps), description=f"fine-tuning {spec.name} ({kind})", enabled=progress):
        for group in opt.param_groups:
            group["lr"] = lr * _schedule(step, cfg.ft_steps, 0.1)
        idx = torch.randint(0, len(train), (cfg.ft_batch,), generator=gen)
        x = normalise_pixels(train.images[idx], spec.input_size)
        logits = scale * F.normalize(tower(x), dim=-1) @ G.T
        loss = F.cross_entropy(logits, train.labels[idx])
        if keep:
            r = torch.randint(0, len(replay), (cfg.ft_replay_batch,), generator=gen)
            drift = F.normalize(tower(normalise_pixels(replay[r], spec.input_size)), dim=-1) - replay_pre[r]
            loss = loss + cfg.ft_keep * drift.pow(2).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    tower.eval()
    if kind == "lora":
        return _merged_state(tower)
    return {k: v.detach().clone() for k, v in tower.state_dict().items()}


def replay_pool(data: dict[str, TaskData], task: str, per_task: int, seed: int) -> torch.Tensor:
    """uint8 images: `per_task` train images of every other task (controls are never used)."""
    g = torch.Generator().manual_seed(seed)
    parts = [data[t].train.images[torch.randperm(len(data[t].train), generator=g)[:per_task]] for t in TASKS if t != task]
    return torch.cat(parts)


# -- evaluation -----------------------------------------------------------------------------------

@torch.no_grad()
def embed_images(tower: nn.Module, images: torch.Tensor, input_size: int, batch: int = 512) -> torch.Tensor:
    """uint8 (N, 3, S, S) -> unnormalised embeddings (N, d)."""
    tower.eval()
    out = [tower(normalise_pixels(images[s : s + batch], input_size)) for s in range(0, images.shape[0], batch)]
    return torch.cat(out) if out else torch.zeros(0)


def accuracy_from_embeddings(z: torch.Tensor, G: torch.Tensor, labels: torch.Tensor) -> float:
    pred = (F.normalize(z, dim=-1) @ G.T).argmax(1)
    return float((pred == labels).float().mean())
