"""Loading trunk world models: `load_model("world:trunk/NAME[/TASK[/lora]]")` through the `world:` backend.

`NAME` is one of the trunk models (`recipe.MODEL_NAMES`) or a tower trained from scratch (`recipe.STUDENT_NAMES`,
built on first use: `students.ensure_students`). A model is platonic's open_clip encoder
(`shared.SharedTrunkEncoder`, which computes the frozen part of the tower once for a model and all its sources) of
the built open_clip directory models/NAME (so the backend, edit-site rules, LoRA targets and exports are a user's
CLIP's); a source is the same with its tower part (sources/NAME/TASK.KIND.safetensors) loaded over the pre-trained
weights. Canonical images are the world's 32 px ones (`canonical_size`), resized to a trunk model's 64 px input by
its preprocessing (a student reads them at 32 px).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ....errors import ArtifactError, InvalidInputError
from ....models.open_clip_backend import export_record
from ...common.weights import load_weights
from ..data import TASK_NAMES
from ..openclip_models import open_world_openclip_dir
from ..splits import CANONICAL_SIZE
from .build import ensure_sources, ensure_trunk_world, require_built
from ...common.kinds import KINDS
from .recipe import MODEL_NAMES, STUDENT_NAMES
from .shared import SharedTrunkEncoder
from .students import ensure_students
from .sources import ascend_above


def parse_name(name: str) -> tuple[str, str | None, str]:
    """`NAME[/TASK[/KIND]]` -> (model, task or None, kind), refusing unknown parts with the known ones."""
    parts = name.strip().split("/")
    if parts[0] not in MODEL_NAMES + STUDENT_NAMES or len(parts) > 3:
        raise InvalidInputError(f"unknown trunk world model {name!r}; models: {', '.join(MODEL_NAMES + STUDENT_NAMES)} "
                                "(optionally /TASK or /TASK/lora)")
    task = parts[1] if len(parts) >= 2 else None
    kind = parts[2] if len(parts) == 3 else "full"
    if task is not None and (task not in TASK_NAMES or kind not in KINDS):
        raise InvalidInputError(f"trunk world model {name!r}: task must be one of {', '.join(TASK_NAMES)} and "
                                f"kind one of {', '.join(KINDS)}")
    return parts[0], task, kind


def load_trunk_world_model(name: str, device="cpu", dtype=None, root: Path | None = None):
    """`NAME`, `NAME/TASK` (last stage + head source) or `NAME/TASK/lora` of the built trunk world (built if needed,
    when `root` is None; a student, `recipe.STUDENT_NAMES`, is built on first use) as platonic's open_clip encoder."""
    model, task, kind = parse_name(name)
    if root is None:
        world = ensure_trunk_world(kinds=(kind,))
    else:
        world = require_built(root)
        if task is not None and model in MODEL_NAMES:
            ensure_sources(world, (kind,))  # a built world gets a kind's sources on first use (else a no-op)
    if model in STUDENT_NAMES:
        ensure_students(world, (kind,), names=(model,))  # this student only
    encoder = _load_encoder(world / "models" / model, f"world:trunk/{name.strip()}", device, dtype)
    if task is not None:
        state, _ = load_weights(world / "sources" / model / f"{task}.{kind}.safetensors")
        _load_above(encoder, state, name)
    return encoder


def _load_above(encoder: SharedTrunkEncoder, state: dict[str, torch.Tensor], name: str) -> None:
    """Write `state` (a tower part above the cut under the open_clip names) into `encoder`, refusing tensors that do
    not fit the model (named `name` in the error)."""
    own = encoder.model.state_dict()
    foreign = [k for k in state if k not in own or own[k].shape != state[k].shape]
    if foreign:
        raise ArtifactError(f"{name}: the source file's tensors {foreign[:3]} do not fit the model; rebuild the "
                            "trunk world (`platonic world trunk-build --force`)")
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(v.to(own[k].dtype))
    encoder.invalidate_fingerprint()


def ascended_trunk_model(encoder: SharedTrunkEncoder, root: Path, task: str, labels: torch.Tensor, prompts,
                         config) -> SharedTrunkEncoder:
    """A loaded trunk world model (`encoder`, `world:trunk/NAME`) after the gradient-ascent negation baseline of
    `config` on `task` (`sources.ascend_above`: the part above the cut, on the built world's cached train
    activations; labels (n,) the task's train labels, prompts its class prompts), as a new encoder; `encoder` is left as it is."""
    name, task_part, _ = parse_name(encoder.spec.removeprefix("world:trunk/"))
    if task_part is not None:
        raise InvalidInputError(f"the gradient-ascent baseline starts from a base model, not the source {encoder.spec}")
    acts, _ = load_weights(require_built(root) / "activations" / f"{name}.safetensors", keys=(task,))
    if task not in acts or len(acts[task]) != len(labels):
        raise ArtifactError(f"{root}: the cached activations of {name} do not match {task}'s train split; rebuild the "
                            "trunk world (`platonic world trunk-build --force`)")
    with torch.no_grad():
        heads = torch.nn.functional.normalize(encoder.encode_texts(list(prompts)).float(), dim=-1)
        scale = encoder.model.logit_scale.detach().exp().item()
    with torch.enable_grad():
        state = ascend_above(encoder.model.visual, acts[task].float(), labels, heads, scale, config)
    edited = encoder.copy_for_new_weights()
    _load_above(edited, state, encoder.spec)
    return edited


def _load_encoder(directory: Path, spec: str, device, dtype) -> SharedTrunkEncoder:
    """The open_clip directory as platonic's open_clip encoder (sharing the activations below the cut), named `spec`
    (the string that loads it again), fed the world's 32 px canonical images."""
    rest = f"local-dir:{directory}"
    model = open_world_openclip_dir(directory, device=device)
    if dtype is not None:
        model = model.to(dtype)
    encoder = SharedTrunkEncoder(model, rest, spec)
    encoder.adopt_export_record(export_record(rest))
    encoder.canonical_size = CANONICAL_SIZE
    return encoder

