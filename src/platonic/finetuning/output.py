"""A fine-tune written to a directory that `platonic measure --finetuned DIR` (and every source field) reads.

    DIR/adapter_config.json, adapter_model.safetensors   mode lora: a peft adapter (peft's save_pretrained)
    DIR/model.safetensors                                mode full / attention: the tensors the fine-tune changed
    DIR/finetune.json                                    settings, the loss of every step, the data digest

`platonic.finetuning.finetune` merges its LoRA into the weights before it returns, so the adapter written
here is the trained update refactored: for each LoRA layer, dW = W_ft - W_0 (rank <= r) is split by a
truncated SVD into B (out, r), A (r, in) with scaling * B A = dW, in float64, and set into a peft model
of the same LoraConfig (targets, rank, alpha). Merging it back gives the fine-tuned weights to float
rounding; `write_finetune` checks that by reloading the directory and records the largest difference
(`adapter_max_abs_error` in finetune.json). The directory is filled in a temporary folder and renamed
into place (`storage.atomic_directory`). No pickle anywhere.
"""

from __future__ import annotations

import json
import platform
import warnings
from datetime import datetime, timezone
from pathlib import Path

import torch

from .._version import __version__
from ..compute import active
from ..distributed import current, on_main
from ..errors import ArtifactError, InvalidInputError
from ..layouts import FINETUNE_KIND, FINETUNE_RECORD, is_finetune_directory
from ..models import DualEncoder
from ..models.audio import CANONICAL_RATE
from ..models.card import README, finetune_card
from ..storage import atomic_directory, write_tensors
from .config import MODES, FinetuneConfig
from .sources import STATE_DICT_FILE, load_finetuned

RECORD_FILE, RECORD_KIND = FINETUNE_RECORD, FINETUNE_KIND
RECORD_VERSION = 1


