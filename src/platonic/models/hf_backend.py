"""transformers backend: CLIPModel (CLIP, MetaCLIP, OpenCLIP exports), SiglipModel, Siglip2Model, ClapModel.

Specs: `hf:ORG/NAME` (weights through transformers' own hub cache) or a local `save_pretrained`
directory. Embeddings are taken *before* any normalisation (CLAP's get_audio_features normalises, so
the towers are called directly), following one `HFLayout` per model class: which submodules encode,
which project, how probes become inputs. Exported models are `save_pretrained` directories.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from ..edit import AppendedLinearSite, EditSite
from ..errors import InvalidInputError
from . import register_backend
from .base import DualEncoder
from .images import to_model_input
from .sites import HF_RULES, SiteRule, discover_site

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
HALF = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class HFLayout:
    """How one transformers model class is wired: tower/projection attributes, input preparation."""

    modality: str
    tower: str  # encoder submodule of the probes' modality
    tower_projection: str | None  # applied to the tower's pooler_output, if any
    text: str
    text_projection: str | None
    mean: tuple[float, ...] = OPENAI_MEAN
    std: tuple[float, ...] = OPENAI_STD
    text_padding: str | bool = True  # "max_length" where the model was trained that way
    naflex: bool = False  # SigLIP2: patchified pixels + attention mask + spatial shapes


LAYOUTS = {
    "CLIPModel": HFLayout("image", "vision_model", "visual_projection", "text_model", "text_projection"),
    "SiglipModel": HFLayout("image", "vision_model", None, "text_model", None, HALF, HALF, "max_length"),
    "Siglip2Model": HFLayout("image", "vision_model", None, "text_model", None, HALF, HALF, "max_length", naflex=True),
    "ClapModel": HFLayout("audio", "audio_model", "audio_projection", "text_model", "text_projection"),
}


class HFEncoder(DualEncoder):
    """A transformers dual encoder behind the DualEncoder interface.

    `tokenizer` is a transformers tokenizer or any callable texts -> {"input_ids", "attention_mask"};
    `processor` supplies the image processor (mean/std) or the CLAP feature extractor when given.
    """

    def __init__(self, model: torch.nn.Module, spec: str, tokenizer=None, processor=None, edit_site: str | None = None):
        name = type(model).__name__
        if name not in LAYOUTS:
            raise InvalidInputError(f"{spec}: transformers class {name} is not supported; supported: {', '.join(LAYOUTS)}")
        self.model = model.eval()
        self.spec = spec
        self.layout = LAYOUTS[name]
        self.modality = self.layout.modality
        self._tokenizer = tokenizer
        self._processor = processor
        self.site_rule: SiteRule | None = None
        if edit_site == "append":
            self._site: EditSite = AppendedLinearSite.install(self.model, self.layout.tower_projection or self.layout.tower, self._text_dim())
        elif edit_site is None:
            self._site, self.site_rule = discover_site(self.model, HF_RULES)
        else:
            raise InvalidInputError(f"edit_site must be None (discover) or 'append'; got {edit_site!r}")

    def _text_dim(self) -> int:
        cfg = self.model.config
        return int(getattr(cfg, "projection_dim", None) or cfg.text_config.hidden_size)

    # -- structure --------------------------------------------------------------------------------
    @property
    def tower(self):
        return getattr(self.model, self.layout.tower)

    @property
    def module(self):
        return self.model

    @property
    def edit_site(self) -> EditSite:
        return self._site

    def architecture_id(self) -> str:
        return f"transformers/{type(self.model).__name__}/{self.model.config.to_json_string(use_diff=False)}"

    # -- probes -------------------------------------------------------------------------------------
    @property
    def image_size(self) -> tuple[int, int]:
        size = self.model.config.vision_config.image_size
        return (size, size) if isinstance(size, int) else tuple(size)

    def _mean_std(self):
        proc = getattr(self._processor, "image_processor", self._processor)
        mean, std = getattr(proc, "image_mean", None), getattr(proc, "image_std", None)
        return (mean or self.layout.mean), (std or self.layout.std)

    def prepare_probes(self, probes: torch.Tensor):
        if self.modality == "audio":
            return self._prepare_audio(probes)
        mean, std = self._mean_std()
        if not self.layout.naflex:
            return {"pixel_values": to_model_input(probes, self.image_size, mean, std, self.device, self.dtype)}
        return self._naflex_inputs(probes, mean, std)

    def _naflex_inputs(self, probes, mean, std):
        """SigLIP2: resize square probes to the largest patch grid within max patches, then patchify.

        pixel_values (B, n, p * p * C) in (row, column) patch order with channels last inside a patch,
        as transformers' Siglip2ImageProcessor lays them out.
        """
        cfg = self.model.config.vision_config
        p = cfg.patch_size
        side = int(math.isqrt(cfg.num_patches))
        x = to_model_input(probes, (side * p, side * p), mean, std, self.device, self.dtype)
        b, c = x.shape[:2]
        patches = x.reshape(b, c, side, p, side, p).permute(0, 2, 4, 3, 5, 1).reshape(b, side * side, p * p * c)
        return {
            "pixel_values": patches,
            "pixel_attention_mask": torch.ones(b, side * side, dtype=torch.long, device=x.device),
            "spatial_shapes": torch.tensor([[side, side]] * b, dtype=torch.long, device=x.device),
        }

    def _prepare_audio(self, probes: torch.Tensor):
        """Waveforms (N, samples) at the extractor's rate -> CLAP log-mel input features.

        Clips longer than the extractor's window are cut to its first `max_length_s` seconds here, so
        that the extractor's random crop never runs (same probes, same features).
        """
        if probes.ndim != 2 or not probes.is_floating_point():
            raise InvalidInputError(f"audio probes must be float waveforms (N, samples); got {probes.dtype} {tuple(probes.shape)}")
        extractor = self.feature_extractor
        probes = probes[:, : int(extractor.nb_max_samples)]
        fusion = bool(getattr(self.model.config.audio_config, "enable_fusion", False))
        feats = extractor([w.numpy() for w in probes.float().cpu()], sampling_rate=extractor.sampling_rate,
                          truncation="fusion" if fusion else "rand_trunc", return_tensors="pt")
        return {"input_features": feats["input_features"].to(self.device, self.dtype),
                "is_longer": feats["is_longer"].to(self.device)}

    @property
    def feature_extractor(self):
        fe = getattr(self._processor, "feature_extractor", self._processor)
        if fe is None:
            from transformers import ClapFeatureExtractor

            fe = ClapFeatureExtractor()
            self._processor = fe
        return fe

    def _forward_tower(self, inputs) -> torch.Tensor:
        out = self.tower(**inputs).pooler_output
        if self.layout.tower_projection:
            out = getattr(self.model, self.layout.tower_projection)(out)
        return out

    # -- text ---------------------------------------------------------------------------------------
    @property
    def tokenizer(self):
        if self._tokenizer is None:
            proc = self._processor
            self._tokenizer = getattr(proc, "tokenizer", None)
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.spec.removeprefix("hf:"))
        return self._tokenizer

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        tok = self.tokenizer
        if getattr(tok, "model_input_names", None) is not None:  # a transformers tokenizer
            max_len = getattr(self.model.config.text_config, "max_position_embeddings", None)
            batch = tok(list(texts), padding=self.layout.text_padding, truncation=True, max_length=max_len, return_tensors="pt")
        else:
            batch = tok(list(texts))
        kwargs = {k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        if self.layout.naflex or type(self.model).__name__ == "SiglipModel":
            kwargs.pop("attention_mask", None)  # SigLIP text towers were trained without a mask
        out = getattr(self.model, self.layout.text)(**kwargs).pooler_output
        if self.layout.text_projection:
            out = getattr(self.model, self.layout.text_projection)(out)
        return out.float().cpu()

    # -- export -------------------------------------------------------------------------------------
    def save(self, path, provenance: dict | None = None) -> Path:
        """`save_pretrained` directory (AutoModel.from_pretrained loads it) plus platonic_provenance.json.

        Written to a temporary directory beside `path`, then renamed into place.
        """
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise InvalidInputError(f"{path} exists and is not a directory; transformers models are saved as directories")
        if isinstance(self._site, AppendedLinearSite):
            raise InvalidInputError(
                f"{self.spec}: the edit lives in an appended linear that {type(self.model).__name__} cannot load; "
                "export is only possible through the model's own edit site"
            )
        parent = path.parent if str(path.parent) else Path(".")
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=parent))
        try:
            self.model.save_pretrained(tmp, safe_serialization=True)
            record = {"spec": self.spec, **(provenance or {})}
            (tmp / "platonic_provenance.json").write_text(json.dumps(record, indent=2, sort_keys=True))
            (tmp / "README.md").write_text(_model_card(self.spec, record))
            if path.exists():
                shutil.rmtree(path)
            tmp.rename(path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return path


def _model_card(spec: str, record: dict) -> str:
    return (f"---\nlibrary_name: transformers\ntags: [platonic]\n---\n# Edited with platonic\n\n"
            f"Base model: `{spec}`.\n\n```json\n{json.dumps(record, indent=2, sort_keys=True)}\n```\n")


def load_hf(rest: str, device="cpu", dtype=None, tokenizer=None, processor=None, edit_site: str | None = None) -> HFEncoder:
    """Load `hf:<rest>` or a local directory through transformers' own loaders."""
    from transformers import AutoConfig, AutoModel, AutoProcessor

    spec = rest if Path(rest).is_dir() else f"hf:{rest}"
    try:
        config = AutoConfig.from_pretrained(rest)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot load {spec}: {exc}") from None
    model = AutoModel.from_pretrained(rest, config=config, dtype=dtype) if dtype else AutoModel.from_pretrained(rest, config=config)
    if processor is None:
        try:
            processor = AutoProcessor.from_pretrained(rest)
        except (OSError, ValueError):
            processor = None  # mean/std fall back to the family's defaults
    return HFEncoder(model.to(device), spec, tokenizer=tokenizer, processor=processor, edit_site=edit_site)


def from_config(config, spec: str = "hf:random", tokenizer: Callable | None = None, seed: int = 0, **kwargs) -> HFEncoder:
    """An HFEncoder with random weights from a transformers config (tests, no download)."""
    from transformers import AutoModel

    torch.manual_seed(seed)
    return HFEncoder(AutoModel.from_config(config), spec, tokenizer=tokenizer, **kwargs)


register_backend("hf", load_hf)
