"""Benchmark of scale (issue 36): feature extraction and fine-tune steps, 1 and N processes, bfloat16 vs float32.

For each number of processes (`--processes`, default 1,2) and dtype (`--dtypes`, default float32,bfloat16)
one launch runs the same work on a random-weight model (`--model`, default open_clip:ViT-S-32):

- feature extraction: `--images` random 224 x 224 images encoded in batches of `--batch`, shared by the
  launch's processes as `EmbeddingCache` shares a miss (`measurement.encode_shared`): images per second;
- fine-tune steps: LoRA r4 on the tower's q / v (the paper's sources), global batch `--batch`, data parallel
  over the processes: the median time between two optimiser steps over `--steps` steps after the first
  (forward, backward, the gradients' all-reduce, AdamW), so model copies and LoRA set-up are not counted;
- peak resident memory of each process (and the GPU's peak allocation where there is one).

One process runs as `python benchmarks/bench_scale.py --worker ...`; N processes as
`accelerate launch --multi_gpu --num_processes N benchmarks/bench_scale.py --worker ...` with the CPU or the
GPUs (`--device`, default: cuda when present). The ratios (N processes / 1, bfloat16 / float32) are taken
within this run, between launches that ran one after the other on the same machine.

`--base DIR` also times the default single-process CPU path of another source tree (DIR/src, e.g. the
commit before this issue: `git archive 8e22935 src | tar -x -C DIR`) beside this one, alternating
(this, base, this, base): the toy setup's addition and negation grids (the fast path) and one encoding
pass, so "nothing in the default path got slower" is a ratio measured in one run.

    python benchmarks/bench_scale.py [--model open_clip:ViT-S-32] [--images 256] [--batch 32] [--steps 4]
                                     [--processes 1,2] [--dtypes float32,bfloat16] [--threads N] [--base DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(args) -> None:
    """One process of a launch: time encoding and fine-tune steps; the main process prints one JSON line."""
    import warnings

    import torch

    from platonic.compute import Compute, using
    from platonic.distributed import join, process_device
    from platonic.finetuning import FinetuneConfig, finetune
    from platonic.measurement import encode_shared
    from platonic.models import load_model

    warnings.simplefilter("ignore")
    settings = Compute.parse(args.device, args.dtype)
    group = join(settings.torch_device())
    device = process_device(str(settings.torch_device()))
    model = load_model(args.model, device=device)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (args.images, 3, 224, 224), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 4, (args.images,), generator=g)
    prompts = [f"a photo of class {i}." for i in range(4)]

    def timed(work) -> float:
        group.barrier()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        work()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        group.barrier()
        return time.perf_counter() - start

    stamps, step = [], torch.optim.AdamW.step

    def stamped(self, *a, **k):  # the time of every optimiser step: a step is the time between two
        out = step(self, *a, **k)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())
        return out

    config = FinetuneConfig(mode="lora", steps=args.steps + 1, batch_size=args.batch, lr=1e-4, schedule="constant")
    with using(settings.model_copy(update={"device": device})):
        encode_shared(model, images[: args.batch], args.batch, False, group)  # warm-up
        encode = timed(lambda: encode_shared(model, images, args.batch, False, group))
        torch.optim.AdamW.step = stamped
        try:
            timed(lambda: finetune(model, images, labels, prompts, config, progress=False))
        finally:
            torch.optim.AdamW.step = step
    seconds = statistics.median(b - a for a, b in zip(stamps, stamps[1:]))  # steps 2.. (the first warms up)
    peak = {group.index: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.startswith("cuda"):
        peak[group.index] = (peak[group.index], torch.cuda.max_memory_allocated() / 2**20)
    peaks = group.merged(peak)
    if group.is_main:
        print(json.dumps({"processes": group.count, "dtype": args.dtype, "device": device.split(":")[0],
                          "encode_images_per_s": args.images / encode,
                          "step_s": seconds, "step_images_per_s": args.batch / seconds,
                          "peak_rss_mb": [peaks[k] for k in sorted(peaks)]}), flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, processes: int, dtype: str, device: str) -> dict:
    """Run the worker as one process or a launch of `processes`; its JSON line."""
    work = [__file__, "--worker", "--model", args.model, "--images", str(args.images), "--batch", str(args.batch),
            "--steps", str(args.steps), "--dtype", dtype, "--device", device]
    if processes == 1:
        command = [sys.executable, *work]
    else:
        command = [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes",
                   str(processes), "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", str(free_port()), *work]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "PLATONIC_QUIET": "1"}
    if device == "cpu":  # one process: --threads (default all cores); a launch: accelerate's one per process
        env["OMP_NUM_THREADS"] = str(args.threads if processes == 1 else 1)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


DEFAULT_PATH = """
import json, time, warnings, torch
warnings.simplefilter("ignore")
from platonic.experiments.run import run_experiments
from platonic.experiments.setups import toy_setup
from platonic.models import load_model
setup = toy_setup()
start = time.perf_counter()
run_experiments(setup, ["addition", "negation"], progress=False, plots=False, trained_baselines=False)
grid = time.perf_counter() - start
model = load_model("open_clip:ViT-S-32")
images = torch.randint(0, 256, (128, 3, 224, 224), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
model.encode_probes(images[:32], batch_size=32)
start = time.perf_counter()
model.encode_probes(images, batch_size=32)
print(json.dumps({"toy_grid_s": grid, "encode_128_s": time.perf_counter() - start}))
"""


def default_path(base: Path, repeats: int = 2) -> None:
    """The default single-process CPU path, this tree vs `base`/src, alternating; medians and ratios."""
    import tempfile

    times: dict[str, list[dict]] = {"this": [], "base": []}
    for _ in range(repeats):
        for name, src in (("this", ROOT / "src"), ("base", base / "src")):
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "PYTHONPATH": str(src), "PLATONIC_CACHE": cache, "PLATONIC_QUIET": "1"}
                done = subprocess.run([sys.executable, "-c", DEFAULT_PATH], env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"the default path of {src} failed:\n{done.stderr[-3000:]}")
            times[name].append(json.loads(done.stdout.splitlines()[-1]))
    print(f"\ndefault single-process CPU path, this tree vs {base}/src (medians of {repeats}, alternating):")
    for key in ("toy_grid_s", "encode_128_s"):
        this, old = (statistics.median(t[key] for t in times[n]) for n in ("this", "base"))
        print(f"  {key:14s} this {this:7.3f} s   base {old:7.3f} s   this / base {this / old:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="open_clip:ViT-S-32")
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default=None)
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--base", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads of the one-process CPU run")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and torch.cuda.device_count() < max(int(p) for p in args.processes.split(",")):
        raise SystemExit(f"--processes {args.processes}: this machine has {torch.cuda.device_count()} GPU(s)")
    print(f"model {args.model}, {args.images} images, batch {args.batch}, {args.steps} steps, device {device}, "
          f"{os.cpu_count()} CPU(s), one process on {args.threads} thread(s), torch {torch.__version__}")
    rows = {}
    for dtype in args.dtypes.split(","):
        for processes in (int(p) for p in args.processes.split(",")):
            start = time.perf_counter()
            rows[(processes, dtype)] = r = launch(args, processes, dtype, device)
            peaks = ", ".join(f"{p:.0f}" if not isinstance(p, list) else f"{p[0]:.0f} (GPU {p[1]:.0f})"
                              for p in r["peak_rss_mb"])
            print(f"{processes} process(es) {dtype:8s}: encode {r['encode_images_per_s']:7.1f} images/s   "
                  f"fine-tune {r['step_s']:6.3f} s/step ({r['step_images_per_s']:6.1f} images/s)   peak RSS MB: "
                  f"{peaks}   [launch {time.perf_counter() - start:.0f} s]", flush=True)
    print("\nratios (same run):")
    dtypes, counts = args.dtypes.split(","), sorted({p for p, _ in rows})
    for dtype in dtypes:
        for n in counts[1:]:
            a, b = rows[(counts[0], dtype)], rows[(n, dtype)]
            print(f"  {dtype:8s} {n} processes / {counts[0]}: encode x{b['encode_images_per_s'] / a['encode_images_per_s']:.2f}"
                  f", fine-tune x{b['step_images_per_s'] / a['step_images_per_s']:.2f} (throughput)")
    for n in counts:
        for dtype in dtypes[1:]:
            a, b = rows[(n, dtypes[0])], rows[(n, dtype)]
            print(f"  {n} process(es) {dtype} / {dtypes[0]}: encode x{b['encode_images_per_s'] / a['encode_images_per_s']:.2f}"
                  f", fine-tune x{b['step_images_per_s'] / a['step_images_per_s']:.2f} (throughput)")
    if args.base is not None:
        default_path(args.base)


if __name__ == "__main__":
    main()
