"""The world's data: tasks, controls, splits, probes and pre-training captions.

Every image is a canonical uint8 tensor (3, S, S) with S = `CANONICAL_SIZE` (32); a split holds
images (n, 3, S, S) uint8 and labels (n,) int64. Models resize these bilinearly to their own input
size (`platonic.world.zoo.WorldModel.prepare_probes`), so every model sees the same pixels.

Real data (nobody here wrote it):
- Fashion-MNIST, from the Debian package `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist);
- glyphs rendered from the typefaces of `fonts-aenigma` (hundreds of display families) and
  `fonts-dejavu-core`; fonts are split by family into disjoint train / val / test sets, so a
  glyph task's test split shows letterforms of typefaces no model ever saw;
- desktop icons of 27 everyday objects from ten Debian icon themes (`platonic.world.icons`), split
  by theme family the same way.
Procedural data (shapes, colours, counting, textures) fills the rest.

Tasks (8) and their roles:
    fashion        10 classes  Fashion-MNIST
    digits         10 classes  glyphs 0-9           } related group (glyph reading)
    upper          26 classes  glyphs A-Z           }
    lower          26 classes  glyphs a-z           held-out related task
    shapes          8 classes  procedural
    colours        10 classes  procedural
    counting        6 classes  procedural
    textures        8 classes  procedural
Controls (no probe, no fine-tune; the roles of CIFAR-100 and ImageNet):
    objects        27 classes  icons of everyday objects in test icon themes, "a photo of a {}."
    symbols        12 classes  punctuation/symbol glyphs in test fonts, "a photo of a {}."
Both are pre-training sets too (their train splits: other fonts, other themes); no task uses their images.

Probes: 30 per class drawn from the task's train split by a seeded random permutation (seed 42, no
per-class quota), N = 30 x classes, as in method.md §1.6 (`platonic.data.probes`, shared with YAML setups).
"""

from __future__ import annotations

import gzip
import hashlib
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..data.probes import PROBES_PER_CLASS, probe_indices
from ..errors import InvalidInputError, MissingDataError
from .icons import OBJECT_HINTS, OBJECT_NAMES, render_icon_set, require_icons

CANONICAL_SIZE = 32
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
AENIGMA_DIR = Path("/usr/share/fonts/truetype/aenigma")
DEJAVU_DIR = Path("/usr/share/fonts/truetype/dejavu")


# -- task definitions ---------------------------------------------------------------------------

FASHION_CLASSES = ("T-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot")
FASHION_HINTS = ("top", "legwear", "top", "garment", "outerwear", "footwear", "top", "footwear", "accessory", "footwear")
DIGITS = tuple("0123456789")
DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
UPPER = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
LOWER = tuple("abcdefghijklmnopqrstuvwxyz")
SYMBOL_CHARS = tuple("+%&?@#$=!/*(")
SYMBOL_NAMES = ("plus sign", "percent sign", "ampersand", "question mark", "at sign", "hash sign", "dollar sign",
                "equals sign", "exclamation mark", "slash", "asterisk", "parenthesis")
SHAPES = ("circle", "square", "triangle", "star", "cross", "diamond", "ring", "hexagon")
SHAPE_HINTS = ("round shape", "shape with corners", "pointed shape", "pointed shape", "shape with corners",
               "pointed shape", "round shape", "shape with corners")
COLOURS = ("red", "green", "blue", "yellow", "orange", "purple", "pink", "brown", "grey", "cyan")
COLOUR_RGB = ((220, 30, 30), (30, 170, 40), (30, 60, 220), (235, 220, 30), (245, 140, 20), (140, 40, 180),
              (250, 130, 190), (130, 80, 30), (128, 128, 128), (30, 210, 220))
COLOUR_HINTS = ("warm colour", "cool colour", "cool colour", "warm colour", "warm colour", "cool colour",
                "warm colour", "dark colour", "dull colour", "cool colour")
COUNTS = ("one", "two", "three", "four", "five", "six")
TEXTURES = ("horizontal stripes", "vertical stripes", "diagonal stripes", "checkerboard", "polka dots", "grid",
            "noise", "waves")
TEXTURE_HINTS = ("line pattern", "line pattern", "line pattern", "regular pattern", "regular pattern",
                 "regular pattern", "irregular pattern", "line pattern")


