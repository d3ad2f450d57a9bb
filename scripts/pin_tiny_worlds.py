"""Write the tiny worlds' weight pins (tests/world/tiny_world_pins.json, tests/audio_zoo/tiny_audio_world_pins.json,
tests/trunk_world/tiny_trunk_world_pins.json).

Run it after a deliberate change of what a world build trains, together with a bump of that world's
RECIPE_VERSION (platonic.world.image.build, platonic.world.audio.build, platonic.world.image.trunkworld.recipe,
whose STUDENT_VERSION covers the students); the tests then hold the new weights.

    python scripts/pin_tiny_worlds.py [IMAGE_WORLD_DIR AUDIO_WORLD_DIR TRUNK_WORLD_DIR]

Without arguments the three tiny worlds are built first in a temporary cache (about 4 minutes on 2 cores; the
trunk world with both source kinds of its models and of its students).
"""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from weight_pins import write_pins  # noqa: E402


def main(argv: list[str]) -> None:
    from platonic.world.audio import build as audio_build
    from platonic.world.image import build
    from platonic.world.image.trunkworld import recipe as trunk_recipe
    from platonic.world.image.trunkworld.build import ensure_sources, ensure_trunk_world
    from platonic.world.image.trunkworld.students import ensure_students

    if argv:
        image, audio, trunk = map(Path, argv)
    else:
        os.environ["PLATONIC_CACHE"] = tempfile.mkdtemp(prefix="platonic-pins-")
        image = build.ensure_world("tiny", 0, progress=True, kinds=build.KINDS)
        audio = audio_build.ensure_audio_world("tiny", 0, progress=True)
        trunk = ensure_trunk_world("tiny", 0, progress=True, kinds=build.KINDS)
    ensure_sources(trunk, build.KINDS, progress=True)  # the pinned file set: every kind of every model and student
    ensure_students(trunk, build.KINDS, progress=True)
    write_pins(image, build.RECIPE_VERSION, ROOT / "tests" / "world" / "tiny_world_pins.json")
    write_pins(audio, audio_build.RECIPE_VERSION, ROOT / "tests" / "audio_zoo" / "tiny_audio_world_pins.json")
    write_pins(trunk, f"{trunk_recipe.RECIPE_VERSION}+{trunk_recipe.STUDENT_VERSION}",
               ROOT / "tests" / "trunk_world" / "tiny_trunk_world_pins.json")
    print("pinned", image, audio, "and", trunk)


if __name__ == "__main__":
    main(sys.argv[1:])
