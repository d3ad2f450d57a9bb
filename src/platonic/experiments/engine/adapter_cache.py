"""Fitted adapters kept on disk, so an adapter edit is fitted once: by any process of a launch, or by an
earlier run.

    $PLATONIC_CACHE/adapters/<target fingerprint>/<key>/    a peft adapter directory (`Adapter.save`)

The key hashes everything the fit depends on: the target's pre-edit fingerprint, every term's
coefficient, descriptor (its tensor digest, task, source, probe digest and prompts), the whole
`AdaptConfig`, the modules LoRA wraps (the config's, or the model's `lora_target_modules`, whose rule may
change without the fingerprint changing), the fit's autocast dtype, the anchors' digest, and the source of the modules that
define the fit (`platonic.adapter`, `platonic.finetuning.lora`), so a changed setting or changed code
misses the cache instead of reading a stale adapter. The directory is written atomically and once
(`locks.write_once`): two processes never write one at the same time.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

from ...adapter import AdaptConfig, Adapter, adapt, fit_dtype, is_adapter_directory
from ...finetuning import lora
from ...hashing import tensor_digest
from ...locks import write_once
from ...paths import cache_dir


def _code_digest() -> str:
    h = hashlib.sha256()
    for module in (inspect.getmodule(adapt), lora):
        h.update(inspect.getsource(module).encode())
    return h.hexdigest()


def adapter_key(model, pairs, config: AdaptConfig, anchors=None) -> str:
    """sha256 of what a fit of `pairs` [(c, Descriptor)] on `model` depends on (module docstring)."""
    terms = [{"c": float(c), "matrix": tensor_digest(d.matrix), "task": d.task, "source": d.provenance.source,
              "probes": d.grid.probe_digest, "prompts": list(d.grid.prompts)} for c, d in pairs]
    dtype = fit_dtype(config, model.device)
    record = {"target": model.base_fingerprint, "terms": terms, "config": config.model_dump(mode="json"),
              "lora_targets": sorted(config.target_modules or model.lora_target_modules),
              "dtype": str(dtype).removeprefix("torch.") if dtype is not None else "float32", "code": _code_digest(),
              "anchors": None if anchors is None else tensor_digest(model.canonical(anchors))}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def adapter_path(model, key: str) -> Path:
    return cache_dir("adapters", model.base_fingerprint[:40]) / key[:40]


def cached_adapt(model, pairs, *, config: AdaptConfig, probes=None, cache=None, anchors=None) -> tuple[Adapter, bool]:
    """(adapter, hit): the adapter of `platonic.adapt(model, pairs, ...)`, read from the cache when there, else
    fitted (without a progress bar) and kept."""
    path = adapter_path(model, adapter_key(model, pairs, config, anchors))
    if is_adapter_directory(path):
        return Adapter.load(path), True
    fitted = adapt(model, pairs, config=config, probes=probes, cache=cache, anchors=anchors, progress=False)
    write_once(path, lambda: fitted.save(path))
    return fitted, False


__all__ = ["adapter_key", "adapter_path", "cached_adapt"]