@dataclass(frozen=True)
class Task:
    """A classification task (or control set) of the world.

    classes: class names in label order; template: the one prompt template ("... {} ...");
    hints: per class, a partial description used in pre-training captions (names a group, not the class);
    domain: what kind of picture it is, used in generic captions; role: "task" or "control".
    """

    name: str
    classes: tuple[str, ...]
    template: str
    hints: tuple[str, ...]
    domain: str
    source: str
    role: str = "task"

    @property
    def prompts(self) -> list[str]:
        return [self.template.format(c) for c in self.classes]

    @property
    def n_classes(self) -> int:
        return len(self.classes)


def _vowel_hint(c: str) -> str:
    return "vowel" if c.lower() in "aeiou" else "consonant"


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("fashion", FASHION_CLASSES, "a photo of a {}, a type of clothing.", FASHION_HINTS, "clothing", "fashion-mnist"),
        Task("digits", DIGIT_NAMES, "a photo of the digit {}.", tuple("even digit" if i % 2 == 0 else "odd digit" for i in range(10)),
             "digit", "aenigma"),
        Task("upper", UPPER, "a photo of the capital letter {}.", tuple("capital " + _vowel_hint(c) for c in UPPER), "capital letter", "aenigma"),
        Task("lower", LOWER, "a photo of the small letter {}.", tuple("small " + _vowel_hint(c) for c in LOWER), "small letter", "aenigma"),
        Task("shapes", SHAPES, "a drawing of a {}.", SHAPE_HINTS, "shape", "procedural"),
        Task("colours", COLOURS, "a photo of something {}.", COLOUR_HINTS, "coloured thing", "procedural"),
        Task("counting", COUNTS, "a photo of {} dots.", tuple("a few dots" if i < 3 else "many dots" for i in range(6)), "dots", "procedural"),
        Task("textures", TEXTURES, "a photo of a {} texture.", TEXTURE_HINTS, "texture", "procedural"),
    )
}
CONTROLS: dict[str, Task] = {
    "objects": Task("objects", OBJECT_NAMES, "a photo of a {}.", OBJECT_HINTS, "desktop icon", "icon themes", role="control"),
    "symbols": Task("symbols", SYMBOL_NAMES, "a photo of a {}.", ("symbol",) * len(SYMBOL_NAMES), "symbol", "aenigma", role="control"),
}
TASK_NAMES = tuple(TASKS)
CONTROL_NAMES = tuple(CONTROLS)
RELATED_GROUP = ("digits", "upper")
HELD_OUT_RELATED = "lower"


def all_sets() -> dict[str, Task]:
    return {**TASKS, **CONTROLS}


# -- splits ---------------------------------------------------------------------------------------

@dataclass
class Split:
    """images (n, 3, S, S) uint8; labels (n,) int64."""

    images: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def subset(self, idx) -> "Split":
        return Split(self.images[idx], self.labels[idx])


@dataclass
class TaskData:
    task: Task
    train: Split
    val: Split
    test: Split
    probe_index: torch.Tensor = field(default=None)  # (N,) indices into train

    @property
    def probes(self) -> torch.Tensor:
        """Canonical probes (N, 3, S, S) uint8: 30 x classes train images, seed 42."""
        return self.train.images[self.probe_index]


# -- real data: Fashion-MNIST ---------------------------------------------------------------------

def require_debian_data() -> None:
    """Raise MissingDataError naming the Debian package when the real data is not installed."""
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").exists():
        raise MissingDataError(
            f"Fashion-MNIST not found in {FASHION_DIR}: install the Debian package `dataset-fashion-mnist` "
            "(sudo apt-get install dataset-fashion-mnist, or `make debian`)"
        )
    if not AENIGMA_DIR.is_dir() or not any(AENIGMA_DIR.glob("*.ttf")):
        raise MissingDataError(
            f"no fonts in {AENIGMA_DIR}: install the Debian package `fonts-aenigma` "
            "(sudo apt-get install fonts-aenigma, or `make debian`)"
        )
    if not (DEJAVU_DIR / "DejaVuSans.ttf").exists():
        raise MissingDataError(
            f"no DejaVu fonts in {DEJAVU_DIR}: install the Debian package `fonts-dejavu-core` "
            "(sudo apt-get install fonts-dejavu-core, or `make debian`)"
        )
    require_icons()


