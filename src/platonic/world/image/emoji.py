"""Emoji of 100 everyday things: the trunk world's control with many classes, the role CIFAR-100 plays for the paper.

The classes (`EMOJI`) are animals, plants, food, vehicles, weather, buildings, household things, instruments and
balls, as CIFAR-100's are, none of them a class of a task or of the other controls. Each is drawn by three emoji
designs of Debian font packages (`DESIGNS`): Noto Color Emoji (colour), Symbola (black outlines) and GNU Unifont
(16 px pixel art). Every split shows every design: pre-training sees train renderings of the drawings, the control
is measured on new renderings of them, as CIFAR-100's test photos are new photos of things CLIP's pre-training
showed. (A design held out of pre-training for each class left Lite0 at 5.7 % zero-shot, 11.5 % with the captions
naming the things 30 % of the time: a control with little to lose; docs/lab/2026-12-06-emoji-control.md.)

A design's glyph is rendered large, cropped to its ink, centred on a square and scaled to a (64, 64) RGBA master;
each image is a master drawn by `icons.render_icon` (20-30 px, offset, light or dark ground, pixel noise), a
one-colour design's ink turned light on a dark ground: (3, 32, 32) uint8 like every canonical image of the world.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ...errors import MissingDataError
from .icons import MASTER, render_masters

# class name, caption hint (a group, not the class), code point
EMOJI: tuple[tuple[str, str, int], ...] = (
    ("tiger", "mammal", 0x1F405), ("rabbit", "mammal", 0x1F407), ("cat", "mammal", 0x1F408),
    ("elephant", "mammal", 0x1F418), ("horse", "mammal", 0x1F40E), ("sheep", "mammal", 0x1F411),
    ("monkey", "mammal", 0x1F412), ("dog", "mammal", 0x1F415), ("pig", "mammal", 0x1F416), ("cow", "mammal", 0x1F404),
    ("camel", "mammal", 0x1F42B), ("fox", "mammal", 0x1F98A),
    ("rooster", "bird", 0x1F413), ("penguin", "bird", 0x1F427), ("eagle", "bird", 0x1F985), ("duck", "bird", 0x1F986),
    ("owl", "bird", 0x1F989),
    ("crocodile", "reptile", 0x1F40A), ("snake", "reptile", 0x1F40D), ("turtle", "reptile", 0x1F422),
    ("dragon", "reptile", 0x1F409),
    ("whale", "sea animal", 0x1F40B), ("dolphin", "sea animal", 0x1F42C), ("octopus", "sea animal", 0x1F419),
    ("tropical fish", "sea animal", 0x1F420), ("shark", "sea animal", 0x1F988), ("crab", "sea animal", 0x1F980),
    ("snail", "small creature", 0x1F40C), ("ant", "small creature", 0x1F41C), ("bee", "small creature", 0x1F41D),
    ("ladybird", "small creature", 0x1F41E), ("butterfly", "small creature", 0x1F98B),
    ("spider", "small creature", 0x1F577),
    ("grapes", "fruit", 0x1F347), ("watermelon", "fruit", 0x1F349), ("lemon", "fruit", 0x1F34B),
    ("banana", "fruit", 0x1F34C), ("pineapple", "fruit", 0x1F34D), ("apple", "fruit", 0x1F34E),
    ("strawberry", "fruit", 0x1F353),
    ("tomato", "vegetable", 0x1F345), ("corn", "vegetable", 0x1F33D), ("hot pepper", "vegetable", 0x1F336),
    ("mushroom", "vegetable", 0x1F344), ("carrot", "vegetable", 0x1F955),
    ("hamburger", "food", 0x1F354), ("pizza", "food", 0x1F355), ("bread", "food", 0x1F35E), ("cheese", "food", 0x1F9C0),
    ("ice cream", "sweet", 0x1F368), ("doughnut", "sweet", 0x1F369), ("cake", "sweet", 0x1F370),
    ("wine glass", "drink", 0x1F377), ("coffee cup", "drink", 0x2615),
    ("rose", "flower", 0x1F339), ("sunflower", "flower", 0x1F33B), ("tulip", "flower", 0x1F337),
    ("cactus", "plant", 0x1F335), ("palm tree", "tree", 0x1F334), ("pine tree", "tree", 0x1F332),
    ("maple leaf", "plant", 0x1F341),
    ("rocket", "vehicle", 0x1F680), ("helicopter", "vehicle", 0x1F681), ("locomotive", "vehicle", 0x1F682),
    ("bus", "vehicle", 0x1F68C), ("police car", "vehicle", 0x1F693), ("truck", "vehicle", 0x1F69A),
    ("bicycle", "vehicle", 0x1F6B2), ("sailboat", "vehicle", 0x26F5), ("airplane", "vehicle", 0x2708),
    ("cloud", "weather", 0x2601), ("rainbow", "weather", 0x1F308), ("snowman", "weather", 0x26C4),
    ("sun", "weather", 0x2600), ("volcano", "landscape", 0x1F30B), ("umbrella", "weather", 0x2602),
    ("lightning", "weather", 0x26A1),
    ("castle", "building", 0x1F3F0), ("church", "building", 0x26EA),
    ("telephone", "household thing", 0x260E), ("television", "household thing", 0x1F4FA),
    ("alarm clock", "household thing", 0x23F0), ("light bulb", "household thing", 0x1F4A1),
    ("candle", "household thing", 0x1F56F), ("book", "household thing", 0x1F4D6),
    ("key", "tool", 0x1F511), ("hammer", "tool", 0x1F528), ("wrench", "tool", 0x1F527), ("anchor", "tool", 0x2693),
    ("crown", "jewel", 0x1F451), ("balloon", "party thing", 0x1F388), ("gift", "party thing", 0x1F381),
    ("trophy", "party thing", 0x1F3C6),
    ("bed", "furniture", 0x1F6CF),
    ("guitar", "musical instrument", 0x1F3B8), ("trumpet", "musical instrument", 0x1F3BA),
    ("violin", "musical instrument", 0x1F3BB), ("drum", "musical instrument", 0x1F941),
    ("football", "ball", 0x26BD), ("basketball", "ball", 0x1F3C0),
)
EMOJI_NAMES = tuple(c for c, _, _ in EMOJI)
EMOJI_HINTS = tuple(h for _, h, _ in EMOJI)

# design -> (font files: the first that has the glyph draws it, render size, one colour?, stroke widening in master
# pixels); the size is the one the font draws at (Noto Color Emoji's bitmaps are 109 px). Symbola's hairline outlines
# are widened by 2 px of the 64 px master (a 3 x 3 maximum filter on the ink), else they fade at 20-30 px.
DESIGNS: dict[str, tuple[tuple[Path, ...], int, bool, int]] = {
    "noto": ((Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"),), 109, False, 0),
    "symbola": ((Path("/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf"),), 96, True, 2),
    "unifont": ((Path("/usr/share/fonts/opentype/unifont/unifont_upper.otf"),
                 Path("/usr/share/fonts/opentype/unifont/unifont.otf")), 96, True, 0),
}
EMOJI_PACKAGES = ("fonts-noto-color-emoji", "fonts-symbola", "fonts-unifont")


def require_emoji() -> None:
    """Raise MissingDataError naming the packages when a design's font file is missing."""
    missing = [str(f) for files, *_ in DESIGNS.values() for f in files if not f.exists()]
    if missing:
        raise MissingDataError(f"emoji fonts not found ({', '.join(missing)}): install the Debian packages "
                               f"{' '.join(EMOJI_PACKAGES)} (sudo apt-get install {' '.join(EMOJI_PACKAGES)}, "
                               "or `make debian`)")


