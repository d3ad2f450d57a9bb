"""open_clip backend: `open_clip:ARCH/TAG`, `open_clip:hf-hub:ORG/NAME`, `open_clip:local-dir:DIR`,
`open_clip:ARCH@FILE`, and random weights `open_clip:ARCH` (seed 0) or `open_clip:ARCH@seed=N`.

Weights come from open_clip's own loaders and cache. Exports, both loaded by open_clip alone:
- a file PATH.safetensors: the state dict, for `open_clip.create_model(ARCH, pretrained=PATH)`;
- a directory (any other PATH): open_clip's hub layout, as its `push_to_hf_hub.save_for_hf` writes it
  (open_clip_config.json with model_cfg + preprocess_cfg, open_clip_model.safetensors, the tokenizer
  files where the model has a Hugging Face tokenizer), plus platonic_provenance.json and a model card
  README.md; `open_clip.create_model_and_transforms("local-dir:PATH")` loads it, and so does
  `hf-hub:ORG/NAME` once the directory is pushed to the hub.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import save_file

from ..edit import AppendedLinearSite, EditSite
from ..errors import ArtifactError, InvalidInputError
from ..layouts import (
    OPEN_CLIP_CONFIG,
    OPEN_CLIP_WEIGHTS,
    PROVENANCE_FILE,
    is_open_clip_export,
    is_open_clip_export_directory,
    read_json,
)
from ..storage import atomic_write, platonic_record, refuse_existing
from . import register_backend
from .base import DualEncoder, conv_layer_names
from .constants import OPENAI_MEAN, OPENAI_STD
from .images import to_model_input
from .open_clip_specs import check_spec, parse_spec
from .sites import OPEN_CLIP_RULES, SiteRule, discover_site


# open_clip config entries that may name a local folder: the HF text tower's model and tokenizer (a path where the
# hub id would be), a timm tower's config folder ("local-dir:DIR")
FOLDER_ENTRIES = (("text_cfg", "hf_model_name"), ("text_cfg", "hf_tokenizer_name"), ("vision_cfg", "timm_model_name"))


def config_folder(key: str, value) -> Path | None:
    """The local folder the `FOLDER_ENTRIES` entry `key` = `value` of an open_clip config may name, or None where the
    value cannot name one (not a string; a timm entry without the "local-dir:" prefix is a timm model name). Whether
    the folder exists, or the path is a hub id such as "sentence-transformers/all-MiniLM-L6-v2", is the caller's
    to check."""
    if not isinstance(value, str) or (key == "timm_model_name" and not value.startswith("local-dir:")):
        return None
    return Path(value.removeprefix("local-dir:")).expanduser()


def placeless_config(model_cfg: dict) -> dict:
    """open_clip's `model_cfg` with every entry that names a local folder (`FOLDER_ENTRIES`) replaced by the sha256 of
    the folder's config.json (what open_clip's factory reads from it: the weights come from the checkpoint), so that
    the same model whose MiniLM or timm config folder sits elsewhere (another virtual environment, a copy) has the
    same architecture id. A hub id or a timm model name stays as it is."""
    import copy
    import hashlib

    cfg = copy.deepcopy(model_cfg)
    for tower, key in FOLDER_ENTRIES:
        folder = config_folder(key, cfg.get(tower, {}).get(key))
        if folder is not None and folder.is_dir():
            config = folder / "config.json"
            digest = hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else None
            cfg[tower][key] = {"local folder, config.json sha256": digest}
    return cfg


class OpenClipEncoder(DualEncoder):
    """An open_clip CLIP / CustomTextCLIP / CoCa model behind the DualEncoder interface."""

    def __init__(self, model: torch.nn.Module, arch: str, spec: str, tokenizer=None, edit_site: str | None = None):
        self.model = model.eval()
        self.arch = arch
        self.spec = spec
        self._tokenizer = tokenizer
        self.site_rule: SiteRule | None = None
        if edit_site == "append":
            d = self._probe_embed_dim()
            self._site: EditSite = AppendedLinearSite.install(self.model, "visual", d)
        elif edit_site is None:
            self._site, self.site_rule = discover_site(self.model, OPEN_CLIP_RULES)
        else:
            raise InvalidInputError(f"edit_site must be None (discover) or 'append'; got {edit_site!r}")

    def _probe_embed_dim(self) -> int:
        size = self.image_size
        with torch.inference_mode():
            return int(self.model.encode_image(torch.zeros(1, 3, *size, device=self.device, dtype=self.dtype)).shape[-1])

    @property
    def tower(self):
        return self.model.visual

    @property
    def module(self):
        return self.model

    @property
    def edit_site(self) -> EditSite:
        return self._site

    @property
    def lora_target_modules(self) -> list[str]:
        """As the base class, except ResNet CLIPs: their attention pool reads q/k/v_proj.weight directly
        (F.multi_head_attention_forward), where LoRA layers would never run, so they get their convolutions."""
        if type(self.model.visual).__name__ == "ModifiedResNet":
            return conv_layer_names(self.model.visual)
        return super().lora_target_modules

    @property
    def image_size(self) -> tuple[int, int]:
        size = getattr(self.model.visual, "image_size", 224)
        return (size, size) if isinstance(size, int) else tuple(size)

    @property
    def preprocess_cfg(self) -> dict:
        return dict(getattr(self.model.visual, "preprocess_cfg", {}) or {})

    def prepare_probes(self, probes: torch.Tensor) -> torch.Tensor:
        cfg = self.preprocess_cfg
        return to_model_input(probes, self.image_size, cfg.get("mean", OPENAI_MEAN), cfg.get("std", OPENAI_STD),
                              device=self.device, dtype=self.dtype)

    def _forward_tower(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.model.encode_image(inputs, normalize=False)

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            import open_clip

            self._tokenizer = open_clip.get_tokenizer(self.arch)
        return self._tokenizer

    @torch.inference_mode()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        tokens = self.tokenizer(list(texts)).to(self.device)
        return self.model.encode_text(tokens, normalize=False).float().cpu()

    def architecture_id(self) -> str:
        """The model's classes and open_clip's model config: a `local-dir:DIR` names its architecture by its
        config, never by its path (a bank solved on one spelling of the directory, or on a copy, applies to
        every other), nor by where the folders its config names sit (`placeless_config`). Built-in and hub
        architectures keep their name (their config is the name's)."""
        classes = f"{type(self.model).__name__}/{type(self.model.visual).__name__}"
        if not self.arch.startswith("local-dir:"):
            return f"open_clip/{self.arch}/{classes}"
        try:
            config = json.dumps(placeless_config(self.model_config()), sort_keys=True, default=str)
        except (OSError, ValueError, InvalidInputError):
            config = "unknown"
        return f"open_clip/local-dir/{classes}/{config}"

    def save(self, path, provenance: dict | None = None, overwrite: bool = False) -> Path:
        """Write the model for open_clip: PATH.safetensors (a state dict loadable by
        open_clip.create_model(ARCH, pretrained=PATH)) or, for any other PATH, a directory in open_clip's
        hub layout (`save_directory`; loaded by create_model_and_transforms("local-dir:PATH")).

        An existing file at `path` is replaced only when it is a previous platonic open_clip export, or
        with `overwrite` (never the checkpoint the model was loaded from: the command line refuses that).
        When the edit lives in an appended linear (no final linear in the tower), open_clip cannot
        load that layer: the file holds the unedited architecture's weights, and the appended layer
        is written beside it as PATH.appended.safetensors, with a warning.
        """
        path = Path(path)
        if path.suffix != ".safetensors":
            return self.save_directory(path, provenance, overwrite=overwrite)
        meta = {"platonic": json.dumps({"arch": self.arch, "spec": self.spec, **(provenance or {})}, sort_keys=True)}
        what = "platonic open_clip export"
        site = self._site
        side = path.with_name(path.name.removesuffix(".safetensors") + ".appended.safetensors")
        for target in (path, side) if isinstance(site, AppendedLinearSite) else (path,):
            refuse_existing(target, is_open_clip_export, overwrite, what)
        if isinstance(site, AppendedLinearSite):
            appended = {"weight": site.linear.weight.detach().cpu().contiguous()}
            site.remove()
            try:
                state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
            finally:
                AppendedLinearSite.install(site.parent, site.attr, site.out_dim)
                self._site = AppendedLinearSite(site.parent, site.attr, getattr(site.parent, site.attr))
            atomic_write(side, lambda tmp: save_file(appended, tmp, metadata=meta), replaceable=is_open_clip_export,
                         overwrite=overwrite, what=what)
            warnings.warn(f"{self.arch} has no final linear map; the edit is in an appended layer saved to {side}, "
                          f"which open_clip alone does not load", stacklevel=2)
        else:
            state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        return atomic_write(path, lambda tmp: save_file(state, tmp, metadata=meta), replaceable=is_open_clip_export,
                            overwrite=overwrite, what=what)


    def model_config(self) -> dict:
        """open_clip's model_cfg of this model (built-in architectures, hf-hub: and local-dir: configs), with
        quick_gelu set when the model runs QuickGELU (as tags like `openai` ask for)."""
        import copy

        import open_clip

        if self.arch.startswith("local-dir:"):
            cfg = json.loads((Path(self.arch.removeprefix("local-dir:")) / OPEN_CLIP_CONFIG).read_text())["model_cfg"]
        elif self.arch.startswith("hf-hub:"):
            from open_clip.factory import _get_hf_config

            cfg = _get_hf_config(self.arch.removeprefix("hf-hub:"))["model_cfg"]
        else:
            cfg = open_clip.get_model_config(self.arch)
        if cfg is None:
            raise InvalidInputError(f"{self.spec}: open_clip has no model config for {self.arch!r} to export")
        cfg = copy.deepcopy(cfg)
        if any(type(m).__name__ == "QuickGELU" for m in self.model.modules()):
            cfg["quick_gelu"] = True
        return cfg

    def save_directory(self, path, provenance: dict | None = None, overwrite: bool = False) -> Path:
        """Write open_clip's hub layout to the directory `path` atomically (module docstring).

        open_clip_config.json holds {"model_cfg", "preprocess_cfg"} (what open_clip's `save_config_for_hf`
        writes), open_clip_model.safetensors the whole state dict. An appended edit layer, which open_clip
        cannot load, is refused: export through the model's own edit site.
        """
        from ..storage import atomic_directory
        from .card import README, model_card

        if Path(path).suffix in (".pt", ".pth", ".bin", ".ckpt"):
            raise InvalidInputError(f"{path}: an open_clip export is a file *.safetensors or a directory; name it "
                                    f"{Path(path).with_suffix('.safetensors').name} or drop the {Path(path).suffix} suffix")
        if isinstance(self._site, AppendedLinearSite):
            raise InvalidInputError(f"{self.spec}: the edit lives in an appended linear that open_clip cannot load from a "
                                    "directory; export to a *.safetensors file instead (the appended layer goes beside it)")
        record = {"arch": self.arch, "spec": self.spec, **(provenance or {})}
        config = {"model_cfg": self.model_config(), "preprocess_cfg": _json_ready(self.preprocess_cfg)}
        state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        meta = {"format": "pt", "platonic": json.dumps({k: v for k, v in record.items() if k != "recipe"}, sort_keys=True,
                                                       default=str)}

        def write(tmp: Path) -> None:
            save_file(state, str(tmp / OPEN_CLIP_WEIGHTS), metadata=meta)
            (tmp / OPEN_CLIP_CONFIG).write_text(json.dumps(config, indent=2))
            if hasattr(self.tokenizer, "save_pretrained") and config["model_cfg"].get("text_cfg", {}).get("hf_tokenizer_name"):
                self.tokenizer.save_pretrained(str(tmp))  # open_clip reads a local-dir's HF tokenizer from the directory
            (tmp / PROVENANCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
            (tmp / README).write_text(model_card(self.spec, record, "open_clip"))

        return atomic_directory(path, write, replaceable=is_open_clip_export_directory, overwrite=overwrite,
                                what=f"platonic open_clip export (a directory with {PROVENANCE_FILE})")




def _json_ready(value):
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_json_ready(v) for v in value]
    return value


def _short(exc: Exception, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:limit]}{'…' if len(text) > limit else ''}"