def _read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _to_canonical_gray(img28: np.ndarray) -> np.ndarray:
    """(n, 28, 28) uint8 -> (n, 3, 32, 32) uint8, padded by 2 on every side."""
    n = img28.shape[0]
    out = np.zeros((n, 3, CANONICAL_SIZE, CANONICAL_SIZE), dtype=np.uint8)
    out[:, :, 2:30, 2:30] = img28[:, None]
    return out


def _balanced_take(labels: np.ndarray, per_class: int, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    idx = []
    for c in range(n_classes):
        where = np.flatnonzero(labels == c)
        idx.append(rng.permutation(where)[:per_class])
    return rng.permutation(np.concatenate(idx))


def load_fashion(sizes: dict, rng: np.random.Generator) -> dict[str, Split]:
    """Fashion-MNIST train -> (train, val) by a seeded balanced draw; t10k -> test."""
    require_debian_data()
    tr_x = _read_idx(FASHION_DIR / "train-images-idx3-ubyte.gz")
    tr_y = _read_idx(FASHION_DIR / "train-labels-idx1-ubyte.gz").astype(np.int64)
    te_x = _read_idx(FASHION_DIR / "t10k-images-idx3-ubyte.gz")
    te_y = _read_idx(FASHION_DIR / "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    both = _balanced_take(tr_y, sizes["train"] + sizes["val"], 10, rng)
    val_mask = np.zeros(len(both), bool)
    for c in range(10):
        val_mask[np.flatnonzero(tr_y[both] == c)[: sizes["val"]]] = True
    te = _balanced_take(te_y, sizes["test"], 10, rng)
    mk = lambda x, y: Split(torch.from_numpy(_to_canonical_gray(x)), torch.from_numpy(y.copy()))  # noqa: E731
    return {"train": mk(tr_x[both[~val_mask]], tr_y[both[~val_mask]]), "val": mk(tr_x[both[val_mask]], tr_y[both[val_mask]]),
            "test": mk(tr_x[te] if False else te_x[te], te_y[te])}


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


def render_glyph(font_path: Path, char: str, rng: np.random.Generator) -> np.ndarray:
    """One glyph (3, S, S) uint8: light ink on a dark ground, random size, offset and tint."""
    from PIL import Image, ImageDraw, ImageFont

    size = int(rng.integers(18, 27))
    font = ImageFont.truetype(str(font_path), size)
    img = Image.new("L", (CANONICAL_SIZE, CANONICAL_SIZE), 0)
    draw = ImageDraw.Draw(img)
    l, t, r, b = draw.textbbox((0, 0), char, font=font)
    w, h = r - l, b - t
    scale = min(1.0, 28.0 / max(w, h, 1))
    if scale < 1.0:
        font = ImageFont.truetype(str(font_path), max(8, int(size * scale)))
        l, t, r, b = draw.textbbox((0, 0), char, font=font)
        w, h = r - l, b - t
    x = (CANONICAL_SIZE - w) / 2 - l + rng.integers(-2, 3)
    y = (CANONICAL_SIZE - h) / 2 - t + rng.integers(-2, 3)
    draw.text((x, y), char, fill=255, font=font)
    a = np.asarray(img, dtype=np.float32) / 255.0
    ink = rng.uniform(0.7, 1.0, size=3) * 255
    ground = rng.uniform(0.0, 0.25, size=3) * 255
    rgb = ground[:, None, None] * (1 - a[None]) + ink[:, None, None] * a[None]
    return rgb.clip(0, 255).astype(np.uint8)


def render_glyph_set(chars, fonts: list[Path], variants: int, rng: np.random.Generator) -> Split:
    imgs, labels = [], []
    for font in fonts:
        for _ in range(variants):
            for k, c in enumerate(chars):
                imgs.append(render_glyph(font, c, rng))
                labels.append(k)
    order = rng.permutation(len(labels))
    return Split(torch.from_numpy(np.stack(imgs)[order]), torch.tensor(labels, dtype=torch.int64)[torch.from_numpy(order)])


# -- procedural data ------------------------------------------------------------------------------

def _canvas(rng, dark=False):
    from PIL import Image

    base = rng.integers(0, 60, size=3) if dark else rng.integers(150, 230, size=3)
    return Image.new("RGB", (CANONICAL_SIZE, CANONICAL_SIZE), tuple(int(v) for v in base))


def _random_colour(rng) -> tuple[int, int, int]:
    return tuple(int(v) for v in rng.integers(0, 256, size=3))


def _jitter_colour(rgb, rng, amount=25) -> tuple[int, int, int]:
    return tuple(int(np.clip(v + rng.integers(-amount, amount + 1), 0, 255)) for v in rgb)


def _draw_shape(draw, kind: str, cx: float, cy: float, r: float, colour, rng) -> None:
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
    _draw_shape(draw, SHAPES[label], cx, cy, r, _random_colour(rng), rng)
    return _noisy(img, rng)


def _colour_image(label: int, rng) -> np.ndarray:
    from PIL import ImageDraw

    img = _canvas(rng, dark=bool(rng.integers(0, 2)))
    draw = ImageDraw.Draw(img)
    r = rng.uniform(6, 12)
    cx, cy = rng.uniform(r + 1, CANONICAL_SIZE - r - 1, size=2)
    _draw_shape(draw, SHAPES[int(rng.integers(0, len(SHAPES)))], cx, cy, r, _jitter_colour(COLOUR_RGB[label], rng, 30), rng)
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


def _texture_image(label: int, rng) -> np.ndarray:
    S = CANONICAL_SIZE
    yy, xx = np.mgrid[0:S, 0:S].astype(np.float32)
    period = rng.uniform(4, 8)
    phase = rng.uniform(0, period)
    kind = TEXTURES[label]
    if kind == "horizontal stripes":
        m = ((yy + phase) % period) < period / 2
    elif kind == "vertical stripes":
        m = ((xx + phase) % period) < period / 2
    elif kind == "diagonal stripes":
        sign = 1 if rng.integers(0, 2) else -1
        m = ((xx + sign * yy + phase) % period) < period / 2
    elif kind == "checkerboard":
        m = (((xx + phase) // (period / 2)) + ((yy + phase) // (period / 2))) % 2 == 0
    elif kind == "polka dots":
        m = np.hypot((xx + phase) % period - period / 2, (yy + phase) % period - period / 2) < period / 4
    elif kind == "grid":
        m = (((xx + phase) % period) < 1.2) | (((yy + phase) % period) < 1.2)
    elif kind == "noise":
        m = rng.random((S, S)) < 0.5
    else:  # waves
        m = ((yy + 2.5 * np.sin(xx / rng.uniform(1.5, 3.0)) + phase) % period) < period / 2
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


PROCEDURAL = {"shapes": _shape_image, "colours": _colour_image, "counting": _count_image, "textures": _texture_image}


def make_procedural(name: str, per_class: int, rng: np.random.Generator) -> Split:
    n_classes = TASKS[name].n_classes
    labels = np.repeat(np.arange(n_classes), per_class)
    labels = rng.permutation(labels)
    imgs = np.stack([PROCEDURAL[name](int(y), rng) for y in labels])
    return Split(torch.from_numpy(imgs), torch.from_numpy(labels.astype(np.int64)))


# -- the whole data set -------------------------------------------------------------------------

@dataclass(frozen=True)
class DataSizes:
    """Per-class split sizes (procedural, fashion), glyph variants per font and split, icon renderings per
    icon drawing (train; val and test), control images per class."""

    train_per_class: int
    val_per_class: int
    test_per_class: int
    glyph_variants_train: int
    glyph_variants_eval: int
    control_per_class: int
    max_fonts: int | None = None  # cap on fonts per split (tiny profile)
    icon_variants_train: int = 8
    icon_variants_eval: int = 10


def build_data(sizes: DataSizes, seed: int, progress: bool = True, probes_per_class: int = PROBES_PER_CLASS) -> dict[str, TaskData]:
    """All tasks and controls, deterministic under `seed`. Returns name -> TaskData (controls: test only)."""
    from ..progress import track

    require_debian_data()
    out: dict[str, TaskData] = {}
    fonts = split_fonts(usable_fonts())
    if sizes.max_fonts is not None:
        fonts = {k: v[: sizes.max_fonts] for k, v in fonts.items()}
    steps = ["fashion", "digits", "upper", "lower", "shapes", "colours", "counting", "textures", "symbols", "objects"]
    for name in track(steps, description="rendering world data", enabled=progress):
        sub = np.random.default_rng([seed, steps.index(name)])
        if name == "fashion":
            sp = load_fashion({"train": sizes.train_per_class, "val": sizes.val_per_class, "test": sizes.test_per_class}, sub)
        elif name == "objects":
            sp = {split: Split(*render_icon_set(split, sizes.icon_variants_train if split == "train" else sizes.icon_variants_eval, sub))
                  for split in ("train", "val", "test")}
        elif name in ("digits", "upper", "lower", "symbols"):
            chars = {"digits": DIGITS, "upper": UPPER, "lower": LOWER, "symbols": SYMBOL_CHARS}[name]
            sp = {
                "train": render_glyph_set(chars, fonts["train"], sizes.glyph_variants_train, sub),
                "val": render_glyph_set(chars, fonts["val"], sizes.glyph_variants_eval, sub),
                "test": render_glyph_set(chars, fonts["test"], sizes.glyph_variants_eval, sub),
            }
        else:
            sp = {
                "train": make_procedural(name, sizes.train_per_class, sub),
                "val": make_procedural(name, sizes.val_per_class, sub),
                "test": make_procedural(name, sizes.test_per_class, sub),
            }
        task = TASKS.get(name) or CONTROLS[name]
        td = TaskData(task, sp["train"], sp["val"], sp["test"])
        td.probe_index = probe_indices(len(td.train), task.n_classes, probes_per_class)
        out[name] = td
    # controls: at most `control_per_class` test images per class; their train splits stay for pre-training
    cr = np.random.default_rng([seed, 99])
    for name in CONTROL_NAMES:
        whole = out[name]
        idx = _balanced_take(whole.test.labels.numpy(), sizes.control_per_class, CONTROLS[name].n_classes, cr)
        out[name] = TaskData(CONTROLS[name], whole.train, whole.val, whole.test.subset(torch.from_numpy(idx)),
                             probe_index=torch.zeros(0, dtype=torch.long))
    return out


def data_to_tensors(data: dict[str, TaskData]) -> dict[str, torch.Tensor]:
    """Flatten for safetensors: '{name}.{split}.images' / '.labels', '{name}.probe_index'."""
    t = {}
    for name, td in data.items():
        for split in ("train", "val", "test"):
            s = getattr(td, split)
            t[f"{name}.{split}.images"] = s.images.contiguous()
            t[f"{name}.{split}.labels"] = s.labels.contiguous()
        t[f"{name}.probe_index"] = td.probe_index.contiguous()
    return t


def data_from_tensors(t: dict[str, torch.Tensor]) -> dict[str, TaskData]:
    out = {}
    for name, task in all_sets().items():
        sp = {s: Split(t[f"{name}.{s}.images"], t[f"{name}.{s}.labels"]) for s in ("train", "val", "test")}
        out[name] = TaskData(task, sp["train"], sp["val"], sp["test"], probe_index=t[f"{name}.probe_index"])
    return out


# -- pre-training captions ------------------------------------------------------------------------

GENERIC_CAPTIONS = ("a picture.", "an image.", "a small picture of something.", "a photo.")


def caption_pools(task: Task) -> dict[str, list[list[str]]]:
    """Per class: 'name' captions (name the class), 'hint' captions (a group or domain), shared 'generic'.

    Naming captions use several phrasings, only one of which is the task's prompt template.
    """
    name, hint = [], []
    for c, h in zip(task.classes, task.hints):
        name.append([task.template.format(c), f"{c}.", f"an image of {c}, a {task.domain}.", f"a picture showing {c}."])
        hint.append([f"a {h}.", f"a picture of a {h}.", f"a {task.domain}.", f"an image of a {task.domain}."])
    return {"name": name, "hint": hint}


def caption_vocabulary() -> list[str]:
    """Every caption string pre-training may use, sorted (the text cache is keyed by this list)."""
    out = set(GENERIC_CAPTIONS)
    for task in all_sets().values():
        pools = caption_pools(task)
        for kind in ("name", "hint"):
            for caps in pools[kind]:
                out.update(caps)
        out.update(task.prompts)
    return sorted(out)
