"""The GPU check of issue 36: the whole route on two random-weight models, float32 and bfloat16, one run.

For each dtype (float32, then bfloat16 autocast) on `--device` (default cuda):
  finetune (LoRA r4 on q / v, `--steps` steps of `--batch`) both models on a synthetic 4-class task
  -> measure each fine-tune's descriptor -> solve it onto the other model (float64) -> apply it in closed
  form -> export -> reload with the model's own library (open_clip / transformers) and compare the
  reloaded image embeddings with platonic's edited model -> fit the adapter route the other way ->
  export -> reload -> compare.
It prints seconds, throughput and peak memory of every stage beside float32's, and exits 1 on any
mismatch beyond these tolerances:

  export -> reload              relative error of the reloaded embeddings <= 1e-4 (float32, same weights)
  descriptors, bf16 vs fp32     <= 5e-3 per entry, the same fine-tune measured both ways (8 significant bits)
  edited accuracy, bf16 vs fp32 <= 5 points on the synthetic test set (the fine-tunes themselves differ)
  losses                        finite, in both dtypes

Models: `--models full` (default): open_clip ViT-B-32 and a transformers SigLIP base (patch 16, 224 px),
random weights built offline; `--models tiny`: a transformers CLIP and SigLIP of hidden size 32, for a run
on the CPU (tests/test_gpu_check.py). Run it on a GPU machine with scripts/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import copy
import math
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

EXPORT_TOLERANCE, DESCRIPTOR_TOLERANCE, ACCURACY_POINTS = 1e-4, 5e-3, 5.0
TASK, CLASSES = "colours", ("red", "green", "blue", "grey")


def bpe_tokenizer(context: int):
    """open_clip's bundled BPE as a texts -> {input_ids, attention_mask} callable (no download)."""
    from open_clip.tokenizer import SimpleTokenizer

    tok = SimpleTokenizer(context_length=context)

    def tokenize(texts):
        ids = tok(texts)
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}

    return tokenize


def build_models(kind: str, device: str) -> dict:
    """{name: DualEncoder} of random weights, on `device`."""
    from transformers import CLIPConfig, SiglipConfig

    from platonic.models import load_model
    from platonic.models.hf_backend import from_config

    text = dict(vocab_size=49408, max_position_embeddings=64)
    if kind == "tiny":
        small = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
        clip = CLIPConfig(text_config={**text, **small, "eos_token_id": 49407, "bos_token_id": 49406},
                          vision_config={**small, "image_size": 32, "patch_size": 8}, projection_dim=24)
        siglip = SiglipConfig(text_config={**text, **small}, vision_config={**small, "image_size": 32, "patch_size": 8})
        models = {"clip": from_config(clip, "hf:tiny-clip", tokenizer=bpe_tokenizer(16)),
                  "siglip": from_config(siglip, "hf:tiny-siglip", tokenizer=bpe_tokenizer(16))}
    else:
        models = {"vit-b-32": load_model("open_clip:ViT-B-32"),
                  "siglip": from_config(SiglipConfig(text_config=text), "hf:random-siglip-base-patch16-224",
                                        tokenizer=bpe_tokenizer(64))}
    for m in models.values():
        m.module.to(device)
    return models


def task_data(n_train: int, n_probes: int, n_test: int):
    """Noisy single-colour 224 px images of 4 classes: (train x, y), probes, (test x, y); seeded."""
    g = torch.Generator().manual_seed(0)
    colours = torch.tensor([[200, 40, 40], [40, 200, 40], [40, 40, 200], [128, 128, 128]]).view(4, 3, 1, 1)

    def draw(n):
        y = torch.arange(n) % 4
        x = (colours[y] + 40 * torch.randn(n, 3, 224, 224, generator=g)).clamp(0, 255).to(torch.uint8)
        return x, y

    return draw(n_train), draw(n_probes)[0], draw(n_test)


class Stages:
    """Seconds, items per second and peak memory of every stage, per dtype."""

    def __init__(self, device: str):
        self.device, self.rows = device, {}

    def run(self, dtype: str, stage: str, items: int, work):
        cuda = self.device.startswith("cuda")
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        out = work()
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        memory = torch.cuda.max_memory_allocated() / 2**20 if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.rows[(stage, dtype)] = (seconds, items / seconds, memory)
        return out

    def print(self, dtypes) -> None:
        kind = "GPU peak allocated" if self.device.startswith("cuda") else "process peak RSS"
        print(f"\n{'stage':40s} " + " ".join(f"{d + ' s':>12s} {d + ' items/s':>17s} {'MB':>8s}" for d in dtypes)
              + f"   {dtypes[-1]} / {dtypes[0]} (throughput)   [memory: {kind}]")
        for stage in dict.fromkeys(s for s, _ in self.rows):
            cells = [self.rows[(stage, d)] for d in dtypes]
            line = " ".join(f"{s:12.3f} {r:17.1f} {m:8.0f}" for s, r, m in cells)
            print(f"{stage:40s} {line}   x{cells[-1][1] / cells[0][1]:.2f}")


def reloaded_embeddings(model, path: Path, pixels: torch.Tensor) -> torch.Tensor:
    """Image embeddings of an export reloaded by its own library alone, on the CPU in float32."""
    if model.spec.startswith("open_clip"):
        import open_clip

        native = open_clip.create_model_and_transforms(f"local-dir:{path}")[0].eval()
        with torch.no_grad():
            return native.encode_image(pixels).float()
    from transformers import AutoModel

    native = AutoModel.from_pretrained(str(path)).eval()
    with torch.no_grad():
        out = native.get_image_features(pixel_values=pixels)
    return (out if isinstance(out, torch.Tensor) else out.pooler_output).float()


