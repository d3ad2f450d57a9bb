"""The tiny worlds' weights, pinned: a build whose weights move without a recipe version bump fails a test.

`summary(world_dir)` digests every weights file of a built world (sha256 of its tensors' bytes in name
order, and the float64 sum and sum of squares of its floating tensors). On the CPU the pins were made on
(same torch, same kernel capability, same processor model) the digests must be equal; on another CPU the
float kernels may round differently, so the sums must agree within `CROSS_CPU_RTOL`.
`scripts/pin_tiny_worlds.py` writes the pin files (after a deliberate change of what a build trains and a
bump of the world's RECIPE_VERSION).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
from pathlib import Path

import torch
from safetensors import safe_open

CROSS_CPU_RTOL = 1e-3


def cpu_identity() -> dict:
    """What decides whether two CPUs compute the same floats here: torch, its kernel capability, the model."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"torch": torch.__version__, "capability": torch.backends.cpu.get_cpu_capability(), "model": model}


def summary(world: Path) -> dict[str, dict]:
    """{weights file (relative path): {"sha256", "sum", "sumsq"}} of every models/**/*.safetensors of a built world."""
    out = {}
    for path in sorted(Path(world).glob("models/**/*.safetensors")):
        h, total, squares = hashlib.sha256(), 0.0, 0.0
        with safe_open(str(path), framework="pt") as f:
            for key in sorted(f.keys()):
                t = f.get_tensor(key).contiguous()
                h.update(key.encode())
                h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
                if t.is_floating_point():
                    total += float(t.double().sum())
                    squares += float(t.double().pow(2).sum())
        out[str(path.relative_to(world))] = {"sha256": h.hexdigest(), "sum": total, "sumsq": squares}
    return out


def write_pins(world: Path, recipe: str, out: Path) -> None:
    out.write_text(json.dumps({"recipe": recipe, "cpu": cpu_identity(), "files": summary(world)}, indent=1, sort_keys=True)
                   + "\n")


def differences(world: Path, pins_file: Path) -> list[str]:
    """What differs between a built world and its pins (exact on the pins' CPU, within CROSS_CPU_RTOL elsewhere)."""
    pins = json.loads(Path(pins_file).read_text())
    now = summary(world)
    if set(now) != set(pins["files"]):
        return [f"files differ: {sorted(set(now) ^ set(pins['files']))}"]
    exact = pins["cpu"] == cpu_identity()
    out = []
    for name, pinned in pins["files"].items():
        got = now[name]
        if exact:
            if got["sha256"] != pinned["sha256"]:
                out.append(f"{name}: weights differ (sum {got['sum']:.9g} vs {pinned['sum']:.9g})")
            continue
        scale = math.sqrt(pinned["sumsq"]) + abs(pinned["sum"])
        if abs(got["sum"] - pinned["sum"]) > CROSS_CPU_RTOL * scale or \
                abs(got["sumsq"] - pinned["sumsq"]) > CROSS_CPU_RTOL * pinned["sumsq"]:
            out.append(f"{name}: sum {got['sum']:.6g} vs {pinned['sum']:.6g}, sumsq {got['sumsq']:.6g} vs {pinned['sumsq']:.6g}")
    return out
