"""Loading image zoo models: `load_model("world:NAME[/TASK[/lora]]")` through the `world:` backend
(`platonic.world.backend`); the world is built on first use."""

from __future__ import annotations

from pathlib import Path

from ...errors import InvalidInputError
from ...finetuning.linearize import LinearizedEncoder
from .build import KINDS, TANGENT_WEIGHTS, built_kinds, ensure_sources, ensure_world
from .data import TASKS
from ..common.weights import load_weights
from .zoo import MODEL_NAMES, SPECS, WorldModel, model_from_state


def load_image_world_model(name: str, device="cpu", dtype=None, root: Path | None = None) -> WorldModel | LinearizedEncoder:
    """Load `NAME`, `NAME/TASK` (full fine-tune) or `NAME/TASK/lora` from the built world (built if needed).

    A source fine-tuned in the tangent space (a profile with mode "linear" sources; its file holds dtheta)
    loads as a `LinearizedEncoder` around the pre-trained `NAME`; every other source as a `WorldModel`.
    """
    parts = name.strip().split("/")
    if parts[0] not in SPECS or len(parts) > 3:
        raise InvalidInputError(
            f"unknown world model {name!r}; models: {', '.join(MODEL_NAMES)} (optionally /TASK or /TASK/lora), "
            "trunk/NAME for the world on pretrained trunks, or audio/NAME for the audio world"
        )
    task = parts[1] if len(parts) >= 2 else None
    kind = parts[2] if len(parts) == 3 else "full"
    if task is not None and (task not in TASKS or kind not in KINDS):
        raise InvalidInputError(f"world model {name!r}: task must be one of {', '.join(TASKS)} and kind full or lora")
    if root is None:
        world = ensure_world(kinds=(kind,))
    else:
        world = Path(root)
        if task is not None and built_kinds(world):
            ensure_sources(world, (kind,))  # a built world gets a kind's sources on first use (else a no-op)
    spec = SPECS[parts[0]]
    state, _ = load_weights(world / "models" / spec.name / "base.safetensors")
    if task is None:
        return model_from_state(spec, state, f"world:{name}", device=device, dtype=dtype)
    ft, meta = load_weights(world / "models" / spec.name / "ft" / f"{task}.{kind}.safetensors")
    if meta.get("weights") == TANGENT_WEIGHTS:  # a tangent source: the pre-trained model's expansion at dtheta
        base = model_from_state(spec, state, f"world:{spec.name}", device=device, dtype=dtype)
        source = LinearizedEncoder(base, {k: v.to(device) for k, v in ft.items()})
        source.spec = f"world:{name}"  # the string that loads it again
        return source
    state = {**state, **{f"image.{k}": v for k, v in ft.items()}}
    return model_from_state(spec, state, f"world:{name}", device=device, dtype=dtype)

