"""Glyphs rendered from the typefaces of Debian font packages (`fonts-aenigma`, `fonts-dejavu-core`), fonts
split by family into disjoint train / val / test sets."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

from .splits import CANONICAL_SIZE, ImageSplit
from .tasks import DIGITS, LOWER, SYMBOL_CHARS, UPPER

AENIGMA_DIR = Path("/usr/share/fonts/truetype/aenigma")
DEJAVU_DIR = Path("/usr/share/fonts/truetype/dejavu")


# -- real data: glyphs from font packages -------------------------------------------------------

GLYPH_CHARS = DIGITS + UPPER + LOWER + SYMBOL_CHARS


def usable_fonts() -> list[Path]:
    """Fonts (aenigma + DejaVu) that render every glyph the world uses, distinctly; sorted by name."""
    from PIL import ImageFont

    out = []
    for path in sorted(AENIGMA_DIR.glob("*.ttf")) + sorted(DEJAVU_DIR.glob("DejaVu*.ttf")):
        try:
            font = ImageFont.truetype(str(path), 24)
        except OSError:
            continue
        masks = set()
        ok = True
        for c in GLYPH_CHARS:
            m = font.getmask(c)
            if m.getbbox() is None:
                ok = False
                break
            masks.add(bytes(m))
        if ok and len(masks) >= len(GLYPH_CHARS) - 3:
            out.append(path)
    return out


def split_fonts(fonts: list[Path]) -> dict[str, list[Path]]:
    """Disjoint font sets by a hash of the family file name: DejaVu always train; aenigma 70/15/15."""
    out = {"train": [], "val": [], "test": []}
    for p in fonts:
        if p.name.startswith("DejaVu"):
            out["train"].append(p)
            continue
        h = int(hashlib.sha256(p.stem.encode()).hexdigest()[:8], 16) % 100
        out["train" if h < 70 else "val" if h < 85 else "test"].append(p)
    return out


def render_glyph(font_path: Path, char: str, rng: np.random.Generator, side: int = CANONICAL_SIZE) -> np.ndarray:
    """One glyph (3, side, side) uint8: light ink on a dark ground, random size, offset and tint. Every length
    (font size 18-26, the 28 px box a glyph must fit, offsets of +-2) is for a 32 px canvas and scales with side."""
    from PIL import Image, ImageDraw, ImageFont

    k = side / CANONICAL_SIZE
    size = int(round(int(rng.integers(18, 27)) * k))
    font = ImageFont.truetype(str(font_path), size)
    img = Image.new("L", (side, side), 0)
    draw = ImageDraw.Draw(img)
    l, t, r, b = draw.textbbox((0, 0), char, font=font)
    w, h = r - l, b - t
    scale = min(1.0, 28.0 * k / max(w, h, 1))
    if scale < 1.0:
        font = ImageFont.truetype(str(font_path), max(int(8 * k), int(size * scale)))
        l, t, r, b = draw.textbbox((0, 0), char, font=font)
        w, h = r - l, b - t
    x = (side - w) / 2 - l + rng.integers(-2, 3) * k
    y = (side - h) / 2 - t + rng.integers(-2, 3) * k
    draw.text((x, y), char, fill=255, font=font)
    a = np.asarray(img, dtype=np.float32) / 255.0
    ink = rng.uniform(0.7, 1.0, size=3) * 255
    ground = rng.uniform(0.0, 0.25, size=3) * 255
    rgb = ground[:, None, None] * (1 - a[None]) + ink[:, None, None] * a[None]
    return rgb.clip(0, 255).astype(np.uint8)


def render_glyph_set(chars, fonts: list[Path], variants: int, rng: np.random.Generator) -> ImageSplit:
    imgs, labels = [], []
    for font in fonts:
        for _ in range(variants):
            for k, c in enumerate(chars):
                imgs.append(render_glyph(font, c, rng))
                labels.append(k)
    order = rng.permutation(len(labels))
    return ImageSplit(torch.from_numpy(np.stack(imgs)[order]), torch.tensor(labels, dtype=torch.int64)[torch.from_numpy(order)])
