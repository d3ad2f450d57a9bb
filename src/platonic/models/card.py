"""The model card an exported model carries: huggingface_hub's `ModelCard`, `base_model:` in its front matter.

    ---
    base_model: laion/CLIP-ViT-B-32-laion2B-s34B-b79K     # the hub repo the edit started from, when there is one
    library_name: open_clip                               # or transformers
    tags: [platonic, task-arithmetic]
    ---
    # <base> edited with platonic
    edits: route, alpha, every term (coefficient, task, source, descriptor sha256), the recipe if any

`base_model_id(spec)` reads the hub repo from a model spec without any network access: `hf:ORG/NAME[@REV]`,
`open_clip:hf-hub:ORG/NAME`, and `open_clip:ARCH/TAG` through open_clip's own table of pretrained tags
(its `hf_hub` field). Random weights, local files and directories have none, and the card then names
the spec only (a `base_model` given in the provenance overrides the lookup).
"""

from __future__ import annotations

import json

from ..errors import InvalidInputError

README = "README.md"


def base_model_id(spec: str) -> str | None:
    """The Hugging Face repo id `spec` was loaded from (or None): no network, no model built."""
    prefix, _, rest = spec.partition(":")
    if prefix == "hf":
        name = rest.partition("@")[0]
        return name if _is_repo_id(name) else None
    if prefix != "open_clip":
        return None
    if rest.startswith("hf-hub:"):
        name = rest.removeprefix("hf-hub:").partition("@")[0]
        return name if _is_repo_id(name) else None
    if "@" in rest or "/" not in rest:
        return None  # a local weights file, random weights
    arch, tag = rest.split("/", 1)
    try:
        import open_clip

        hub = (open_clip.get_pretrained_cfg(arch, tag) or {}).get("hf_hub", "")
    except Exception:  # noqa: BLE001 - an unknown tag has no repo; the card then names the spec
        return None
    name = "/".join(hub.strip("/").split("/")[:2])
    return name if _is_repo_id(name) else None


def _is_repo_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


def model_card(spec: str, record: dict, library: str) -> str:
    """The README.md text of an export of `spec` (library "open_clip" or "transformers").

    record: the export's provenance ({"edits": [...], "recipe": {...}?, "base_model": "ORG/NAME"?, ...}).
    """
    from huggingface_hub import ModelCard, ModelCardData

    if library not in ("open_clip", "transformers"):
        raise InvalidInputError(f"a model card is for an open_clip or transformers export; got {library!r}")
    base = record.get("base_model") or base_model_id(spec)
    data = ModelCardData(library_name=library, base_model=base, tags=["platonic", "task-arithmetic"])
    lines = [f"# `{spec}` edited with platonic", "",
             f"Base model: `{spec}`" + (f" ([{base}](https://huggingface.co/{base}))." if base else " (no hub repository)."),
             "", _loading(library), "", "## Edits", ""]
    edits = record.get("edits", [])
    for i, edit in enumerate(edits, 1):
        strength = f", alpha = {edit['alpha']:g}" if "alpha" in edit else ""
        lines.append(f"{i}. route `{edit.get('route', '?')}`{strength}; terms:")
        for t in edit.get("terms", []):
            lines.append(f"   - {t['coefficient']:+g} x `{t['task']}` from `{t['source']}` "
                         f"(descriptor sha256 `{t.get('descriptor_digest') or '-'}`)")
    if not edits:
        lines.append("None recorded.")
    if record.get("recipe") is not None:
        lines += ["", "## Recipe", "", "```json", json.dumps(record["recipe"], indent=2, sort_keys=True), "```"]
    lines += ["", "## Provenance", "", "```json", json.dumps({k: v for k, v in record.items() if k != "recipe"}, indent=2, sort_keys=True, default=str), "```", ""]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n" + "\n".join(lines)).content


def finetune_card(record: dict) -> str:
    """The README.md of a `platonic finetune` LoRA directory (peft's save_pretrained writes an empty template):
    the base model, the task and data, the settings and the loss, and how to load it."""
    from huggingface_hub import ModelCard, ModelCardData

    spec, data, config = record.get("model", "?"), record.get("data", {}), record.get("config", {})
    base = base_model_id(spec)
    losses = record.get("losses") or [float("nan")]
    card = ModelCardData(library_name="peft", base_model=base, tags=["platonic", "lora", "fine-tune"])
    lines = [f"# LoRA fine-tune of `{spec}` on `{data.get('task', '?')}`", "",
             f"Made by `platonic finetune` (platonic {record.get('platonic_version', '?')}): mode {record.get('mode')}, "
             f"rank {config.get('lora_rank')}, alpha {config.get('lora_alpha')}, {len(record.get('losses', []))} steps "
             f"at lr {config.get('lr')}; loss {losses[0]:.4g} -> {losses[-1]:.4g}.", "",
             f"Data: `{data.get('source', '?')}`, split `{data.get('split', '?')}`, {data.get('images', data.get('clips', '?'))} "
             f"items (data sha256 `{data.get('data_digest', '-')}`).", "",
             "Load it with peft alone on the base model's image (or audio) tower: "
             "`PeftModel.from_pretrained(tower, PATH)`; or measure it with `platonic measure --finetuned PATH`. "
             "Every setting is in `finetune.json`."]
    return ModelCard(f"---\n{card.to_yaml()}\n---\n" + "\n".join(lines) + "\n").content


def _loading(library: str) -> str:
    if library == "open_clip":
        return ("Load it with open_clip alone: `open_clip.create_model_and_transforms('local-dir:PATH')` "
                "(this directory), or `'hf-hub:ORG/NAME'` once it is pushed.")
    return "Load it with transformers alone: `AutoModel.from_pretrained(PATH)`."
