"""Measuring descriptors on real models, and the target-side embeddings a solve needs.

- `measure(pre, finetuned, probes, prompts, task)`: UTD = <f_ft(x), g(p)> - <f_pre(x), g(p)> with the
  pre-trained model's frozen text tower g (method.md §1.1).
- `target_grid(model, probes, prompts)`: (F or H, G) for `Operator.solve` on the target;
  `design_rows(model, inputs)`: F or H alone (e.g. of an anchor pool).
- `EmbeddingCache`: embeddings on disk keyed by model fingerprint + probe digest (text embeddings: the text
  side's fingerprint + prompt digest), so a second measurement runs no forward pass.
- `ProbeStore`: canonical probe tensors by digest, so a descriptor's probes can be found again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file

from .compute import active as active_compute
from .compute import autocast
from .compute import batch_size as active_batch_size
from .compute import row_range
from .descriptor import Descriptor, ProbeGrid, Provenance
from .distributed import Group, current
from .errors import InvalidInputError, ZeroDescriptorWarning
from .finetuning import load_finetuned
from .hashing import input_digest
from .locks import write_once
from .models import DualEncoder, ProbeEmbeddings, load_model
from .paths import cache_dir
from .storage import write_tensors


def canonical_probes(model: DualEncoder, probes) -> torch.Tensor:
    """The canonical probe tensor of `model` (see `DualEncoder.canonical`)."""
    return model.canonical(probes)


STREAM_BATCHES = 64  # a miss of more batches than this is encoded and kept on disk in chunks of this many


class EmbeddingCache:
    """safetensors files under `root`, one per (model fingerprint, content digest[, autocast dtype]); text
    embeddings are keyed on the model's `text_fingerprint` instead (its tensors outside the tower).

    Entries are written under the cache folder's lock, once (`locks.write_once`), so processes sharing
    the cache never write one at the same time. Embeddings measured under a narrow autocast dtype
    (`platonic.compute`, bfloat16 / float16) are kept apart from the float32 ones (the dtype is part of
    the name; float32 entries keep the names they always had). In a data-parallel launch
    (`platonic.distributed`) a miss is encoded once by all processes together: each takes a contiguous
    share of the batches (so every row is computed in the very batch one process would use), the shares
    are gathered in order, and the main process writes the entry.
    """

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir("embeddings")
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str, digest: str, kind: str) -> Path:
        settings = active_compute()
        narrow = f".{settings.dtype}" if settings.narrow else ""
        return self.root / f"{key}-{digest[:32]}.{kind}{narrow}.safetensors"

    def probes_path(self, model: DualEncoder, probes) -> Path:
        """Where the embeddings of `probes` (a tensor or a lazily decoded split) by `model` are, or will be, kept."""
        # the site digest guards against weights folded without refreshing the fingerprint
        return self._path(f"{model.fingerprint}-{model.site_digest()[:16]}", inputs_digest(probes), "probes")

    def probes(self, model: DualEncoder, probes, batch_size: int | None = None, progress: bool = True) -> ProbeEmbeddings:
        """The embeddings (z (N, d), u (N, p) or None) of canonical `probes`, read or encoded and kept.

        probes: a tensor, or a lazily decoded split (`LazyImages`: decoded batch by batch, never whole);
        batch_size: inputs per forward pass (default: the active setting, else 64). A miss of more than
        `STREAM_BATCHES` batches is encoded in chunks of that many batches, each written to disk as it is
        done (ENTRY.parts/): a killed extraction resumes at its last chunk, and the chunks' batches are
        the batches of one pass, so the entry is the same bits."""
        path = self.probes_path(model, probes)
        group = current()
        if group.agree(path.exists()):
            data = load_file(str(path))
            return ProbeEmbeddings(z=data["z"], u=data.get("u"))
        size = active_batch_size(64) if batch_size is None else batch_size
        chunk = size * STREAM_BATCHES
        if probes.shape[0] <= chunk:
            emb = encode_shared(model, probes, size, progress, group)
        else:
            emb = self._streamed(model, probes, path.with_name(path.name + ".parts"), size, chunk, progress, group)
        tensors = {"z": emb.z} if emb.u is None else {"z": emb.z, "u": emb.u}
        if group.is_main:
            write_once(path, lambda: write_tensors(path, tensors))
            shutil.rmtree(path.with_name(path.name + ".parts"), ignore_errors=True)
        group.barrier()
        return emb

    def _streamed(self, model, probes, parts: Path, size: int, chunk: int, progress: bool, group) -> ProbeEmbeddings:
        """Encode `probes` chunk by chunk, each chunk kept as parts/K.safetensors (read back where it exists)."""
        from .progress import track

        zs, us = [], []
        starts = list(range(0, probes.shape[0], chunk))
        for k, start in enumerate(track(starts, description=f"encoding {probes.shape[0]} inputs", enabled=progress)):
            part = parts / f"{k:06d}.safetensors"
            if group.agree(part.exists()):
                data = load_file(str(part))
                emb = ProbeEmbeddings(z=data["z"], u=data.get("u"))
            else:
                emb = encode_shared(model, row_range(probes, start, min(start + chunk, probes.shape[0])), size, False, group)
                tensors = {"z": emb.z} if emb.u is None else {"z": emb.z, "u": emb.u}
                if group.is_main:
                    write_once(part, lambda: write_tensors(part, tensors, make_parents=True))
            zs.append(emb.z)
            us.append(emb.u)
        return ProbeEmbeddings(z=torch.cat(zs), u=None if us[0] is None else torch.cat(us))

    def texts_path(self, model: DualEncoder, prompts: Sequence[str]) -> Path:
        """Where the text embeddings of `prompts` by `model` are, or will be, kept: keyed on the model's
        `text_fingerprint`, so every fine-tune and edit of one model's tower shares them."""
        return self._path(model.text_fingerprint, hashlib.sha256(json.dumps(list(prompts)).encode()).hexdigest(), "texts")

    def texts(self, model: DualEncoder, prompts: Sequence[str]) -> torch.Tensor:
        """The text embeddings g (M, d) of `prompts`, read or encoded and kept."""
        path = self.texts_path(model, prompts)
        if path.exists():
            return load_file(str(path))["g"]
        with autocast(model.device):
            g = model.encode_texts(prompts)
        g = g.float() if active_compute().narrow else g
        write_once(path, lambda: write_tensors(path, {"g": g}))
        return g


