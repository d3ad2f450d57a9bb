"""Procedural images: shapes, colours, counting, textures (`PROCEDURAL`, `make_procedural`), and harder variants of
shapes and textures (`VARIANTS`) for the world on pretrained trunks, where the originals sit at 97-99 % fine-tuned
(research/hard_tasks_screen.py, docs/lab/2026-12-04-trunk-world-screen.md)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ...errors import InvalidInputError
from .splits import CANONICAL_SIZE, ImageSplit
from .tasks import COLOUR_RGB, SHAPES, TASKS, TEXTURES

# -- procedural data ------------------------------------------------------------------------------

def _canvas(rng, dark=False):
    from PIL import Image

    base = rng.integers(0, 60, size=3) if dark else rng.integers(150, 230, size=3)
    return Image.new("RGB", (CANONICAL_SIZE, CANONICAL_SIZE), tuple(int(v) for v in base))


def _random_colour(rng) -> tuple[int, int, int]:
    return tuple(int(v) for v in rng.integers(0, 256, size=3))


def _jitter_colour(rgb, rng, amount=25) -> tuple[int, int, int]:
    return tuple(int(np.clip(v + rng.integers(-amount, amount + 1), 0, 255)) for v in rgb)


def draw_shape(draw, kind: str, cx: float, cy: float, r: float, colour, rng) -> None:
    """Draw shape `kind` (one of `SHAPES`) of radius r centred at (cx, cy) in `colour` with PIL's `draw`, turned by
    an angle drawn from `rng` (the shapes task's drawing; research/hard_tasks_screen.py draws its candidates with it)."""
    rot = rng.uniform(0, 2 * math.pi)
    if kind == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)
    elif kind == "ring":
        w = max(2, int(r / 2.5))
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=colour, width=w)
    elif kind == "square":
        pts = [(cx + r * math.cos(rot + k * math.pi / 2), cy + r * math.sin(rot + k * math.pi / 2)) for k in range(4)]
        draw.polygon(pts, fill=colour)
    elif kind == "diamond":
        pts = [(cx, cy - r), (cx + 0.6 * r, cy), (cx, cy + r), (cx - 0.6 * r, cy)]
        draw.polygon(pts, fill=colour)
    elif kind == "triangle":
        pts = [(cx + r * math.cos(rot + k * 2 * math.pi / 3), cy + r * math.sin(rot + k * 2 * math.pi / 3)) for k in range(3)]
        draw.polygon(pts, fill=colour)
    elif kind == "hexagon":
        pts = [(cx + r * math.cos(rot + k * math.pi / 3), cy + r * math.sin(rot + k * math.pi / 3)) for k in range(6)]
        draw.polygon(pts, fill=colour)
    elif kind == "star":
        pts = []
        for k in range(10):
            rr = r if k % 2 == 0 else r * 0.42
            pts.append((cx + rr * math.cos(rot + k * math.pi / 5), cy + rr * math.sin(rot + k * math.pi / 5)))
        draw.polygon(pts, fill=colour)
    elif kind == "cross":
        w = r * 0.35
        draw.rectangle([cx - r, cy - w, cx + r, cy + w], fill=colour)
        draw.rectangle([cx - w, cy - r, cx + w, cy + r], fill=colour)
    else:  # pragma: no cover
        raise InvalidInputError(f"unknown shape {kind!r}; one of {', '.join(SHAPES)}")


def _shape_image(label: int, rng) -> np.ndarray:
    from PIL import ImageDraw

    img = _canvas(rng, dark=bool(rng.integers(0, 2)))
    draw = ImageDraw.Draw(img)
    r = rng.uniform(7, 13)
    cx, cy = rng.uniform(r + 1, CANONICAL_SIZE - r - 1, size=2)
    draw_shape(draw, SHAPES[label], cx, cy, r, _random_colour(rng), rng)
    return _noisy(img, rng)


def _colour_image(label: int, rng) -> np.ndarray:
    from PIL import ImageDraw

    img = _canvas(rng, dark=bool(rng.integers(0, 2)))
    draw = ImageDraw.Draw(img)
    r = rng.uniform(6, 12)
    cx, cy = rng.uniform(r + 1, CANONICAL_SIZE - r - 1, size=2)
    draw_shape(draw, SHAPES[int(rng.integers(0, len(SHAPES)))], cx, cy, r, _jitter_colour(COLOUR_RGB[label], rng, 30), rng)
    return _noisy(img, rng)


def _count_image(label: int, rng) -> np.ndarray:
    from PIL import ImageDraw

    img = _canvas(rng, dark=bool(rng.integers(0, 2)))
    draw = ImageDraw.Draw(img)
    colour = _random_colour(rng)
    centres = []
    n = label + 1
    tries = 0
    while len(centres) < n and tries < 500:
        tries += 1
        r = 2.6
        c = rng.uniform(r + 1, CANONICAL_SIZE - r - 1, size=2)
        if all(np.hypot(*(c - o)) > 2 * r + 2 for o in centres):
            centres.append(c)
    for cx, cy in centres:
        rr = rng.uniform(2.0, 3.2)
        draw.ellipse([cx - rr, cy - rr, cx + rr, cy + rr], fill=colour)
    return _noisy(img, rng)


