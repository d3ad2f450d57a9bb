"""Fine-tuning a dual encoder's image (or audio) tower against its frozen prompt head; OrthoReg.

The classification head is the model's own normalised prompt embeddings G (M, d), frozen:

    logits = s * normalise(z(x)) G^T,
    L = CE(logits, y) + lambda * sum_l ||dW_l^T dW_l - I||_F + rho * mean_r ||normalise(z(r)) - normalise(z_pre(r))||^2

with the OrthoReg term (method.md §2) over every trainable 2-D parameter's update dW = W - W_0
(recomputed each step; the Gram matrix on the smaller side; the norm *not* squared), or over
dW = (alpha / r) B A for LoRA layers (as the forward pass applies it: `platonic.finetuning.lora.lora_weight_deltas`),
and the optional replay term (weight rho = `replay`) over a batch r of `replay_inputs` (other data the fine-tune should leave where it was; z_pre is the model before
fine-tuning). Modes: "full" (the whole tower and its edit site), "attention" (ATT-FT: the weight
matrices of the blocks' attention q, k, v and output projections only, `platonic.finetuning.attention`), "lora"
(peft LoRA on the model's `lora_target_modules`, its attention q/v projections where it has them; with
`lora_targets="attention"`, LoRA-ATT on q, k, v and the output projection), "linear" (tangent
fine-tuning of the tower's first-order Taylor expansion around theta_0, `platonic.finetuning.linearize`; the
result is a `LinearizedEncoder` and the OrthoReg term is over its dtheta).
AdamW; the lr rises linearly over the warm-up, then decays on a cosine to 0 (`schedule="cosine"`) or stays
(`"constant"`, the paper's sources, method.md §1.6); a run is `steps` long, or `epochs` passes over its inputs.
`ascent=True` maximises the loss instead (the gradient-ascent negation baseline).
An appended identity edit site (`AppendedLinearSite`) is not part of the model and is never trained.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

from ..compute import active as active_compute
from ..compute import batches as decoded_batches
from ..compute import optimizer_step
from ..distributed import current as current_group
from ..edit import appended_identity_parameters
from ..errors import InvalidInputError
from ..models import DualEncoder
from ..progress import track
from .attention import attention_lora_modules, attention_weight_names
from .config import DEFAULT_STEPS, GRADIENT_ASCENT, FinetuneConfig  # noqa: F401 - re-exported
from .linearize import LinearizedEncoder, linearisable_names, tangent_forward
from .lora import attach_lora, lora_layer_names_without_grad, lora_weight_deltas


def orthoreg_penalty(deltas: Iterable[torch.Tensor]) -> torch.Tensor:
    """sum_l ||Gram(dW_l) - I||_F, Gram = dW dW^T if dW has fewer rows than columns, else dW^T dW.

    1-D tensors (biases, norms) are skipped. Not squared, as in the OrthoReg authors' code.
    """
    total = None
    for dW in deltas:
        if dW.ndim != 2:
            continue
        rows, cols = dW.shape
        gram = dW @ dW.T if rows < cols else dW.T @ dW
        term = torch.linalg.matrix_norm(gram - torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device))
        total = term if total is None else total + term
    if total is None:
        raise InvalidInputError("OrthoReg found no 2-D parameter updates to regularise")
    return total


def trainable_parameters(ft: DualEncoder, mode: str) -> list[tuple[str, torch.nn.Parameter]]:
    """(name, parameter) of what a "full" or "attention" fine-tune of `ft` trains: every tower parameter and
    the edit site's (named "edit_site.NAME" where it lives outside the tower), or the blocks' attention
    weight matrices (`attention.attention_weight_names`); an appended identity site is never trained."""
    appended = {id(p) for p in appended_identity_parameters(ft.tower)}
    named = {k: p for k, p in ft.tower.named_parameters() if id(p) not in appended}
    for name, t in ft.edit_site.tensors().items():  # e.g. HF visual_projection lives outside the tower
        if isinstance(t, torch.nn.Parameter) and id(t) not in appended and all(t is not p for p in named.values()):
            named[f"edit_site.{name}"] = t
    if mode == "attention":
        named = {k: named[k] for k in attention_weight_names(ft.tower, ft.spec, ft.runs_in_forward)}
    return list(named.items())


def _lr_groups(named, lr_scale: Callable[[str], float], lr: float) -> list[dict]:
    """AdamW parameter groups: the parameters of one factor lr_scale(name) together, at lr * factor."""
    groups: dict[float, list] = {}
    for name, p in named:
        factor = float(lr_scale(name))
        if not (factor >= 0 and math.isfinite(factor)):
            raise InvalidInputError(f"lr_scale({name!r}) = {factor}: give a finite factor >= 0")
        groups.setdefault(factor, []).append(p)
    return [{"params": ps, "lr": lr * factor} for factor, ps in groups.items()]


def _replay_targets(model: DualEncoder, config: FinetuneConfig, replay_inputs) -> torch.Tensor | None:
    """normalise(z_pre(r)) (R, d) of the replay inputs under the model before fine-tuning, or None."""
    if not config.replay:
        if replay_inputs is not None:
            raise InvalidInputError("replay_inputs were given but config.replay is 0; set replay > 0 to use them")
        return None
    if replay_inputs is None or len(replay_inputs) == 0:
        raise InvalidInputError(f"config.replay = {config.replay} needs replay_inputs: canonical inputs of other data "
                                "the fine-tune should leave where they were")
    z = model.encode_probes(replay_inputs).z.to(model.device, torch.float32)
    return torch.nn.functional.normalize(z, dim=1)


def require_finite_loss(loss: torch.Tensor, step: int, steps: int, config: FinetuneConfig) -> None:
    """Stop at the first non-finite loss (step is 0-based): a run that diverged (--lr 1e30) would otherwise
    go on and write weights that are all NaN."""
    if not torch.isfinite(loss.detach()).all():
        raise InvalidInputError(f"fine-tuning diverged: the loss is {float(loss.detach()):g} at step {step + 1} of "
                                f"{steps} (lr {config.lr:g}); nothing was written. Lower the learning rate (--lr), e.g. "
                                f"to {min(config.lr / 10, 1e-4):g}")


def batch_order(n: int, batch_size: int, steps: int, seed: int) -> list[torch.Tensor]:
    """The row indices of every step's batch: seeded permutations of the n rows, taken batch_size at a time
    (a new permutation when the rest of one is too short). Known before the first step, so a DataLoader
    can decode batches ahead and the processes of a launch agree on every global batch."""
    gen = torch.Generator().manual_seed(seed)
    order, cursor, out = torch.randperm(n, generator=gen), 0, []
    for _ in range(steps):
        if cursor + batch_size > len(order):
            order, cursor = torch.randperm(n, generator=gen), 0
        out.append(order[cursor : cursor + batch_size])
        cursor += batch_size
    return out


def _check_shards(group, config: FinetuneConfig) -> None:
    """Every process of a data-parallel launch needs rows of each global batch (and of each replay batch)."""
    if group.parallel and config.batch_size < group.count:
        raise InvalidInputError(f"batch size {config.batch_size} cannot be shared by the launch's {group.count} processes; "
                                f"give a batch size of at least {group.count} (it is the global batch)")
    if group.parallel and config.replay and config.replay_batch_size < group.count:
        raise InvalidInputError(f"replay_batch_size {config.replay_batch_size} cannot be shared by {group.count} "
                                "processes; raise it to at least the number of processes")


def finetune(model: DualEncoder, inputs: torch.Tensor, labels: torch.Tensor, prompts, config: FinetuneConfig | None = None,
             progress: bool = True, replay_inputs: torch.Tensor | None = None, *,
             parameters: Callable[[DualEncoder], list[tuple[str, torch.nn.Parameter]]] | None = None,
             lr_scale: Callable[[str], float] | None = None) -> tuple[DualEncoder, list[float]]:
    """A fine-tuned copy of `model` (mode "linear": a `LinearizedEncoder` around a copy) and the loss of every step.

    inputs (n, ...) canonical probes with labels (n,) indexing `prompts`; replay_inputs (R, ...) canonical
    inputs for the replay term (only with `config.replay` > 0).
    parameters(copy) -> [(name, parameter)]: which parameters of the copy train in mode "full" or
    "attention" (default `trainable_parameters(copy, mode)`), e.g. the edit site alone for LP-FT's first
    stage. lr_scale(name) -> the factor on `config.lr` of that parameter (AdamW parameter groups, e.g.
    layer-wise decay); the names are those of `parameters`, the LoRA layers' or the tangent model's.
    """
    config = config or FinetuneConfig()
    if parameters is not None and config.mode not in ("full", "attention"):
        raise InvalidInputError(f"parameters= chooses among the weights of a full or attention fine-tune; mode "
                                f"{config.mode!r} trains its own (LoRA layers, or the tangent model's dtheta)")
    if len(inputs) != len(labels) or len(inputs) == 0:
        raise InvalidInputError(f"fine-tuning needs as many labels as inputs (got {len(inputs)} inputs, {len(labels)} labels)")
    if int(labels.max()) >= len(prompts) or int(labels.min()) < 0:
        raise InvalidInputError(f"labels must index the {len(prompts)} prompts")
    replay_targets = _replay_targets(model, config, replay_inputs)
    torch.manual_seed(config.seed)
    ft = model.copy_for_new_weights()
    head = torch.nn.functional.normalize(ft.encode_texts(list(prompts)).to(ft.device, torch.float32), dim=1)
    scale = config.logit_scale if config.logit_scale is not None else model.logit_scale

    peft_model = None
    forward = ft._forward_tower
    if config.mode == "lora":
        targets = (attention_lora_modules(ft.tower, ft.spec, ft.runs_in_forward) if config.lora_targets == "attention"
                   else ft.lora_target_modules)
        peft_model = attach_lora(ft.tower, targets, config.lora_rank, config.lora_alpha, ft.spec)
        named = [(k, p) for k, p in ft.tower.named_parameters() if p.requires_grad]
        params = [p for _, p in named]
        initial = None
    elif config.mode == "linear":  # dtheta of the tangent model, from zero; theta_0 stays frozen
        for p in ft.module.parameters():
            p.requires_grad_(False)
        names = linearisable_names(ft)
        weights = dict(ft.module.named_parameters())
        params = [torch.nn.Parameter(torch.zeros_like(weights[n])) for n in names]
        named = list(zip(names, params))
        initial = [torch.zeros_like(p) for p in params] if config.orthoreg else None

        def tangent(batch):
            return tangent_forward(ft, names, params, batch)

        forward = tangent
    else:
        named = parameters(ft) if parameters is not None else trainable_parameters(ft, config.mode)
        if not named:
            raise InvalidInputError("parameters= chose no parameter to train; return (name, parameter) pairs of the copy")
        for p in ft.module.parameters():
            p.requires_grad_(False)
        params = [p for _, p in named]
        for p in params:
            p.requires_grad_(True)
        initial = [p.detach().clone() for p in params] if config.orthoreg else None

    optimizer = torch.optim.AdamW(params if lr_scale is None else _lr_groups(named, lr_scale, config.lr), lr=config.lr,
                                  weight_decay=config.weight_decay)
    steps = config.total_steps(len(inputs))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: config.lr_factor(step, steps))
    group, settings = current_group(), active_compute()
    _check_shards(group, config)
    scaler = torch.amp.GradScaler(ft.device.type) if settings.dtype == "float16" else None
    replay_gen = torch.Generator().manual_seed(config.seed + 1)
    order = batch_order(len(inputs), config.batch_size, steps, config.seed)
    parts = [idx[group.shard(len(idx))] for idx in order] if group.parallel else order
    losses = []
    ft.tower.train()
    batches = decoded_batches(inputs, parts)
    for step in track(range(steps), description=f"fine-tuning ({config.mode})", enabled=progress):
        idx, part = order[step], parts[step]
        with settings.autocast(ft.device):
            z = forward(ft.prepare_probes(next(batches)))
        logits = scale * torch.nn.functional.normalize(z.float(), dim=1) @ head.T
        if group.parallel:  # this process's share of the global batch's mean: sum over its rows / global rows
            loss = torch.nn.functional.cross_entropy(logits, labels[part].to(logits.device), reduction="sum") / len(idx)
        else:
            loss = torch.nn.functional.cross_entropy(logits, labels[idx].to(logits.device))
        if config.ascent:
            loss = -loss
        if replay_targets is not None:
            r = torch.randint(0, len(replay_inputs), (config.replay_batch_size,), generator=replay_gen)
            mine = r[group.shard(len(r))] if group.parallel else r
            with settings.autocast(ft.device):
                z_r = torch.nn.functional.normalize(forward(ft.prepare_probes(replay_inputs[mine])).float(), dim=1)
            moved = (z_r - replay_targets[mine.to(replay_targets.device)]).pow(2).sum(1)
            loss = loss + config.replay * (moved.sum() / len(r) if group.parallel else moved.mean())
        if config.orthoreg:
            deltas = lora_weight_deltas(ft.tower) if peft_model is not None else [p - p0 for p, p0 in zip(params, initial)]
            penalty = orthoreg_penalty(deltas)
            loss = loss + config.orthoreg * (penalty / group.count if group.parallel else penalty)
        if not group.parallel:
            require_finite_loss(loss, len(losses), steps, config)
        optimizer.zero_grad(set_to_none=True)
        (loss if scaler is None else scaler.scale(loss)).backward()
        if peft_model is not None and not losses:
            silent = lora_layer_names_without_grad(peft_model)
            if silent:
                raise InvalidInputError(f"{ft.spec}: the LoRA layers on {', '.join(silent[:4])} never run in the tower's "
                                        "forward pass, so they cannot learn; use mode='full' or 'attention'")
        total = group.sum_gradients(params, loss) if group.parallel else float(loss.detach())
        if group.parallel:  # the global loss: every process of the launch stops at the same step
            require_finite_loss(torch.tensor(total), len(losses), steps, config)
        if scaler is not None:
            scaler.unscale_(optimizer)
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        optimizer_step(optimizer, scheduler, scaler)
        losses.append(total)
    ft.tower.eval()
    if not all(torch.isfinite(p).all() for p in params):
        raise InvalidInputError(f"fine-tuning's last step (of {steps}) made weights non-finite (NaN or inf) at lr "
                                f"{config.lr:g}; nothing is kept: lower the learning rate (--lr)")
    if peft_model is not None:
        peft_model.merge_and_unload()
    for p in ft.module.parameters():
        p.requires_grad_(False)
    if config.mode == "linear":
        return LinearizedEncoder(ft, {n: p.detach() for n, p in zip(names, params)}), losses
    return ft, losses
