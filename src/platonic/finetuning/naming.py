"""What a fine-tune source names, read from its text alone: hub names and revisions, pinning, existence.

Torch-free, so that a command refuses a missing or unpinned fine-tune before anything heavy loads
(`platonic.finetuning.sources` loads them).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InvalidInputError, UnpinnedRevisionError
from ..models import has_backend_prefix

COMMIT = re.compile(r"[0-9a-f]{40}")
ACCEPTED = ("a model spec, a state dict (.safetensors, or open_clip's .bin / .pt / .pth), a peft LoRA adapter "
            "directory (adapter_config.json), a transformers vision-only save_pretrained directory, or hf:ORG/NAME[@REV]")


# -- what a source is --------------------------------------------------------------------------------

def split_revision(name: str) -> tuple[str, str | None]:
    """"ORG/NAME@REV" -> ("ORG/NAME", "REV"); "ORG/NAME" -> ("ORG/NAME", None). An empty REV is an error."""
    base, at, revision = name.partition("@")
    if at and not revision:
        raise InvalidInputError(f"{name}: give a revision after '@' (a commit, tag or branch), or drop the '@'")
    return base, (revision or None)


def hub_name(source) -> str | None:
    """The hub repository a source reads ("hf:ORG/NAME@REV" -> "ORG/NAME@REV"), None for local ones.

    hf: names that are not local directories, open_clip:hf-hub:NAME and open_clip:ARCH/TAG (open_clip's
    pretrained tags download from the hub) count as hub sources.
    """
    if not isinstance(source, str):
        return None
    prefix, _, rest = source.partition(":")
    if prefix == "hf" and rest and not Path(rest).exists():
        return rest
    if prefix == "open_clip" and (rest.startswith("hf-hub:") or ("/" in rest and "@" not in rest)):
        return rest
    return None


def require_pinned(source, what: str = "the fine-tune", flag: str = "--require-pinned") -> None:
    """Refuse a hub source that names no commit (UnpinnedRevisionError); local sources pass.

    what: how the message names the source; flag: the setting that asked for pinning (named in the fix).
    """
    name = hub_name(source)
    if name is None:
        return
    if str(source).startswith("open_clip:"):
        raise UnpinnedRevisionError(
            f"{what} {source} is an open_clip hub download, which cannot be pinned to a commit; download the "
            "checkpoint at a commit (huggingface_hub.hf_hub_download(REPO, FILE, revision=COMMIT)) and give the file, "
            f"or drop {flag}")
    repo, revision = split_revision(name)
    if revision is None or not COMMIT.fullmatch(revision):
        now = f"@{revision} is a branch or tag, not a commit" if revision else "it names no revision"
        raise UnpinnedRevisionError(
            f"{what} {source} is not pinned ({now}); write hf:{repo}@COMMIT with the 40-hex commit id "
            f"(huggingface_hub.HfApi().model_info('{repo}').sha gives the current one), or drop {flag}")


def require_exists(finetuned) -> None:
    """Raise when `finetuned` names a file or folder that does not exist (model specs and models pass)."""
    if not isinstance(finetuned, (str, Path)) or has_backend_prefix(finetuned) or Path(str(finetuned)).exists():
        return
    raise InvalidInputError(f"the fine-tune {str(finetuned)!r} does not exist (no such file or directory); give {ACCEPTED}")
