"""The zoo: six heterogeneous tiny dual encoders behind platonic's `DualEncoder` interface.

| name      | image tower                  | input | d   | text head | loss    | edit site           | LoRA targets        |
|-----------|------------------------------|-------|-----|-----------|---------|---------------------|---------------------|
| vit-a     | ViT w64 x4, CLS, x @ proj    | 32    | 128 | linear    | CLIP    | ProjectionParameter | q_proj, v_proj      |
| vit-b     | same as vit-a                | 32    | 128 | linear    | CLIP    | ProjectionParameter | q_proj, v_proj      |
| resnet    | ResNet-like, GroupNorm       | 24    | 144 | mlp       | CLIP    | LinearSite (bias)   | conv2 (conv LoRA)   |
| convnext  | ConvNeXt-like                | 24    | 128 | linear    | CLIP    | LinearSite (no bias)| pw1, pw2            |
| map-vit   | ViT w96 x3 + residual MAP head | 28  | 96  | mlp       | SigLIP  | HeadAffineSite(fc2) | q_proj, v_proj      |
| mixer     | MLP-Mixer w112, ends in LayerNorm | 32 | 112 | mlp      | CLIP    | AppendedLinearSite  | fc1, fc2            |

vit-a / vit-b are the same architecture with different pre-training (seed, data mixture, caption
naming rate): the pair for the weight-space baselines. Text towers share the frozen
all-MiniLM-L6-v2 (`platonic.world.common.text`) and differ in their trainable head.

Model specs for `platonic.models.load_model`:
    world:NAME               the pre-trained model
    world:NAME/TASK          NAME after full fine-tuning of its image tower on TASK
    world:NAME/TASK/lora     NAME after the light (LoRA rank 4) fine-tune on TASK
The world is built on first use (profile from $PLATONIC_WORLD_PROFILE, default "full"); the loader
and its registration live in `platonic.world.backend`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ...edit import AppendedLinearSite, EditSite, HeadAffineSite, LinearSite, ProjectionParameter
from ...errors import InvalidInputError
from ...models.base import DualEncoder
from ..common.heads import LogitHead, TextHead
from ..common.text import SENTENCE_DIM, SENTENCE_MODEL, SentenceEncoder
from ..common.weights import save_weights
from .data import CANONICAL_SIZE
from .nets import TOWERS

PIXEL_MEAN, PIXEL_STD = 0.5, 0.25


@dataclass(frozen=True)
class ModelSpec:
    """Everything that defines a zoo model's architecture and pre-training recipe."""

    name: str
    arch: str
    arch_kwargs: dict
    embed_dim: int
    input_size: int
    text: str
    loss: str
    site: str  # "proj" | "linear" | "head" | "appended"
    lora_targets: tuple[str, ...]
    seed: int
    mixture: dict = field(default_factory=dict)  # dataset -> sampling weight in pre-training
    name_rate: float = 0.1  # fraction of captions that name the class
    hint_rate: float = 0.4  # fraction that name a group / domain
    # weights of the pre-training terms that put different data sets in different directions
    # (world/common/losses.py: set_overlap on images, prompt_overlap on class-name captions); 0 = off
    image_orthogonality: float = 0.0
    prompt_orthogonality: float = 0.0
    # weight of the term that spreads a batch's image embeddings over more directions (train.anisotropy)
    isotropy: float = 0.0

    def architecture(self) -> dict:
        return {"arch": self.arch, "arch_kwargs": self.arch_kwargs, "embed_dim": self.embed_dim,
                "input_size": self.input_size, "text": self.text, "loss": self.loss, "site": self.site,
                "text_backbone": SENTENCE_MODEL}


_GLYPH_HEAVY = {"digits": 2.0, "upper": 2.0, "lower": 2.0, "symbols": 1.5}
_PROC_HEAVY = {"shapes": 2.0, "colours": 2.0, "counting": 2.0, "textures": 2.0}
_VIT = {"img": 32, "patch": 4, "width": 64, "depth": 4, "heads": 4}

# Every model is pre-trained with both orthogonality terms (train.py) and embeds in 96-144 dimensions, about
# the world's 104 task prompts or more, so that each task's prompts can span their own subspace: at d = 64
# a task's prompt span held 43-83 % of the other tasks' class directions, and every operator moved the
# other tasks as much as its own (docs/world.md, "Putting the tasks in different directions").
_ORTH = {"image_orthogonality": 10.0, "prompt_orthogonality": 3.0}

