"""Writing edited models out: where an export of a target goes, what it may replace, and the adapter
route's fit-then-export (`platonic apply --route adapter`).

An export is the target's own format (`transfer.save_model`): a transformers `save_pretrained`
directory; for open_clip a directory in open_clip's hub layout, or a state dict FILE.safetensors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from .errors import InvalidInputError
from .layouts import is_model_export, is_open_clip_export_directory, is_transformers_export
from .models import has_backend_prefix
from .preflight import check_output

if TYPE_CHECKING:
    import torch

    from .models import DualEncoder

ROUTES = ("closed_form", "adapter")
FILE_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")  # names that promise a file, not a directory


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
    if target.startswith("open_clip:") and output.suffix in FILE_SUFFIXES[1:]:
        raise InvalidInputError(f"-o {output}: an open_clip export is a directory (open_clip's hub layout) or a state "
                                f"dict *.safetensors; name it {output.with_suffix('.safetensors').name} or drop {output.suffix}")
    if exports_directory(target, output):
        if target.startswith("open_clip:"):
            check_output(output, is_open_clip_export_directory, overwrite, "platonic open_clip export directory",
                         directory=True)
        else:
            check_output(output, is_transformers_export, overwrite, "platonic transformers export", directory=True)
            if output.suffix in FILE_SUFFIXES and not output.is_dir():
                raise InvalidInputError(f"-o {output}: a transformers export is a directory (save_pretrained's layout), "
                                        f"not a {output.suffix} file; name the directory {output.with_suffix('').name}")
    else:
        check_output(output, lambda p: p.is_file() and is_model_export(p), overwrite, "platonic model export (a file)")


def adapt_and_export(model: DualEncoder, descriptors: Sequence, terms: Mapping[str, float], adapter_path: Path,
                     output: Path, options: dict, probes: Mapping[str, torch.Tensor] | None = None,
                     overwrite: bool = False):
    """The adapter route: fit a LoRA on `model`'s tower to the descriptors of `terms` (`platonic.adapt`),
    merge it, and write the export `output` and the peft directory `adapter_path` together or not at all.

    Nothing is written before the fit and the merge succeed (a merge that gives non-finite weights is
    refused). Then, in order: the adapter is written whole and parked beside `adapter_path`
    (`storage.stage_pending`); a previous adapter directory is moved aside; the export is written
    atomically, its provenance naming the adapter's digest (the commit point); the parked adapter is put
    in place and the previous one deleted. A failure before the commit puts everything back. A kill
    leaves the old export (with its adapter, or with it moved aside, which the next cleanup puts back),
    or the new export with its adapter, in place or parked, which the next write beside it or
    `platonic clean` puts in place (two paths cannot change in one step on any file system).
    options: `AdaptConfig` settings; probes: {digest: canonical probes} not in the probe store.
    Returns (adapter, the export's path). In a data-parallel launch (`platonic.distributed`) the fit is
    shared by the processes and the main process alone writes the adapter and the export.
    """
    import warnings

    from .adapter import adapt, adapt_config_from, select_terms
    from .distributed import on_main
    from .storage import commit_pending, discard, drop_pending, move_aside, restore_aside, stage_pending
    from .transfer import save_model

    config = adapt_config_from(options)
    chosen = select_terms(descriptors, terms)
    adapter = adapt(model, chosen, config=config, probes=dict(probes or {}), device=model.device)
    adapter.merge_into(model)
    worse = {k: v for k, v in adapter.report.get("relative_residual", {}).items() if v >= 1}
    if worse:
        warnings.warn(f"the adapter's relative residual is {', '.join(f'{k} {v:.3f}' for k, v in worse.items())}: at or "
                      "above 1, the fit is no closer to the descriptors than no edit; try another --lr or --rank",
                      stacklevel=2)

    def write() -> Path:  # the main process of a launch alone writes
        digest = adapter.digest()
        pending = stage_pending(adapter_path, adapter.write_files,
                                {"path": str(Path(output).resolve()), "key": "adapter_digest", "value": digest})
        aside = None
        try:
            aside = move_aside(adapter_path)
            path = save_model(model, output, {"adapter_dir": str(adapter_path), "adapter_digest": digest},
                              overwrite=overwrite)
        except BaseException:
            drop_pending(pending)
            restore_aside(aside, adapter_path)
            raise
        commit_pending(pending, adapter_path)
        discard(aside)
        return path

    return adapter, on_main(write) or Path(output)

