"""The `DualEncoder` interface every backend implements (open_clip, transformers, the embedded world).

A backend says how to encode probes and prompts, where its edit lands (`edit_site`), which modules
LoRA should target, and how to write itself back in its own format. Everything platonic does to a
model (measure, solve, fold, export) goes through this interface; nothing guesses from model names.

Probes are the *canonical* tensor shared by all models: images as (N, 3, 224, 224) uint8, audio as
(N, T) float waveforms at 16 kHz (`models.audio`). Each backend turns them into its own input
(`prepare_probes`), e.g. a bilinear resize to its input size and its own mean/std normalisation, or a
resampling to its own rate and its own mel features (method.md §1.6: every model sees the same pixels,
hears the same samples).
"""

from __future__ import annotations

import copy
import hashlib
from abc import ABC, abstractmethod
from typing import Sequence

import torch
from torch import nn

from ..edit import EditSite, ProbeEmbeddings
from ..errors import EditSiteError, InvalidInputError
from ..hashing import tensors_digest


QUERY_VALUE_NAMES = ("q_proj", "v_proj", "q", "v", "query", "value")


def attention_projection_names(tower: nn.Module) -> list[str]:
    """Leaf names of the tower's attention query/value projections, for peft `target_modules`.

    Separate q/v projections where the tower has them; else fused `qkv` Linears; else packed
    nn.MultiheadAttention modules (open_clip's own towers).
    """
    separate, fused, packed = set(), set(), set()
    for name, module in tower.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if isinstance(module, nn.Linear) and leaf in QUERY_VALUE_NAMES:
            separate.add(leaf)
        elif isinstance(module, nn.Linear) and leaf == "qkv":
            fused.add(leaf)
        elif isinstance(module, nn.MultiheadAttention):
            packed.add(leaf)
    return sorted(separate or fused or packed)


MLP_NAMES = ("fc1", "fc2", "c_fc", "c_proj")


def conv_layer_names(tower: nn.Module) -> list[str]:
    """Leaf names of the tower's convolutions that mix channels: its spatial (kernel > 1) ungrouped ones, or, in a
    depthwise-separable net (EfficientNet, MobileNet: grouped spatial convolutions, where the only ungrouped
    spatial one is the stem), its pointwise (1 x 1) ungrouped ones, which carry the blocks' channel mixing."""
    convs = [(name.rsplit(".", 1)[-1], m) for name, m in tower.named_modules() if isinstance(m, nn.Conv2d)]
    separable = any(m.groups > 1 and max(m.kernel_size) > 1 for _, m in convs)
    return sorted({name for name, m in convs if m.groups == 1 and (max(m.kernel_size) == 1) == separable})


def lora_layer_names(tower: nn.Module) -> list[str]:
    """peft `target_modules` for a tower: its attention projections (`attention_projection_names`),
    else the Linears of its MLP blocks (fc1 / fc2, c_fc / c_proj), else its convolutions that mix channels
    (`conv_layer_names`); [] when it has none of these (nothing LoRA should wrap)."""
    attention = attention_projection_names(tower)
    if attention:
        return attention
    mlp = {name.rsplit(".", 1)[-1] for name, m in tower.named_modules()
           if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in MLP_NAMES}
    return sorted(mlp) or conv_layer_names(tower)


