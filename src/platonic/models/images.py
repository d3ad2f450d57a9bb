"""Canonical probe images: one shared 224 x 224 uint8 copy, resized per model (method.md §1.6).

The embedded world uses its own, smaller canonical size (`DualEncoder.canonical_size`).

`canonical_images` turns files, a folder, PIL images or tensors into the (N, 3, 224, 224) uint8
tensor every model is fed from and whose digest identifies the probes (16-bit greyscale is scaled to
8 bits, not clipped). Images (files, folders, PIL) are made canonical as the reference code stores its
probe bundle (`resize="reference"`, the default, `paper_canonical`): the shorter side resized to
int(S * 256 / 224) (PIL bilinear, which antialiases), the centre S x S cropped, normalised with CLIP's
mean and std, de-normalised and truncated to uint8. `resize="shorter-side"` is the path before issue 35:
the shorter side resized straight to S and rounded, then the centre crop; it keeps more of the image's
border (a frame along the top of a 256 x 320 image survives it and is cropped by the reference's), and the
probe digests of descriptors measured from folders before then. `to_model_input` resizes the canonical
probes bilinearly (plain, no antialiasing, as the reference code) to a model's input size and normalises
them with that model's mean and std.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F

from ..errors import InvalidInputError
from .constants import OPENAI_MEAN, OPENAI_STD

CANONICAL_SIZE = 224
RESIZE_RATIO = 256 / 224  # the reference code resizes the shorter side to int(S * 256 / 224), then crops S
RESIZES = ("reference", "shorter-side")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}


HIGH_DEPTH_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I", "F")


def check_finite_pixels(img) -> None:
    """Refuse a float image with NaN or infinite pixels (no 8-bit image can show them: a NaN pixel used to turn
    a float TIFF almost black, silently)."""
    if img.mode != "F":
        return
    import numpy as np

    bad = int((~np.isfinite(np.asarray(img, dtype=np.float64))).sum())
    if bad:
        raise InvalidInputError(f"it has {bad} non-finite pixel(s) (NaN or inf) in its float data; fix or drop the file")


def to_8bit(img):
    """A PIL image with 8-bit channels: 16-bit (and 32-bit integer / float) greyscale is *scaled* to 0..255.

    PIL's own convert("RGB") clips such images at 255 (almost all white). "I;16*" modes span 0..65535;
    "I" and "F" are read as 16-bit when their values exceed 255 (PNG and TIFF open 16-bit grey that way),
    as 8-bit otherwise; float images within [0, 1] are read as fractions. Non-finite pixels are refused
    (`check_finite_pixels`).
    """
    from PIL import Image
    import numpy as np

    if img.mode not in HIGH_DEPTH_MODES:
        return img
    check_finite_pixels(img)
    a = np.asarray(img, dtype=np.float64)
    top = float(a.max()) if a.size else 0.0
    if img.mode.startswith("I;16") or top > 255:
        scale = 255.0 / 65535.0 if top <= 65535 else 255.0 / top
    elif img.mode == "F" and top <= 1.0:
        scale = 255.0
    else:
        scale = 1.0
    return Image.fromarray(np.clip(np.rint(a * scale), 0, 255).astype(np.uint8), mode="L")


def paper_canonical(img, size: int = CANONICAL_SIZE) -> torch.Tensor:
    """(3, size, size) uint8 of one PIL image, as the reference code stores a probe (pta/features.py):

        x = ToTensor(CenterCrop(S)(Resize(int(S * 256 / 224))(img)))
        canonical = uint8_truncate(clamp((((x - mean) / std) * std + mean), 0, 1) * 255)

    Resize is PIL's bilinear on the shorter side (torchvision's `Resize` on a PIL image), mean / std
    CLIP's, and the float-to-uint8 step truncates as the reference's `.to(torch.uint8)` does.
    """
    from torchvision.transforms import functional as TF

    img = to_8bit(img).convert("RGB")
    img = TF.center_crop(TF.resize(img, int(size * RESIZE_RATIO)), [size, size])
    x = TF.to_tensor(img)  # float32 in [0, 1]
    mean = torch.tensor(OPENAI_MEAN).view(3, 1, 1)
    std = torch.tensor(OPENAI_STD).view(3, 1, 1)
    x = (x - mean) / std  # normalised, as the reference eval transform hands it over ...
    return ((x * std + mean).clamp(0, 1) * 255).to(torch.uint8)  # ... and de-normalised, truncated


def _pil_to_canonical(img, size: int, resize: str = "reference") -> torch.Tensor:
    """One PIL image as (3, size, size) uint8: `paper_canonical`, or ("shorter-side") the shorter side
    resized to `size` (bilinear, rounded), then the centre size x size."""
    if resize == "reference":
        return paper_canonical(img, size)
    from PIL import Image

    img = to_8bit(img).convert("RGB")
    w, h = img.size
    scale = size / min(w, h)
    img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    img = img.crop((left, top, left + size, top + size))
    return torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).reshape(size, size, 3).permute(2, 0, 1)


def image_files(folder: Path) -> list[Path]:
    """Image files below `folder`, sorted by path (the probe order)."""
    files = sorted(p for p in Path(folder).rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise InvalidInputError(f"no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) found under {folder}")
    return files


def canonical_images(images, size: int = CANONICAL_SIZE, resize: str = "reference") -> torch.Tensor:
    """(N, 3, size, size) uint8 from a tensor, a folder, a list of files or a list of PIL images.

    Images: `resize` "reference" (the paper's probe bundle, the default) or "shorter-side" (module
    docstring). Tensors (already pixels; `resize` does not apply): uint8 (N, C, H, W), or float in
    [0, 1]; grey (C = 1) is repeated to RGB; other sizes are resized bilinearly (antialiased) to
    size x size. The default size is 224 (method.md §1.6).
    """
    if resize not in RESIZES:
        raise InvalidInputError(f"probe resize is one of {', '.join(RESIZES)}; got {resize!r}")
    if isinstance(images, (str, Path)):
        images = image_files(Path(images))
    if isinstance(images, torch.Tensor):
        return _canonical_tensor(images, size)
    items = list(images)
    if not items:
        raise InvalidInputError("no probe images given")
    from PIL import Image

    out = []
    for item in items:
        if isinstance(item, (str, Path)):
            try:
                with Image.open(item) as img:
                    out.append(_pil_to_canonical(img, size, resize))
            except Image.DecompressionBombError as exc:
                raise InvalidInputError(f"probe image {item} is over PIL's size limit ({exc}); shrink it, or raise "
                                        "PIL.Image.MAX_IMAGE_PIXELS if you trust the file") from None
            except (OSError, ValueError) as exc:
                raise InvalidInputError(f"cannot read probe image {item}: {exc}") from None
        elif isinstance(item, Image.Image):
            out.append(_pil_to_canonical(item, size, resize))
        else:
            raise InvalidInputError(f"probe images must be files, PIL images or one tensor; got {type(item).__name__}")
    return torch.stack(out)


def _canonical_tensor(x: torch.Tensor, size: int) -> torch.Tensor:
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise InvalidInputError(f"probe images must be a (N, 3, H, W) or (N, 1, H, W) tensor; got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise InvalidInputError("no probe images given (N = 0)")
    if x.is_floating_point():
        if not torch.isfinite(x).all() or x.min() < 0 or x.max() > 1:
            raise InvalidInputError("float probe images must be finite and in [0, 1]; pass uint8 for 0..255 pixels")
        x = (x * 255).round().to(torch.uint8)
    elif x.dtype != torch.uint8:
        raise InvalidInputError(f"probe images must be uint8 or float in [0, 1]; got {x.dtype}")
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    if tuple(x.shape[2:]) != (size, size):
        x = F.interpolate(x.float(), size=(size, size), mode="bilinear", antialias=True, align_corners=False)
        x = x.round().clamp(0, 255).to(torch.uint8)
    return x.contiguous()


def to_model_input(probes: torch.Tensor, size: int | Sequence[int], mean: Iterable[float], std: Iterable[float],
                   device=None, dtype=torch.float32) -> torch.Tensor:
    """Canonical uint8 probes (B, 3, 224, 224) -> normalised float input (B, 3, H, W) of a model.

    x = (resize_bilinear(probes / 255, (H, W)) - mean) / std, plain bilinear (align_corners=False) without
    antialiasing, as the reference code resizes its stored probes for each model (method.md §1.6).
    """
    if probes.dtype != torch.uint8 or probes.ndim != 4:
        raise InvalidInputError(f"expected canonical uint8 probes (B, 3, H, W); got {probes.dtype} {tuple(probes.shape)}")
    size = (size, size) if isinstance(size, int) else tuple(size)
    x = probes.to(device=device).float() / 255.0
    if tuple(x.shape[2:]) != size:
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    mean_t = torch.tensor(list(mean), device=x.device).view(1, -1, 1, 1)
    std_t = torch.tensor(list(std), device=x.device).view(1, -1, 1, 1)
    return ((x - mean_t) / std_t).to(dtype)
