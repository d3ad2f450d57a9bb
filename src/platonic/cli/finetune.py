"""`platonic finetune`: a source fine-tune of a model on a task, written as a directory every command reads."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import InvalidInputError
from .common import (
    check_compute,
    console,
    device_option,
    dtype_option,
    input_paths,
    num_workers_option,
    overwrite_option,
    use_compute,
)


def finetune(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="The pre-trained model spec, e.g. open_clip:ViT-B-32/laion2b_s34b_b79k."),
    task: str = typer.Option(..., "--task", help="NAME (a registered task: eurosat, dtd, ...) or NAME=SOURCE: an image "
                             "folder (a sound folder for audio-text models), hf:ORG/NAME[@REV], hf:DIR or "
                             "torchvision:NAME@ROOT (docs/data.md)."),
    output: Path = typer.Option(..., "-o", "--output", help="Directory to write: a peft adapter (lora) or "
                                "model.safetensors (full, attention), with finetune.json."),
    mode: str = typer.Option("lora", "--mode", help="lora, full or attention (ATT-FT: attention weights only)."),
    orthoreg: float = typer.Option(0.0, "--orthoreg", help="OrthoReg's lambda (method.md §2); 0: off."),
    template: str = typer.Option(None, "--template", help="Prompt template with one {} (default: the registry's, "
                                 "else 'a photo of a {}.', for sound 'this is a sound of {}.')."),
    steps: int = typer.Option(None, "--steps", min=1, help="Optimiser steps (default 200)."),
    epochs: float = typer.Option(None, "--epochs", help="Passes over the train split instead of --steps "
                                 "(the paper's sources: 3; SUN397: 1)."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Inputs per optimiser step: the global batch, "
                                   "shared by the processes of a launch."),
    lr: float = typer.Option(1e-4, "--lr", help="AdamW learning rate."),
    schedule: str = typer.Option("cosine", "--schedule", help="cosine (decay to 0) or constant (the paper's "
                                 "sources), after the warm-up."),
    weight_decay: float = typer.Option(0.1, "--weight-decay"),
    lora_rank: int = typer.Option(4, "--lora-rank", min=1, help="LoRA rank (the paper's sources: 4)."),
    lora_alpha: float = typer.Option(8.0, "--lora-alpha", help="LoRA alpha (the paper's sources: 8)."),
    lora_targets: str = typer.Option("model", "--lora-targets", help="model (the backend's q / v projections) or "
                                     "attention (q, k, v and out: LoRA-ATT)."),
    seed: int = typer.Option(0, "--seed"),
    device: str = device_option(),
    dtype: str = dtype_option(),
    num_workers: int = num_workers_option(),
    overwrite: bool = overwrite_option(),
) -> None:
    """Fine-tune a model's image (or audio) tower on a task against its frozen prompt head, and write it as a source.

    The directory is read wherever a fine-tune is (platonic measure --finetuned DIR, a YAML's sources).
    Data parallel in a launch (accelerate launch --multi_gpu --num_processes N -m platonic.cli finetune
    ...): each process trains its share of every batch, gradients are summed, the main process writes.
    """
    from pydantic import ValidationError

    from .._checks import as_finite_scalar
    from ..finetuning.config import MODES, FinetuneConfig
    from ..layouts import is_finetune_directory
    from ..models import check_spec
    from ..preflight import check_cache_writable, check_output, refuse_output_among_inputs

    if mode not in MODES:
        raise InvalidInputError(f"--mode {mode!r}: choose lora, full or attention")
    if lora_targets not in ("model", "attention"):
        raise InvalidInputError(f"--lora-targets {lora_targets!r}: choose model or attention")
    check_compute(device)
    check_spec(model)
    name, eq, source = task.partition("=")
    if eq and not (name and source):
        raise InvalidInputError(f"--task {task!r}: write NAME or NAME=SOURCE")
    try:
        length = {k: v for k, v in (("steps", steps), ("epochs", epochs)) if v is not None}
        config = FinetuneConfig(mode=mode, **length, batch_size=batch_size, lr=as_finite_scalar("--lr", lr),
                                schedule=schedule, weight_decay=weight_decay,
                                orthoreg=as_finite_scalar("--orthoreg", orthoreg), lora_rank=lora_rank,
                                lora_alpha=lora_alpha, lora_targets=lora_targets, seed=seed)
    except ValidationError as exc:
        raise InvalidInputError("; ".join(f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}"
                                          for e in exc.errors())) from None
    refuse_output_among_inputs({"-o": output}, input_paths(model, source or None))
    check_output(output, is_finetune_directory, overwrite, "platonic fine-tune directory", directory=True)
    check_cache_writable()
    from ..data.resolve import open_task
    from ..finetuning import finetune_on_task, train_split

    data = open_task(name, source or None, template=template)
    train = train_split(data, config)  # the data's problems before the model loads
    settings = use_compute(ctx, device, dtype, None, num_workers)
    from ..models import load_model

    pre = load_model(model, device=settings.device)
    _, record = finetune_on_task(pre, data, config, output, overwrite=overwrite, train=train)
    losses = record["losses"]
    used = record["data"]
    count = f"{used['clips']} train clips" if "clips" in used else f"{used['images']} train images"
    console.print(f"wrote {output}: {mode} fine-tune of {model} on {used['task']} "
                  f"({count}, {len(losses)} steps, loss {losses[0]:.4g} -> {losses[-1]:.4g})")