class DualEncoder(ABC):
    """One image-text (or audio-text) dual encoder.

    Subclasses set `spec`, `modality` ("image" or "audio") and implement the abstract members.
    """

    spec: str
    modality: str = "image"
    canonical_size: int = 224  # side of the shared canonical probe images this model is fed from
    canonical_seconds: float | None = None  # audio: the clip length the model takes (None: any; it crops itself)

    # -- what a backend provides ----------------------------------------------------------------
    @property
    @abstractmethod
    def tower(self) -> nn.Module:
        """The image (or audio) tower: the module a fine-tune changes and an edit lands in."""

    @property
    def family(self) -> str:
        """The tower's architecture family, for results per (source family, target family): the class name of its
        backbone (a timm tower's `trunk`, e.g. "EfficientNet", "VisionTransformer"; else the tower's own class)."""
        trunk = getattr(self.tower, "trunk", None)
        return type(trunk if isinstance(trunk, nn.Module) else self.tower).__name__

    @property
    def embed_dim(self) -> int:
        """d, the width of the shared embedding space (what the edit site writes)."""
        return self.edit_site.out_dim

    @property
    @abstractmethod
    def edit_site(self) -> EditSite:
        """Where an operator folds in (one of platonic.edit's site types)."""

    def runs_in_forward(self, module: nn.Module) -> bool:
        """Whether the tower's forward pass on prepared inputs runs `module` of the tower: every module here; a
        model that feeds part of its tower cached activations says which part runs (ATT-FT and LoRA-ATT adapt
        only the attention that runs)."""
        return True

    @property
    def lora_target_modules(self) -> list[str]:
        """Names (peft `target_modules` suffixes) LoRA wraps in the tower: attention q/v projections
        where it has them, else its MLP Linears or convolutions (`lora_layer_names`)."""
        return lora_layer_names(self.tower)

    def canonical(self, probes) -> torch.Tensor:
        """Probes in any accepted form -> the canonical tensor whose digest identifies them.

        Images: (N, 3, S, S) uint8 with S = `canonical_size`, from a tensor, folder, files or PIL images.
        Audio: float (N, T) waveforms at 16 kHz (`models.audio.CANONICAL_RATE`), from a tensor, or a
        folder or files of sound (`models.audio.canonical_audio`: mono, resampled, padded to one length).
        """
        if self.modality == "audio":
            from .audio import as_canonical_audio

            return as_canonical_audio(probes)
        from .images import canonical_images

        return canonical_images(probes, self.canonical_size)

    @abstractmethod
    def prepare_probes(self, probes: torch.Tensor) -> torch.Tensor:
        """Canonical probes -> the tower's input batch (resize, normalise), on the model's device."""

    @abstractmethod
    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        """Tower inputs (B, ...) -> unnormalised embeddings (B, d)."""

    @abstractmethod
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Prompts -> unnormalised text embeddings (M, d), under inference mode."""

    @abstractmethod
    def architecture_id(self) -> str:
        """A string that names the architecture exactly (class, config), part of the fingerprint."""

    @abstractmethod
    def save(self, path, provenance: dict | None = None) -> None:
        """Write the model in its own library's format (see platonic.models.export)."""

    @property
    def module(self) -> nn.Module:
        """The whole model (both towers); its state dict is what the fingerprint hashes."""
        return self.tower

    @property
    def logit_scale(self) -> float:
        """The learned temperature s = exp(t) of the image-text logits s <f(x), g(p)>.

        open_clip and transformers (CLIP, SigLIP) keep t as `logit_scale`, CLAP as `logit_scale_a`.
        """
        for name in ("logit_scale", "logit_scale_a"):
            t = getattr(self.module, name, None)
            if isinstance(t, torch.Tensor):
                return float(t.detach().float().exp())
        raise InvalidInputError(f"{self.spec}: no learned logit scale found on the model; give FinetuneConfig.logit_scale")

    # -- shared behaviour -----------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.module.parameters()).dtype

    def weights_digest(self) -> str:
        """sha256 over the state dict (names, dtypes, shapes, bytes), in name order."""
        return tensors_digest(self.module.state_dict())

    def _architecture_key(self) -> str:
        return hashlib.sha256(self.architecture_id().encode()).hexdigest()[:16]

    @property
    def fingerprint(self) -> str:
        """Architecture + weights digest of the model's current weights (computed once, then cached).

        `platonic.transfer.apply` refreshes it after folding; code that changes weights by other
        means calls `invalidate_fingerprint()`.
        """
        cached = getattr(self, "_fingerprint", None)
        if cached is None:
            self.edit_site  # noqa: B018 - a lazily appended site adds weights; hash them whatever the call order
            cached = f"{self._architecture_key()}-{self.weights_digest()[:32]}"
            self._fingerprint = cached
        return cached

    @property
    def text_fingerprint(self) -> str:
        """Architecture + digest of the model's tensors outside its tower (the text tower, the logit head): what
        `encode_texts` can depend on, so the key of cached text embeddings (`EmbeddingCache.texts`). A fine-tune
        or an edit of the tower keeps it, so its prompts are not encoded again. A model whose `module` holds
        nothing outside its tower keys its texts on `fingerprint`. Computed once, reset with the fingerprint."""
        cached = getattr(self, "_text_fingerprint", None)
        if cached is None:
            inside = {id(t) for t in self.tower.state_dict(keep_vars=True).values()}
            outside = {name: t for name, t in self.module.state_dict(keep_vars=True).items() if id(t) not in inside}
            cached = f"{self._architecture_key()}-text-{tensors_digest(outside)[:32]}" if outside else self.fingerprint
            self._text_fingerprint = cached
        return cached

    def invalidate_fingerprint(self) -> None:
        self._fingerprint = None
        self._text_fingerprint = None

    def copy_for_new_weights(self) -> "DualEncoder":
        """A deep copy that is about to get other weights (a fine-tune): its fingerprints are reset."""
        other = copy.deepcopy(self)
        other._fingerprint = None
        other._text_fingerprint = None
        other._base_fingerprint = None
        other.export_base = None
        return other

    def adopt_export_record(self, record: dict | None) -> None:
        """Keep what the provenance of a platonic export says of the model it was edited from: the base's
        fingerprint (`export_base`; banks solved on that base apply to the export again, `transfer.target_match`)
        and the edits it holds (so that a further export lists them all). Loaders call it on an export."""
        if record and isinstance(record.get("base_fingerprint"), str):
            self.export_base = record["base_fingerprint"]
            self.edits = list(record.get("edits") or [])

    @property
    def origin_fingerprint(self) -> str:
        """The fingerprint of the model every edit started from: an export's base (`export_base`), else the
        weights before the first platonic edit in this session (`base_fingerprint`). An export records it."""
        return getattr(self, "export_base", None) or self.base_fingerprint

    @property
    def base_fingerprint(self) -> str:
        """The fingerprint before the first platonic edit: what operators for this model are solved for."""
        return getattr(self, "_base_fingerprint", None) or self.fingerprint

    def record_edit(self, entry: dict, base_fingerprint: str) -> None:
        """Note an edit that has just changed the weights: `entry` joins `edits` (what an export's card and
        provenance list), `base_fingerprint` (the model's `base_fingerprint` read *before* the change) stays
        the pre-edit fingerprint, and the fingerprint of the current weights is recomputed on next use."""
        edits = getattr(self, "edits", [])
        edits.append(entry)
        self.edits = edits
        self._base_fingerprint = base_fingerprint
        self.invalidate_fingerprint()

    def site_digest(self) -> str:
        """sha256 of the edit site's current tensors (cheap; changes with every fold)."""
        return tensors_digest(self.edit_site.tensors())

    @torch.inference_mode()
    def encode_probes(self, probes: torch.Tensor, batch_size: int = 64, progress: bool = False) -> ProbeEmbeddings:
        """Canonical probes (N, ...) -> ProbeEmbeddings(z (N, d), u (N, p) or None), batched.

        Forward passes run under the active autocast (`platonic.compute`; none by default); a lazy split is
        decoded by the active number of DataLoader workers. z and u come back as float32 on the CPU."""
        from ..compute import active, batches, slices
        from ..progress import track

        site = self.edit_site
        captured: list[torch.Tensor] = []
        hook = site.watch_inputs(captured)
        was_training = self.tower.training
        self.tower.eval()
        zs, settings, moved = [], active(), 0
        try:
            parts = slices(probes.shape[0], batch_size)
            decoded = batches(probes, parts)
            for _ in track(parts, description=f"encoding {probes.shape[0]} probes", enabled=progress):
                with settings.autocast(self.device):
                    zs.append(self._forward_tower(self.prepare_probes(next(decoded))).float().cpu())
                for i in range(moved, len(captured)):  # the head's inputs leave the GPU batch by batch
                    captured[i] = captured[i].float().cpu()
                moved = len(captured)
        finally:
            if hook is not None:
                hook.remove()
            self.tower.train(was_training)
        u = None
        if captured:
            u = torch.cat([c.float().cpu().reshape(-1, c.shape[-1]) for c in captured])
            if u.shape[0] != probes.shape[0]:
                raise EditSiteError(
                    f"{self.spec}: the head affine ran on {u.shape[0]} rows for {probes.shape[0]} probes; "
                    "it is not a per-image last map, so it cannot take a head edit"
                )
        return ProbeEmbeddings(z=torch.cat(zs), u=u)

    def encode_images(self, images, batch_size: int = 64, progress: bool = False) -> torch.Tensor:
        """Images (canonical tensor, folder, files or PIL images) -> unnormalised embeddings (N, d)."""
        if self.modality != "image":
            raise InvalidInputError(f"{self.spec} is an {self.modality}-text model; use encode_{self.modality}")
        return self.encode_probes(self.canonical(images), batch_size, progress).z

    def encode_audio(self, waveforms: torch.Tensor, batch_size: int = 16, progress: bool = False) -> torch.Tensor:
        """Float waveforms (N, samples) at the model's sampling rate -> unnormalised embeddings (N, d)."""
        if self.modality != "audio":
            raise InvalidInputError(f"{self.spec} is an {self.modality}-text model; use encode_{self.modality}s")
        return self.encode_probes(waveforms, batch_size, progress).z

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r}, d={self.embed_dim}, site={self.edit_site.describe()})"
