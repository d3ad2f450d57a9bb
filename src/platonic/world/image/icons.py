"""Desktop icons of everyday objects: the world's broad control set, real artwork from Debian icon themes.

The control "objects" plays the role CIFAR-100 and ImageNet play for the paper: a broad set of things
no task is about, whose images no task uses. Its images are the icons of 27 named objects (camera,
printer, scissors, ...) drawn by the artists of ten freedesktop icon themes, looked up by their
Icon Naming Specification names. The themes are split by family into disjoint train / val / test sets
(`THEME_SPLITS`), as the glyph tasks split their typefaces: pre-training sees the train themes' icons
with captions that name the object; the control is measured on icons of themes no model saw.

Each icon is read once as a (64, 64) RGBA master (PNG sizes 32-64 px as drawn, SVG rendered by
`rsvg-convert` from the Debian package `librsvg2-bin`), exact duplicates within a class dropped (some
themes share artwork), then drawn at a random size and offset on a light or dark ground with pixel
noise: (3, 32, 32) uint8 like every canonical image of the world.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import torch

from ...errors import MissingDataError

ICON_ROOT = Path("/usr/share/icons")
MASTER = 64

# class name, caption hint (a group, not the class), Icon Naming Specification names in order of preference
OBJECT_ICONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("camera", "device", ("camera-photo",)),
    ("computer", "device", ("computer",)),
    ("printer", "device", ("printer",)),
    ("folder", "container", ("folder",)),
    ("hard disk", "storage medium", ("drive-harddisk",)),
    ("compact disc", "storage medium", ("media-optical",)),
    ("house", "building", ("go-home",)),
    ("trash can", "container", ("user-trash",)),
    ("envelope", "paper thing", ("mail-unread", "mail-message-new")),
    ("magnifying glass", "tool", ("edit-find", "system-search")),
    ("loudspeaker", "sound device", ("audio-speakers", "audio-volume-high")),
    ("scissors", "tool", ("edit-cut",)),
    ("padlock", "tool", ("changes-prevent", "system-lock-screen")),
    ("clipboard", "paper thing", ("edit-paste",)),
    ("floppy disk", "storage medium", ("media-floppy",)),
    ("calendar", "paper thing", ("x-office-calendar",)),
    ("warning sign", "sign", ("dialog-warning",)),
    ("globe", "round thing", ("applications-internet",)),
    ("parcel", "container", ("package-x-generic",)),
    ("keyboard", "computer part", ("input-keyboard",)),
    ("computer mouse", "computer part", ("input-mouse",)),
    ("battery", "computer part", ("battery",)),
    ("microphone", "sound device", ("audio-input-microphone",)),
    ("headphones", "sound device", ("audio-headphones",)),
    ("gamepad", "toy", ("input-gaming",)),
    ("calculator", "device", ("accessories-calculator",)),
    ("smiley face", "round thing", ("face-smile",)),
)
OBJECT_NAMES = tuple(c for c, _, _ in OBJECT_ICONS)
OBJECT_HINTS = tuple(h for _, h, _ in OBJECT_ICONS)

# theme families (directories under /usr/share/icons that share artwork go together) and their split
THEME_SPLITS: dict[str, tuple[tuple[str, ...], ...]] = {
    "train": (("Adwaita",), ("Tango",), ("gnome", "mate"), ("nuoveXT2",), ("breeze",)),
    "val": (("Numix",), ("Faba",)),
    "test": (("oxygen",), ("elementary",)),
}
# the Debian packages those directories come from, and the SVG renderer
ICON_PACKAGES = ("adwaita-icon-theme", "tango-icon-theme", "gnome-icon-theme", "mate-icon-theme", "lxde-icon-theme",
                 "breeze-icon-theme", "numix-icon-theme", "oxygen-icon-theme",
                 "elementary-icon-theme", "faba-icon-theme", "librsvg2-bin")

_SIZE_DIR = re.compile(r"^(32|48|64)(x(32|48|64))?$")


def _missing(what: str) -> MissingDataError:
    return MissingDataError(f"{what}: install the Debian packages {' '.join(ICON_PACKAGES)} "
                             f"(sudo apt-get install {' '.join(ICON_PACKAGES)}, or `make debian`)")


def require_icons() -> None:
    """Raise MissingDataError naming the packages when a theme directory or rsvg-convert is missing."""
    for split in THEME_SPLITS.values():
        for family in split:
            for theme in family:
                if not (ICON_ROOT / theme).is_dir():
                    raise _missing(f"icon theme {theme!r} not found in {ICON_ROOT}")
    if shutil.which("rsvg-convert") is None:
        raise _missing("rsvg-convert (renders SVG icons) not found")


def _index(theme: str) -> dict[str, list[Path]]:
    """Icon name -> its files in `theme` (PNG or SVG in 32-64 px or scalable size folders, none symbolic), sorted."""
    out: dict[str, list[Path]] = {}
    for path in sorted((ICON_ROOT / theme).rglob("*")):
        if path.suffix not in (".png", ".svg") or "symbolic" in path.name or "symbolic" in path.parts:
            continue
        if not any(_SIZE_DIR.match(part) or (part == "scalable" and path.suffix == ".svg") for part in path.parts):
            continue
        out.setdefault(path.stem, []).append(path)
    return out


def _read_master(path: Path) -> np.ndarray:
    """(MASTER, MASTER, 4) uint8 RGBA of one icon file, scaled to fit with its aspect kept."""
    from PIL import Image

    if path.suffix == ".svg":
        png = subprocess.run(["rsvg-convert", "-w", str(MASTER), "-h", str(MASTER), "-a", str(path)],
                             capture_output=True, check=True).stdout
        img = Image.open(io.BytesIO(png)).convert("RGBA")
    else:
        img = Image.open(path).convert("RGBA")
    scale = MASTER / max(img.size)
    if scale != 1:
        img = img.resize((max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale))),
                         Image.LANCZOS if scale < 1 else Image.BICUBIC)
    canvas = Image.new("RGBA", (MASTER, MASTER), (0, 0, 0, 0))
    canvas.paste(img, ((MASTER - img.size[0]) // 2, (MASTER - img.size[1]) // 2))
    return np.asarray(canvas, dtype=np.uint8)


def icon_masters(split: str) -> list[list[np.ndarray]]:
    """Per object class (in `OBJECT_NAMES` order), the distinct RGBA masters the split's themes draw of it.

    A theme gives every file of the class's first icon name it has (its 32, 48 and 64 px drawings
    and its SVG); masters that repeat a class's earlier one byte for byte are dropped.
    """
    require_icons()
    per_class: list[list[np.ndarray]] = [[] for _ in OBJECT_ICONS]
    seen: list[set[bytes]] = [set() for _ in OBJECT_ICONS]
    for family in THEME_SPLITS[split]:
        for theme in family:
            index = _index(theme)
            for k, (_, _, names) in enumerate(OBJECT_ICONS):
                files = next((index[n] for n in names if n in index), [])
                for f in files:
                    m = _read_master(f)
                    if m[..., 3].max() == 0:
                        continue
                    key = hashlib.sha256(m.tobytes()).digest()
                    if key not in seen[k]:
                        seen[k].add(key)
                        per_class[k].append(m)
    empty = [OBJECT_NAMES[k] for k, ms in enumerate(per_class) if not ms]
    if empty:
        raise _missing(f"the {split} icon themes draw no {', '.join(empty)}")
    return per_class


def render_icon(master: np.ndarray, rng: np.random.Generator, size: int = 32, ink: bool = False) -> np.ndarray:
    """One icon (3, size, size) uint8: the master at 20-30 px, offset by up to 2 px, on a light or dark
    ground with Gaussian pixel noise (sd 6). ink: the master is drawn in one colour, which becomes a grey that
    stands out from the ground (light on a dark ground, dark on a light one)."""
    from PIL import Image

    px = int(rng.integers(20, 31))
    dark = bool(rng.integers(0, 2))
    ground = rng.integers(0, 60, size=3) if dark else rng.integers(150, 230, size=3)
    if ink:
        master = master.copy()
        master[..., :3] = int(rng.integers(190, 256)) if dark else int(rng.integers(0, 70))
    icon = Image.fromarray(master, "RGBA").resize((px, px), Image.BILINEAR)
    canvas = Image.new("RGBA", (size, size), tuple(int(v) for v in ground) + (255,))
    x = (size - px) // 2 + int(rng.integers(-2, 3))
    y = (size - px) // 2 + int(rng.integers(-2, 3))
    canvas.alpha_composite(icon, (max(0, x), max(0, y)))
    a = np.asarray(canvas.convert("RGB"), dtype=np.float32).transpose(2, 0, 1)
    a = a + rng.normal(0, 6, size=a.shape)
    return a.clip(0, 255).astype(np.uint8)


def render_masters(per_class: list[list[tuple[np.ndarray, bool]]], variants: int,
                   rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`variants` renderings (`render_icon`) of every (master, ink) of every class, in class order, then shuffled:
    images (n, 3, 32, 32) uint8, labels (n,) int64 (the class's place in `per_class`)."""
    imgs, labels = [], []
    for k, masters in enumerate(per_class):
        for master, ink in masters:
            for _ in range(variants):
                imgs.append(render_icon(master, rng, ink=ink))
                labels.append(k)
    order = rng.permutation(len(labels))
    return torch.from_numpy(np.stack(imgs)[order]), torch.tensor(labels, dtype=torch.int64)[torch.from_numpy(order)]


def render_icon_set(split: str, variants: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`variants` renderings of every master of `split`, shuffled: images (n, 3, 32, 32) uint8, labels (n,) int64."""
    return render_masters([[(m, False) for m in masters] for masters in icon_masters(split)], variants, rng)
