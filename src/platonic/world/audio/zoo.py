"""The audio zoo: four tiny audio-text dual encoders behind platonic's `DualEncoder` interface.

They differ the way the paper's CLAP models do (tower type, width, depth) and, like the image world's
zoo, sit on the frozen all-MiniLM-L6-v2 text encoder (`platonic.world.common.text`) with a text head of their own:

| name  | audio tower (`nets.py`)                        | front end                    | d   | text head | edit site            | LoRA targets |
|-------|------------------------------------------------|------------------------------|-----|-----------|----------------------|--------------|
| cnn   | log-mel CNN, widths 16/32/64                   | 64 mels, 25 ms / 10 ms       | 128 | mlp       | LinearSite (bias)    | conv2        |
| ast-s | transformer on 8x8 mel patches, w64 x 3, CLS   | 48 mels, 32 ms / 16 ms       | 128 | linear    | ProjectionParameter  | q_proj, v_proj |
| ast-l | transformer on 16x9 mel patches, w96 x 5, attention-pool head | 64 mels, 25 ms / 12.5 ms | 96 | mlp | HeadAffineSite(fc2) | q_proj, v_proj |
| wav   | 1-D conv on the 8 kHz waveform + 2 ConvNeXt-1d blocks, w96 | waveform at 8 kHz  | 96  | linear    | AppendedLinearSite   | pw1, pw2     |

All are pre-trained with the CLIP softmax loss on captions (`pretrain.py`); every canonical probe is a
16 kHz mono 1 s clip (N, 16000) float, which each model resamples to its own rate with
`canonical.resample` and turns into its own input (`prepare_probes`).

Model specs for `platonic.models.load_model` (the image world's `world:` backend dispatches them):
    world:audio/NAME               the pre-trained model
    world:audio/NAME/TASK          NAME after full fine-tuning of its audio tower on TASK
    world:audio/NAME/TASK/lora     NAME after the light (LoRA; rank 8 in the full profile) fine-tune on TASK
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Sequence

import torch
from torch import nn

from ...edit import AppendedLinearSite, EditSite, HeadAffineSite, LinearSite, ProjectionParameter
from ...errors import InvalidInputError
from ...models.base import DualEncoder
from ..common.heads import LogitHead, TextHead
from ..common.text import SENTENCE_DIM, SENTENCE_MODEL, SentenceEncoder
from ..common.weights import load_weights, save_weights
from . import canonical
from .nets import TOWERS, log_mel


@dataclass(frozen=True)
class AudioModelSpec:
    """Everything that defines an audio zoo model's architecture and pre-training recipe.

    frontend: {"kind": "mel", "n_fft", "hop", "n_mels"} or {"kind": "wave"}; `rate` the model's sampling rate.
    """

    name: str
    arch: str
    arch_kwargs: dict
    embed_dim: int
    rate: int
    frontend: dict
    text: str
    loss: str
    site: str  # "proj" | "linear" | "head" | "appended"
    lora_targets: tuple[str, ...]
    seed: int
    mixture: dict = field(default_factory=dict)  # pre-training set -> sampling weight
    name_rate: float = 0.8
    hint_rate: float = 0.15
    image_orthogonality: float = 0.0  # weight of world.common.losses.set_overlap on the audio embeddings
    prompt_orthogonality: float = 0.0  # weight of world.common.losses.prompt_overlap on class-naming captions

    def architecture(self) -> dict:
        return {"arch": self.arch, "arch_kwargs": self.arch_kwargs, "embed_dim": self.embed_dim, "rate": self.rate,
                "frontend": self.frontend, "text": self.text, "loss": self.loss, "site": self.site,
                "text_backbone": SENTENCE_MODEL}

    def frames(self) -> int:
        """Frames of the mel front end for one canonical clip (1 + samples at `rate` // hop)."""
        return 1 + (canonical.CLIP_SAMPLES * self.rate // canonical.SAMPLE_RATE) // self.frontend["hop"]


def _mel(n_fft: int, hop: int, n_mels: int) -> dict:
    return {"kind": "mel", "n_fft": n_fft, "hop": hop, "n_mels": n_mels}


_ORTH = {"image_orthogonality": 4.0, "prompt_orthogonality": 2.0}

SPECS: dict[str, AudioModelSpec] = {
    s.name: s
    for s in (
        AudioModelSpec("cnn", "mel_cnn", {"widths": (16, 32, 64)}, 128, 16000, _mel(400, 160, 64), "mlp", "clip", "linear",
                       ("conv2",), seed=21, name_rate=0.8, **_ORTH),
        AudioModelSpec("ast-s", "mel_vit", {"n_mels": 48, "frames": 63, "patch": (8, 8), "width": 64, "depth": 3, "heads": 4},
                       128, 16000, _mel(512, 256, 48), "linear", "clip", "proj", ("q_proj", "v_proj"), seed=22,
                       mixture={"digits": 1.5, "commands": 1.5, "colours": 1.5}, name_rate=0.85, **_ORTH),
        AudioModelSpec("ast-l", "mel_map", {"n_mels": 64, "frames": 81, "patch": (16, 9), "width": 96, "depth": 5, "heads": 4},
                       96, 16000, _mel(400, 200, 64), "mlp", "clip", "head", ("q_proj", "v_proj"), seed=23,
                       mixture={"instrument": 1.5, "pitch": 1.5, "chord": 1.5}, name_rate=0.9, **_ORTH),
        AudioModelSpec("wav", "wave_conv", {"stem": ((32, 10, 5), (64, 8, 4), (96, 4, 4)), "depth": 2}, 96, 8000,
                       {"kind": "wave"}, "linear", "clip", "appended", ("pw1", "pw2"), seed=24,
                       mixture={"beats": 1.5, "noise": 1.5, "tempo": 1.5}, name_rate=0.9, **_ORTH),
    )
}
MODEL_NAMES = tuple(SPECS)


class AudioWorldDualEncoder(nn.Module):
    """Audio tower, text head and logit head of one audio zoo model (what the fingerprint hashes)."""

    def __init__(self, spec: AudioModelSpec):
        super().__init__()
        kwargs = dict(spec.arch_kwargs)
        kwargs["embed_dim"] = spec.embed_dim
        self.audio = TOWERS[spec.arch](**kwargs)
        self.text = TextHead(spec.text, SENTENCE_DIM, spec.embed_dim)
        self.logit = LogitHead(spec.loss)


def build_module(spec: AudioModelSpec, seed: int) -> AudioWorldDualEncoder:
    """Freshly initialised module, deterministic under `seed`."""
    torch.manual_seed(seed)
    return AudioWorldDualEncoder(spec)


def check_clips(clips) -> torch.Tensor:
    """Refuse anything but canonical clips: a float tensor (N, 16000), 16 kHz mono 1 s."""
    if not isinstance(clips, torch.Tensor) or clips.ndim != 2 or not clips.is_floating_point() \
            or clips.shape[1] != canonical.CLIP_SAMPLES:
        shape = tuple(clips.shape) if isinstance(clips, torch.Tensor) else type(clips).__name__
        raise InvalidInputError(f"audio world inputs are float waveforms (N, {canonical.CLIP_SAMPLES}) at 16 kHz, 1 s "
                                f"(canonical.resample to 16 kHz first); got {shape}")
    return clips


def model_inputs(spec: AudioModelSpec, clips: torch.Tensor) -> torch.Tensor:
    """Canonical clips (N, 16000) float -> the tower's input: (N, 1, n_mels, frames) log-mel or (N, 1, T') waveform
    at the model's rate (float32, CPU)."""
    x = canonical.resample(check_clips(clips).detach().float().cpu(), canonical.SAMPLE_RATE, spec.rate)
    fe = spec.frontend
    if fe["kind"] == "wave":
        return x.unsqueeze(1)
    return log_mel(x, spec.rate, fe["n_fft"], fe["hop"], fe["n_mels"])


class AudioWorldModel(DualEncoder):
    """An audio zoo model as a `DualEncoder` (modality "audio"). `module` holds audio tower, text head, logit head."""

    modality = "audio"
    canonical_seconds = canonical.CLIP_SECONDS  # the towers take exactly one canonical clip (`check_clips`)

    def __init__(self, spec: AudioModelSpec, module: AudioWorldDualEncoder, spec_string: str | None = None):
        self.model_spec = spec
        self._module = module
        self.spec = spec_string or f"world:audio/{spec.name}"
        self._site: EditSite | None = None

    @property
    def tower(self) -> nn.Module:
        return self._module.audio

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
        """Canonical clips (N, 16000) float -> the tower's input batch on the model's device and dtype."""
        return model_inputs(self.model_spec, probes).to(device=self.device, dtype=self.dtype)

    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.tower(inputs)

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Prompts -> (M, d) unnormalised embeddings: frozen MiniLM, then this model's text head."""
        s = SentenceEncoder.shared().encode(list(texts)).to(device=self.device, dtype=self.dtype)
        return self._module.text(s)

    def architecture_id(self) -> str:
        return "platonic.world.audio/" + json.dumps(self.model_spec.architecture(), sort_keys=True)

    @property
    def logit_scale(self) -> float:
        return float(self._module.logit.scale)

    def save(self, path, provenance: dict | None = None) -> None:
        """All weights as one safetensors file with the spec and provenance as JSON metadata."""
        save_weights(path, self._module.state_dict(), {"spec": spec_to_json(self.model_spec), "provenance": provenance or {}})


def spec_to_json(spec: AudioModelSpec) -> dict:
    return json.loads(json.dumps(asdict(spec)))


def model_from_state(spec: AudioModelSpec, state: dict, spec_string: str | None = None, device="cpu",
                     dtype=None) -> AudioWorldModel:
    module = AudioWorldDualEncoder(spec)
    module.load_state_dict(state)
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    module.to(device=device, dtype=dtype) if dtype is not None else module.to(device=device)
    return AudioWorldModel(spec, module, spec_string)


__all__ = ["AudioModelSpec", "AudioWorldDualEncoder", "AudioWorldModel", "MODEL_NAMES", "SPECS", "build_module",
           "check_clips", "load_weights", "model_from_state", "model_inputs", "save_weights", "spec_to_json"]
