"""The pins' comparison: exact on the pins' CPU; across CPUs it lets rounding through and catches a moved recipe."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from weight_pins import CROSS_CPU_BASE_RTOL, CROSS_CPU_RTOL, cpu_identity, differences, summary, write_pins

TASKS = ("a", "b", "c", "d", "e")


def _world(root: Path, update_scale: float = 1.0, noise: float = 0.0, base_shift: float = 0.0,
           base_scale: float = 1.0, base_drift: float = 0.0) -> Path:
    """A built world's layout: models/m/base.safetensors (both towers, "image." and "text." prefixed) and five
    fine-tunes models/m/ft/TASK.full.safetensors (the image tower: base + update_scale * update + noise).

    The base is base_scale * w + base_shift, plus base_drift times the part of the all-ones tensor orthogonal to
    w: a drift that moves the base's sum by about base_drift * N and its sum of squares by only base_drift^2 * N."""
    g = torch.Generator().manual_seed(0)
    base = {"image.w": torch.randn(64, 64, generator=g), "text.w": torch.randn(8, 8, generator=g)}
    for key, w in base.items():
        ones = torch.ones_like(w)
        base[key] = base_scale * w + base_drift * (ones - w * (w * ones).sum() / w.pow(2).sum())
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


def _base_change(world: Path, pins: Path) -> tuple[float, float]:
    """(|sum change| / (||w|| + |sum|), |sum of squares change| / sum of squares) of the base against its pins."""
    pinned = json.loads(pins.read_text())["files"]["models/m/base.safetensors"]
    got = summary(world)["models/m/base.safetensors"]
    return (abs(got["sum"] - pinned["sum"]) / (math.sqrt(pinned["sumsq"]) + abs(pinned["sum"])),
            abs(got["sumsq"] - pinned["sumsq"]) / pinned["sumsq"])


def test_across_cpus_a_bases_sum_may_drift_but_not_its_norm(pins, tmp_path):
    """An AVX2-only CPU moved a base's whole sum by 1.35e-3 of its scale at a sum of squares within 5.4e-7 (2.6e-6
    at most across kernels); one more pre-training step moves the sum of squares by 3.3e-4 or more
    (docs/lab/2026-12-05-weight-pins-across-cpus.md)."""
    pins = _elsewhere(pins)
    drifted = _world(tmp_path / "drifted", base_drift=1e-3)
    sum_change, norm_change = _base_change(drifted, pins)
    assert sum_change > 10 * CROSS_CPU_RTOL and norm_change < CROSS_CPU_BASE_RTOL / 10
    assert differences(drifted, pins) == []
    longer = _world(tmp_path / "longer", base_scale=1 + 1e-4)  # a norm change under one more pre-training step's
    assert _base_change(longer, pins)[1] < 3.3e-4
    assert [line.split(":")[0] for line in differences(longer, pins)] == ["models/m/base.safetensors"]


def test_across_cpus_cached_activations_keep_the_wider_tolerance(tmp_path):
    """A student's activations moved by 1.4e-4 (sum of squares) across CPUs: they pass within CROSS_CPU_RTOL, and
    a shift of their sum past it is named."""
    def world(root: Path, scale: float = 1.0, shift: float = 0.0) -> Path:
        (root / "activations").mkdir(parents=True)
        a = torch.rand(256, 32, generator=torch.Generator().manual_seed(0))
        save_file({"a": scale * a + shift}, str(root / "activations/m.safetensors"))
        return root

    pins = tmp_path / "pins.json"
    write_pins(world(tmp_path / "pinned"), "r1", pins)
    pins = _elsewhere(pins)
    assert differences(world(tmp_path / "rounded", scale=1 + 1e-4), pins) == []  # sum of squares 2e-4
    assert [line.split(":")[0] for line in differences(world(tmp_path / "shifted", shift=5e-3), pins)] == [
        "activations/m.safetensors"]


def test_a_missing_or_extra_file_is_named(pins, tmp_path):
    world = _world(tmp_path / "fewer")
    (world / "models/m/ft/e.full.safetensors").unlink()
    assert differences(world, pins) == ["files differ: ['models/m/ft/e.full.safetensors']"]
