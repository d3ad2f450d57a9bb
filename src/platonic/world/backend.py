"""The `world:` backend: `load_model("world:NAME[/TASK[/lora]]")` loads a model of the image world,
`load_model("world:trunk/NAME[/TASK[/lora]]")` one of the image world on pretrained trunks (an open_clip model),
`load_model("world:audio/NAME[/TASK[/lora]]")` one of the audio world's.

Importing this module registers the backend; `platonic.models` imports it on the first `world:` spec
(entry point `platonic.backends`).
"""

from __future__ import annotations

from pathlib import Path

from ..models import register_backend


def load_world_model(name: str, device="cpu", dtype=None, root: Path | None = None):
    """`NAME[/TASK[/lora]]` of the image world (`image.backend`), `trunk/NAME[/TASK[/lora]]` of the trunk world
    (`image.trunkworld.backend`) or `audio/NAME[/TASK[/lora]]` of the audio world (`audio.backend`), from the built
    world at `root` (the cached one, built if needed, when None)."""
    if name.strip().startswith("trunk/"):
        from .image.trunkworld.backend import load_trunk_world_model

        return load_trunk_world_model(name.strip().removeprefix("trunk/"), device=device, dtype=dtype, root=root)
    if name.strip().startswith("audio/"):
        from .audio.backend import load_audio_world_model

        return load_audio_world_model(name.strip().removeprefix("audio/"), device=device, dtype=dtype, root=root)
    from .image.backend import load_image_world_model

    return load_image_world_model(name, device=device, dtype=dtype, root=root)


register_backend("world", load_world_model)