def export_error(edited, path: Path, images: torch.Tensor) -> float:
    """Relative error between platonic's edited model and its export reloaded natively (float32, CPU)."""
    from platonic.transfer import save_model

    save_model(edited, path)
    cpu = copy.deepcopy(edited)
    cpu.module.to("cpu")
    pixels = cpu.prepare_probes(images)
    ours = cpu.encode_probes(images).z
    theirs = reloaded_embeddings(cpu, path, pixels if isinstance(pixels, torch.Tensor) else pixels["pixel_values"])
    return float((ours - theirs).norm() / ours.norm())


def one_dtype(dtype: str, models: dict, data, args, stages: Stages, out: Path, failures: list) -> dict:
    """The whole route in one dtype; returns its fine-tunes, descriptors and edited accuracies."""
    from platonic import AdaptConfig, adapt, apply, finetune, measure, solve_bank
    from platonic.compute import Compute, using
    from platonic.finetuning import FinetuneConfig
    from platonic.hashing import tensor_digest
    from platonic.metrics import top1

    (x, y), probes, (tx, ty) = data
    prompts = [f"a photo of a {c} thing." for c in CLASSES]
    (a, model_a), (b, model_b) = models.items()
    config = FinetuneConfig(mode="lora", steps=args.steps, batch_size=args.batch, lr=1e-3, schedule="constant")
    got = {"ft": {}, "descriptors": {}, "accuracy": {}}
    with using(Compute(device=args.device, dtype=dtype)):
        for name, model in models.items():
            ft, losses = stages.run(dtype, f"finetune {name} (images)", args.steps * args.batch,
                                    lambda model=model: finetune(model, x, y, prompts, config, progress=False))
            if not all(math.isfinite(v) for v in losses):
                failures.append(f"{dtype} {name}: non-finite fine-tune loss")
            got["ft"][name] = ft
            got["descriptors"][name] = stages.run(dtype, f"measure {name} (probes x 2)", 2 * len(probes), lambda m=model, f=ft: measure(
                m, f, probes, prompts, TASK, progress=False))
        given = {tensor_digest(probes): probes}
        bank = stages.run(dtype, f"solve {a} -> {b} (probes)", len(probes), lambda: solve_bank(
            model_b, [got["descriptors"][a]], probes=given, progress=False))
        edited = copy.deepcopy(model_b)
        apply(edited, bank, {TASK: 1.0}, alpha=0.5)
        z = stages.run(dtype, f"evaluate {b} + closed form (images)", len(tx), lambda: edited.encode_probes(tx).z)
        got["accuracy"]["closed_form"] = top1(z.double(), edited.encode_texts(prompts).double(), ty)
        adapter = stages.run(dtype, f"adapter {b} -> {a} (steps x batch)", args.steps * args.batch, lambda: adapt(
            model_a, [(1.0, got["descriptors"][b])], probes=given, progress=False,
            config=AdaptConfig(max_steps=args.steps, batch_size=args.batch)))
        fitted = adapter.merge_into(copy.deepcopy(model_a))
        z = fitted.encode_probes(tx).z
        got["accuracy"]["adapter"] = top1(z.double(), fitted.encode_texts(prompts).double(), ty)
    for route, model in (("closed_form", edited), ("adapter", fitted)):
        error = export_error(model, out / f"{dtype}-{route}", tx[:8])
        print(f"{dtype} {route}: export -> reload relative error {error:.2e}")
        if not error <= EXPORT_TOLERANCE:
            failures.append(f"{dtype} {route}: reloaded export differs by {error:.2e} (> {EXPORT_TOLERANCE:g})")
    return got


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--models", choices=("full", "tiny"), default="full")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--train", type=int, default=512)
    parser.add_argument("--probes", type=int, default=120)
    parser.add_argument("--test", type=int, default=256)
    parser.add_argument("--out", type=Path, default=None, help="where the exports go (default: a temporary folder)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    from platonic.compute import Compute, using
    from platonic.measurement import measure

    Compute.parse(device=args.device)  # a GPU named on a machine without one: one line, before any work
    if args.device.startswith("cuda"):
        print(f"GPU: {torch.cuda.get_device_name(torch.device(args.device))}, torch {torch.__version__}, "
              f"CUDA {torch.version.cuda}")
    models = build_models(args.models, args.device)
    data = task_data(args.train, args.probes, args.test)
    stages, failures, dtypes = Stages(args.device), [], ["float32", "bfloat16"]
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        runs = {d: one_dtype(d, models, data, args, stages, out, failures) for d in dtypes}
    stages.print(dtypes)
    prompts = [f"a photo of a {c} thing." for c in CLASSES]
    for name, model in models.items():  # the same (float32) fine-tune measured in bfloat16
        with using(Compute(device=args.device, dtype="bfloat16")):
            narrow = measure(model, runs["float32"]["ft"][name], data[1], prompts, TASK, progress=False).matrix
        error = float((narrow - runs["float32"]["descriptors"][name].matrix).abs().max())
        print(f"{name}: descriptor bfloat16 vs float32, largest entry error {error:.2e}")
        if not error <= DESCRIPTOR_TOLERANCE:
            failures.append(f"{name}: bfloat16 descriptor differs by {error:.2e} per entry (> {DESCRIPTOR_TOLERANCE:g})")
    for route in ("closed_form", "adapter"):
        wide, low = (100 * runs[d]["accuracy"][route] for d in dtypes)
        print(f"{route}: edited accuracy float32 {wide:.2f}, bfloat16 {low:.2f}")
        if not abs(wide - low) <= ACCURACY_POINTS:
            failures.append(f"{route}: edited accuracy moved {abs(wide - low):.2f} points in bfloat16 (> {ACCURACY_POINTS:g})")
    print("\nGPU check: " + ("PASS" if not failures else "FAIL\n  " + "\n  ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
