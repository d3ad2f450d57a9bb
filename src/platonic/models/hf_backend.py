"""transformers backend: CLIPModel (CLIP, MetaCLIP, OpenCLIP exports), SiglipModel, Siglip2Model, ClapModel.

Specs: `hf:ORG/NAME[@REV]` (weights through transformers' own hub cache, at revision REV: a commit,
tag or branch) or a local `save_pretrained` directory. Embeddings are taken *before* any normalisation (CLAP's get_audio_features normalises, so
the towers are called directly), following one `HFLayout` per model class: which submodules encode,
which project, how probes become inputs. Exported models are `save_pretrained` directories.
"""

from __future__ import annotations

import json
import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from ..edit import AppendedLinearSite, EditSite
from ..errors import InvalidInputError
from ..layouts import PROVENANCE_FILE, is_transformers_export, read_json
from . import register_backend
from .base import DualEncoder
from .constants import HALF, OPENAI_MEAN, OPENAI_STD
from .images import to_model_input
from .sites import HF_RULES, SiteRule, discover_site



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
        """The class and its whole config, without what names where it was loaded from (`_name_or_path`: a
        bank solved on models/clip must apply to ./models/clip, its absolute path or a copy) or which
        library version wrote it (keys starting with "_", `transformers_version`)."""
        config = path_free(self.model.config.to_dict())
        return f"transformers/{type(self.model).__name__}/{json.dumps(config, sort_keys=True, default=str)}"

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
        """Canonical waveforms (N, T) at 16 kHz -> resampled to the extractor's rate (CLAP: 48 kHz) ->
        CLAP log-mel input features.

        Clips longer than the extractor's window are cut to its first `max_length_s` seconds here, so
        that the extractor's random crop never runs (same probes, same features).
        """
        from .audio import CANONICAL_RATE, resample

        if probes.ndim != 2 or not probes.is_floating_point():
            raise InvalidInputError(f"audio probes must be float waveforms (N, samples); got {probes.dtype} {tuple(probes.shape)}")
        extractor = self.feature_extractor
        probes = resample(probes.float().cpu(), CANONICAL_RATE, int(extractor.sampling_rate))
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

                name, revision = hub_revision(self.spec.removeprefix("hf:"))
                self._tokenizer = AutoTokenizer.from_pretrained(name, revision=revision)
        return self._tokenizer

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        tok = self.tokenizer
        if getattr(tok, "model_input_names", None) is not None:  # a transformers tokenizer
            max_len = getattr(self.model.config.text_config, "max_position_embeddings", None)
            batch = tok(list(texts), padding=self.layout.text_padding, truncation=True, max_length=max_len, return_tensors="pt")
        else:
            batch = tok(list(texts))
        check_token_ids(self.spec, tok, list(texts), batch["input_ids"], batch.get("attention_mask"))
        kwargs = {k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        if self.layout.naflex or type(self.model).__name__ == "SiglipModel":
            kwargs.pop("attention_mask", None)  # SigLIP text towers were trained without a mask
        out = getattr(self.model, self.layout.text)(**kwargs).pooler_output
        if self.layout.text_projection:
            out = getattr(self.model, self.layout.text_projection)(out)
        return out.float().cpu()

    # -- export -------------------------------------------------------------------------------------
    def save(self, path, provenance: dict | None = None, overwrite: bool = False) -> Path:
        """A `save_pretrained` directory that transformers alone loads: the model, its tokenizer and its
        image processor (CLAP: feature extractor), platonic_provenance.json and a model card README.md
        (`models.card`: huggingface_hub's ModelCard, `base_model:` the hub repo of the spec where it has one).

        Written to a temporary directory beside `path` and swapped in atomically. An existing `path` is
        replaced only when it is a previous platonic transformers export, or with `overwrite`; a tokenizer
        that transformers cannot save (a plain callable) is left out, with a warning.
        """
        from ..storage import atomic_directory
        from .card import README, model_card

        if isinstance(self._site, AppendedLinearSite):
            raise InvalidInputError(
                f"{self.spec}: the edit lives in an appended linear that {type(self.model).__name__} cannot load; "
                "export is only possible through the model's own edit site"
            )
        record = {"spec": self.spec, **(provenance or {})}

        def write(tmp: Path) -> None:
            with library_progress():
                self.model.save_pretrained(tmp, safe_serialization=True)
            record["saved"] = self._save_preprocessing(tmp, Path(path))
            (tmp / PROVENANCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))
            (tmp / README).write_text(model_card(self.spec, record, "transformers"))

        return atomic_directory(path, write, replaceable=is_transformers_export, overwrite=overwrite,
                                what=f"platonic transformers export (a directory with {PROVENANCE_FILE})")

    def _save_preprocessing(self, directory: Path, final: Path) -> list[str]:
        """Save the tokenizer and the image processor / feature extractor beside the weights; returns what was saved."""
        saved = []
        processor = self._processor
        if processor is not None and hasattr(processor, "tokenizer") and hasattr(processor, "save_pretrained"):
            processor.save_pretrained(str(directory))  # a ProcessorMixin: tokenizer and image processor together
            return ["processor"]
        try:
            tokenizer = self.tokenizer
        except (OSError, ValueError):
            tokenizer = None
        if hasattr(tokenizer, "save_pretrained"):
            tokenizer.save_pretrained(str(directory))
            saved.append("tokenizer")
        else:
            warnings.warn(f"{self.spec}: its tokenizer ({type(tokenizer).__name__}) is not a transformers tokenizer, so "
                          f"the export {final} has none; load it with tokenizer=... (or copy the base "
                          "model's tokenizer files into it)", stacklevel=4)
        inputs = self._input_processor()
        if inputs is not None:
            inputs.save_pretrained(str(directory))
            saved.append(type(inputs).__name__)
        return saved

    def _input_processor(self):
        """The image processor (or CLAP feature extractor) describing what platonic feeds the tower."""
        proc = getattr(self._processor, "image_processor", None) or getattr(self._processor, "feature_extractor", None)
        proc = proc or (self._processor if hasattr(self._processor, "save_pretrained") else None)
        if proc is not None:
            return proc
        if self.modality == "audio":
            return self.feature_extractor
        import transformers

        mean, std = (list(v) for v in self._mean_std())
        name = type(self.model).__name__
        if name == "Siglip2Model":
            cfg = self.model.config.vision_config
            return transformers.Siglip2ImageProcessor(patch_size=cfg.patch_size, max_num_patches=cfg.num_patches,
                                                      image_mean=mean, image_std=std)
        h, w = self.image_size
        if name == "SiglipModel":
            return transformers.SiglipImageProcessor(size={"height": h, "width": w}, image_mean=mean, image_std=std)
        return transformers.CLIPImageProcessor(size={"shortest_edge": h}, crop_size={"height": h, "width": w},
                                               image_mean=mean, image_std=std)


