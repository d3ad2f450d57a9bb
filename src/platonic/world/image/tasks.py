"""The world's tasks and controls (class names, one prompt template each, caption hints) and the
pre-training captions made from them (`caption_pools`, `caption_vocabulary`).

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
    emoji         100 classes  everyday things as emoji in three designs, new renderings of the drawings
                               pre-training saw (`world.image.emoji`); the trunk world's many-class control, as
                               CIFAR-100 is the paper's; the world of tiny towers keeps the first two (`CONTROL_NAMES`)
All are pre-training sets too (their train splits: other fonts, other themes; the emoji's other renderings); no task
uses their images.
"""

from __future__ import annotations

from ...errors import InvalidInputError
from ..common.tasks import Task
from ..common.tasks import caption_pools as common_caption_pools
from ..common.tasks import caption_vocabulary as common_vocabulary
from .emoji import EMOJI_HINTS, EMOJI_NAMES
from .icons import OBJECT_HINTS, OBJECT_NAMES

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
    "emoji": Task("emoji", EMOJI_NAMES, "a photo of a {}.", EMOJI_HINTS, "cartoon", "emoji fonts", role="control"),
}
TASK_NAMES = tuple(TASKS)
CONTROL_NAMES = ("objects", "symbols")  # the world of tiny towers' controls (the default of the functions below)
RELATED_GROUP = ("digits", "upper")
HELD_OUT_RELATED = "lower"


def check_controls(controls: tuple[str, ...]) -> tuple[str, ...]:
    """`controls` as a tuple; an InvalidInputError names any the image world does not have."""
    unknown = [c for c in controls if c not in CONTROLS]
    if unknown:
        raise InvalidInputError(f"unknown control(s) {', '.join(unknown)}; the image world has {', '.join(CONTROLS)}")
    return tuple(controls)


def all_sets(controls: tuple[str, ...] = CONTROL_NAMES) -> dict[str, Task]:
    """The tasks and the named controls, in that order."""
    return {**TASKS, **{c: CONTROLS[c] for c in check_controls(controls)}}


# -- pre-training captions ------------------------------------------------------------------------

GENERIC_CAPTIONS = ("a picture.", "an image.", "a small picture of something.", "a photo.")


NAMING = ("{c}.", "an image of {c}, a {domain}.", "a picture showing {c}.")
HINTING = ("a {h}.", "a picture of a {h}.", "a {domain}.", "an image of a {domain}.")


def caption_pools(task: Task) -> dict[str, list[list[str]]]:
    """Per class: 'name' captions (name the class), 'hint' captions (a group or the domain) (`common.tasks`)."""
    return common_caption_pools(task, NAMING, HINTING)


def caption_vocabulary(controls: tuple[str, ...] = CONTROL_NAMES) -> list[str]:
    """Every caption string image pre-training over the tasks and `controls` may use, sorted (the text cache is keyed
    by this list)."""
    return common_vocabulary(all_sets(controls), GENERIC_CAPTIONS, caption_pools)
