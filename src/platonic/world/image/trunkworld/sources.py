"""A trunk world model's sources: one fine-tune per task on cached activations below the trunk's last stage.

For task t with prompt embeddings G (C, d) (unit rows, the frozen text tower) and the model's own logit scale s,
each step draws `batch` train items a (B, C', h, w) and `replay_batch` replay items r of the other tasks:

    L = CE(s * unit(f(a)) G^T, y) + replay * mean_r || unit(f(r)) - unit(f_0(r)) ||^2

where f = `tower.Above` (last stage -> head, run by its `training_forward`) being trained and f_0 the pre-trained
one. kind "full" trains every parameter of f (batch-norm statistics frozen); kind "lora" trains peft LoRA adapters
on the cut's `lora_targets` (an EfficientNet's last-stage pointwise convolutions and head convolution; a
ModifiedResNet's layer4 convolutions), merged into their weights at the end. AdamW, warm-up 10 % then cosine. The
result is f's state under the open_clip model's names: what a source file holds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .pretrain import schedule
from .recipe import SourceRecipe
from .tower import Above


def _trainable(above: Above, kind: str, recipe: SourceRecipe):
    """(parameters to train, finish() -> the trained Above) for `kind`; "lora" puts peft's adapters into `above`'s own
    modules (called as they are), merged by finish()."""
    if kind == "full":
        return list(above.parameters()), lambda: above
    from peft import LoraConfig, get_peft_model

    for p in above.parameters():
        p.requires_grad_(False)
    wrapped = get_peft_model(above, LoraConfig(r=recipe.lora_rank, lora_alpha=recipe.lora_alpha, lora_dropout=0.0,
                                               target_modules=list(above.cut.lora_targets)))
    params = [p for n, p in wrapped.named_parameters() if "lora_" in n]
    return params, lambda: wrapped.merge_and_unload()


def train_source(visual, kind: str, train: torch.Tensor, labels: torch.Tensor, prompts: torch.Tensor,
                 logit_scale: float, replay: torch.Tensor, recipe: SourceRecipe, seed: int) -> dict[str, torch.Tensor]:
    """One source of `kind` ("full" | "lora"); returns the trained tower part's state under the model's names.

    visual: the pre-trained open_clip image tower (left unchanged: a copy of its upper part trains);
    train (n, C', h, w) activations with labels (n,); prompts (C, d) unit text embeddings of the task's prompts;
    replay (R, C', h, w) activations of the other tasks' train items."""
    torch.manual_seed(seed)
    above = Above(visual, copy=True).eval()  # eval: batch-norm statistics (and dropout) frozen; affine params train
    with torch.no_grad():
        replay_target = F.normalize(above.training_forward(replay), dim=-1)
    params, finish = _trainable(above, kind, recipe)
    opt = torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay, fused=True)
    g = torch.Generator().manual_seed(seed + 1)
    for step in range(recipe.steps):
        for group in opt.param_groups:
            group["lr"] = recipe.lr * schedule(step, recipe.steps, 0.1)
        i = torch.randint(0, len(train), (recipe.batch,), generator=g)
        r = torch.randint(0, len(replay), (recipe.replay_batch,), generator=g)
        # one forward pass for both batches (batch norm runs on its frozen statistics: no item sees another)
        z = F.normalize(above.training_forward(torch.cat([train[i], replay[r]])), dim=-1)
        loss = (F.cross_entropy(logit_scale * z[:recipe.batch] @ prompts.T, labels[i])
                + recipe.replay * (z[recipe.batch:] - replay_target[r]).pow(2).sum(1).mean())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return finish().state_in_model()


def ascend_above(visual, train: torch.Tensor, labels: torch.Tensor, prompts: torch.Tensor, model_scale: float,
                 config) -> dict[str, torch.Tensor]:
    """The gradient-ascent negation baseline on the part of the tower the world's full sources train.

    The trunk world's models are LiT bases (the trunk below the cut frozen), so their baseline moves what a full
    source moves: f = `tower.Above` on cached activations (run by its `training_forward`, as the sources train),
    batch-norm statistics frozen, maximising

        L = CE(s * unit(f(a)) G^T, y)

    for `config` (`finetuning.GRADIENT_ASCENT`: its steps, batch, AdamW lr / weight decay, schedule, gradient
    clip and logit scale s, or `model_scale` where it has none; batches in `batch_order`'s seeded order).
    train (n, C', h, w) activations, labels (n,), prompts (C, d) unit text embeddings. Returns f's state under the
    model's names."""
    from ....finetuning.training import batch_order

    torch.manual_seed(config.seed)
    scale = config.logit_scale if config.logit_scale is not None else model_scale
    above = Above(visual, copy=True).eval()
    params = list(above.parameters())
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    steps = config.total_steps(len(train))
    for step, idx in enumerate(batch_order(len(train), config.batch_size, steps, config.seed)):
        for group in opt.param_groups:
            group["lr"] = config.lr * config.lr_factor(step, steps)
        z = F.normalize(above.training_forward(train[idx]), dim=-1)
        loss = -F.cross_entropy(scale * z @ prompts.T, labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
    return above.state_in_model()
