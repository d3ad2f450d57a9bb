"""Research harness (not part of the package, not tested): how far the tiny image world's bases move under deliberate
pre-training changes, against a built tiny world (docs/lab/2026-12-05-weight-pins-across-cpus.md, addendum of
2026-12-06), to set the cross-CPU tolerance of a base's pin.

Each model's base is pre-trained again in this process (`job_pretrain`, one thread, the built world's data and
captions copied into OUT) under one variant, and its whole-file sum and sum of squares compared with the built base:
- same: the recipe as it is (the sums must come out equal to the last bit);
- steps31: one more pre-training step;
- lr43: the pre-training learning rate x 4/3.
Prints one line a model: |sum change| / (sqrt(sum of squares) + |sum|), |sum of squares change| / sum of squares.
For the drift across kernels, build the tiny world again under ATEN_CPU_CAPABILITY=avx2|default in another cache.

Usage: python research/base_pin_variants.py VARIANT BUILT_TINY_WORLD_DIR OUT_DIR
"""
import dataclasses
import math
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file

from platonic.world.image import build


def sums(path: Path) -> tuple[float, float]:
    tensors = [t for t in load_file(str(path)).values() if t.is_floating_point()]
    return sum(float(t.double().sum()) for t in tensors), sum(float(t.double().pow(2).sum()) for t in tensors)


def main(variant: str, built: Path, out: Path) -> None:
    tiny = build.PROFILES["tiny"]
    changes = {"same": {}, "steps31": {"steps": tiny.pretrain.steps + 1}, "lr43": {"lr": tiny.pretrain.lr * 4 / 3}}
    build.PROFILES["tiny"] = dataclasses.replace(tiny, pretrain=dataclasses.replace(tiny.pretrain, **changes[variant]))
    out.mkdir(parents=True, exist_ok=True)
    for name in ("data.safetensors", "captions.safetensors"):
        shutil.copy(built / name, out / name)
    for model in build.MODEL_NAMES:
        build.job_pretrain(str(out), "tiny", 0, model)
        rel = Path("models") / model / "base.safetensors"
        (s, q), (s0, q0) = sums(out / rel), sums(built / rel)
        print(f"{variant} {model}: sum {abs(s - s0) / (math.sqrt(q0) + abs(s0)):.2e}, sumsq {abs(q - q0) / q0:.2e}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
