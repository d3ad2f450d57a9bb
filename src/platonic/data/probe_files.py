"""Probe inputs read from what a user names: a folder of images or of sound files, or a .safetensors file.

`load_probes(path)` gives the canonical tensor every model is fed from (`models.images`: (N, 3, S, S)
uint8; `models.audio`: (N, T) float clips at 16 kHz), or one error naming the option and the fix.
`check_probe_path(path)` refuses a path that cannot hold probes without reading any (no torch), so a
command runs it before its work.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ArtifactError, InvalidInputError


def check_probe_path(path: Path, option: str = "--probes") -> Path:
    """Refuse a path that is neither a folder nor a .safetensors file (`option` names the flag in errors)."""
    path = Path(path)
    if path.is_dir() or (path.is_file() and path.suffix == ".safetensors"):
        return path
    if not path.exists():
        raise InvalidInputError(f"{option} {path} does not exist; give a folder of images or sound files, or a "
                                ".safetensors file")
    raise InvalidInputError(f"{option} {path}: give a folder of images or sound files, or a .safetensors file with a "
                            "'probes' tensor")


def load_probes(path: Path, option: str = "--probes", resize: str = "reference"):
    """A folder of images or of sound files (made canonical: `models.images`, `models.audio`) or a
    .safetensors file holding a tensor named 'probes' (`option` names the flag in errors). resize: how
    a folder's images are made canonical (`models.images.canonical_images`: "reference", the paper's
    probe bundle, or "shorter-side", the path before issue 35)."""
    from safetensors.torch import load_file

    from ..models.audio import canonical_audio, is_audio_file
    from ..models.images import canonical_images

    path = check_probe_path(path, option)
    if path.is_dir():
        if any(is_audio_file(p) for p in path.rglob("*")):
            return canonical_audio(path)
        return canonical_images(path, resize=resize)
    try:
        tensors = load_file(str(path))
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for damaged files
        raise ArtifactError(f"{option} {path} is not a readable safetensors file ({type(exc).__name__}); "
                            "it may be truncated") from None
    if "probes" not in tensors:
        raise InvalidInputError(f"{path} holds no tensor named 'probes' (it has: {', '.join(tensors) or 'none'})")
    return tensors["probes"]