SPECS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        ModelSpec("vit-a", "vit", _VIT, 128, 32, "linear", "clip", "proj", ("q_proj", "v_proj"), seed=11, name_rate=0.80,
                  **_ORTH),
        ModelSpec("vit-b", "vit", _VIT, 128, 32, "linear", "clip", "proj", ("q_proj", "v_proj"), seed=12,
                  mixture=_GLYPH_HEAVY, name_rate=0.85, **_ORTH),
        ModelSpec("resnet", "resnet", {"img": 24, "widths": (24, 48, 96)}, 144, 24, "mlp", "clip", "linear", ("conv2",),
                  seed=13, mixture=_PROC_HEAVY, name_rate=0.60, **_ORTH),
        # lighter terms: at 10 / 3 the ConvNeXt's zero-shot fell to 25.5 % and its fine-tunes barely learned; the
        # isotropy term lifts its participation ratio over 16 (14.1 without it) with zero-shot intact
        ModelSpec("convnext", "convnext", {"img": 24, "widths": (48, 96), "depths": (2, 2)}, 128, 24, "linear", "clip",
                  "linear", ("pw1", "pw2"), seed=14, mixture={"fashion": 2.0}, name_rate=1.0,
                  image_orthogonality=6.0, prompt_orthogonality=2.0, isotropy=0.2),
        # the sigmoid loss learns more slowly in this short pre-training (docs/lab/2026-12-02-world-levers-and-effective-rank.md): every caption names
        # the class, the tower is 96 wide (at 128 its zero-shot fell under 25 %) and the terms are lighter
        ModelSpec("map-vit", "map_vit", {"img": 28, "patch": 4, "width": 96, "depth": 3, "heads": 4}, 96, 28, "mlp",
                  "siglip", "head", ("q_proj", "v_proj"), seed=15, name_rate=1.0,
                  image_orthogonality=4.0, prompt_orthogonality=1.5),
        ModelSpec("mixer", "mixer", {"img": 32, "patch": 4, "width": 112, "depth": 4}, 112, 32, "mlp", "clip", "appended",
                  ("fc1", "fc2"), seed=16, mixture={"lower": 1.5, "counting": 1.5}, name_rate=0.80, **_ORTH),
    )
}
MODEL_NAMES = tuple(SPECS)


class WorldDualEncoder(nn.Module):
    """Both towers and the logit head of one zoo model (what the fingerprint hashes)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        kwargs = dict(spec.arch_kwargs)
        kwargs["embed_dim"] = spec.embed_dim
        self.image = TOWERS[spec.arch](**kwargs)
        self.text = TextHead(spec.text, SENTENCE_DIM, spec.embed_dim)
        self.logit = LogitHead(spec.loss)


def build_module(spec: ModelSpec, seed: int) -> WorldDualEncoder:
    """Freshly initialised module, deterministic under `seed`."""
    torch.manual_seed(seed)
    return WorldDualEncoder(spec)


def normalise_pixels(images: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 (N, 3, S, S) -> float (N, 3, size, size): bilinear resize, then (x - 0.5) / 0.25."""
    x = images.float().div_(255.0)
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=False)
    return (x - PIXEL_MEAN) / PIXEL_STD


class WorldModel(DualEncoder):
    """A zoo model as a `DualEncoder`. `module` holds image tower, text head and logit head."""

    modality = "image"
    canonical_size = CANONICAL_SIZE

    def __init__(self, spec: ModelSpec, module: WorldDualEncoder, spec_string: str | None = None):
        self.model_spec = spec
        self._module = module
        self.spec = spec_string or f"world:{spec.name}"
        self._site: EditSite | None = None

    # -- DualEncoder ---------------------------------------------------------------------------
    @property
    def tower(self) -> nn.Module:
        return self._module.image

    @property
    def module(self) -> nn.Module:
        return self._module

    @property
    def embed_dim(self) -> int:
        return self.model_spec.embed_dim

    @property
    def edit_site(self) -> EditSite:
        if self._site is None:
            t, kind = self.tower, self.model_spec.site
            if kind == "proj":
                self._site = ProjectionParameter(t, "proj")
            elif kind == "linear":
                self._site = LinearSite(t.head)
            elif kind == "head":
                self._site = HeadAffineSite(t.head.fc2)
            elif kind == "appended":
                self._site = AppendedLinearSite.install(t, "out", self.embed_dim)
            else:  # pragma: no cover
                raise InvalidInputError(f"unknown edit site kind {kind!r}")
        return self._site

    @property
    def lora_target_modules(self) -> list[str]:
        return list(self.model_spec.lora_targets)

    def prepare_probes(self, probes: torch.Tensor) -> torch.Tensor:
        """Canonical uint8 (N, 3, 32, 32) -> normalised float (N, 3, s, s) at the model's input size s."""
        if probes.ndim != 4 or probes.shape[1] != 3:
            raise InvalidInputError(f"world probes are (N, 3, H, W) uint8 images; got shape {tuple(probes.shape)}")
        return normalise_pixels(probes, self.model_spec.input_size).to(device=self.device, dtype=self.dtype)

    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.tower(inputs)

    def sentence_embeddings(self, texts: Sequence[str]) -> torch.Tensor:
        return SentenceEncoder.shared().encode(list(texts))

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Prompts -> (M, d) unnormalised embeddings: frozen MiniLM, then this model's text head."""
        s = self.sentence_embeddings(texts).to(device=self.device, dtype=self.dtype)
        return self._module.text(s)

    def architecture_id(self) -> str:
        return "platonic.world/" + json.dumps(self.model_spec.architecture(), sort_keys=True)

    @property
    def logit_scale(self) -> float:
        return float(self._module.logit.scale)

    def save(self, path, provenance: dict | None = None) -> None:
        """Write all weights as one safetensors file with the spec and provenance as JSON metadata."""
        save_weights(path, self._module.state_dict(), {"spec": spec_to_json(self.model_spec), "provenance": provenance or {}})


# -- storage --------------------------------------------------------------------------------------

def spec_to_json(spec: ModelSpec) -> dict:
    d = asdict(spec)
    d["lora_targets"] = list(spec.lora_targets)
    return d


def model_from_state(spec: ModelSpec, state: dict, spec_string: str | None = None, device="cpu", dtype=None) -> WorldModel:
    module = WorldDualEncoder(spec)
    module.load_state_dict(state)
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    module.to(device=device, dtype=dtype) if dtype is not None else module.to(device=device)
    return WorldModel(spec, module, spec_string)
