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

import copy
import hashlib
import json
import warnings
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file

from .descriptor import Descriptor, ProbeGrid, Provenance
from .errors import ArtifactError, InvalidInputError, ZeroDescriptorWarning
from .hashing import tensor_digest
from .models import DualEncoder, ProbeEmbeddings, has_backend_prefix, load_model
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
                "pass them explicitly (--probes), the same ones the descriptor was measured on"
            )
        return load_file(str(path))["probes"]


STATE_DICT_FILE = "model.safetensors"  # the state dict in a directory `platonic finetune` writes


def load_finetuned(pre: DualEncoder, finetuned) -> DualEncoder:
    """The fine-tuned model: a spec or DualEncoder, a (partial) safetensors state dict, a peft LoRA dir,
    or a directory holding model.safetensors (a full / attention fine-tune `platonic finetune` wrote)."""
    if isinstance(finetuned, DualEncoder):
        return finetuned
    path = Path(str(finetuned))
    if path.is_file() and path.suffix == ".safetensors":
        return _with_state_dict(pre, path)
    if path.is_dir() and (path / "adapter_config.json").exists():
        return _with_lora_adapter(pre, path)
    if path.is_dir() and (path / STATE_DICT_FILE).is_file() and not (path / "config.json").is_file():
        return _with_state_dict(pre, path / STATE_DICT_FILE)  # `platonic finetune --mode full|attention -o DIR`
    if isinstance(finetuned, str) and (has_backend_prefix(finetuned) or (path.is_dir() and (path / "config.json").is_file())):
        return load_model(finetuned, device=pre.device)
    require_finetune_exists(finetuned)
    raise InvalidInputError(
        f"cannot read the fine-tune {finetuned!r}: give a model spec, a .safetensors state dict (full or "
        "partial), or a peft LoRA adapter directory (with adapter_config.json)"
    )


def require_finetune_exists(finetuned) -> None:
    """Raise when `finetuned` names a file or folder that does not exist (model specs and models pass)."""
    if isinstance(finetuned, DualEncoder) or has_backend_prefix(finetuned) or Path(str(finetuned)).exists():
        return
    raise InvalidInputError(
        f"the fine-tune {str(finetuned)!r} does not exist (no such file or directory); give a .safetensors state "
        "dict (full or partial), a peft LoRA adapter directory (with adapter_config.json), or a model spec"
    )


def _with_state_dict(pre: DualEncoder, path: Path) -> DualEncoder:
    try:
        state = load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for damaged files
        raise ArtifactError(f"{path} is not a readable safetensors state dict ({type(exc).__name__}: {exc}); "
                            "it may be truncated — save the fine-tune again") from None
    if not state:
        raise InvalidInputError(f"{path} holds no tensors: a fine-tune state dict needs the weights it changed")
    ft = pre.copy_for_new_weights()
    own = ft.module.state_dict()
    unknown = [k for k in state if k not in own]
    if unknown:
        raise InvalidInputError(
            f"{path}: {len(unknown)} tensors do not exist in {pre.spec} (e.g. {unknown[:3]}); "
            "is it a fine-tune of another architecture?"
        )
    bad = [k for k in state if tuple(state[k].shape) != tuple(own[k].shape)]
    if bad:
        raise InvalidInputError(f"{path}: tensor {bad[0]} has shape {tuple(state[bad[0]].shape)}, "
                                f"the model's is {tuple(own[bad[0]].shape)}")
    ft.module.load_state_dict(state, strict=False)
    return ft


ADAPTER_WEIGHTS = "adapter_model.safetensors"


def _with_lora_adapter(pre: DualEncoder, path: Path) -> DualEncoder:
    """Merge a peft LoRA adapter trained on the model's tower (or on the whole model) into a copy.

    Reads adapter_config.json and adapter_model.safetensors only (never a pickled adapter_model.bin).
    """
    from peft import PeftConfig, get_peft_model, set_peft_model_state_dict
    from safetensors import safe_open

    try:
        config = PeftConfig.from_pretrained(str(path))
    except Exception as exc:  # noqa: BLE001 - peft raises JSON, type and value errors for a bad config
        raise ArtifactError(f"{path}/adapter_config.json is not a valid peft adapter config ({type(exc).__name__}: "
                            f"{exc}); save the adapter again with peft's save_pretrained") from None
    if not (path / ADAPTER_WEIGHTS).is_file():
        raise ArtifactError(f"{path} has no {ADAPTER_WEIGHTS}; platonic reads adapter weights from safetensors only "
                            "(save with save_pretrained(..., safe_serialization=True))")
    try:
        with safe_open(str(path / ADAPTER_WEIGHTS), framework="pt") as f:
            weights = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # noqa: BLE001
        raise ArtifactError(f"{path / ADAPTER_WEIGHTS} cannot be read ({type(exc).__name__}: {exc}); it may be truncated") from None
    for attach in ("tower", "module"):
        ft = pre.copy_for_new_weights()
        root = getattr(ft, attach)
        try:
            peft_model = get_peft_model(root, copy.deepcopy(config))
        except (ValueError, TypeError, KeyError):
            continue  # target modules not found under this root
        try:
            result = set_peft_model_state_dict(peft_model, weights)
        except RuntimeError:
            continue  # shapes of another architecture
        if not result.unexpected_keys:
            peft_model.merge_and_unload()  # merges into `root` in place
            return ft
    raise InvalidInputError(f"{path}: the LoRA adapter's weights match neither the tower nor the whole of {pre.spec}")


def measure(pre, finetuned, probes, prompts: Sequence[str], task: str, *, cache: EmbeddingCache | None = None,
            store: ProbeStore | None = None, batch_size: int = 64, progress: bool = True, device="cpu") -> Descriptor:
    """The UTD (N, M) of `finetuned` against `pre` on `probes` x `prompts`, as a Descriptor.

    pre: model spec or DualEncoder; finetuned: spec, DualEncoder, .safetensors state dict or LoRA dir;
    probes: canonical tensor, image folder or files (audio: float (N, samples)); prompts: M class prompts.
    """
    pre_model = load_model(pre, device=device)
    ft_model = load_finetuned(pre_model, finetuned)
    canon = canonical_probes(pre_model, probes)
    cache = cache or EmbeddingCache()
    (store or ProbeStore()).put(canon)
    grid = ProbeGrid.from_probes(task, list(prompts), canon)
    z_pre = cache.probes(pre_model, canon, batch_size, progress).z
    z_ft = cache.probes(ft_model, canon, batch_size, progress).z
    g = cache.texts(pre_model, grid.prompts)
    source = Provenance(source=pre_model.spec, finetune=str(finetuned if not isinstance(finetuned, DualEncoder) else finetuned.spec))
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
