"""Time the command line's start: `platonic --help` and a one-line error, against importing torch.

Each command runs in a fresh interpreter (as a user's shell runs it), `--repeat` times; the best and
the median wall times are printed, with their ratio to the reference measured in the same run: a
fresh interpreter that imports torch (what every command paid before the CLI imported it lazily).
A bare interpreter's start is printed too, as the floor.

Target (issue 34): `--help` and a one-line error in at most 1 s on the project's 2-core machine.

    python benchmarks/bench_cli.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = "from platonic.cli import app; app()"
CASES = {
    "bare interpreter": ["-c", "pass"],
    "import torch (reference)": ["-c", "import torch"],
    "platonic --help": ["-c", CLI, "--help"],
    "platonic apply --help": ["-c", CLI, "apply", "--help"],
    "platonic inspect MISSING (one-line error)": ["-c", CLI, "inspect", "no-such-file.utd"],
    "platonic apply --bank MISSING (one-line error)": ["-c", CLI, "apply", "--target", "open_clip:ViT-S-32", "--bank",
                                                       "no-such.bank", "--terms", "t:+1", "-o", "out.safetensors"],
    "platonic finetune --seed 2**70 (one-line error)": ["-c", CLI, "finetune", "open_clip:ViT-S-32", "--task", "t=data",
                                                          "-o", "out", "--seed", str(2 ** 70)],
}


def timed(args: list[str], cwd: str) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True)
    return time.perf_counter() - t0, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as cwd:
        times = {name: [] for name in CASES}
        codes = {}
        for _ in range(repeat):  # interleaved, so that a busy moment of the machine hits every case alike
            for name, args in CASES.items():
                secs, codes[name] = timed(args, cwd)
                times[name].append(secs)
    reference = statistics.median(times["import torch (reference)"])
    print(f"{'case':<50} {'best s':>7} {'median s':>9} {'/ torch':>8} {'exit':>5}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<50} {min(values):7.3f} {median:9.3f} {median / reference:8.2f} {codes[name]:5d}")
    print(f"(best and median of {repeat} runs each; load average now {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
