"""Measuring descriptors on real models, and the target-side embeddings a solve needs.

- `measure(pre, finetuned, probes, prompts, task)`: UTD = <f_ft(x), g(p)> - <f_pre(x), g(p)> with the
  pre-trained model's frozen text tower g (method.md §1.1).
- `target_grid(model, probes, prompts)`: (F or H, G) for `Operator.solve` on the target;
  `design_rows(model, inputs)`: F or H alone (e.g. of an anchor pool).
- `EmbeddingCache`: embeddings on disk keyed by model fingerprint + probe (or prompt) digest, so a
  second measurement runs no forward pass.
- `ProbeStore`: canonical probe tensors by digest, so a descriptor's probes can be found again.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file

from .descriptor import Descriptor, ProbeGrid, Provenance
from .errors import InvalidInputError, ZeroDescriptorWarning
from .finetuning import load_finetuned
from .hashing import tensor_digest
from .models import DualEncoder, ProbeEmbeddings, load_model
from .paths import cache_dir
from .storage import write_tensors


def canonical_probes(model: DualEncoder, probes) -> torch.Tensor:
    """The canonical probe tensor of `model` (see `DualEncoder.canonical`)."""
    return model.canonical(probes)


class EmbeddingCache:
    """safetensors files under `root`, one per (model fingerprint, content digest)."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir("embeddings")
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, model: DualEncoder, digest: str, kind: str) -> Path:
        # the site digest guards against weights folded without refreshing the fingerprint
        return self.root / f"{model.fingerprint}-{model.site_digest()[:16]}-{digest[:32]}.{kind}.safetensors"

    def probes(self, model: DualEncoder, probes: torch.Tensor, batch_size: int = 64, progress: bool = True) -> ProbeEmbeddings:
        path = self._path(model, tensor_digest(probes), "probes")
        if path.exists():
            data = load_file(str(path))
            return ProbeEmbeddings(z=data["z"], u=data.get("u"))
        emb = model.encode_probes(probes, batch_size=batch_size, progress=progress)
        tensors = {"z": emb.z} if emb.u is None else {"z": emb.z, "u": emb.u}
        write_tensors(path, tensors)
        return emb

    def texts(self, model: DualEncoder, prompts: Sequence[str]) -> torch.Tensor:
        digest = hashlib.sha256(json.dumps(list(prompts)).encode()).hexdigest()
        path = self._path(model, digest, "texts")
        if path.exists():
            return load_file(str(path))["g"]
        g = model.encode_texts(prompts)
        write_tensors(path, {"g": g})
        return g


