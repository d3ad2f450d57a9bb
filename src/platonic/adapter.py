"""The adapter route (method.md §1.4, §1.6): a peft LoRA on the target's image (or audio) tower, fitted
so that the target's *live* descriptor on every probe of every composed term matches c_l U_l.

For terms l = 1..L with descriptors U_l (N_l, M_l), coefficients c_l, the target's normalised prompt
embeddings G_l (M_l, d) (frozen) and its tower f_theta (LoRA parameters theta), the loss is

    L(theta) = (1 / |batch|) sum_{x in batch} (1 / M_l(x)) sum_j ( <f_theta(x), g_j> - <f_pre(x), g_j> - c_l U_l[x, j] )^2

i.e. per probe the mean over its own task's prompts, averaged over the probes of all terms jointly
(one adapter for the whole composition). f_pre is read once, before the first step, with the adapter
attached and untrained (peft initialises B = 0): that is the pre-trained function in the very kernels
the fit runs, so an untrained adapter is exactly zero change. (Disabling the adapter can take another
kernel path, e.g. torch's fused attention for open_clip's packed attention, which differs in the last
bits.) Defaults follow the paper's code: rank 16, alpha 32, AdamW lr 3e-4, wd 1e-4, batch 64, cosine
schedule, 20 epochs over the probes capped at 540 steps, bf16 autocast on a GPU, fixed adapter
initialisation and a seeded batch order.

`adapt(target, terms)` returns an `Adapter`: the LoRA weights with their peft config, the terms,
descriptor digests, settings and the fit's history. `Adapter.save(DIR)` writes a peft adapter
directory (adapter_config.json + adapter_model.safetensors, loadable with peft alone:
`PeftModel.from_pretrained(tower, DIR)`); `Adapter.merge_into(model)` merges it into the target's
weights, recorded like a closed-form edit (route "adapter") so `save_model` exports it natively.
"""

from __future__ import annotations

import copy
import json
import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .adapt_config import AdaptConfig, adapt_config_from
from .adapter_terms import as_terms, select_terms
from .bank import Term
from .compute import DTYPES
from .compute import active as active_compute
from .compute import optimizer_step
from .descriptor import utc_now
from .distributed import current as current_group
from .errors import ArtifactError, FingerprintMismatchError, InvalidInputError
from .finetuning.lora import attach_lora, require_lora_runs
from .hashing import tensor_digest
from .layouts import ADAPTER_CONFIG, ADAPTER_WEIGHTS, is_adapter_directory
from .measurement import EmbeddingCache, ProbeStore
from .models import DualEncoder, load_model
from .progress import StepProgress
from .storage import atomic_directory

META_KEY = "platonic"
ADAPTER_FORMAT_VERSION = 1


@dataclass
class _TermData:
    """One term on the target: canonical probes (N, ...), G (M, d), the base affinities and the goal c U."""

    term: Term
    probes: torch.Tensor
    prompts_g: torch.Tensor
    goal: torch.Tensor  # c * U, (N, M) float32 on the device
    base: torch.Tensor | None = None  # <f_pre(x), g>, (N, M), filled before the first step
    fit_rows: torch.Tensor | None = None
    held_rows: torch.Tensor | None = None


