"""Loading audio zoo models: `load_model("world:audio/NAME[/TASK[/lora]]")`.

The image world's `world:` backend (`platonic.world.backend`) hands every spec that starts with
"audio/" to `load_audio_world_model`; the audio world is built on first use (profile from
`$PLATONIC_WORLD_PROFILE`, default "full"), its LoRA sources when one is first asked for.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import InvalidInputError
from ..common.kinds import built_kinds
from .build import KINDS, ensure_audio_sources, ensure_audio_world, load_weights
from .tasks import TASK_NAMES
from .zoo import MODEL_NAMES, SPECS, AudioWorldModel, model_from_state


def load_audio_world_model(name: str, device="cpu", dtype=None, root: Path | None = None) -> AudioWorldModel:
    """`NAME`, `NAME/TASK` (full fine-tune) or `NAME/TASK/lora` from the built audio world at `root` (built if None)."""
    parts = name.strip().split("/")
    if parts[0] not in SPECS or len(parts) > 3:
        raise InvalidInputError(f"unknown audio world model {name!r}; models: {', '.join(MODEL_NAMES)} "
                                "(world:audio/NAME, optionally /TASK or /TASK/lora)")
    task = parts[1] if len(parts) >= 2 else None
    kind = parts[2] if len(parts) == 3 else "full"
    if task is not None and (task not in TASK_NAMES or kind not in KINDS):
        raise InvalidInputError(f"audio world model {name!r}: task must be one of {', '.join(TASK_NAMES)} "
                                "and kind full or lora")
    if root is None:
        world = ensure_audio_world(kinds=(kind,))
    else:
        world = Path(root)
        if task is not None and built_kinds(world):
            ensure_audio_sources(world, (kind,))  # a built world gets a kind's sources on first use (else a no-op)
    spec = SPECS[parts[0]]
    state, _ = load_weights(world / "models" / spec.name / "base.safetensors")
    if task is not None:
        ft, _ = load_weights(world / "models" / spec.name / "ft" / f"{task}.{kind}.safetensors")
        state = {**state, **{f"audio.{k}": v for k, v in ft.items()}}
    return model_from_state(spec, state, f"world:audio/{name}", device=device, dtype=dtype)
