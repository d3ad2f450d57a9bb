"""Decoding one image the way the paper's code stores its probes (method.md §1.6, pta/features.py).

    x = ToTensor(CenterCrop(S)(Resize(int(S * 256 / 224))(img)))        S = 224 for real models
    canonical = uint8_truncate(clamp((((x - mean) / std) * std + mean), 0, 1) * 255)

Resize is PIL's bilinear on the shorter side (torchvision's `Resize` on a PIL image, which is
antialiased as PIL always is), mean / std are CLIP's (the processor the reference bundle was made
with), and the float-to-uint8 step *truncates* as the reference code's `.to(torch.uint8)` does, so
a few pixel values come out one below the rounded value, exactly as in the paper's bundle. Each model
then resizes these (N, 3, S, S) uint8 probes to its own input size with plain bilinear interpolation,
no antialiasing (`platonic.models.images.to_model_input`).

This is the path of every data source in `platonic.data.sources` (image folders in a YAML setup,
`hf:` and `torchvision:`) and, since issue 35, of `platonic.models.images.canonical_images` (the
`--probes FOLDER` of `platonic measure` / `solve` / `apply`): one function, `paper_canonical`, in
`platonic.models.images`. The earlier folder path (the shorter side resized straight to S, rounded) is
`canonical_images(..., resize="shorter-side")`, `--probe-resize shorter-side` on the command line.
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

from ..errors import InvalidInputError
from ..models.images import CANONICAL_SIZE, check_finite_pixels, paper_canonical


def open_image(item):
    """A PIL image from a path, raw bytes, a {"bytes", "path"} record (Hugging Face `Image(decode=False)`)
    or a PIL image; the one place a data source decodes an image (tests count calls here)."""
    from PIL import Image

    if isinstance(item, Image.Image):
        return item
    try:
        if isinstance(item, dict):
            if item.get("bytes") is not None:
                return _loaded(Image.open(io.BytesIO(item["bytes"])))
            if item.get("path"):
                return _loaded(Image.open(item["path"]))
            raise InvalidInputError("an image record holds neither bytes nor a path")
        if isinstance(item, (bytes, bytearray)):
            return _loaded(Image.open(io.BytesIO(item)))
        return _loaded(Image.open(Path(item)))
    except Image.DecompressionBombError as exc:
        raise InvalidInputError(f"image {_name(item)} is over PIL's size limit ({exc}); shrink it, or raise "
                                "PIL.Image.MAX_IMAGE_PIXELS if you trust the file") from None
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read image {_name(item)}: {exc}") from None


def _loaded(img):
    img.load()
    check_finite_pixels(img)  # inside open_image's try: the message names the file
    return img


def _name(item) -> str:
    if isinstance(item, dict):
        return str(item.get("path") or "<bytes>")
    return "<bytes>" if isinstance(item, (bytes, bytearray)) else str(item)


def decode_batch(items, size: int = CANONICAL_SIZE) -> torch.Tensor:
    """(len(items), 3, size, size) uint8: each item opened (`open_image`) and made canonical."""
    if not items:
        return torch.empty(0, 3, size, size, dtype=torch.uint8)
    return torch.stack([paper_canonical(open_image(item), size) for item in items])
