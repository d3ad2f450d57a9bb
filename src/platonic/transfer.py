"""Solving descriptors for a real target, folding compositions into it, and exporting the result."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import torch

from ._version import __version__
from .bank import Operator, OperatorBank
from .descriptor import Descriptor, ProbeGrid, digest_probes
from .edit import FoldRecord, fold
from .errors import FingerprintMismatchError, InvalidInputError
from .layouts import is_model_export
from .measurement import EmbeddingCache, ProbeStore, canonical_probes, design_rows, target_grid
from .models import DualEncoder, load_model
from .progress import track
from .solve import RidgeSolver
from .solve_config import SolveConfig, check_pool
from .storage import refuse_existing


def solve_bank(target, descriptors: Iterable[Descriptor], *, probes: Mapping[str, torch.Tensor] | None = None,
               store: ProbeStore | None = None, cache: EmbeddingCache | None = None, config: SolveConfig | None = None,
               anchor_images: torch.Tensor | None = None, progress: bool = True, **settings) -> OperatorBank:
    """An OperatorBank for `target`: one operator per descriptor, solved on the target's own embeddings.

    The probes of each descriptor are looked up by digest in `probes` ({digest: tensor}) or the probe
    store. Descriptors sharing a grid share one factorisation (RidgeSolver). The operators (and the
    bank) name the weights they were solved on: `model.fingerprint`.

    config: how to solve (`platonic.SolveConfig`; default the paper's), or its settings as keywords
    (mu_a=, mu_b=, rank=, truncation=, anchor_weight=; solve="paper" | "anchored" for its kind). An
    anchored solve takes the pool `anchor_images` (P unlabeled inputs, e.g. (P, 3, H, W) uint8 images),
    embedded by the target through the same design-row map as the probes (`design_rows`), entering every
    solve as F_pool with relative weight `anchor_weight` (see `platonic.solve`). Each operator records
    the kind, the weight and the pool's digest (`digest_probes` of the canonical pool tensor) in `solve_record`.
    """
    if config is None:
        kind = settings.pop("solve", None)
        config = SolveConfig.parse({**settings, "kind": kind})
    elif settings:
        raise InvalidInputError(f"give config= or its settings ({', '.join(settings)}), not both")
    check_pool(config, anchor_images is not None)
    model = load_model(target)
    descriptors = list(descriptors)
    if not descriptors:
        raise InvalidInputError("solve needs at least one descriptor")
    store = store or ProbeStore()
    pool, pool_digest = None, None
    if anchor_images is not None:
        canon_pool = canonical_probes(model, anchor_images)
        pool_digest = digest_probes(canon_pool)
        pool = design_rows(model, canon_pool, cache=cache, progress=progress)
    bank = OperatorBank(model.fingerprint)
    solvers: dict[ProbeGrid, RidgeSolver] = {}
    for desc in track(descriptors, description=f"solving {len(descriptors)} descriptors", enabled=progress):
        if desc.grid not in solvers:
            canon = store.find(desc, probes)
            F, G = target_grid(model, canon, desc.grid.prompts, cache=cache, progress=progress)
            solvers[desc.grid] = RidgeSolver(F, G, anchor=pool, **config.solver_settings())
        bank.add(Operator.from_solver(solvers[desc.grid], desc, target=model.fingerprint, form=model.edit_site.form,
                                      anchor_digest=pool_digest))
    return bank


TARGET_MATCHES = ("current", "pre-edit", "export's base")


def target_match(model: DualEncoder, target: str) -> str:
    """Which weights of `model` the fingerprint `target` names: "current" (the weights as they are),
    "pre-edit" (before the model's first platonic edit, `base_fingerprint`) or "export's base" (the model a
    loaded platonic export was edited from, as its provenance names it); refuses any other."""
    if target == model.fingerprint:
        return "current"
    if target == model.base_fingerprint:
        return "pre-edit"
    if target == getattr(model, "export_base", None):
        return "export's base"
    raise FingerprintMismatchError(
        f"the edit was solved for target {target} but the model is {model.fingerprint}"
        + (f" (before its platonic edits: {model.base_fingerprint})" if model.base_fingerprint != model.fingerprint else "")
        + "; solve the descriptors again on this model"
    )


def apply(model: DualEncoder, edit: Operator | OperatorBank, terms: Mapping | None = None, alpha: float = 0.5,
          method: str = "closed_form") -> FoldRecord:
    """Fold `edit` (an operator, or `terms` composed from a bank) into `model` at `alpha`.

    Accepts an edit whose target fingerprint names the model's current weights or its weights before
    its first platonic edit (`base_fingerprint`), and refuses any other; which one matched is the
    record's `target_match` ("current" or "pre-edit"), also kept in the edit's entry of `model.edits`.
    The edit travels with an export; `model.fingerprint` then names the edited weights.
    """
    base = model.base_fingerprint  # computed before the weights change
    if isinstance(edit, OperatorBank):
        if terms is None:
            raise InvalidInputError("applying a bank needs terms, e.g. {'eurosat': 1.0, 'dtd': -1.0}")
        target_match(model, edit.target)
        operator = edit.compose(terms)
    elif isinstance(edit, Operator):
        operator = edit
    else:
        raise InvalidInputError(f"apply needs an Operator or an OperatorBank; got {type(edit).__name__}")
    matched = target_match(model, operator.target)
    record = fold(model.edit_site, operator, alpha)
    record.target_match = matched
    model.record_edit({"route": "closed_form", "method": method, "alpha": record.alpha, "target": operator.target,
                       "target_match": matched, "terms": [t.to_json() for t in operator.terms]}, base)
    return record


def save_model(model: DualEncoder, path, provenance: dict | None = None, overwrite: bool = False):
    """Write `model` in its own library's format, with the record of its platonic edits.

    An existing `path` is replaced only when it is a previous platonic export of the same kind (an
    open_clip checkpoint, a transformers directory, ...), or with `overwrite`. The record names the
    fingerprint of the model the edits started from (`base_fingerprint`): loading the export again, the
    banks solved on that base apply to it (`target_match` "export's base").
    """
    import inspect

    record = {"platonic_version": __version__, "edits": list(getattr(model, "edits", [])),
              "base_fingerprint": model.origin_fingerprint, **(provenance or {})}
    if "overwrite" in inspect.signature(model.save).parameters:
        return model.save(path, record, overwrite=overwrite)
    refuse_existing(Path(path), is_model_export, overwrite, "platonic model export")  # backends that do not check
    return model.save(path, record)
