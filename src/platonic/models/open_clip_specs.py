"""The open_clip spec forms (`open_clip:ARCH/TAG`, `ARCH@FILE`, `ARCH@seed=N`, `ARCH`, `hf-hub:`, `local-dir:`),
parsed and checked without building a model and, but for a pretrained tag, without importing open_clip or
torch: the command line checks a spec before anything heavy loads (`platonic.models.check_spec`).
"""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

from ..errors import InvalidInputError
from ..layouts import OPEN_CLIP_CONFIG


def bundled_architectures() -> list[str]:
    """The names of open_clip's bundled model configs, read without importing open_clip (which imports torch)."""
    spec = importlib.util.find_spec("open_clip")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    return sorted(p.stem for folder in folders for p in (Path(folder) / "model_configs").glob("*.json"))


def _check_arch(arch: str) -> None:
    if arch in bundled_architectures():
        return
    import open_clip  # an architecture registered at run time (open_clip.add_model_config) is known there only

    known = open_clip.list_models()
    if arch not in known:
        close = difflib.get_close_matches(arch, known, n=5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see open_clip.list_models()"
        raise InvalidInputError(f"open_clip has no architecture {arch!r}{hint}")


RANDOM_SEED = 0  # `open_clip:ARCH` is this seed's random draw, so the same spec is the same model


def parse_spec(rest: str) -> tuple[str, str | None, int | None]:
    """`ARCH/TAG`, `ARCH@FILE`, `ARCH@seed=N` or `ARCH` -> (arch, tag or file, seed of random weights).

    Seeds are for random weights only: `ARCH` is seed 0. A weights file literally named `seed=N` is
    written with a directory, e.g. `ARCH@./seed=3`.
    """
    if "@" in rest:
        arch, after = rest.split("@", 1)
        if after.startswith("seed="):
            value = after.removeprefix("seed=")
            if not value.isdigit():
                raise InvalidInputError(f"open_clip:{rest}: the seed in @seed=N must be a non-negative integer; got {value!r}")
            return arch, None, int(value)
        return arch, after, None
    if "/" in rest:
        arch, tag = rest.split("/", 1)
        return arch, tag, None
    return rest, None, RANDOM_SEED


def check_spec(rest: str) -> None:
    """Check `open_clip:<rest>` without building anything: the architecture, the tag or seed, the file."""
    if rest.startswith("hf-hub:"):
        return
    if rest.startswith("local-dir:"):
        folder = Path(rest.removeprefix("local-dir:"))
        if not (folder / OPEN_CLIP_CONFIG).is_file():
            raise InvalidInputError(f"open_clip:{rest}: {folder} is not an open_clip model directory (no {OPEN_CLIP_CONFIG}); "
                                    "give a directory platonic or open_clip's save_for_hf wrote")
        return
    arch, pretrained, seed = parse_spec(rest)
    if "@" in rest and seed is None and not Path(pretrained).is_file():
        raise InvalidInputError(f"open_clip:{rest}: weights file {pretrained} does not exist")
    _check_arch(arch)
    if pretrained is not None and "@" not in rest:
        import open_clip

        tags = open_clip.list_pretrained_tags_by_model(arch)
        if pretrained not in tags:
            raise InvalidInputError(f"open_clip has no pretrained tag {pretrained!r} for {arch}; known tags: {', '.join(tags) or 'none'}")