@contextmanager
def library_progress():
    """transformers' own progress bars (loading, writing shards) follow platonic's: off under PLATONIC_QUIET."""
    from transformers.utils import logging as hf_logging

    from ..progress import progress_enabled

    was = hf_logging.is_progress_bar_enabled()
    if not progress_enabled():
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def path_free(config):
    """A transformers config dict (and its sub-configs) without `_name_or_path`, `transformers_version` and the
    other "_" keys: what the architecture is, not where or by which version it was saved."""
    if isinstance(config, dict):
        return {k: path_free(v) for k, v in config.items()
                if not (isinstance(k, str) and (k.startswith("_") or k == "transformers_version"))}
    if isinstance(config, (list, tuple)):
        return [path_free(v) for v in config]
    return config


def check_token_ids(spec: str, tokenizer, texts: list[str], input_ids, attention_mask=None) -> None:
    """Refuse prompts the tokenizer cannot encode, before they become text embeddings that all look alike.

    A prompt whose tokens are all unknown (or that has none but special tokens), and two different
    prompts that get the same ids, are errors: a transformers directory without its tokenizer files
    gets an empty-vocabulary tokenizer that maps every prompt to the same few ids.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    special = set(getattr(tokenizer, "all_special_ids", None) or []) - {unk}
    ids = torch.as_tensor(input_ids)
    mask = torch.as_tensor(attention_mask).bool() if attention_mask is not None else torch.ones_like(ids, dtype=torch.bool)
    fix = ("its vocabulary cannot encode them, so every prompt would embed alike. A transformers directory needs "
           "its own tokenizer files (tokenizer.json, or vocab.json and merges.txt): copy them from the base model "
           "(platonic exports include them), or pass tokenizer=...")
    seen: dict[tuple[int, ...], str] = {}
    for text, row, keep in zip(texts, ids, mask):
        tokens = tuple(row[keep].tolist())
        content = [t for t in tokens if t not in special]
        if text.strip() and unk is not None and (not content or all(t == unk for t in content)):
            raise InvalidInputError(f"{spec}: its tokenizer maps the prompt {text!r} to unknown tokens only; {fix}")
        if tokens in seen and seen[tokens] != text:
            raise InvalidInputError(f"{spec}: its tokenizer maps the prompts {seen[tokens]!r} and {text!r} to the same "
                                    f"token ids (if they differ only past its length limit, shorten them); else {fix}")
        seen[tokens] = text


def load_hf(rest: str, device="cpu", dtype=None, tokenizer=None, processor=None, edit_site: str | None = None) -> HFEncoder:
    """Load `hf:<rest>` or a local directory through transformers' own loaders."""
    from transformers import AutoConfig, AutoModel, AutoProcessor

    spec = rest if Path(rest).is_dir() else f"hf:{rest}"
    name, revision = hub_revision(rest)
    try:
        config = AutoConfig.from_pretrained(name, revision=revision)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot load {spec}: {exc}") from None
    options = {"config": config, "revision": revision, **({"dtype": dtype} if dtype else {})}
    with library_progress():
        model = AutoModel.from_pretrained(name, **options)
    if processor is None:
        try:
            processor = AutoProcessor.from_pretrained(name, revision=revision)
        except (OSError, ValueError):
            processor = None  # mean/std fall back to the family's defaults
    encoder = HFEncoder(model.to(device), spec, tokenizer=tokenizer, processor=processor, edit_site=edit_site)
    encoder.revision = revision
    if Path(rest).is_dir():
        encoder.adopt_export_record(read_json(Path(rest) / PROVENANCE_FILE))
    return encoder


def hub_revision(rest: str) -> tuple[str, str | None]:
    """`ORG/NAME@REV` -> ("ORG/NAME", "REV") for transformers' `revision=`; a local directory or a name
    without '@' -> (rest, None)."""
    if Path(rest).is_dir() or "@" not in rest:
        return rest, None
    name, _, revision = rest.partition("@")
    if not revision:
        raise InvalidInputError(f"hf:{rest}: give a revision after '@' (a commit, tag or branch), or drop the '@'")
    return name, revision


def from_config(config, spec: str = "hf:random", tokenizer: Callable | None = None, seed: int = 0, **kwargs) -> HFEncoder:
    """An HFEncoder with random weights from a transformers config (tests, no download)."""
    from transformers import AutoModel

    torch.manual_seed(seed)
    return HFEncoder(AutoModel.from_config(config), spec, tokenizer=tokenizer, **kwargs)


register_backend("hf", load_hf)
