"""LiT pre-training of a trunk world model on cached features: the image head and the text projection learn,
the trunk and MiniLM stay frozen.

Per step (`contrastive_pretrain`, the loop the students' pre-training shares), a batch of `batch` items is drawn
over the pre-training sets (every task and control's train split),
each with a caption (`CaptionDraw`: the class named `name_rate` of the time, a group or the domain `hint_rate`,
else a generic caption). Loss (the image world's terms, `world.common.losses`):

    L = CLIP(z_img, z_txt) + set_overlap x overlap of the sets' image second moments
        + prompt_overlap x overlap of the sets' class-naming captions

with z_img = head(trunk features) and z_txt = proj(MiniLM mean-pooled features) (B, d), AdamW (betas 0.9 / 0.98,
weight decay 0.05 on matrices), warm-up 5 % then cosine, gradients clipped at norm 1, logit scale learned and
capped at 100 (open_clip's cap).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ....errors import InvalidInputError
from ...common.losses import contrastive_loss, prompt_overlap, set_overlap
from ..tasks import CONTROLS, GENERIC_CAPTIONS, TASKS, caption_pools
from .pooling import training_head
from .recipe import PretrainRecipe
from .shared import pooled_text

MAX_LOG_SCALE = math.log(100.0)


class CaptionDraw:
    """Pre-training batches over `sets` (names of tasks and controls) as the world draws them: a set per row, an
    item of it, and a caption naming the item's class `name_rate` of the time (set s: `set_name_rates[s]` where
    given), a group or domain `hint_rate`, else a generic one. labels[k] (n_k,) the class of each item of set k;
    vocab the caption strings."""

    def __init__(self, sets: list[str], vocab: list[str], labels: list[torch.Tensor], name_rate: float,
                 hint_rate: float, seed: int, set_name_rates: dict[str, float] | None = None):
        rates = dict(set_name_rates or {})
        unknown = sorted(set(rates) - set(sets))
        if unknown:
            raise InvalidInputError(f"naming rates for sets not drawn: {', '.join(unknown)}")
        self.name_rates = [float(rates.get(s, name_rate)) for s in sets]
        index = {c: i for i, c in enumerate(vocab)}
        tasks = {**TASKS, **CONTROLS}
        pools = [caption_pools(tasks[s]) for s in sets]
        self.name_ids = [torch.tensor([[index[c] for c in caps] for caps in p["name"]]) for p in pools]
        self.hint_ids = [torch.tensor([[index[c] for c in caps] for caps in p["hint"]]) for p in pools]
        self.generic = torch.tensor([index[c] for c in GENERIC_CAPTIONS])
        self.labels, self.hint_rate = labels, hint_rate
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, batch: int) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
        """[(set k, item indices (b_k,), caption ids (b_k,))] for the sets drawn, in set order."""
        g = self.generator
        which = torch.randint(0, len(self.labels), (batch,), generator=g)
        kinds, pick = torch.rand(batch, generator=g), torch.randint(0, len(self.generic), (batch,), generator=g)
        out = []
        for k in range(len(self.labels)):
            rows = (which == k).nonzero().flatten()
            if not len(rows):
                continue
            idx = torch.randint(0, len(self.labels[k]), (len(rows),), generator=g)
            label, kind, p = self.labels[k][idx], kinds[rows], pick[rows]
            named = self.name_ids[k][label, p % self.name_ids[k].shape[1]]
            hinted = self.hint_ids[k][label, p % self.hint_ids[k].shape[1]]
            rate = self.name_rates[k]
            cap = torch.where(kind < rate, named, torch.where(kind < rate + self.hint_rate, hinted, self.generic[p]))
            out.append((k, idx, cap))
        return out


def schedule(step: int, total: int, warm: float) -> float:
    """Linear warm-up over `warm` of the steps, then cosine to 0: the learning rate's factor at `step`."""
    w = max(1, int(total * warm))
    return (step + 1) / w if step < w else 0.5 * (1 + math.cos(math.pi * (step - w) / max(1, total - w)))