def read_record(path) -> dict:
    """The finetune.json of a fine-tune directory."""
    try:
        record = json.loads((Path(path) / RECORD_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{path} is not a platonic fine-tune directory ({RECORD_FILE}: {exc})") from None
    if not isinstance(record, dict) or record.get("kind") != RECORD_KIND:
        raise ArtifactError(f"{path}/{RECORD_FILE} is not a platonic fine-tune record")
    return record


def _lora_targets(model: DualEncoder, config: FinetuneConfig) -> list[str]:
    """The peft target modules `platonic.finetuning.finetune` wraps for this config."""
    from .attention import attention_lora_modules

    if config.lora_targets == "attention":
        return attention_lora_modules(model.tower, model.spec, model.runs_in_forward)
    return model.lora_target_modules


def _factorise(delta: torch.Tensor, rank: int, scaling: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(B (out, r), A (r, in)) with scaling * B @ A = delta (out, in) where rank(delta) <= r (truncated SVD)."""
    U, S, Vh = torch.linalg.svd(delta.double(), full_matrices=False)
    k = min(rank, S.numel())
    root = S[:k].sqrt() / (scaling ** 0.5)
    B = torch.zeros(delta.shape[0], rank, dtype=torch.float64)
    A = torch.zeros(rank, delta.shape[1], dtype=torch.float64)
    B[:, :k] = U[:, :k] * root
    A[:k] = root[:, None] * Vh[:k]
    return B, A


def lora_adapter(pre: DualEncoder, ft: DualEncoder, config: FinetuneConfig):
    """A peft model on a copy of `pre`'s tower whose LoRA factors reproduce ft - pre on every LoRA layer."""
    from peft.tuners.lora import LoraLayer

    from .lora import attach_lora

    copy = pre.copy_for_new_weights()
    pre_state = dict(pre.tower.state_dict())
    ft_state = dict(ft.tower.state_dict())
    peft_model = attach_lora(copy.tower, _lora_targets(pre, config), config.lora_rank, config.lora_alpha, pre.spec)
    layers = {}
    with torch.no_grad():
        for path, module in peft_model.named_modules():
            if not isinstance(module, LoraLayer) or "default" not in module.lora_A:
                continue
            # the tower's own name of the wrapped weight: peft's path without its wrappers
            own = ".".join(p for p in path.removeprefix("base_model.model.").split(".") if p != "base_layer")
            packed = isinstance(module.get_base_layer(), torch.nn.MultiheadAttention)
            name = f"{own}.in_proj_weight" if packed else f"{own}.weight"
            delta = (ft_state[name].double() - pre_state[name].double()).flatten(1)
            B, A = _factorise(delta, config.lora_rank, float(module.scaling["default"]))
            lora_A, lora_B = module.lora_A["default"].weight, module.lora_B["default"].weight
            lora_A.copy_(A.reshape(lora_A.shape).to(lora_A.dtype))
            lora_B.copy_(B.reshape(lora_B.shape).to(lora_B.dtype))
            layers[name] = (module, delta)
        _calibrate(peft_model, layers, pre_state)
    return peft_model


def _calibrate(peft_model, layers: dict, pre_state: dict) -> None:
    """Rescale B where peft's merge writes a multiple of scaling * B A into the weight.

    peft 0.21 applies the out_proj LoRA of a packed nn.MultiheadAttention (open_clip's towers) twice,
    in the forward pass and in the merge alike (once by the attention layer, once as a layer of its
    own), so there the trained weights hold 2 scaling B A and a factorisation of dW would come back
    doubled from `load_finetuned`. Merging a copy shows the factor k of every layer; B / k makes the
    merge (and peft's forward) give the fine-tune's weights whatever peft does.
    """
    import copy as copying

    trial = copying.deepcopy(peft_model)
    merged = trial.merge_and_unload().state_dict()
    for name, (module, delta) in layers.items():
        realised = (merged[name].double() - pre_state[name].double()).flatten(1)
        norm = float((delta * delta).sum())
        if norm == 0:
            continue
        k = float((realised * delta).sum()) / norm
        if abs(k - 1) > 1e-3 and k > 0:
            module.lora_B["default"].weight.div_(k)


def changed_state(pre: DualEncoder, ft: DualEncoder) -> dict[str, torch.Tensor]:
    """The fine-tuned values of the floating tensors that differ from `pre` (a partial state dict)."""
    before = pre.module.state_dict()
    return {k: v for k, v in ft.module.state_dict().items()
            if v.is_floating_point() and k in before and not torch.equal(v, before[k])}


def write_finetune(directory, pre: DualEncoder, ft: DualEncoder, config: FinetuneConfig, losses: list[float],
                   data: dict, overwrite: bool = False) -> dict:
    """Write the fine-tune `ft` of `pre` to `directory` atomically (module docstring); returns the record.

    data: what it was trained on (task, source, split, number of images, prompts, data digest).
    """
    if config.mode not in MODES:
        raise InvalidInputError(f"a fine-tune directory holds mode {', '.join(MODES)}; got {config.mode!r}")
    record = {"format": "platonic", "kind": RECORD_KIND, "format_version": RECORD_VERSION, "model": pre.spec,
              "fingerprint": pre.base_fingerprint, "mode": config.mode, "config": config.model_dump(mode="json"),
              "data": data, "losses": [float(x) for x in losses], "platonic_version": __version__,
              "torch_version": torch.__version__, "python": platform.python_version(),
              "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    settings, processes = active(), current().count
    if settings.narrow or processes > 1:  # how it ran, where that is not the default float32 single process
        record["compute"] = {"dtype": settings.dtype, "processes": processes}

    def write(tmp: Path) -> None:
        if config.mode == "lora":
            peft_model = lora_adapter(pre, ft, config)
            peft_model.save_pretrained(str(tmp), safe_serialization=True)
            record["weights"] = "peft adapter (adapter_config.json, adapter_model.safetensors)"
            (tmp / README).write_text(finetune_card(record))  # peft's own README is an empty template
            record["adapter_max_abs_error"] = _max_difference(load_finetuned(pre, tmp), ft)
        else:
            state = changed_state(pre, ft)
            if not state:
                raise InvalidInputError("the fine-tune changed no weight; nothing to write (raise --steps or --lr)")
            write_tensors(tmp / STATE_DICT_FILE, state, {"kind": RECORD_KIND, "model": pre.spec, "mode": config.mode},
                          key="platonic_finetune")
            record["weights"] = STATE_DICT_FILE
            record["changed_tensors"] = sorted(state)
        (tmp / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))

    atomic_directory(directory, write, replaceable=is_finetune_directory, overwrite=overwrite,
                     what="platonic fine-tune directory")
    return record


def restore_buffers(pre: DualEncoder, ft: DualEncoder) -> list[str]:
    """Set `ft`'s floating buffers that differ from `pre`'s back to `pre`'s; returns their names.

    A LoRA fine-tune runs the tower in train mode, so BatchNorm running statistics move (transformers
    CLAP's audio encoder has one `batch_norm`; ResNet towers many) although no weight but the LoRA
    factors is trained. A peft adapter carries LoRA factors only, so the fine-tune written (and the one
    returned) is the pre-trained model plus its low-rank update, with the pre-trained statistics.
    """
    before = dict(pre.module.named_buffers())
    names = []
    with torch.no_grad():
        for name, buffer in ft.module.named_buffers():
            if buffer.is_floating_point() and name in before and not torch.equal(buffer, before[name]):
                buffer.copy_(before[name])
                names.append(name)
    if names:
        ft.invalidate_fingerprint()
    return sorted(names)


def _max_difference(a: DualEncoder, b: DualEncoder) -> float:
    sa, sb = a.module.state_dict(), b.module.state_dict()
    return max((float((sa[k].double() - sb[k].double()).abs().max()) for k in sa if sa[k].is_floating_point()),
               default=0.0)


def train_split(task, config: FinetuneConfig | None = None):
    """The train split of `task` (a `platonic.data.resolve.TaskData`) that `finetune_on_task` trains on, read
    without decoding and checked before any model loads: a task of one class is refused (against one
    prompt the loss is 0 from the first step: nothing is learnt), a class without train images is warned
    about (the fine-tune never sees it), and `config`'s length is checked against the split's size."""
    train = task.split("train")
    if train is None:
        raise InvalidInputError(f"task {task.name!r} has no train split to fine-tune on ({task.source.text})")
    names = task.class_names(train)
    if len(names) < 2:
        raise InvalidInputError(f"task {task.name!r} ({task.source.text}) has {len(names)} class: a fine-tune against one "
                                "prompt has nothing to learn (its loss is 0 from the first step); give two or more classes")
    counts = torch.bincount(train.labels, minlength=len(names)).tolist()
    unseen = [name for name, n in zip(names, counts) if n == 0]
    if unseen:
        warnings.warn(f"task {task.name!r}: class(es) {', '.join(unseen)} have no train images in {task.source.text}; "
                      "the fine-tune never sees them", stacklevel=2)
    if config is not None:
        config.total_steps(len(train))
    return train


def finetune_on_task(model: DualEncoder, task, config: FinetuneConfig, directory, overwrite: bool = False,
                     progress: bool = True, train=None) -> tuple[DualEncoder, dict]:
    """Fine-tune `model` on the train split of `task` (a `platonic.data.resolve.TaskData`) and write it.

    The train split is read lazily: each step decodes its own batch (memory independent of the split's
    size): images (b, 3, S, S) uint8 at S = `model.canonical_size`, or, for an audio-text model, clips
    (b, T) float32 at 16 kHz with T from `model.canonical_seconds` (None: the split's longest clip, capped
    at 10 s; `platonic.data.audio`). Mode lora: buffers the train-mode run moved (BatchNorm statistics)
    are restored (`restore_buffers`), so the adapter is the whole fine-tune. Returns (the fine-tuned
    model, the finetune.json record). `train`: the split `train_split(task, config)` gave, if read already.
    In a data-parallel launch (`platonic.distributed`) every process trains its share of each batch and
    the main process alone writes the directory (the others return {"losses", "data"}).
    """
    from .training import finetune

    train = train if train is not None else train_split(task, config)
    train.require(model.modality, model.spec)
    prompts = task.prompts(train)
    inputs = train.lazy(model.canonical_size, model.canonical_seconds)
    ft, losses = finetune(model, inputs, train.labels, prompts, config, progress=progress)
    restored = restore_buffers(model, ft) if config.mode == "lora" else []
    data = {"task": task.name, "source": task.source.text, "split": train.name, "modality": train.modality,
            "prompts": list(prompts), "data_digest": train.digest()}
    if train.modality == "audio":
        data.update(clips=len(train), clip_samples=inputs.samples, sample_rate=CANONICAL_RATE)
    else:
        data.update(images=len(train), canonical_size=model.canonical_size)
    if restored:
        data["restored_buffers"] = restored
    written = on_main(lambda: write_finetune(directory, model, ft, config, losses, data, overwrite=overwrite))
    return ft, written if written is not None else {"losses": losses, "data": data}
