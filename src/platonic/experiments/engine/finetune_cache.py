"""A cache of fine-tunes as task vectors, keyed by (model, task, flavour, lambda, recipe).

    $PLATONIC_CACHE/finetunes/<model fingerprint>/<task>.<mode>.lam<lambda>.<key>.safetensors

Two callers: the task-arithmetic experiment (`cached_task_vector`, keyed by the input tensors) and the
YAML `finetune:` block of an experiment or recipe (`cached_finetune`, keyed by the train split's data
digest, `Split.digest()`, and the image size, so nothing is decoded to look an entry up).

The key hashes the pre-trained model's fingerprint, the task's labelled train split and prompts, the
whole `FinetuneConfig` (mode = flavour, orthoreg = lambda, steps, lr, seed, ...) and the source of the
modules that define a fine-tune (finetune, linearize, attention, lora), so a changed recipe or changed
code misses the cache instead of reading a stale vector. Entries are safetensors files (no pickle)
written atomically (`storage.write_tensors`): tau = theta_ft - theta_0 over the parameters the
fine-tune changed (for "linear", tau = dtheta of the tangent model), in the model's dtype.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Callable

from safetensors.torch import load_file

from ...finetuning import LinearizedEncoder, attention, linearize, lora
from ...finetuning import training as finetune_module
from ...finetuning.training import FinetuneConfig, finetune
from ...hashing import update_with_tensor
from ...paths import cache_dir
from ...storage import write_tensors
from ...task_vector import TaskVector

KIND = "finetune_task_vector"


def _code_digest() -> str:
    h = hashlib.sha256()
    for module in (finetune_module, linearize, attention, lora):
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def cache_key(model, inputs, labels, prompts, config: FinetuneConfig, data_digest: str | None = None) -> str:
    """sha256 of the model's fingerprint, prompts, the whole config, the fine-tune code and the data:
    `data_digest` when given (a split's digest, nothing decoded), else the input and label tensors."""
    h = hashlib.sha256()
    h.update(json.dumps({"model": model.base_fingerprint, "prompts": list(prompts), "config": config.model_dump(mode="json"),
                         "code": _code_digest(), **({"data": data_digest} if data_digest else {})}, sort_keys=True).encode())
    if data_digest is None:
        update_with_tensor(h, inputs, "inputs")
        update_with_tensor(h, labels, "labels")
    return h.hexdigest()


def entry_path(model, task: str, config: FinetuneConfig, key: str, root: Path | None = None) -> Path:
    folder = Path(root) if root is not None else cache_dir("finetunes", model.base_fingerprint[:40])
    return folder / f"{task}.{config.mode}.lam{config.orthoreg:g}.{key[:20]}.safetensors"


def changed_deltas(pre, ft) -> dict:
    """tau over the floating parameters and buffers a (non-linear) fine-tune changed, in their dtype."""
    tau = TaskVector.from_models(pre.module, ft.module)
    return {k: v for k, v in tau.deltas.items() if bool(v.any())}


def cached_task_vector(model, task: str, inputs, labels, prompts, config: FinetuneConfig,
                       on_miss: Callable[[str], None] | None = None) -> tuple[TaskVector, bool]:
    """(tau, hit): the cached task vector of fine-tuning `model` on (inputs, labels), else fine-tune and store it."""
    key = cache_key(model, inputs, labels, prompts, config)
    return _read_or_train(model, task, inputs, labels, prompts, config, key, {}, on_miss, progress=False)


def cached_finetune(model, task: str, images, labels, prompts, config: FinetuneConfig, data_digest: str,
                    on_miss: Callable[[str], None] | None = None, progress: bool = False) -> tuple[TaskVector, bool]:
    """(tau, hit): the task vector of fine-tuning `model` on (images, labels) under `config`, from the cache if there.

    images: (n, 3, S, S) uint8 (a tensor or `LazyImages`, decoded batch by batch on a miss); labels (n,);
    data_digest: what the images are (e.g. f"{split.digest()}@{S}"), the key's data part. A miss
    fine-tunes and stores tau atomically. `finetuned_model(model, tau, config.mode)` is the fine-tune
    (rebuilt from tau on a miss too, so a first and a cached run use the same weights).
    """
    key = cache_key(model, None, None, prompts, config, data_digest=data_digest)
    return _read_or_train(model, task, images, labels, prompts, config, key, {"data_digest": data_digest}, on_miss,
                          progress)


def _read_or_train(model, task, inputs, labels, prompts, config, key, record, on_miss, progress) -> tuple[TaskVector, bool]:
    """The entry of `key` if stored (hit), else the fine-tune's tau, stored atomically with `record` and its losses."""
    path = entry_path(model, task, config, key)
    if path.is_file():
        return TaskVector(load_file(str(path))), True
    if on_miss is not None:
        on_miss(task)
    ft, losses = finetune(model, inputs, labels, prompts, config, progress=progress)
    deltas = ft.delta if config.mode == "linear" else changed_deltas(model, ft)
    record = {"kind": KIND, "model": model.spec, "fingerprint": model.base_fingerprint, "task": task,
              "config": config.model_dump(mode="json"), **record, "first_loss": losses[0], "last_loss": losses[-1]}
    write_tensors(path, deltas, record, key="platonic", make_parents=True)
    return TaskVector(deltas), False


def finetuned_model(model, tau: TaskVector, mode: str = "full"):
    """theta_0 + tau as a new model (`model` is left as it is); mode "linear": the tangent model of dtheta = tau."""
    if mode == "linear":
        return LinearizedEncoder(model, tau.deltas)
    edited = model.copy_for_new_weights()
    tau.add_to_(edited.module)
    edited.invalidate_fingerprint()
    return edited
