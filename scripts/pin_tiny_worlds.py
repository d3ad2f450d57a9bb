"""Write the tiny worlds' weight pins (tests/world/tiny_world_pins.json, tests/audio_zoo/tiny_audio_world_pins.json,
tests/trunk_world/tiny_trunk_world_pins.json).

Run it after a deliberate change of what a world build trains, together with a bump of that world's
RECIPE_VERSION (platonic.world.image.build, platonic.world.audio.build, platonic.world.image.trunkworld.recipe,
whose STUDENT_VERSION covers the students); the tests then hold the new weights.

    python scripts/pin_tiny_worlds.py [IMAGE_WORLD_DIR AUDIO_WORLD_DIR TRUNK_WORLD_DIR]
    python scripts/pin_tiny_worlds.py --only trunk      # (or image, audio): the world whose recipe changed

Without directories the tiny worlds are built first in a temporary cache (about 4 minutes on 2 cores for all
three; the trunk world with both source kinds of its models and of its students). `--only` re-pins one world and
leaves the other pin files as they are.
"""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from weight_pins import write_pins  # noqa: E402


WORLDS = ("image", "audio", "trunk")


def pin_image(path: Path | None) -> Path:
    from platonic.world.image import build

    path = path or build.ensure_world("tiny", 0, progress=True, kinds=build.KINDS)
    write_pins(path, build.RECIPE_VERSION, ROOT / "tests" / "world" / "tiny_world_pins.json")
    return path


def pin_audio(path: Path | None) -> Path:
    from platonic.world.audio import build as audio_build

    path = path or audio_build.ensure_audio_world("tiny", 0, progress=True, kinds=audio_build.KINDS)
    write_pins(path, audio_build.RECIPE_VERSION, ROOT / "tests" / "audio_zoo" / "tiny_audio_world_pins.json")
    return path


def pin_trunk(path: Path | None) -> Path:
    from platonic.world.image.build import KINDS
    from platonic.world.image.trunkworld import recipe as trunk_recipe
    from platonic.world.image.trunkworld.build import ensure_sources, ensure_trunk_world
    from platonic.world.image.trunkworld.students import ensure_students

    path = path or ensure_trunk_world("tiny", 0, progress=True, kinds=KINDS)
    ensure_sources(path, KINDS, progress=True)  # the pinned file set: every kind of every model and student
    ensure_students(path, KINDS, progress=True)
    write_pins(path, f"{trunk_recipe.RECIPE_VERSION}+{trunk_recipe.STUDENT_VERSION}",
               ROOT / "tests" / "trunk_world" / "tiny_trunk_world_pins.json")
    return path


def main(argv: list[str]) -> None:
    worlds = WORLDS
    if argv[:1] == ["--only"]:
        if len(argv) != 2 or argv[1] not in WORLDS:
            sys.exit(f"--only takes one of {', '.join(WORLDS)}")
        worlds, argv = (argv[1],), []
    if argv and len(argv) != len(WORLDS):
        sys.exit("give the three built tiny worlds' directories (image, audio, trunk), or none")
    paths = dict(zip(WORLDS, map(Path, argv))) if argv else {}
    if not argv:
        os.environ["PLATONIC_CACHE"] = tempfile.mkdtemp(prefix="platonic-pins-")
    pin = {"image": pin_image, "audio": pin_audio, "trunk": pin_trunk}
    for world in worlds:
        print("pinned", world, pin[world](paths.get(world)))


if __name__ == "__main__":
    main(sys.argv[1:])