@dataclass
class Adapter:
    """A fitted LoRA for one target: peft config and weights, terms, settings and the fit's history.

    weights: peft's adapter state dict (keys as `PeftModel.save_pretrained` writes them);
    target: fingerprint of the pre-trained target it was fitted on; report: steps, chosen step,
    losses, held-out evaluations, relative residual ||UTD_live - c U|| / ||c U|| per term.
    """

    lora_config: dict
    weights: dict[str, torch.Tensor]
    target: str
    target_spec: str
    terms: tuple[Term, ...]
    settings: dict
    report: dict = field(default_factory=dict)
    created: str = field(default_factory=utc_now)

    # -- applying -------------------------------------------------------------------------------
    def _peft_config(self):
        from peft import LoraConfig

        return LoraConfig(**self.lora_config)

    def merge_into(self, model: DualEncoder) -> DualEncoder:
        """Merge the adapter into `model`'s tower in place and record the edit (route "adapter").

        Refuses a model that is not the pre-trained target the adapter was fitted on, and a merge
        whose weights come out non-finite (the weights are then restored).
        """
        from peft import get_peft_model, set_peft_model_state_dict

        fingerprint = model.base_fingerprint
        if fingerprint != self.target and model.fingerprint != self.target:
            raise FingerprintMismatchError(
                f"this adapter was fitted on target {self.target} ({self.target_spec}); {model.spec} is "
                f"{fingerprint}. Fit it again on this model (platonic apply --route adapter)"
            )
        model.edit_site  # noqa: B018 - a lazily appended site must exist on both sides, as during the fit
        saved = {k: v.detach().clone() for k, v in model.tower.state_dict().items()}
        peft_model = get_peft_model(model.tower, copy.deepcopy(self._peft_config()))
        result = set_peft_model_state_dict(peft_model, self.weights)
        if result.unexpected_keys:
            peft_model.unload()
            raise InvalidInputError(f"the adapter's weights do not fit {model.spec}'s tower "
                                    f"(e.g. {list(result.unexpected_keys)[:2]}); was it fitted on another architecture?")
        peft_model.merge_and_unload()
        if not all(torch.isfinite(t).all() for t in model.tower.state_dict().values()):
            model.tower.load_state_dict(saved)
            raise InvalidInputError("merging the adapter gave non-finite weights; the model was restored. "
                                    "Fit again with smaller coefficients or learning rate")
        for p in model.module.parameters():
            p.requires_grad_(False)
        model.record_edit({"route": "adapter", "method": "adapter", "target": fingerprint,
                           "terms": [t.to_json() for t in self.terms], "settings": self.settings,
                           "adapter_digest": self.digest()}, fingerprint)
        return model

    def digest(self) -> str:
        """sha256 over the adapter's tensors in name order."""
        from .hashing import tensors_digest

        return tensors_digest(self.weights)

    # -- storage --------------------------------------------------------------------------------
    def metadata(self) -> dict:
        return {"format": "platonic", "kind": "adapter", "format_version": ADAPTER_FORMAT_VERSION,
                "route": "adapter", "target": self.target, "target_spec": self.target_spec,
                "terms": [t.to_json() for t in self.terms], "settings": self.settings, "report": self.report,
                "created": self.created, "lora_config": self.lora_config}

    def save(self, directory) -> Path:
        """Write a peft adapter directory atomically (a previous adapter directory there is replaced)."""
        return atomic_directory(directory, self.write_files, replaceable=is_adapter_directory)

    def write_files(self, directory) -> None:
        """Write the peft files (adapter_config.json, adapter_model.safetensors with platonic metadata) into the
        existing folder `directory`: `save` does it in a temporary, the adapter route in a parked one."""
        self._peft_config().save_pretrained(str(directory))
        payload = {k: v.detach().cpu().contiguous() for k, v in self.weights.items()}
        save_file(payload, str(Path(directory) / ADAPTER_WEIGHTS),
                  metadata={"format": "pt", META_KEY: json.dumps(self.metadata(), sort_keys=True)})

    @classmethod
    def load(cls, directory) -> "Adapter":
        """Read an adapter directory written by `save` (tensors and JSON only; no code runs)."""
        directory = Path(directory)
        if not is_adapter_directory(directory):
            raise ArtifactError(f"{directory} is not a platonic adapter directory (no {ADAPTER_CONFIG} and "
                                f"{ADAPTER_WEIGHTS} with platonic metadata); write one with platonic apply --route adapter")
        try:
            with safe_open(str(directory / ADAPTER_WEIGHTS), framework="pt") as f:
                meta = json.loads(f.metadata()[META_KEY])
                weights = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as exc:  # noqa: BLE001 - safetensors raises several types for damaged files
            raise ArtifactError(f"{directory / ADAPTER_WEIGHTS} cannot be read ({type(exc).__name__}: {exc}); "
                                "it may be truncated: fit the adapter again") from None
        if not isinstance(meta.get("format_version"), int) or meta["format_version"] > ADAPTER_FORMAT_VERSION:
            raise ArtifactError(f"{directory} has adapter format version {meta.get('format_version')!r}; "
                                f"this platonic reads up to {ADAPTER_FORMAT_VERSION}. Upgrade platonic")
        try:
            return cls(lora_config=meta["lora_config"], weights=weights, target=meta["target"],
                       target_spec=meta["target_spec"], terms=tuple(Term.from_json(t) for t in meta["terms"]),
                       settings=meta["settings"], report=meta.get("report", {}), created=meta.get("created", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"{directory}: malformed adapter metadata ({exc})") from None

    def __repr__(self) -> str:
        body = " ".join(f"{t.coefficient:+g}*{t.task}@{t.source}" for t in self.terms)
        return f"Adapter({body}; rank {self.lora_config.get('r')}, {len(self.weights)} tensors, target {self.target[:16]}…)"




# -- the fit ----------------------------------------------------------------------------------------

PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}