def load_open_clip(rest: str, device="cpu", dtype=None, tokenizer=None, edit_site: str | None = None) -> OpenClipEncoder:
    """Load `open_clip:<rest>` (see the module docstring).

    Random weights (`open_clip:ARCH`, `open_clip:ARCH@seed=N`) are drawn under their seed (0 by default)
    without touching the global random state, so loading one spec twice gives one model.
    """
    import open_clip

    spec = f"open_clip:{rest}"
    if rest.startswith("local-dir:"):
        check_spec(rest)
        arch = rest
        logging.getLogger().disabled, was = True, logging.getLogger().disabled
        try:
            model = open_clip.create_model(rest, device=device)
        except Exception as exc:  # noqa: BLE001 - whatever the directory holds, open_clip cannot build it
            raise InvalidInputError(f"{spec}: open_clip cannot load the directory ({_short(exc)})") from None
        finally:
            logging.getLogger().disabled = was
    elif rest.startswith("hf-hub:"):
        arch = rest
        try:
            model = open_clip.create_model(rest, device=device)
        except (OSError, RuntimeError, ValueError) as exc:
            raise ArtifactError(f"{spec}: cannot load it from the Hugging Face hub ({_short(exc)}); check the name, "
                                "the network or the local cache") from None
    else:
        check_spec(rest)
        arch, pretrained, seed = parse_spec(rest)
        is_file = "@" in rest and seed is None
        if seed is not None:
            warnings.warn(f"{spec}: no pretrained tag given, the model has RANDOM weights (seed {seed}; "
                          f"open_clip:{arch}@seed=N draws others; use open_clip:{arch}/TAG for trained weights)",
                          stacklevel=3)
        logging.getLogger().disabled, was = True, logging.getLogger().disabled
        try:
            with torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(seed)
                model = open_clip.create_model(arch, pretrained=pretrained, device=device)
        except Exception as exc:  # noqa: BLE001 - whatever the file holds, it is not this architecture's checkpoint
            if not is_file:
                raise ArtifactError(f"{spec}: cannot load the pretrained weights ({_short(exc)}); check the network "
                                    "or open_clip's cache") from None
            raise InvalidInputError(f"{spec}: {pretrained} is not a checkpoint of {arch} ({_short(exc)}); give a state "
                                    f"dict saved from open_clip:{arch}, e.g. one platonic exported") from None
        finally:
            logging.getLogger().disabled = was
    if dtype is not None:
        model = model.to(dtype)
    encoder = OpenClipEncoder(model, arch, spec, tokenizer=tokenizer, edit_site=edit_site)
    encoder.adopt_export_record(export_record(rest))
    return encoder


def export_record(rest: str) -> dict | None:
    """The provenance of a platonic export that `open_clip:<rest>` names (a local-dir: directory or an
    ARCH@FILE state dict platonic wrote), else None."""
    if rest.startswith("local-dir:"):
        return read_json(Path(rest.removeprefix("local-dir:")) / PROVENANCE_FILE)
    arch, pretrained, seed = parse_spec(rest) if not rest.startswith("hf-hub:") else (rest, None, None)
    return platonic_record(pretrained) if "@" in rest and seed is None and is_open_clip_export(pretrained) else None


register_backend("open_clip", load_open_clip, check_spec)
