"""The pins' comparison: exact on the pins' CPU; across CPUs it lets rounding through and catches a moved recipe."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from weight_pins import cpu_identity, differences, write_pins

TASKS = ("a", "b", "c", "d", "e")


def _world(root: Path, update_scale: float = 1.0, noise: float = 0.0, base_shift: float = 0.0) -> Path:
    """A built world's layout: models/m/base.safetensors (both towers, "image." and "text." prefixed) and five
    fine-tunes models/m/ft/TASK.full.safetensors (the image tower: base + update_scale * update + noise)."""
    g = torch.Generator().manual_seed(0)
    base = {"image.w": torch.randn(64, 64, generator=g), "text.w": torch.randn(8, 8, generator=g)}
    (root / "models/m/ft").mkdir(parents=True)
    save_file({k: v + base_shift for k, v in base.items()}, str(root / "models/m/base.safetensors"))
    for task in TASKS:
        update = 1e-2 * torch.randn(64, 64, generator=g)
        jitter = noise * torch.randn(64, 64, generator=g)
        save_file({"w": base["image.w"] + base_shift + update_scale * update + jitter},
                  str(root / f"models/m/ft/{task}.full.safetensors"))
    return root


@pytest.fixture
def pins(tmp_path):
    out = tmp_path / "pins.json"
    write_pins(_world(tmp_path / "pinned"), "r1", out)
    return out


def _elsewhere(pins: Path) -> Path:
    record = json.loads(pins.read_text())
    record["cpu"] = {**record["cpu"], "model": "another"}
    pins.write_text(json.dumps(record))
    return pins


def test_the_pins_hold_each_fine_tunes_distance_from_its_base(pins):
    files = json.loads(pins.read_text())["files"]
    assert "update_sumsq" not in files["models/m/base.safetensors"]
    assert all(0 < files[f"models/m/ft/{t}.full.safetensors"]["update_sumsq"] < 1 for t in TASKS)


def test_on_the_pins_cpu_one_rounding_difference_is_a_difference(pins, tmp_path):
    assert json.loads(pins.read_text())["cpu"] == cpu_identity()
    assert differences(_world(tmp_path / "same"), pins) == []
    changed = differences(_world(tmp_path / "rounded", noise=1e-7), pins)
    assert len(changed) == len(TASKS) and all("weights differ" in line for line in changed)


def test_across_cpus_rounding_passes_and_a_moved_recipe_does_not(pins, tmp_path):
    pins = _elsewhere(pins)
    assert differences(_world(tmp_path / "rounded", noise=1e-6), pins) == []
    longer = differences(_world(tmp_path / "longer", update_scale=1.06), pins)
    assert longer and "models/m: its fine-tunes' distance from the base moved by 6.00%" in longer[-1]
    assert any("models/m/base.safetensors" in line for line in differences(_world(tmp_path / "shifted", base_shift=0.05), pins))


def test_a_missing_or_extra_file_is_named(pins, tmp_path):
    world = _world(tmp_path / "fewer")
    (world / "models/m/ft/e.full.safetensors").unlink()
    assert differences(world, pins) == ["files differ: ['models/m/ft/e.full.safetensors']"]
