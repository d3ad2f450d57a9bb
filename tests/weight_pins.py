"""The tiny worlds' weights, pinned: a build whose weights move without a recipe version bump fails a test.

`summary(world_dir)` digests every weights file of a built world: sha256 of its tensors' bytes in name order,
the float64 sum and sum of squares of its floating tensors, and for a fine-tune (models/M/ft/*) the sum of
squares of its update ||ft - base||^2 against its model's base (models/M/base.safetensors).

On the CPU the pins were made on (same torch, kernel capability, vendor, family, model and stepping) the
digests must be equal. On another CPU the float kernels round differently, so:
- a base's (trained weights that are not a fine-tune: the tiny worlds' models/M/base.safetensors, the trunk
  world's models/M/open_clip_model.safetensors) sum of squares must agree within `CROSS_CPU_BASE_RTOL`, a
  fine-tune's within `CROSS_CPU_RTOL`; the trunk world's cached activations (activations/*: forward passes
  over the data, not weights) keep their sum and sum of squares within `CROSS_CPU_RTOL`;
- a model's fine-tunes must have moved as far from its base as pinned: the median over the model's fine-tunes
  of | ||ft - base|| - pinned | / pinned within `CROSS_CPU_UPDATE_RTOL`.
No whole-file sum of weights is compared across CPUs. A fine-tune's: the tiny sources are 4 AdamW steps, whose first
steps are about lr * sign(gradient), so rounding flips the sign of many tiny updates; that moved the ResNet
fine-tunes' sums by up to 3.4e-3 of their scale on a CI machine, as much as one more fine-tune step (2.7e-3).
The update norm separates them (docs/lab/2026-12-05-weight-pins-across-cpus.md): the same build with
ATEN_CPU_CAPABILITY=avx2 or default moved the per-model median by at most 4.1e-3 (ResNet; 2e-6 elsewhere),
one more fine-tune step by at least 5.2e-2 on every model, a fine-tune lr x 4/3 by at least 0.30.
A base's: an AVX2-only AMD EPYC moved the tiny ResNet base's sum by 1.35e-3 of its scale, while one more
pre-training step moves a base's sum by as little as 6.6e-6 (ViT-B): the sum tells neither apart. The sum of
squares does: across CPUs and kernels a base's moved by at most 2.6e-6, one more pre-training step moves it
by 3.3e-4 to 1.1e-3, a pre-training lr x 4/3 by 6.9e-3 to 3.0e-2 (same lab note, addendum of 2026-12-06).
The activations of a student trained from scratch moved further on that CPU (scratch-resnet's: sum 1.8e-4,
sum of squares 1.4e-4 of their scale), so they keep the wider tolerance; the student's weights, which make them,
are held at `CROSS_CPU_BASE_RTOL`.
`scripts/pin_tiny_worlds.py` writes the pin files (after a deliberate change of what a build trains and a
bump of the world's RECIPE_VERSION).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import statistics
from pathlib import Path

import torch
from safetensors import safe_open

CROSS_CPU_RTOL = 1e-3
CROSS_CPU_BASE_RTOL = 1e-4
CROSS_CPU_UPDATE_RTOL = 3e-2
CPUINFO_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping")


def cpu_identity() -> dict:
    """What decides whether two CPUs compute the same floats here: torch, its kernel capability, the processor
    (vendor, family, model, stepping and name from /proc/cpuinfo, where there is one)."""
    out = {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(),
           "model name": platform.processor() or platform.machine()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in CPUINFO_FIELDS:
                out[key.strip()] = value.strip()
            elif not line.strip():
                break  # the first processor's block is enough
    except OSError:
        pass
    return out


def _floats(path: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(path), framework="pt") as f:
        return {key: f.get_tensor(key) for key in sorted(f.keys())}


def update_sumsq(finetune: dict[str, torch.Tensor], base: dict[str, torch.Tensor]) -> float:
    """||ft - base||^2 over the fine-tune's floating tensors that the base holds, under the same name or under the
    one tower prefix ("image.", "audio.": a base file holds both towers) that holds the most of them; float64."""
    def held(prefix: str) -> int:
        return sum(prefix + key in base and base[prefix + key].shape == t.shape for key, t in finetune.items())

    prefix = max(["", *sorted({key.split(".", 1)[0] + "." for key in base if "." in key})], key=held)
    total = 0.0
    for key, t in finetune.items():
        b = base.get(prefix + key)
        if t.is_floating_point() and b is not None and b.shape == t.shape:
            total += float((t.double() - b.double()).pow(2).sum())
    return total


def _base_of(path: Path, world: Path) -> Path | None:
    """The base weights a fine-tune file is an update of: models/M/base.safetensors for the tiny worlds'
    models/M/ft/*; the open_clip weights models/M/open_clip_model.safetensors for the trunk world's sources/M/*."""
    relative = path.relative_to(world).parts
    if path.parent.name == "ft":
        return path.parent.parent / "base.safetensors"
    if relative[0] == "sources":
        return world / "models" / relative[1] / "open_clip_model.safetensors"
    return None


def summary(world: Path) -> dict[str, dict]:
    """{weights file (relative path): {"sha256", "sum", "sumsq"[, "update_sumsq"]}} of every weights file of a
    built world (models/**, and the trunk world's sources/** and activations/*); "update_sumsq" for a fine-tune
    (models/M/ft/*, sources/M/*) whose model has a base."""
    out, bases = {}, {}
    world = Path(world)
    files = [p for pattern in ("models/**/*.safetensors", "sources/**/*.safetensors", "activations/*.safetensors")
             for p in world.glob(pattern)]
    for path in sorted(files):
        tensors = _floats(path)
        h, total, squares = hashlib.sha256(), 0.0, 0.0
        for key, t in tensors.items():
            t = t.contiguous()
            h.update(key.encode())
            h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
            if t.is_floating_point():
                total += float(t.double().sum())
                squares += float(t.double().pow(2).sum())
        record = {"sha256": h.hexdigest(), "sum": total, "sumsq": squares}
        base_file = _base_of(path, world)
        if base_file is not None and base_file.exists():
            if base_file not in bases:
                bases[base_file] = _floats(base_file)
            record["update_sumsq"] = update_sumsq(tensors, bases[base_file])
        out[str(path.relative_to(world))] = record
    return out


def write_pins(world: Path, recipe: str, out: Path) -> None:
    out.write_text(json.dumps({"recipe": recipe, "cpu": cpu_identity(), "files": summary(world)}, indent=1, sort_keys=True)
                   + "\n")


def _model(name: str) -> str:
    """The folder of a model's fine-tunes: models/M/ft/x.safetensors -> models/M; sources/M/x.safetensors -> sources/M."""
    return "/".join(name.split("/")[:2])


def differences(world: Path, pins_file: Path) -> list[str]:
    """What differs between a built world and its pins (exact on the pins' CPU; elsewhere the statistics of the
    module docstring within CROSS_CPU_BASE_RTOL, CROSS_CPU_RTOL and CROSS_CPU_UPDATE_RTOL)."""
    pins = json.loads(Path(pins_file).read_text())
    now = summary(world)
    if set(now) != set(pins["files"]):
        return [f"files differ: {sorted(set(now) ^ set(pins['files']))}"]
    if pins["cpu"] == cpu_identity():
        return [f"{name}: weights differ (sum {now[name]['sum']:.9g} vs {pinned['sum']:.9g})"
                for name, pinned in pins["files"].items() if now[name]["sha256"] != pinned["sha256"]]
    out, moved = [], {}
    for name, pinned in pins["files"].items():
        got = now[name]
        activations = name.startswith("activations/")
        rtol = CROSS_CPU_RTOL if "update_sumsq" in pinned or activations else CROSS_CPU_BASE_RTOL
        scale = math.sqrt(pinned["sumsq"]) + abs(pinned["sum"])
        sum_off = activations and abs(got["sum"] - pinned["sum"]) > CROSS_CPU_RTOL * scale
        if sum_off or abs(got["sumsq"] - pinned["sumsq"]) > rtol * pinned["sumsq"]:
            out.append(f"{name}: sum {got['sum']:.6g} vs {pinned['sum']:.6g}, sumsq {got['sumsq']:.6g} vs {pinned['sumsq']:.6g}")
        if "update_sumsq" in pinned:
            if "update_sumsq" not in got or pinned["update_sumsq"] <= 0:
                out.append(f"{name}: no fine-tune update to compare (now {got.get('update_sumsq')}, "
                           f"pinned {pinned['update_sumsq']})")
                continue
            ref = math.sqrt(pinned["update_sumsq"])
            moved.setdefault(_model(name), []).append(abs(math.sqrt(got["update_sumsq"]) - ref) / ref)
    for model, changes in sorted(moved.items()):
        median = statistics.median(changes)
        if median > CROSS_CPU_UPDATE_RTOL:
            out.append(f"{model}: its fine-tunes' distance from the base moved by {100 * median:.2f}% "
                       f"(median over {len(changes)}; across CPUs at most {100 * CROSS_CPU_UPDATE_RTOL:g}%)")
    return out
