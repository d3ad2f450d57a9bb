"""Fine-tune sources: what `measure --finetuned`, `load_finetuned` and a YAML's `sources:` accept.

    a DualEncoder                              used as it is
    FILE.safetensors | .bin | .pt | .pth       a state dict of the model (whole or partial) or of its image
                                               tower alone; open_clip checkpoints included ("state_dict" /
                                               "module." unwrapped); read by `platonic.finetuning.checkpoints`, no code runs
    DIR with adapter_config.json               a peft LoRA adapter (adapter_model.safetensors), merged into a copy
    DIR with model.safetensors, no config.json a `platonic finetune --mode full|attention` directory
    DIR with config.json of a vision-only      a transformers CLIPVisionModel, CLIPVisionModelWithProjection,
      transformers model                       SiglipVisionModel or Siglip2VisionModel save_pretrained directory:
                                               its weights go onto the matching dual encoder's image side
    hf:ORG/NAME[@REV]                          the hub, through transformers' own loaders: a vision-only model as
                                               above, or a whole dual encoder
    any other model spec                       open_clip:..., a transformers directory, world:NAME

How a state dict lands on the model (`onto_model`): its keys are tried as they are, with the image
tower's path put in front (a tower-only state dict, e.g. open_clip's `visual` saved alone), and without
a leading "model."; the reading under which most keys name a tensor of the model wins. Every key must
then name a tensor of the model, with its shape: a checkpoint whose keys match nothing (or only some)
is an error that says how many of N matched and which prefixes were expected. A checkpoint that
covers only part of the model must hold image-side tensors only (the tower and its edit site, e.g. a
transformers CLIPModel's `vision_model.` and `visual_projection.`); the text tower stays the base's.

Provenance: the fine-tuned DualEncoder carries `source_description`, e.g.
"hf:org/name@3f2a… (transformers CLIPVisionModelWithProjection, commit 3f2a…; 42 of the model's 96 tensors,
image side)", which `measure` records as the descriptor's `provenance.finetune`.

Pinning: a hub source is pinned when it names a full 40-hex commit (hf:ORG/NAME@COMMIT).
`require_pinned(source)` refuses one that is not (`--require-pinned`, YAML `require_pinned: true`).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from ..errors import ArtifactError, InvalidInputError
from ..models import DualEncoder, has_backend_prefix, load_model
from .checkpoints import TORCH_SUFFIXES, is_weights_file, read_state_dict
from .naming import ACCEPTED, require_exists, require_pinned, split_revision  # noqa: F401 - re-exported

STATE_DICT_FILE = "model.safetensors"  # the state dict in a directory `platonic finetune` writes
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# transformers' vision-only classes, by config.architectures[0], else by config.model_type
VISION_ONLY_CLASSES = ("CLIPVisionModel", "CLIPVisionModelWithProjection", "SiglipVisionModel", "Siglip2VisionModel")
VISION_ONLY_TYPES = {"clip_vision_model": "CLIPVisionModel", "siglip_vision_model": "SiglipVisionModel",
                     "siglip2_vision_model": "Siglip2VisionModel"}

def load_finetuned(pre: DualEncoder, finetuned, require_pinned_revision: bool = False) -> DualEncoder:
    """The fine-tuned model of `pre` that `finetuned` names (module docstring), with `source_description`.

    pre: the pre-trained model (copied, never changed); finetuned: a DualEncoder, path or spec string.
    """
    if isinstance(finetuned, DualEncoder):
        return finetuned
    text = str(finetuned)
    if require_pinned_revision:
        require_pinned(text)
    path = Path(text)
    if path.is_file() and is_weights_file(path):
        return with_state_dict(pre, read_state_dict(path), text)
    if path.is_dir() and (path / "adapter_config.json").exists():
        return with_lora_adapter(pre, path)
    if path.is_dir() and (path / STATE_DICT_FILE).is_file() and not (path / "config.json").is_file():
        return with_state_dict(pre, read_state_dict(path / STATE_DICT_FILE), text)  # `platonic finetune -o DIR`
    local_config = path.is_dir() and (path / "config.json").is_file()
    if local_config or text.startswith("hf:"):
        vision = _vision_only_class(text)
        if vision is not None:
            return with_vision_model(pre, text, vision)
    if has_backend_prefix(text) or local_config:
        ft = load_model(text, device=pre.device)
        ft.source_description = text
        return ft
    require_exists(finetuned)
    if path.is_file() and path.suffix not in TORCH_SUFFIXES:
        raise InvalidInputError(f"cannot read the fine-tune {text!r} ({path.suffix or 'no suffix'}): give {ACCEPTED}")
    raise InvalidInputError(f"cannot read the fine-tune {text!r}: give {ACCEPTED}")


# -- state dicts onto the model ----------------------------------------------------------------------

def _module_path(root: torch.nn.Module, sub: torch.nn.Module) -> str | None:
    """The name of `sub` inside `root` ("" when they are the same module), None when it is not inside."""
    for name, module in root.named_modules():
        if module is sub:
            return name
    return None


def image_side_keys(model: DualEncoder) -> set[str]:
    """State-dict keys of `model.module` that belong to the image (or audio) side: the tower and its edit site."""
    own = {id(t) for t in model.tower.state_dict(keep_vars=True).values()}
    own |= {id(t) for t in model.edit_site.tensors().values()}
    return {k for k, t in model.module.state_dict(keep_vars=True).items() if id(t) in own}


def _prefixes(keys) -> list[str]:
    """The distinct first components of `keys`, as "NAME." (what a message says was expected)."""
    return sorted({k.split(".", 1)[0] + "." for k in keys})


def onto_model(model: DualEncoder, state: dict[str, torch.Tensor], what: str) -> tuple[dict[str, torch.Tensor], str]:
    """`state` renamed to the keys of `model.module` (module docstring), and what was loaded, in words.

    Raises InvalidInputError naming how many of the N keys matched, the expected prefixes, and a shape
    that differs.
    """
    own = model.module.state_dict()
    tower = _module_path(model.module, model.tower) or ""
    readings = [dict(state)]
    if tower:
        readings.append({f"{tower}.{k}": v for k, v in state.items()})
    if any(k.startswith("model.") for k in state):
        readings.append({k.removeprefix("model."): v for k, v in state.items()})
    mapped = max(readings, key=lambda r: sum(k in own for k in r))
    matched = [k for k in mapped if k in own]
    image = image_side_keys(model)
    if len(matched) < len(mapped):
        unknown = [k for k in mapped if k not in own]
        raise InvalidInputError(
            f"{what}: {len(matched)} of {len(mapped)} keys match a tensor of {model.spec}; the other {len(unknown)} do "
            f"not exist in {model.spec} (e.g. {unknown[:3]}); expected keys that start with "
            f"{', '.join(_prefixes(image)) or '(the model tensors)'} (its image side) or the whole model's. Is it a "
            "checkpoint of another architecture?")
    bad = [k for k in mapped if tuple(mapped[k].shape) != tuple(own[k].shape)]
    if bad:
        raise InvalidInputError(f"{what}: tensor {bad[0]} has shape {tuple(mapped[bad[0]].shape)}, the model's is "
                                f"{tuple(own[bad[0]].shape)} ({len(bad)} of {len(mapped)} differ); is it a fine-tune "
                                "of another size of this architecture?")
    outside = [k for k in mapped if k not in image]
    if len(mapped) < len(own) and outside:
        raise InvalidInputError(
            f"{what}: a partial checkpoint ({len(mapped)} of the model's {len(own)} tensors) must hold image-side "
            f"tensors only ({', '.join(_prefixes(image))}), but {len(outside)} are not (e.g. {outside[:3]}); give "
            "the whole model's state dict, or the image tower's tensors alone")
    if len(mapped) == len(own):
        return mapped, f"all {len(own)} tensors of the model"
    return mapped, f"{len(mapped)} of the model's {len(own)} tensors, image side ({', '.join(_prefixes(mapped))})"


def with_state_dict(pre: DualEncoder, state: dict[str, torch.Tensor], what: str) -> DualEncoder:
    """A copy of `pre` with `state` (a whole or partial state dict, see `onto_model`) loaded into it."""
    if not state:
        raise InvalidInputError(f"{what} holds no tensors: a fine-tune state dict needs the weights it changed")
    mapped, loaded = onto_model(pre, state, what)
    ft = pre.copy_for_new_weights()
    ft.module.load_state_dict(mapped, strict=False)
    ft.source_description = f"{what} (state dict; {loaded})"
    return ft


# -- transformers vision-only models -----------------------------------------------------------------

def transformers_name(source: str) -> tuple[str, str | None, bool]:
    """(what transformers' from_pretrained reads, the revision or None, whether it is a local directory).

    "hf:ORG/NAME@REV" -> ("ORG/NAME", "REV", False); "hf:DIR" and "DIR" -> ("DIR", None, True).
    """
    rest = source.removeprefix("hf:")
    if Path(rest).is_dir():
        return rest, None, True
    name, revision = split_revision(rest)
    return name, revision, False


def _vision_only_class(source: str) -> str | None:
    """The transformers vision-only class a local directory or hf: name holds, None for anything else.

    Reads its config through transformers (AutoConfig: config.json only, no weights).
    """
    from transformers import AutoConfig

    name, revision, _ = transformers_name(source)
    try:
        config = AutoConfig.from_pretrained(name, revision=revision)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read the configuration of {source} ({type(exc).__name__}: "
                                f"{' '.join(str(exc).split())[:200]}); check the name, revision, network or cache") from None
    archs = [a for a in (getattr(config, "architectures", None) or []) if a in VISION_ONLY_CLASSES]
    return archs[0] if archs else VISION_ONLY_TYPES.get(getattr(config, "model_type", ""))


def with_vision_model(pre: DualEncoder, source: str, class_name: str) -> DualEncoder:
    """A copy of `pre` with the weights of a transformers vision-only model (`class_name`) on its image side.

    source: a save_pretrained directory, hf:DIR or hf:ORG/NAME[@REV] (loaded by transformers' own
    `from_pretrained`, which reads safetensors and loads .bin weights-only); its state dict
    (vision_model.*, visual_projection.* for the WithProjection class) is mapped by `onto_model`.
    """
    import transformers

    name, revision, local = transformers_name(source)
    try:
        vision = getattr(transformers, class_name).from_pretrained(name, revision=revision)
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"cannot load {source} as a transformers {class_name} ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:200]})") from None
    state = {k: v.detach() for k, v in vision.state_dict().items()}
    commit = getattr(vision.config, "_commit_hash", None)
    mapped, loaded = onto_model(pre, state, source)
    ft = pre.copy_for_new_weights()
    ft.module.load_state_dict(mapped, strict=False)
    pinned = f", commit {commit}" if commit and not local else ""
    ft.source_description = f"{source} (transformers {class_name}{pinned}; {loaded})"
    return ft


# -- peft adapters -----------------------------------------------------------------------------------

def with_lora_adapter(pre: DualEncoder, path: Path) -> DualEncoder:
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
    mismatch = None
    for attach in ("tower", "module"):
        ft = pre.copy_for_new_weights()
        root = getattr(ft, attach)
        try:
            peft_model = get_peft_model(root, copy.deepcopy(config))
        except (ValueError, TypeError, KeyError):
            continue  # target modules not found under this root
        try:
            result = set_peft_model_state_dict(peft_model, weights)
        except RuntimeError as exc:
            mismatch = mismatch or _first_size_mismatch(exc)  # the modules matched, the shapes did not
            continue
        if not result.unexpected_keys:
            peft_model.merge_and_unload()  # merges into `root` in place
            rank, kind = getattr(config, "r", "?"), getattr(config.peft_type, "value", config.peft_type)
            ft.source_description = (f"{path} (peft {kind} adapter, rank {rank}, {len(weights)} tensors, "
                                     f"merged into the {'image tower' if attach == 'tower' else 'model'})")
            return ft
    if mismatch is not None:
        raise InvalidInputError(f"{path}: the LoRA adapter's weights do not have the shapes its adapter_config.json "
                                f"(r = {getattr(config, 'r', '?')}) gives on {pre.spec} ({mismatch}); check r and "
                                "target_modules in adapter_config.json against the weights, or save the adapter again")
    raise InvalidInputError(f"{path}: the LoRA adapter's weights match neither the tower nor the whole of {pre.spec}")


def _first_size_mismatch(exc: Exception) -> str:
    """The first "size mismatch for NAME: ..." line of torch's load_state_dict error (or its first line)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    found = next((line for line in lines if line.startswith("size mismatch")), lines[0] if lines else type(exc).__name__)
    return found[:200]
