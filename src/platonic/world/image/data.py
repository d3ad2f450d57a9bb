"""The world's data: tasks, controls, splits, probes and pre-training captions.

Every image is a canonical uint8 tensor (3, S, S) with S = `CANONICAL_SIZE` (32); a split holds
images (n, 3, S, S) uint8 and labels (n,) int64. Models resize these bilinearly to their own input
size (`platonic.world.image.zoo.WorldModel.prepare_probes`), so every model sees the same pixels.

Real data (nobody here wrote it):
- Fashion-MNIST, from the Debian package `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist);
- glyphs rendered from the typefaces of `fonts-aenigma` (hundreds of display families) and
  `fonts-dejavu-core`; fonts are split by family into disjoint train / val / test sets, so a
  glyph task's test split shows letterforms of typefaces no model ever saw;
- desktop icons of 27 everyday objects from ten Debian icon themes (`platonic.world.image.icons`), split
  by theme family the same way.
Procedural data (shapes, colours, counting, textures) fills the rest.

The tasks and controls are `world.tasks`; glyphs `world.glyphs`; procedural images `world.procedural`;
icons `world.icons`; this module loads Fashion-MNIST and assembles the whole data set (`build_data`).

Probes: 30 per class drawn from the task's train split by a seeded random permutation (seed 42, no
per-class quota), N = 30 x classes, as in method.md §1.6 (`platonic.data.probes`, shared with YAML setups).
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...data.probes import PROBES_PER_CLASS, probe_indices
from ...errors import MissingDataError
from . import glyphs
from .emoji import render_emoji_set, require_emoji
from .glyphs import render_glyph_set, split_fonts, usable_fonts
from .icons import render_icon_set, require_icons
from .procedural import PROCEDURAL, check_variants, make_procedural
from .splits import CANONICAL_SIZE, ImageSplit, ImageTaskData
from .tasks import (
    CONTROL_NAMES,
    CONTROLS,
    DIGITS,
    HELD_OUT_RELATED,
    LOWER,
    RELATED_GROUP,
    SYMBOL_CHARS,
    TASK_NAMES,
    TASKS,
    UPPER,
    Task,
    all_sets,
    caption_pools,
    caption_vocabulary,
    check_controls,
)

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")

__all__ = ["CANONICAL_SIZE", "CONTROL_NAMES", "CONTROLS", "FASHION_DIR", "HELD_OUT_RELATED", "PROCEDURAL", "RELATED_GROUP",
           "TASK_NAMES", "TASKS", "DataSizes", "ImageSplit", "ImageTaskData", "MissingDataError", "Task", "all_sets",
           "build_data", "caption_pools", "caption_vocabulary", "data_from_tensors", "data_to_tensors", "load_fashion",
           "make_procedural", "require_debian_data"]


# -- real data: Fashion-MNIST ---------------------------------------------------------------------

def require_debian_data() -> None:
    """Raise MissingDataError naming the Debian package when the real data is not installed."""
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").exists():
        raise MissingDataError(
            f"Fashion-MNIST not found in {FASHION_DIR}: install the Debian package `dataset-fashion-mnist` "
            "(sudo apt-get install dataset-fashion-mnist, or `make debian`)"
        )
    if not glyphs.AENIGMA_DIR.is_dir() or not any(glyphs.AENIGMA_DIR.glob("*.ttf")):
        raise MissingDataError(
            f"no fonts in {glyphs.AENIGMA_DIR}: install the Debian package `fonts-aenigma` "
            "(sudo apt-get install fonts-aenigma, or `make debian`)"
        )
    if not (glyphs.DEJAVU_DIR / "DejaVuSans.ttf").exists():
        raise MissingDataError(
            f"no DejaVu fonts in {glyphs.DEJAVU_DIR}: install the Debian package `fonts-dejavu-core` "
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


def load_fashion(sizes: dict, rng: np.random.Generator) -> dict[str, ImageSplit]:
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
    mk = lambda x, y: ImageSplit(torch.from_numpy(_to_canonical_gray(x)), torch.from_numpy(y.copy()))  # noqa: E731
    return {"train": mk(tr_x[both[~val_mask]], tr_y[both[~val_mask]]), "val": mk(tr_x[both[val_mask]], tr_y[both[val_mask]]),
            "test": mk(tr_x[te] if False else te_x[te], te_y[te])}


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


def build_data(sizes: DataSizes, seed: int, progress: bool = True, probes_per_class: int = PROBES_PER_CLASS,
               variants: dict[str, str] | None = None, train_fonts: int | None = None,
               controls: tuple[str, ...] = CONTROL_NAMES) -> dict[str, ImageTaskData]:
    """All tasks and the named controls, deterministic under `seed`. Returns name -> ImageTaskData (controls: test
    only). A set's images do not depend on which other controls are drawn.

    variants: procedural task -> the variant that draws it (`procedural.VARIANTS`, e.g. {"shapes": "small-lowc"});
    the others are drawn as the tiny-tower world draws them. train_fonts: the cap on training typefaces, in place
    of `sizes.max_fonts` for the train split (val and test keep `sizes.max_fonts`)."""
    from ...progress import track

    variants = dict(variants or {})
    check_variants(variants)
    controls = check_controls(controls)
    require_debian_data()
    if "emoji" in controls:
        require_emoji()
    out: dict[str, ImageTaskData] = {}
    fonts = split_fonts(usable_fonts())
    caps = {k: sizes.max_fonts for k in fonts}
    if train_fonts is not None:
        caps["train"] = train_fonts
    fonts = {k: v[: caps[k]] for k, v in fonts.items()}
    # a set's seed is its place in this list, so adding a control leaves the other sets' images as they were
    order = ["fashion", "digits", "upper", "lower", "shapes", "colours", "counting", "textures", "symbols", "objects",
             "emoji"]
    steps = [name for name in order if name in TASKS or name in controls]
    for name in track(steps, description="rendering world data", enabled=progress):
        sub = np.random.default_rng([seed, order.index(name)])
        if name == "fashion":
            sp = load_fashion({"train": sizes.train_per_class, "val": sizes.val_per_class, "test": sizes.test_per_class}, sub)
        elif name == "emoji":
            sp = {split: ImageSplit(*render_emoji_set(
                      sizes.icon_variants_train if split == "train" else sizes.icon_variants_eval, sub))
                  for split in ("train", "val", "test")}
        elif name == "objects":
            sp = {split: ImageSplit(*render_icon_set(split, sizes.icon_variants_train if split == "train" else sizes.icon_variants_eval, sub))
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
                split: make_procedural(name, getattr(sizes, f"{split}_per_class"), sub, variants.get(name, "world"))
                for split in ("train", "val", "test")
            }
        task = TASKS.get(name) or CONTROLS[name]
        td = ImageTaskData(task, sp["train"], sp["val"], sp["test"])
        td.probe_index = probe_indices(len(td.train), task.n_classes, probes_per_class)
        out[name] = td
    # controls: at most `control_per_class` test images per class; their train splits stay for pre-training
    cr = np.random.default_rng([seed, 99])
    for name in (c for c in CONTROLS if c in controls):  # this order: the draws of `cr` stay those of before
        whole = out[name]
        idx = _balanced_take(whole.test.labels.numpy(), sizes.control_per_class, CONTROLS[name].n_classes, cr)
        out[name] = ImageTaskData(CONTROLS[name], whole.train, whole.val, whole.test.subset(torch.from_numpy(idx)),
                             probe_index=torch.zeros(0, dtype=torch.long))
    return out


def data_to_tensors(data: dict[str, ImageTaskData]) -> dict[str, torch.Tensor]:
    """Flatten for safetensors: '{name}.{split}.images' / '.labels', '{name}.probe_index'."""
    t = {}
    for name, td in data.items():
        for split in ("train", "val", "test"):
            s = getattr(td, split)
            t[f"{name}.{split}.images"] = s.images.contiguous()
            t[f"{name}.{split}.labels"] = s.labels.contiguous()
        t[f"{name}.probe_index"] = td.probe_index.contiguous()
    return t


def data_from_tensors(t: dict[str, torch.Tensor]) -> dict[str, ImageTaskData]:
    """The sets `data_to_tensors` wrote: the tasks, then the controls it holds."""
    out = {}
    held = tuple(c for c in CONTROLS if f"{c}.test.images" in t)
    for name, task in all_sets(held).items():
        sp = {s: ImageSplit(t[f"{name}.{s}.images"], t[f"{name}.{s}.labels"]) for s in ("train", "val", "test")}
        out[name] = ImageTaskData(task, sp["train"], sp["val"], sp["test"], probe_index=t[f"{name}.probe_index"])
    return out