def _draw(font, char: str, canvas: int):
    from PIL import Image, ImageDraw

    img = Image.new("RGBA", (canvas, canvas), (0, 0, 0, 0))
    ImageDraw.Draw(img).text((canvas // 2, canvas // 2), char, font=font, anchor="mm", embedded_color=True,
                             fill=(0, 0, 0, 255))
    return img


@lru_cache(maxsize=None)
def _font(path: Path, size: int):
    from PIL import ImageFont

    return ImageFont.truetype(str(path), size)


@lru_cache(maxsize=None)
def _fallbacks(path: Path, size: int) -> frozenset[bytes]:
    """The drawings the font gives code points it lacks (two private-use non-characters), as RGBA bytes."""
    return frozenset(_draw(_font(path, size), chr(c), 2 * size).tobytes() for c in (0xFFFFD, 0x10FFFD))


def has_glyph(path: Path, size: int, char: str) -> bool:
    """Whether the font draws `char` as itself: some ink, and not the drawing it gives code points it lacks."""
    img = _draw(_font(path, size), char, 2 * size)
    return img.getbbox() is not None and img.tobytes() not in _fallbacks(path, size)


@lru_cache(maxsize=None)
def emoji_master(design: str, k: int) -> np.ndarray:
    """(MASTER, MASTER, 4) uint8 RGBA: class k's emoji in `design`, cropped to its ink, centred, aspect kept."""
    from PIL import Image, ImageFilter

    files, size, _, widen = DESIGNS[design]
    char = chr(EMOJI[k][2])
    path = next((f for f in files if has_glyph(f, size, char)), None)
    if path is None:
        raise MissingDataError(f"no font of the emoji design {design!r} draws {EMOJI[k][0]!r} (U+{EMOJI[k][2]:04X})")
    img = _draw(_font(path, size), char, 2 * size)
    img = img.crop(img.getbbox())
    scale = MASTER / max(img.size)
    img = img.resize((max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale))), Image.LANCZOS)
    canvas = Image.new("RGBA", (MASTER, MASTER), (0, 0, 0, 0))
    canvas.paste(img, ((MASTER - img.size[0]) // 2, (MASTER - img.size[1]) // 2))
    if widen:
        canvas.putalpha(canvas.getchannel("A").filter(ImageFilter.MaxFilter(widen + 1)))
    return np.asarray(canvas, dtype=np.uint8)


def render_emoji_set(variants: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`variants` renderings of every class's drawing in every design, shuffled: images (n, 3, 32, 32) uint8,
    labels (n,) int64, n = 100 x 3 x variants. A split's renderings are its own draws of `rng`."""
    require_emoji()
    return render_masters([[(emoji_master(d, k), DESIGNS[d][2]) for d in DESIGNS] for k in range(len(EMOJI))],
                          variants, rng)
