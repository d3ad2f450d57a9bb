"""The world's cache key is its declared recipe, and the tiny world's weights are pinned against it."""

import json
import sys
from pathlib import Path

from platonic.world.image import build

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from weight_pins import differences  # noqa: E402

PINS = Path(__file__).with_name("tiny_world_pins.json")


def test_the_key_is_the_declared_recipe_and_reads_no_source_file(monkeypatch):
    tiny = build.PROFILES["tiny"]
    record = build.recipe_record(tiny, 0)
    assert set(record) == {"version", "recipe", "profile", "seed", "specs", "tasks"}
    assert record["recipe"] == build.RECIPE_VERSION and set(record["specs"]) == set(build.MODEL_NAMES)
    key = build.recipe_hash(tiny, 0)
    assert key == build.recipe_hash(tiny, 0) != build.recipe_hash(tiny, 1) != build.recipe_hash(build.PROFILES["full"], 0)

    def no_reading(*args, **kwargs):
        raise AssertionError("the recipe key read a file")

    monkeypatch.setattr(Path, "read_bytes", no_reading)
    monkeypatch.setattr(Path, "read_text", no_reading)
    assert build.recipe_hash(tiny, 0) == key  # moving or documenting code rebuilds nothing
    monkeypatch.setattr(build, "RECIPE_VERSION", build.RECIPE_VERSION + "-next")
    assert build.recipe_hash(tiny, 0) != key  # a bump rebuilds


def test_the_tiny_worlds_weights_are_pinned(tiny_world):
    """A change of what a build trains must bump RECIPE_VERSION and re-pin (scripts/pin_tiny_worlds.py)."""
    pins = json.loads(PINS.read_text())
    assert pins["recipe"] == build.RECIPE_VERSION, "RECIPE_VERSION changed: re-pin with scripts/pin_tiny_worlds.py"
    changed = differences(tiny_world["path"], PINS)
    assert not changed, ("the tiny world's weights moved without a RECIPE_VERSION bump; if the change is meant, bump "
                         "platonic.world.image.build.RECIPE_VERSION and run scripts/pin_tiny_worlds.py: " + "; ".join(changed[:5]))