def texture_mask(kind: str, xx: np.ndarray, yy: np.ndarray, period: float, phase: float, rng) -> np.ndarray:
    """The two-colour pattern of texture `kind` (one of `TEXTURES`) as a boolean (S, S) mask over pixel coordinates
    xx, yy (S, S) (research/hard_tasks_screen.py passes turned coordinates); stripe orientation, noise and wave
    length draw from `rng`."""
    if kind == "horizontal stripes":
        return ((yy + phase) % period) < period / 2
    elif kind == "vertical stripes":
        return ((xx + phase) % period) < period / 2
    elif kind == "diagonal stripes":
        sign = 1 if rng.integers(0, 2) else -1
        return ((xx + sign * yy + phase) % period) < period / 2
    elif kind == "checkerboard":
        return (((xx + phase) // (period / 2)) + ((yy + phase) // (period / 2))) % 2 == 0
    elif kind == "polka dots":
        return np.hypot((xx + phase) % period - period / 2, (yy + phase) % period - period / 2) < period / 4
    elif kind == "grid":
        return (((xx + phase) % period) < 1.2) | (((yy + phase) % period) < 1.2)
    elif kind == "noise":
        return rng.random(xx.shape) < 0.5
    # waves
    return ((yy + 2.5 * np.sin(xx / rng.uniform(1.5, 3.0)) + phase) % period) < period / 2


def _texture_image(label: int, rng) -> np.ndarray:
    S = CANONICAL_SIZE
    yy, xx = np.mgrid[0:S, 0:S].astype(np.float32)
    period = rng.uniform(4, 8)
    phase = rng.uniform(0, period)
    m = texture_mask(TEXTURES[label], xx, yy, period, phase, rng)
    a, b = np.array(_random_colour(rng), np.float32), np.array(_random_colour(rng), np.float32)
    if np.abs(a - b).sum() < 150:
        b = 255 - a
    img = np.where(m[None], a[:, None, None], b[:, None, None])
    img = img + rng.normal(0, 8, size=img.shape)
    return img.clip(0, 255).astype(np.uint8)


def _noisy(img, rng) -> np.ndarray:
    a = np.asarray(img, dtype=np.float32).transpose(2, 0, 1)
    a = a + rng.normal(0, 6, size=a.shape)
    return a.clip(0, 255).astype(np.uint8)


def _small_low_contrast_shape(label: int, rng) -> np.ndarray:
    """A small shape (radius 4-8 px) whose colour is the background's (40-215 a channel) shifted by +-45 x U(0.8, 1.2)
    a channel, plus Gaussian noise sigma 10."""
    from PIL import Image, ImageDraw

    S = CANONICAL_SIZE
    bg = rng.integers(40, 216, size=3)
    img = Image.new("RGB", (S, S), tuple(int(v) for v in bg))
    r = rng.uniform(4, 8)
    cx, cy = rng.uniform(r + 1, S - r - 1, size=2)
    colour = tuple(int(v) for v in np.clip(bg + rng.choice([-1, 1], 3) * 45 * rng.uniform(0.8, 1.2, 3), 0, 255))
    draw_shape(ImageDraw.Draw(img), SHAPES[label], cx, cy, r, colour, rng)
    a = np.asarray(img, np.float32).transpose(2, 0, 1) + rng.normal(0, 10, size=(3, S, S))
    return a.clip(0, 255).astype(np.uint8)


def _low_contrast_turned_texture(label: int, rng) -> np.ndarray:
    """The texture's pattern over coordinates turned by U(-0.35, 0.35) rad, period 3-10 px, two colours 40 apart a
    channel (the first 40-215), plus Gaussian noise sigma 18."""
    S = CANONICAL_SIZE
    yy, xx = np.mgrid[0:S, 0:S].astype(np.float32)
    t = rng.uniform(-0.35, 0.35)
    xr, yr = xx * math.cos(t) - yy * math.sin(t), xx * math.sin(t) + yy * math.cos(t)
    period = rng.uniform(3, 10)
    phase = rng.uniform(0, period)
    m = texture_mask(TEXTURES[label], xr, yr, period, phase, rng)
    a = rng.integers(40, 216, size=3).astype(np.float32)
    b = np.clip(a + rng.choice([-1, 1], 3) * 40, 0, 255)
    img = np.where(m[None], a[:, None, None], b[:, None, None]) + rng.normal(0, 18, size=(3, S, S))
    return img.clip(0, 255).astype(np.uint8)


PROCEDURAL = {"shapes": _shape_image, "colours": _colour_image, "counting": _count_image, "textures": _texture_image}
# task -> variant name -> renderer; "world" is the task as the tiny-tower world draws it
VARIANTS = {name: {"world": render} for name, render in PROCEDURAL.items()}
VARIANTS["shapes"]["small-lowc"] = _small_low_contrast_shape
VARIANTS["textures"]["lowc-noise-rot"] = _low_contrast_turned_texture


def check_variants(variants: dict[str, str]) -> None:
    """Refuse a task without variants or an unknown variant, naming the known ones."""
    for name, variant in variants.items():
        if name not in VARIANTS:
            raise InvalidInputError(f"no variants of task {name!r}; procedural tasks: {', '.join(VARIANTS)}")
        if variant not in VARIANTS[name]:
            raise InvalidInputError(f"unknown variant {variant!r} of {name}; use one of {', '.join(VARIANTS[name])}")


def make_procedural(name: str, per_class: int, rng: np.random.Generator, variant: str = "world") -> ImageSplit:
    """`per_class` images of every class of procedural task `name`, drawn by its `variant` (`VARIANTS`), shuffled."""
    check_variants({name: variant})
    n_classes = TASKS[name].n_classes
    labels = np.repeat(np.arange(n_classes), per_class)
    labels = rng.permutation(labels)
    render = VARIANTS[name][variant]
    imgs = np.stack([render(int(y), rng) for y in labels])
    return ImageSplit(torch.from_numpy(imgs), torch.from_numpy(labels.astype(np.int64)))
