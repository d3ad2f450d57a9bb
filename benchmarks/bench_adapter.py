"""Benchmark of the adapter route (platonic.adapt): seconds per edit and steps per second.

Two targets:
- a world model (default world:vit-b), fitting a two-task composition of other models' descriptors with
  the paper's settings (20 epochs over the pooled probes, at most 540 steps): one whole edit, timed;
- a random-weight open_clip ViT-B-32 at 224 px: a few steps on a 64-probe batch, timed, and the time of
  a 540-step edit extrapolated from them.

The world edit runs on one thread, as `platonic experiment --adapter-cells` fits tiny towers (two threads on
two busy cores were measured 7x slower); the ViT-B-32 uses all threads (`--threads N` sets them).

Reference measured in the same run, on the same batch: one step of plain full fine-tuning of the
tower (forward, backward, AdamW on every tower weight). The ratio adapter step / full step says what
LoRA's frozen base saves or costs; it is printed, not asserted.

    python benchmarks/bench_adapter.py [--world-model vit-b] [--vit-steps 3] [--threads N]
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from platonic import AdaptConfig, Descriptor, ProbeGrid, adapt
from platonic.measurement import EmbeddingCache, measure


def full_step_seconds(model, probes: torch.Tensor, G: torch.Tensor, repeats: int) -> float:
    """Seconds of one full fine-tuning step (every tower weight trained) on `probes`."""
    work = model.copy_for_new_weights()
    params = list(work.tower.parameters())
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=1e-5)
    times = []
    for _ in range(repeats + 1):  # the first step warms up
        start = time.perf_counter()
        z = torch.nn.functional.normalize(work._forward_tower(work.prepare_probes(probes)).float(), dim=1)
        loss = (z @ G.T).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return min(times[1:])


def world_bench(name: str, cache: EmbeddingCache) -> None:
    from platonic.experiments.setups import world_data
    from platonic.models import load_model
    from platonic.world.image.build import ensure_world
    from platonic.world.image.data import TASKS

    path = ensure_world()
    data = world_data(path)
    sources = {"fashion": "vit-a" if name != "vit-a" else "mixer", "shapes": "resnet" if name != "resnet" else "mixer"}
    pairs, probes = [], {}
    for task, source in sources.items():
        d = measure(f"world:{source}", f"world:{source}/{task}", data[task].probes, TASKS[task].prompts, task,
                    cache=cache, progress=False)
        pairs.append((1.0, d))
        probes[d.grid.probe_digest] = data[task].probes
    target = load_model(f"world:{name}")
    start = time.perf_counter()
    adapter = adapt(target, pairs, probes=probes, cache=cache, progress=False)
    seconds = time.perf_counter() - start
    steps = adapter.report["steps"]
    batch = data["fashion"].probes[:64]
    G = torch.nn.functional.normalize(target.encode_texts(TASKS["fashion"].prompts).float(), dim=1)
    reference = full_step_seconds(target, batch, G, repeats=5)
    n_probes = sum(adapter.report["probes"].values())
    print(f"world:{name}, fashion@{sources['fashion']} + shapes@{sources['shapes']} ({n_probes} probes), paper settings:")
    print(f"  one edit: {seconds:.1f} s, {steps} steps, {steps / seconds:.1f} steps/s "
          f"(bar: at most 60 s per edit on this machine)")
    print(f"  reference, one full fine-tuning step on 64 probes: {1000 * reference:.1f} ms; adapter step (with its share "
          f"of the fixed costs) / full step = {seconds / steps / reference:.2f}")


def vit_bench(steps: int, cache: EmbeddingCache) -> None:
    from platonic.models import load_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        target = load_model("open_clip:ViT-B-32")
    g = torch.Generator().manual_seed(0)
    probes = torch.randint(0, 256, (64, 3, 224, 224), dtype=torch.uint8, generator=g)
    prompts = [f"a photo of class {i}." for i in range(10)]
    grid = ProbeGrid.from_probes("bench", prompts, probes)
    desc = Descriptor(0.05 * torch.randn(64, 10, generator=g), grid)
    start = time.perf_counter()
    adapt(target, desc, config=AdaptConfig(max_steps=0), probes={grid.probe_digest: probes}, cache=cache, progress=False)
    fixed = time.perf_counter() - start  # base affinities, LoRA set-up and its check: paid once per edit
    start = time.perf_counter()
    adapter = adapt(target, desc, config=AdaptConfig(max_steps=steps), probes={grid.probe_digest: probes}, cache=cache,
                    progress=False)
    per_step = (time.perf_counter() - start - fixed) / adapter.report["steps"]
    G = torch.nn.functional.normalize(target.encode_texts(prompts).float(), dim=1)
    reference = full_step_seconds(target, probes, G, repeats=2)
    print("open_clip:ViT-B-32 (random weights), 224 px, batch 64, rank 16 on its attention:")
    print(f"  {per_step:.2f} s per step ({1 / per_step:.2f} steps/s), fixed cost {fixed:.1f} s; a 540-step edit "
          f"(the paper's cap) extrapolates to {(fixed + 540 * per_step) / 60:.1f} min here")
    print(f"  reference, one full fine-tuning step on the same batch: {reference:.2f} s; adapter step / full step = "
          f"{per_step / reference:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-model", default="vit-b")
    parser.add_argument("--vit-steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--skip-vit", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import tempfile

    cache = EmbeddingCache(tempfile.mkdtemp(prefix="bench-adapter-"))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads (the world edit runs on one, as the experiments do)")
    from platonic.experiments.engine import single_thread

    with single_thread():
        world_bench(args.world_model, cache)
    if not args.skip_vit:
        vit_bench(args.vit_steps, cache)


if __name__ == "__main__":
    main()