class CappedScale:
    """The model's logit scale as the world's `contrastive_loss` reads it (`.scale`), capped at 100."""

    def __init__(self, model: nn.Module):
        self.model = model

    @property
    def scale(self) -> torch.Tensor:
        return self.model.logit_scale.clamp(max=MAX_LOG_SCALE).exp()


def contrastive_pretrain(model: nn.Module, trained: nn.Module, embed, inputs: list[torch.Tensor], draw: CaptionDraw,
                         text_features: torch.Tensor, recipe, steps: int, extra_params=(), extra_loss=None) -> dict:
    """The world's contrastive pre-training loop: `trained`, `model.text.proj` and `model.logit_scale` learn in place
    (the caller seeds torch), with `extra_params` beside them (decayed as matrices) where `extra_loss` needs them.

    inputs[k]: set k's train items in `draw`'s set order; embed: a batch of them -> z_img (B, d); text_features
    (V, 384): MiniLM mean-pooled features of the caption vocabulary. Per step, on a drawn batch with captions c:

        L = CLIP(z_img, proj(t_c)) + recipe.set_overlap x set overlap + recipe.prompt_overlap x prompt overlap
            [+ extra_loss(z_img, drawn)]

    AdamW (betas 0.9 / 0.98, weight decay 0.05 on matrices) at recipe.lr, warm-up 5 % then cosine over `steps` of
    recipe.batch, gradients clipped at norm 1; the logit scale capped at 100 after. Returns statistics."""
    proj = model.text.proj
    params = [*trained.parameters(), *proj.parameters(), model.logit_scale]
    extra = list(extra_params)
    opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2] + extra, "weight_decay": 0.05},
                             {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                            lr=recipe.lr, betas=(0.9, 0.98), fused=True)
    scale = CappedScale(model)
    trained.train()
    losses = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = recipe.lr * schedule(step, steps, 0.05)
        drawn = draw(recipe.batch)
        x = torch.cat([inputs[k][idx] for k, idx, _ in drawn])
        caps = torch.cat([c for _, _, c in drawn])
        set_ids = torch.cat([torch.full((len(idx),), k) for k, idx, _ in drawn])
        zi, zt = embed(x), proj(text_features[caps])
        loss = (contrastive_loss(zi, zt, caps, scale, "clip") + recipe.set_overlap * set_overlap(zi, set_ids)
                + recipe.prompt_overlap * prompt_overlap(proj, text_features, draw.name_ids))
        if extra_loss is not None:
            loss = loss + extra_loss(zi, drawn)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params + extra, 1.0)
        opt.step()
        losses.append(loss.item())
    trained.eval()
    with torch.no_grad():
        model.logit_scale.clamp_(max=MAX_LOG_SCALE)
    tail = losses[-20:] or [float("nan")]
    return {"steps": steps, "final_loss": sum(tail) / len(tail), "logit_scale": model.logit_scale.detach().exp().item()}


def pretrain_heads(model: nn.Module, name: str, features: list[torch.Tensor], draw: CaptionDraw,
                   text_features: torch.Tensor, recipe: PretrainRecipe) -> dict:
    """Train `model.visual.head` (run by `pooling.training_head`), `model.text.proj` and `model.logit_scale` in place
    (`contrastive_pretrain`, the caller seeds torch) on trunk features: features[k] of set k's train items ((n_k, F)
    pooled or (n_k, F, h, w) maps), in `draw`'s set order. Returns statistics."""
    head = model.visual.head
    return contrastive_pretrain(model, head, lambda f: training_head(head, f), features, draw, text_features, recipe,
                                recipe.steps_of(name))


@torch.inference_mode()
def caption_features(model: nn.Module, vocab: list[str], tokenizer, batch: int = 128) -> torch.Tensor:
    """(V, 384) float32: MiniLM's mean-pooled features of `vocab` through open_clip's text tower up to its projection
    (`model.text.proj`), i.e. encode_text(t) == proj(caption_features(t)). tokenizer: open_clip's HFTokenizer of
    the model."""
    out = [pooled_text(model.text, tokenizer(vocab[i:i + batch])) for i in range(0, len(vocab), batch)]
    return torch.cat(out).float()