def inputs_digest(inputs) -> str:
    """The content digest of model inputs: a tensor's bytes, or a lazily decoded split's `digest()` (its rows'
    identity and decoded form), so a split is named without decoding it."""
    return input_digest(inputs) if isinstance(inputs, torch.Tensor) else inputs.digest()


def encode_shared(model: DualEncoder, probes: torch.Tensor, batch_size: int, progress: bool,
                  group: Group | None = None) -> ProbeEmbeddings:
    """`model.encode_probes(probes)`, shared by the processes of a data-parallel `group` (default: the current).

    Process k encodes its contiguous share of the batches (whole batches of `batch_size`, so each row is
    computed in the batch a single process would put it in); the shares are gathered in rank order. With
    fewer batches than processes, every process encodes everything."""
    group = group or current()
    n_batches = -(-probes.shape[0] // batch_size)
    if not group.parallel or n_batches < group.count:
        return model.encode_probes(probes, batch_size=batch_size, progress=progress)
    share = group.shard(n_batches)
    rows = slice(share.start * batch_size, min(share.stop * batch_size, probes.shape[0]))
    local = model.encode_probes(row_range(probes, rows.start, rows.stop), batch_size=batch_size, progress=progress)
    z = torch.cat(group.gather(local.z))
    u = None if local.u is None else torch.cat(group.gather(local.u))
    return ProbeEmbeddings(z=z, u=u)


class ProbeStore:
    """Canonical probe tensors by sha256 digest (the digest a ProbeGrid records)."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir("probes")
        self.root.mkdir(parents=True, exist_ok=True)

    def put(self, probes: torch.Tensor) -> str:
        digest = input_digest(probes)
        path = self.root / f"{digest}.safetensors"
        if not path.exists():
            write_once(path, lambda: write_tensors(path, {"probes": probes}))
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
            store: ProbeStore | None = None, batch_size: int | None = None, progress: bool = True, device="cpu",
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
                batch_size: int | None = None, progress: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(F (N, d) or H (N, p + 1), G (M, d)) of the target on a descriptor's probes and prompts.

    The edit site's `design_matrix`: F = z / ||z|| for the projection forms, H = [u; 1] / ||z|| for a
    residual-head affine.
    """
    cache = cache or EmbeddingCache()
    G = torch.nn.functional.normalize(cache.texts(model, list(prompts)).double(), dim=1)
    return design_rows(model, probes, cache=cache, batch_size=batch_size, progress=progress), G


def design_rows(model: DualEncoder, inputs, *, cache: EmbeddingCache | None = None, batch_size: int | None = None,
                progress: bool = True) -> torch.Tensor:
    """The target's design rows of `inputs` (made canonical), float64: F (n, d) or H (n, p + 1).

    Normalised embeddings z / ||z|| for the projection forms; [u; 1] / ||z|| for a residual-head affine
    (`head_design_matrix`). The rows of a descriptor's probes (`target_grid`) and of an anchor pool.
    """
    cache = cache or EmbeddingCache()
    emb = cache.probes(model, canonical_probes(model, inputs), batch_size, progress)
    return model.edit_site.design_matrix(emb)
