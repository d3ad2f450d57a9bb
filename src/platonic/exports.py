"""Writing edited models out: where an export of a target goes, what it may replace, and the adapter
route's fit-then-export (`platonic apply --route adapter`).

An export is the target's own format (`transfer.save_model`): a transformers `save_pretrained`
directory; for open_clip a directory in open_clip's hub layout, or a state dict FILE.safetensors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import torch

from .errors import InvalidInputError
from .models import DualEncoder, has_backend_prefix
from .preflight import check_output
from .transfer import is_model_export, save_model

ROUTES = ("closed_form", "adapter")


def adapter_dir_beside(output: Path) -> Path:
    """Where the adapter route keeps its peft adapter directory by default: OUTPUT.adapter beside the export."""
    return output.with_name(output.name.removesuffix(".safetensors") + ".adapter")


def exports_directory(target: str, output: Path | None = None) -> bool:
    """Whether the export of `target` to `output` is a directory: transformers always, open_clip unless
    the output is named *.safetensors (a state-dict file)."""
    if target.startswith("open_clip:"):
        return output is not None and output.suffix != ".safetensors"
    return target.startswith("hf:") or (not has_backend_prefix(target) and Path(target).is_dir())


def check_export_output(target: str, output: Path, overwrite: bool) -> None:
    """Refuse an export path of the wrong form for `target`, or one holding something platonic did not write
    (unless `overwrite`), before any model loads."""
    from .models.hf_backend import is_transformers_export
    from .models.open_clip_backend import is_open_clip_export_directory

    if target.startswith("open_clip:") and output.suffix in (".pt", ".pth", ".bin", ".ckpt"):
        raise InvalidInputError(f"-o {output}: an open_clip export is a directory (open_clip's hub layout) or a state "
                                f"dict *.safetensors; name it {output.with_suffix('.safetensors').name} or drop {output.suffix}")
    if exports_directory(target, output):
        if target.startswith("open_clip:"):
            check_output(output, is_open_clip_export_directory, overwrite, "platonic open_clip export directory",
                         directory=True)
        else:
            check_output(output, is_transformers_export, overwrite, "platonic transformers export", directory=True)
    else:
        check_output(output, lambda p: p.is_file() and is_model_export(p), overwrite, "platonic model export (a file)")


def adapt_and_export(model: DualEncoder, descriptors: Sequence, terms: Mapping[str, float], adapter_path: Path,
                     output: Path, options: dict, probes: Mapping[str, torch.Tensor] | None = None,
                     overwrite: bool = False):
    """The adapter route: fit a LoRA on `model`'s tower to the descriptors of `terms` (`platonic.adapt`),
    keep it as a peft directory at `adapter_path`, merge it and export the model to `output`.

    options: `AdaptConfig` settings; probes: {digest: canonical probes} not in the probe store.
    Returns (adapter, the export's path). In a data-parallel launch (`platonic.distributed`) the fit is
    shared by the processes and the main process alone writes the adapter and the export.
    """
    from .adapter import adapt, adapt_config_from, select_terms
    from .distributed import on_main

    config = adapt_config_from(options)
    chosen = select_terms(descriptors, terms)
    adapter = adapt(model, chosen, config=config, probes=dict(probes or {}), device=model.device)
    adapter.merge_into(model)

    def write() -> Path:
        adapter.save(adapter_path)
        return save_model(model, output, {"adapter_dir": str(adapter_path)}, overwrite=overwrite)

    return adapter, on_main(write) or Path(output)
