"""`platonic measure`, `solve` and `apply`: a descriptor from a fine-tune, a bank for a target, an edited export."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer

from ..errors import InvalidInputError, ZeroDescriptorWarning
from ..terms import default_alpha, parse_terms
from .common import (
    batch_size_option,
    check_compute,
    check_descriptor_files,
    console,
    device_option,
    dtype_option,
    given_probes,
    input_paths,
    num_workers_option,
    overwrite_option,
    print_operators,
    probe_resize_option,
    read_descriptors,
    read_prompts,
    use_compute,
)


def measure(
    ctx: typer.Context,
    model: str = typer.Option(..., "--model", help="The pre-trained model spec, e.g. open_clip:ViT-B-32/laion2b_s34b_b79k."),
    finetuned: str = typer.Option(..., "--finetuned", help="Fine-tune: a state dict (.safetensors; open_clip's .bin / "
                                  ".pt / .pth), a peft LoRA adapter dir, a transformers vision-only save_pretrained dir "
                                  "(CLIPVisionModel, SiglipVisionModel), hf:ORG/NAME[@REV], or a model spec."),
    task: str = typer.Option(..., "--task", help="Task name stored in the descriptor."),
    probes: Path = typer.Option(..., "--probes", help="Folder of probe images, or .safetensors with a 'probes' tensor."),
    probe_resize: str = probe_resize_option(),
    prompts: Path = typer.Option(None, "--prompts", help="UTF-8 text file, one class prompt per line."),
    classes: str = typer.Option(None, "--classes", help="Comma-separated class names (with --template)."),
    template: str = typer.Option("a photo of a {}.", "--template", help="Prompt template for --classes, with one {}."),
    output: Path = typer.Option(..., "-o", "--output", help="Descriptor file to write."),
    device: str = device_option(),
    dtype: str = dtype_option(),
    batch_size: int = batch_size_option(),
    num_workers: int = num_workers_option(),
    require_pinned: bool = typer.Option(False, "--require-pinned", help="Refuse a hub fine-tune that names no commit "
                                        "(write hf:ORG/NAME@COMMIT)."),
    overwrite: bool = overwrite_option(),
) -> None:
    """Measure the universal task descriptor of a fine-tune (N probes x M prompts).

    The descriptor's provenance records the fine-tune as loaded: its revision and how many tensors. In a
    launch of N processes each encodes its share of the probes; the main process writes the descriptor.
    """
    from ..data.probe_files import check_probe_path
    from ..finetuning import require_exists
    from ..finetuning import require_pinned as refuse_unpinned
    from ..models import check_spec
    from ..preflight import check_cache_writable, check_output, refuse_output_among_inputs
    from ..storage import artifact_kind

    check_compute(device)
    check_spec(model)
    texts = read_prompts(prompts, classes, template)
    require_exists(finetuned)
    if require_pinned:
        refuse_unpinned(finetuned, "--finetuned")
    check_probe_path(probes)
    refuse_output_among_inputs({"-o": output}, input_paths(model, finetuned, probes, prompts))
    check_output(output, lambda p: artifact_kind(p) == "descriptor", overwrite, "platonic descriptor file")
    check_cache_writable()
    settings = use_compute(ctx, device, dtype, batch_size, num_workers)
    from ..data.probe_files import load_probes
    from ..distributed import on_main
    from ..measurement import measure as measure_descriptor
    from ..measurement import require_change

    canon = load_probes(probes, resize=probe_resize)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZeroDescriptorWarning)  # refused below, as an error
        desc = measure_descriptor(model, finetuned, canon, texts, task, device=settings.device,
                                  require_pinned=require_pinned)
    require_change(desc, f"--finetuned {finetuned}")
    on_main(lambda: desc.save(output, overwrite=overwrite))
    console.print(f"wrote {output}: {desc!r}")


def solve(
    ctx: typer.Context,
    descriptors: list[Path] = typer.Argument(..., help="Descriptor files."),
    target: str = typer.Option(..., "--target", help="Target model spec."),
    output: Path = typer.Option(..., "-o", "--output", help="Bank file to write."),
    probes: list[Path] = typer.Option([], "--probes", help="Probe files/folders, if not in the probe store."),
    probe_resize: str = probe_resize_option(),
    mu_a: float = typer.Option(1e-2, "--mu-a", help="Relative ridge weight on the probe side."),
    mu_b: float = typer.Option(1e-6, "--mu-b", help="Relative ridge weight on the prompt side."),
    solve_kind: str = typer.Option("paper", "--solve", help="paper (method §1.2) or anchored: also keep the "
                                   "affinities of a pool of unlabeled images unchanged (needs --anchor-images)."),
    anchor_images: Path = typer.Option(None, "--anchor-images", help="The anchored solve's pool: a folder of "
                                       "unlabeled images, or .safetensors with a 'probes' tensor."),
    anchor_weight: float = typer.Option(None, "--anchor-weight", help="Relative weight of the pool, with --solve "
                                        "anchored (default 1: as much as the probes; lambda = w ||F||^2 / ||F_pool||^2)."),
    device: str = device_option(),
    dtype: str = dtype_option(),
    batch_size: int = batch_size_option(),
    num_workers: int = num_workers_option(),
    overwrite: bool = overwrite_option(),
) -> None:
    """Solve descriptors into an operator bank for a target model (any architecture).

    The target's embeddings of the probes and prompts run on --device under --dtype; the solve itself is float64.
    """
    from ..data.probe_files import check_probe_path
    from ..models import check_spec
    from ..preflight import check_cache_writable, check_output, refuse_output_among_inputs
    from ..solve_config import CLI_FLAGS, SolveConfig, check_pool
    from ..storage import artifact_kind

    check_compute(device)
    check_spec(target)
    if anchor_weight is not None and solve_kind != "anchored":
        raise InvalidInputError("--anchor-weight is the anchored solve's pool weight, which the paper's solve would "
                                "ignore; add --solve anchored (and --anchor-images DIR) or drop --anchor-weight")
    config = SolveConfig.parse({"kind": solve_kind, "mu_a": mu_a, "mu_b": mu_b, "anchor_weight": anchor_weight},
                               CLI_FLAGS)
    check_pool(config, anchor_images is not None)
    refuse_output_among_inputs({"-o": output}, input_paths(target, *descriptors, *probes, anchor_images))
    check_output(output, lambda p: artifact_kind(p) == "bank", overwrite, "platonic bank file")
    check_descriptor_files(list(descriptors))
    for path in probes:
        check_probe_path(path)
    if anchor_images is not None:
        check_probe_path(anchor_images, "--anchor-images")
    check_cache_writable()
    settings = use_compute(ctx, device, dtype, batch_size, num_workers)
    from ..data.probe_files import load_probes
    from ..distributed import on_main
    from ..models import load_model
    from ..transfer import solve_bank

    loaded = read_descriptors(list(descriptors))
    pool = None if anchor_images is None else load_probes(anchor_images, "--anchor-images")
    model = load_model(target, device=settings.device)
    bank = solve_bank(model, loaded, probes=given_probes(model, probes, probe_resize), config=config, anchor_images=pool)
    on_main(lambda: bank.save(output, overwrite=overwrite))
    console.print(f"wrote {output}: {bank!r}")
    print_operators([op.metadata() for op in bank], [op.delta for op in bank], title="solved operators")


def apply(
    ctx: typer.Context,
    extra: list[Path] = typer.Argument(None, help="More descriptor files (adapter route), e.g. after --descriptors A.utd."),
    target: str = typer.Option(..., "--target", help="Target model spec (the bank's target)."),
    terms: str = typer.Option(..., "--terms", help="Signed composition, e.g. 'eurosat:+1,dtd:-1' (task or task@source), "
                              "each task once."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the edited model in its own format: a "
                                "transformers save_pretrained directory; for open_clip a directory in open_clip's hub "
                                "layout (loads as 'local-dir:DIR') or a state dict FILE.safetensors."),
    route: str = typer.Option("closed_form", "--route", help="closed_form (fold bank operators into the last layer) or "
                              "adapter (fit a LoRA on the tower to the descriptors)."),
    bank: Path = typer.Option(None, "--bank", help="Operator bank file (closed form)."),
    descriptors: list[Path] = typer.Option([], "--descriptors", help="Descriptor files (adapter route)."),
    probes: list[Path] = typer.Option([], "--probes", help="Probe files/folders, if not in the probe store (adapter route)."),
    probe_resize: str = probe_resize_option(),
    alpha: float = typer.Option(None, "--alpha", help="Closed-form strength; default 0.5, or 1.0 when every term is "
                                "negative (the paper's negation)."),
    adapter_dir: Path = typer.Option(None, "--adapter-dir", help="Where to keep the fitted peft adapter directory "
                                     "(default: OUTPUT.adapter beside the export)."),
    rank: int = typer.Option(16, "--rank", help="LoRA rank (adapter route)."),
    lr: float = typer.Option(3e-4, "--lr", help="AdamW learning rate (adapter route)."),
    max_steps: int = typer.Option(540, "--max-steps", help="Step cap: 20 epochs over the probes, at most this many."),
    holdout: float = typer.Option(0.0, "--holdout", help="Fraction of probes held out to pick the best step (0: none)."),
    device: str = device_option(),
    dtype: str = dtype_option(),
    batch_size: int = batch_size_option("Adapter route: probes per optimiser step, the global batch of a launch "
                                        "(default 64)."),
    num_workers: int = num_workers_option(),
    overwrite: bool = overwrite_option(),
) -> None:
    """Write a composition of skills into the target and export it natively.

    Closed form (default): fold bank entries into the target's last linear map. Adapter: fit a LoRA on
    the target's tower so its live descriptors match the terms (method §1.4); the peft adapter
    directory is kept beside the export. An existing output is replaced only when it is a previous
    platonic export (or with --overwrite), by an atomic swap. --dtype (default: bfloat16 autocast on a GPU,
    as the paper's code, float32 elsewhere), --batch-size and --num-workers are the adapter fit's; the
    closed form runs no forward pass. In a launch the fit is data parallel; the main process writes.
    """
    from .._checks import as_finite_scalar
    from ..adapt_config import adapt_config_from
    from ..data.probe_files import check_probe_path
    from ..exports import ROUTES, adapter_dir_beside, check_export_output
    from ..layouts import is_adapter_directory
    from ..models import check_spec
    from ..preflight import check_cache_writable, check_output, inside, refuse_output_among_inputs, same_path
    from ..storage import read_header

    if route not in ROUTES:
        raise InvalidInputError(f"--route {route!r}: choose closed_form or adapter")
    parsed = parse_terms(terms)
    if route == "closed_form" and (dtype is not None or batch_size is not None or num_workers):
        raise InvalidInputError("--dtype, --batch-size and --num-workers set the adapter fit (--route adapter); the "
                                "closed form folds the bank into the weights without a forward pass")
    check_compute(device)
    check_spec(target)
    inputs = input_paths(target, bank, *descriptors, *(extra or []), *probes)
    if route == "closed_form":
        if bank is None:
            raise InvalidInputError("the closed form needs --bank FILE (platonic solve writes one); "
                                    "or use --route adapter with --descriptors")
        if descriptors or extra:
            raise InvalidInputError("descriptor files go with --route adapter; the closed form reads --bank")
        used = default_alpha(parsed) if alpha is None else as_finite_scalar("--alpha", alpha)
        if used == 0:
            raise InvalidInputError("--alpha 0 is no edit: the export would be the unedited target under a card that "
                                    "lists an edit; give a strength, e.g. --alpha 0.5")
        refuse_output_among_inputs({"-o": output}, inputs)
        check_export_output(target, output, overwrite)
        read_header(bank, "bank")
        settings = use_compute(ctx, device, dtype, None, num_workers)
        from ..bank import OperatorBank
        from ..distributed import on_main
        from ..models import load_model
        from ..transfer import apply as apply_edit
        from ..transfer import save_model

        loaded = OperatorBank.load(bank)
        model = load_model(target, device=settings.device)
        record = apply_edit(model, loaded, parsed, alpha=used)
        path = on_main(lambda: save_model(model, output, overwrite=overwrite)) or output
        solved_on = {"current": "on these weights",
                     "pre-edit": "on the target's weights before its platonic edits",
                     "export's base": f"on the model this export was edited from (its provenance names base "
                                      f"{loaded.target[:16]}…), so the edit lands on top of the export's edits"}
        console.print(f"wrote {path}: {target} + ({terms}) at alpha = {used:g} (closed form; the bank was solved "
                      f"{solved_on[record.target_match]})")
        return
    if alpha is not None:
        raise InvalidInputError("--alpha is the closed form's strength; the adapter's is in the coefficients of --terms")
    if bank is not None:
        raise InvalidInputError("the adapter route fits to descriptors, not a bank: give --descriptors A.utd B.utd")
    files = list(descriptors) + list(extra or [])
    if not files:
        raise InvalidInputError("the adapter route needs the descriptors: --descriptors A.utd [B.utd ...]")
    options = dict(rank=rank, lora_alpha=2.0 * rank, lr=lr, max_steps=max_steps, holdout=holdout,
                   **({"batch_size": batch_size} if batch_size is not None else {}))
    adapt_config_from(options)  # a bad setting is refused before the model loads
    if max_steps == 0:
        raise InvalidInputError("--max-steps 0 fits nothing, so it is no edit: the export would be the unedited target "
                                "under a card that lists an edit; give a number of steps (default 540)")
    adapter_path = adapter_dir or adapter_dir_beside(output)
    if same_path(adapter_path, output):
        raise InvalidInputError(f"--adapter-dir {adapter_path} is the export's own path; give another directory")
    if inside(adapter_path, output):
        raise InvalidInputError(f"--adapter-dir {adapter_path} is inside the export {output}, which the export's swap "
                                f"replaces whole; give a directory outside it (default: {adapter_dir_beside(output)})")
    refuse_output_among_inputs({"-o": output, "--adapter-dir": adapter_path}, inputs)
    check_export_output(target, output, overwrite)
    check_output(adapter_path, is_adapter_directory, False, "platonic adapter directory (choose another "
                 "--adapter-dir)", directory=True)
    check_descriptor_files(files)
    for path in probes:
        check_probe_path(path)
    check_cache_writable()
    settings = use_compute(ctx, device, dtype, None, num_workers)
    from ..exports import adapt_and_export
    from ..models import load_model

    loaded = read_descriptors(files)
    model = load_model(target, device=settings.device)
    adapter, path = adapt_and_export(model, loaded, parsed, adapter_path, output, options,
                                     probes=given_probes(model, probes, probe_resize), overwrite=overwrite)
    residuals = ", ".join(f"{k} {v:.3f}" for k, v in adapter.report["relative_residual"].items())
    console.print(f"fitted {adapter!r} in {adapter.report['steps']} steps; relative residual: {residuals}")
    console.print(f"wrote {adapter_path} (peft adapter) and {path}: {model.spec} + ({', '.join(parsed)}) by the adapter route")