def fit_dtype(config: AdaptConfig, device: torch.device) -> torch.dtype | None:
    """The fit's autocast dtype (None: float32): `precision` when it names one; "auto": the active --dtype
    (`platonic.compute`) when one was given, else bf16 on CUDA (the paper's code) and float32 elsewhere."""
    if config.precision != "auto":
        return PRECISIONS[config.precision]
    given = active_compute().dtype
    if given:
        return None if given == "float32" else DTYPES[given]
    return torch.bfloat16 if device.type == "cuda" else None


def _autocast(config: AdaptConfig, device: torch.device):
    dtype = fit_dtype(config, device)
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


def _affinities(model: DualEncoder, probes: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """<normalise(f(x)), g> (n, M) in float32, through the same autograd path as the fit's steps."""
    z = model._forward_tower(model.prepare_probes(probes))
    return torch.nn.functional.normalize(z.float(), dim=1) @ G.T


def _batched_affinities(model, data: _TermData, config: AdaptConfig, rows: torch.Tensor | None = None) -> torch.Tensor:
    rows = torch.arange(len(data.probes)) if rows is None else rows
    out = []
    with torch.enable_grad(), _autocast(config, model.device):
        for start in range(0, len(rows), config.batch_size):
            idx = rows[start : start + config.batch_size]
            out.append(_affinities(model, data.probes[idx], data.prompts_g).detach())
    return torch.cat(out) if out else torch.zeros(0, data.goal.shape[1], device=data.goal.device)


def _residual(model, data: _TermData, config: AdaptConfig, rows: torch.Tensor | None = None) -> tuple[float, float]:
    """(||live change - c U||_F^2, ||c U||_F^2) over `rows` (all probes by default)."""
    rows = torch.arange(len(data.probes)) if rows is None else rows
    change = _batched_affinities(model, data, config, rows) - data.base[rows]
    goal = data.goal[rows]
    return float((change - goal).double().pow(2).sum()), float(goal.double().pow(2).sum())


def _prepare_terms(model: DualEncoder, pairs, probes, store, cache) -> list[_TermData]:
    out = []
    device = model.device
    for c, desc in pairs:
        canon = store.find(desc, probes)
        canon = model.canonical(canon)
        if canon.shape[0] != desc.shape[0]:
            raise InvalidInputError(f"the probes of {desc.task} hold {canon.shape[0]} inputs, its descriptor "
                                    f"{desc.shape[0]} rows; pass the probes it was measured on")
        G = torch.nn.functional.normalize(cache.texts(model, desc.grid.prompts).float(), dim=1).to(device)
        term = Term(float(c), desc.provenance.source, desc.task, tensor_digest(desc.matrix))
        out.append(_TermData(term, canon, G, (float(c) * desc.matrix.float()).to(device)))
    return out


def _split(data: list[_TermData], holdout: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed + 1)
    for d in data:
        n = len(d.probes)
        perm = torch.randperm(n, generator=gen)
        held = min(n - 1, math.ceil(holdout * n)) if holdout > 0 else 0
        d.held_rows, d.fit_rows = perm[:held].sort().values, perm[held:].sort().values


def adapt(target, terms, *, config: AdaptConfig | None = None, probes: Mapping[str, torch.Tensor] | None = None,
          store: ProbeStore | None = None, cache: EmbeddingCache | None = None, anchors=None, progress: bool = True,
          device=None) -> Adapter:
    """Fit one LoRA on `target`'s tower so its live descriptors match every term's c U (jointly).

    target: model spec or DualEncoder (not modified; the fit runs on a copy).
    terms: a Descriptor, a Composition, or (coefficient, Descriptor) pairs; addition uses c = +1,
        negation c = -1 (the paper's settings). Each descriptor's probes are found by digest in
        `probes` ({digest: canonical tensor}) or the probe store.
    anchors: beyond the paper, with `config.anchor_weight` w > 0: unlabeled inputs (any form the target's
        `canonical` accepts) whose normalised embeddings e(x) the fit keeps, adding to the loss
        w * mean over an anchor batch of ||e_theta(x) - e_pre(x)||^2 (the adapter's locality).
    Returns the `Adapter` (merge it with `Adapter.merge_into(model)`, keep it with `Adapter.save(DIR)`).
    """
    from peft.utils import get_peft_model_state_dict

    config = config or AdaptConfig()
    model = load_model(target, device=device or "cpu")
    pairs = as_terms(terms)
    fingerprint = model.base_fingerprint
    cache = cache or EmbeddingCache()
    data = _prepare_terms(model, pairs, probes, store or ProbeStore(), cache)
    if (anchors is None) != (config.anchor_weight == 0):
        raise InvalidInputError("anchors and anchor_weight go together: give unlabeled anchor inputs (anchors=) and a "
                                "positive anchor_weight, or neither")
    anchor_inputs = None if anchors is None else model.canonical(anchors)
    targets = list(config.target_modules or model.lora_target_modules)
    work = model.copy_for_new_weights()
    work.edit_site  # noqa: B018 - an appended site is part of the structure the adapter is fitted on
    for p in work.module.parameters():
        p.requires_grad_(False)
    peft_model = attach_lora(work.tower, targets, config.rank, config.lora_alpha, model.spec, seed=config.seed)
    work.tower.eval()  # no dropout / batch statistics: the fit sees the function inference uses

    for d in data:
        d.base = _batched_affinities(work, d, config)  # B = 0: the pre-trained function, bit for bit
    anchor = None if anchor_inputs is None else _Anchors(work, anchor_inputs, config)
    probe_batch = [(0, r) for r in range(min(4, len(data[0].probes)))]
    require_lora_runs(peft_model, _batch_loss(work, data, probe_batch, config), model.spec)
    _split(data, config.holdout, config.seed)
    pool = [(i, int(r)) for i, d in enumerate(data) for r in d.fit_rows]
    group = current_group()
    if group.parallel and min(config.batch_size, len(pool)) < group.count:
        raise InvalidInputError(f"a batch of {min(config.batch_size, len(pool))} probes cannot be shared by the launch's "
                                f"{group.count} processes; raise batch_size or use fewer processes")
    scaler = torch.amp.GradScaler(work.device.type) if fit_dtype(config, work.device) == torch.float16 else None
    steps = config.steps_for(len(pool))
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)

    def schedule(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        return 0.5 * (1 + math.cos(math.pi * (step - config.warmup_steps) / max(1, steps - config.warmup_steps)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    gen = torch.Generator().manual_seed(config.seed)
    order, cursor = torch.randperm(len(pool), generator=gen), 0
    losses, evaluations = [], []
    best = (float("inf"), 0, None)

    def held_out_residual() -> float:
        num = den = 0.0
        for d in data:
            n, g = _residual(work, d, config, d.held_rows)
            num, den = num + n, den + g
        return math.sqrt(num / den) if den > 0 else 0.0

    with StepProgress(steps, f"fitting adapter ({len(data)} term{'s' if len(data) > 1 else ''})", enabled=progress) as bar:
        for step in range(steps):
            if cursor + config.batch_size > len(order) and cursor > 0:
                order, cursor = torch.randperm(len(pool), generator=gen), 0
            batch = [pool[int(k)] for k in order[cursor : cursor + config.batch_size]]
            cursor += config.batch_size
            if group.parallel:  # this process's rows; its share of the batch mean (the shares sum to it)
                mine = batch[group.shard(len(batch))]
                loss = _batch_loss(work, data, mine, config) * (len(mine) / len(batch))
            else:
                loss = _batch_loss(work, data, batch, config)
            if anchor is not None:
                loss = loss + config.anchor_weight * anchor.loss(work) / group.count
            optimizer.zero_grad(set_to_none=True)
            (loss if scaler is None else scaler.scale(loss)).backward()
            losses.append(group.sum_gradients(params, loss) if group.parallel else float(loss.detach()))
            optimizer_step(optimizer, scheduler, scaler)
            bar.advance(losses[-1])
            if config.holdout > 0 and ((step + 1) % config.eval_every == 0 or step + 1 == steps):
                value = held_out_residual()
                evaluations.append({"step": step + 1, "held_out_residual": value})
                if value < best[0]:
                    best = (value, step + 1, {k: v.detach().clone() for k, v in get_peft_model_state_dict(peft_model).items()})
    if best[2] is not None:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(peft_model, best[2])
    names = _term_names(data)
    residuals = {}
    for name, d in zip(names, data):
        num, den = _residual(work, d, config)
        residuals[name] = math.sqrt(num / den) if den > 0 else 0.0
    weights = {k: v.detach().cpu().clone() for k, v in get_peft_model_state_dict(peft_model).items()}
    report = {"steps": steps, "chosen_step": best[1] if best[2] is not None else steps, "losses": losses,
              "held_out": evaluations, "relative_residual": residuals,
              "probes": {name: len(d.probes) for name, d in zip(names, data)}}
    if anchor is not None:
        report["anchors"] = {"count": len(anchor_inputs), "digest": tensor_digest(anchor_inputs)}
    lora_dict = {"r": config.rank, "lora_alpha": config.lora_alpha, "target_modules": targets, "lora_dropout": 0.0,
                 "bias": "none"}
    return Adapter(lora_dict, weights, fingerprint, model.spec, tuple(d.term for d in data),
                   config.model_dump(mode="json"), report)


def _term_names(data: list[_TermData]) -> list[str]:
    """"task@source" per term, numbered ("#2", ...) where two terms share both (e.g. two probe sets)."""
    names = []
    for d in data:
        base = name = f"{d.term.task}@{d.term.source}"
        k = 1
        while name in names:
            k += 1
            name = f"{base}#{k}"
        names.append(name)
    return names


class _Anchors:
    """Unlabeled inputs whose normalised embeddings the fit keeps: mean ||e_theta(x) - e_pre(x)||^2 per batch."""

    def __init__(self, model: DualEncoder, inputs: torch.Tensor, config: AdaptConfig):
        self.inputs, self.config = inputs, config
        chunks = []
        with torch.enable_grad(), _autocast(config, model.device):
            for start in range(0, len(inputs), config.batch_size):
                z = model._forward_tower(model.prepare_probes(inputs[start : start + config.batch_size]))
                chunks.append(torch.nn.functional.normalize(z.float(), dim=1).detach())
        self.base = torch.cat(chunks)
        self.gen = torch.Generator().manual_seed(config.seed + 2)
        self.order, self.cursor = torch.randperm(len(inputs), generator=self.gen), 0

    def loss(self, model: DualEncoder) -> torch.Tensor:
        if self.cursor >= len(self.order):
            self.order, self.cursor = torch.randperm(len(self.inputs), generator=self.gen), 0
        idx = self.order[self.cursor : self.cursor + self.config.batch_size]
        self.cursor += self.config.batch_size
        with _autocast(self.config, model.device):
            z = model._forward_tower(model.prepare_probes(self.inputs[idx])).float()
        e = torch.nn.functional.normalize(z, dim=1)
        return (e - self.base[idx.to(self.base.device)]).pow(2).sum(dim=1).mean()


def _batch_loss(model: DualEncoder, data: list[_TermData], batch: list[tuple[int, int]], config: AdaptConfig) -> torch.Tensor:
    """Mean over the batch's probes of the mean over their own prompts of (live change - c U)^2."""
    groups: dict[int, list[int]] = {}
    for i, r in batch:
        groups.setdefault(i, []).append(r)
    prepared = [model.prepare_probes(data[i].probes[torch.tensor(rows)]) for i, rows in groups.items()]
    with _autocast(config, model.device):
        if all(isinstance(p, torch.Tensor) for p in prepared):  # one forward for the whole batch
            chunks = torch.split(model._forward_tower(torch.cat(prepared)).float(), [len(r) for r in groups.values()])
        else:  # transformers inputs are dicts of tensors: one forward per term
            chunks = [model._forward_tower(p).float() for p in prepared]
    total = 0.0
    for (i, rows), z in zip(groups.items(), chunks):
        d, idx = data[i], torch.tensor(rows, device=data[i].goal.device)
        change = torch.nn.functional.normalize(z, dim=1) @ d.prompts_g.T - d.base[idx]
        total = total + (change - d.goal[idx]).pow(2).mean(dim=1).sum()
    return total / len(batch)


__all__ = ["AdaptConfig", "Adapter", "adapt", "adapt_config_from", "as_terms", "fit_dtype", "is_adapter_directory",
           "select_terms"]