class ProbeStore:
    """Canonical probe tensors by sha256 digest (the digest a ProbeGrid records)."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir("probes")
        self.root.mkdir(parents=True, exist_ok=True)

    def put(self, probes: torch.Tensor) -> str:
        digest = tensor_digest(probes)
        path = self.root / f"{digest}.safetensors"
        if not path.exists():
            write_tensors(path, {"probes": probes})
        return digest

    def get(self, digest: str) -> torch.Tensor:
        path = self.root / f"{digest}.safetensors"
        if not path.exists():
            raise InvalidInputError(
                f"the probes with digest {digest[:16]}… are not in the probe store ({self.root}); "
                "pass them explicitly (--probes), the same ones the descriptor was measured on (a folder decoded "
                "before issue 35, or measured with it: add --probe-resize shorter-side)"
            )
        return load_file(str(path))["probes"]

    def find(self, descriptor, given: dict | None = None) -> torch.Tensor:
        """The canonical probes `descriptor` was measured on: among `given` ({digest: probes}, the --probes a
        user passed), else in the store. When probes were given and none is the descriptor's, the error says
        so (their digests beside the descriptor's), not merely that the store lacks them."""
        digest = descriptor.grid.probe_digest
        if given and digest in given:
            return given[digest]
        if (self.root / f"{digest}.safetensors").exists() or not given:
            return self.get(digest)
        have = ", ".join(f"{d[:16]}…" for d in given)
        raise InvalidInputError(f"the probes given (--probes; digest {have}) are not the ones the descriptor of "
                                f"{descriptor.task!r} ({descriptor.provenance.source}) was measured on (digest "
                                f"{digest[:16]}…), and the probe store has no copy of those; give the probe files it "
                                "was measured on")


# the fine-tune sources (files, adapters, vision-only checkpoints, hub names) live in platonic.finetuning.sources


def require_change(descriptor: Descriptor, source: str) -> Descriptor:
    """Refuse an all-zero descriptor, naming its fine-tune `source`: an operator solved from it is no edit, and
    every figure made from it (a cosine, a table cell) would be a division by zero or a silent no-op."""
    if descriptor.norm() == 0:
        raise InvalidInputError(f"the fine-tune {source} changed nothing on these probes (task {descriptor.task!r}): "
                                "its descriptor is all zeros, so an operator solved from it would be no edit; nothing "
                                "was written. Check that it is the fine-tuned model and not the pre-trained one")
    return descriptor


def measure(pre, finetuned, probes, prompts: Sequence[str], task: str, *, cache: EmbeddingCache | None = None,
            store: ProbeStore | None = None, batch_size: int = 64, progress: bool = True, device="cpu",
            require_pinned: bool = False) -> Descriptor:
    """The UTD (N, M) of `finetuned` against `pre` on `probes` x `prompts`, as a Descriptor.

    pre: model spec or DualEncoder; finetuned: any source `platonic.finetuning.load_finetuned` reads (a spec,
    DualEncoder, state dict file, LoRA dir, vision-only transformers checkpoint, hf:ORG/NAME[@REV]);
    probes: canonical tensor, image folder or files (audio: float (N, samples)); prompts: M class prompts.
    require_pinned: refuse a hub source that names no commit. `provenance.finetune` records the source as
    loaded (`source_description`: revision, how many tensors).
    """
    pre_model = load_model(pre, device=device)
    ft_model = load_finetuned(pre_model, finetuned, require_pinned_revision=require_pinned)
    canon = canonical_probes(pre_model, probes)
    cache = cache or EmbeddingCache()
    (store or ProbeStore()).put(canon)
    grid = ProbeGrid.from_probes(task, list(prompts), canon)
    z_pre = cache.probes(pre_model, canon, batch_size, progress).z
    z_ft = cache.probes(ft_model, canon, batch_size, progress).z
    g = cache.texts(pre_model, grid.prompts)
    what = getattr(ft_model, "source_description", None) or (finetuned.spec if isinstance(finetuned, DualEncoder) else str(finetuned))
    source = Provenance(source=pre_model.spec, finetune=what)
    descriptor = Descriptor.from_embeddings(z_pre, z_ft, g, grid, source)
    if descriptor.norm() == 0:
        warnings.warn(f"the fine-tune {source.finetune} changed nothing on these probes: the descriptor of {task!r} is "
                      "all zeros, so an operator solved from it is zero (no edit). Check that it is the fine-tuned "
                      "model and not the pre-trained one", ZeroDescriptorWarning, stacklevel=2)
    return descriptor


def target_grid(model: DualEncoder, probes, prompts: Sequence[str], *, cache: EmbeddingCache | None = None,
                batch_size: int = 64, progress: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(F (N, d) or H (N, p + 1), G (M, d)) of the target on a descriptor's probes and prompts.

    The edit site's `design_matrix`: F = z / ||z|| for the projection forms, H = [u; 1] / ||z|| for a
    residual-head affine.
    """
    cache = cache or EmbeddingCache()
    G = torch.nn.functional.normalize(cache.texts(model, list(prompts)).double(), dim=1)
    return design_rows(model, probes, cache=cache, batch_size=batch_size, progress=progress), G


def design_rows(model: DualEncoder, inputs, *, cache: EmbeddingCache | None = None, batch_size: int = 64,
                progress: bool = True) -> torch.Tensor:
    """The target's design rows of `inputs` (made canonical), float64: F (n, d) or H (n, p + 1).

    Normalised embeddings z / ||z|| for the projection forms; [u; 1] / ||z|| for a residual-head affine
    (`head_design_matrix`). The rows of a descriptor's probes (`target_grid`) and of an anchor pool.
    """
    cache = cache or EmbeddingCache()
    emb = cache.probes(model, canonical_probes(model, inputs), batch_size, progress)
    return model.edit_site.design_matrix(emb)
