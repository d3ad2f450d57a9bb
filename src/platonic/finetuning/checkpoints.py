"""Weight files read without executing code, and the one explicit way to convert a pickled one.

`read_state_dict(path)` -> {name: tensor} from
    *.safetensors                      safetensors (tensors and a JSON header only)
    *.bin, *.pt, *.pth, *.ckpt         torch's zip / legacy format, read with torch.load(weights_only=True):
                                       tensors, dicts, lists and numbers only, no class is imported and
                                       no code runs

and unwrapped as open_clip's `load_state_dict` does: a dict holding "state_dict" (a training
checkpoint with epoch / optimizer beside it) gives that dict; keys all starting with "module."
(DataParallel / DDP) lose that prefix. Non-tensor entries that remain (e.g. a step counter) are dropped.

A file that holds pickled objects beyond those (a whole pickled nn.Module, as some task-vector releases
ship) fails the weights-only load; it is refused with `PickledCheckpointError`, which names the fix:

    platonic convert --trust-pickle FILE -o FILE.safetensors

`convert_pickled(src, out, trust_pickle=True)` is that conversion: it unpickles `src` (which runs
whatever code the file names: only for files you trust), takes its state dict (a module's
`state_dict()`, or the dict itself, unwrapped as above) and writes it atomically as safetensors.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import torch

from ..errors import ArtifactError, InvalidInputError, PickledCheckpointError

SAFETENSORS_SUFFIXES = (".safetensors",)
TORCH_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")
CONVERT_KEY = "platonic_convert"  # metadata key of a file `convert_pickled` wrote


def is_weights_file(path) -> bool:
    """True for an existing file whose suffix names a format `read_state_dict` reads."""
    path = Path(path)
    return path.is_file() and path.suffix in (*SAFETENSORS_SUFFIXES, *TORCH_SUFFIXES)


def convert_command(path) -> str:
    """The command that converts the pickled checkpoint `path` (what `PickledCheckpointError` names)."""
    path = Path(path)
    return f"platonic convert --trust-pickle {path} -o {path.with_suffix('.safetensors')}"


def read_state_dict(path) -> dict[str, torch.Tensor]:
    """The tensors of a weights file (module docstring), on the CPU; never executes code.

    Raises ArtifactError for a damaged or unknown file, PickledCheckpointError for one that needs
    unpickling, InvalidInputError for one that holds no tensors.
    """
    path = Path(path)
    if path.suffix in SAFETENSORS_SUFFIXES:
        from safetensors.torch import load_file

        try:
            raw = load_file(str(path))
        except Exception as exc:  # noqa: BLE001 - safetensors raises several types for damaged files
            raise ArtifactError(f"{path} is not a readable safetensors state dict ({type(exc).__name__}: {exc}); "
                                "it may be truncated — save the fine-tune again") from None
    elif path.suffix in TORCH_SUFFIXES:
        raw = _torch_load_weights_only(path)
    else:
        raise InvalidInputError(f"{path}: unknown weights format {path.suffix or '(no suffix)'}; give "
                                f"{', '.join((*SAFETENSORS_SUFFIXES, *TORCH_SUFFIXES))}")
    state = unwrap_state_dict(raw, path)
    if not state:
        raise InvalidInputError(f"{path} holds no tensors: a fine-tune state dict needs the weights it changed")
    return state


ZIP_MAGIC, PICKLE_PROTOCOL = b"PK\x03\x04", 0x80  # torch.save's zip archive; a pickle (protocol >= 2) opens with 0x80


def _torch_load_weights_only(path: Path):
    with open(path, "rb") as f:
        head = f.read(4)
    if not (head.startswith(ZIP_MAGIC) or head[:1] == bytes([PICKLE_PROTOCOL])):
        raise ArtifactError(f"{path} is not a torch checkpoint: it is neither torch.save's zip archive nor a pickle "
                            f"(it starts with {head!r}); the file may be damaged or of another format")
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise PickledCheckpointError(
            f"{path} holds pickled Python objects, not only tensors (a whole pickled module?), and platonic loads "
            f"no code; if you trust the file, convert it once: {convert_command(path)} "
            f"({_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError, EOFError, ... for damaged files
        raise ArtifactError(f"{path} is not a readable torch checkpoint ({type(exc).__name__}: {_first_line(exc)}); "
                            "it may be truncated or of another format") from None


def _first_line(exc: Exception, limit: int = 160) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text[:limit] + ("…" if len(text) > limit else "")


def unwrap_state_dict(raw, path) -> dict[str, torch.Tensor]:
    """open_clip's unwrapping (factory.load_state_dict): raw["state_dict"] if present, "module." removed.

    raw: what a checkpoint file held (a dict, or a module's state dict). Non-tensor values are dropped.
    """
    if isinstance(raw, dict) and isinstance(raw.get("state_dict"), dict):
        raw = raw["state_dict"]
    if not isinstance(raw, dict):
        raise InvalidInputError(f"{path} holds a {type(raw).__name__}, not a state dict (a mapping of names to tensors)")
    state = {str(k): v for k, v in raw.items() if isinstance(v, torch.Tensor)}
    if state and all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return state


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_converted_file(path) -> bool:
    """True for a safetensors file `convert_pickled` wrote (what a second conversion may replace)."""
    from ..storage import platonic_record

    return platonic_record(path, key=CONVERT_KEY) is not None


def convert_pickled(src, out, *, trust_pickle: bool = False, overwrite: bool = False) -> dict:
    """Unpickle `src` and write its state dict to `out` (*.safetensors) atomically; returns the record.

    UNPICKLING RUNS CODE: the file can name any importable function, which runs while it loads. Only
    with `trust_pickle=True`; the classes a pickled module names must be importable here (e.g. the
    open_clip version that saved it). The output holds {name: tensor} and a record (metadata key
    "platonic_convert": source file name, its sha256, the number of tensors).
    """
    src, out = Path(src), Path(out)
    if not trust_pickle:
        raise PickledCheckpointError(f"converting {src} unpickles it, which runs code the file names; pass "
                                     "--trust-pickle (trust_pickle=True) only for a file you trust")
    if out.suffix != ".safetensors":
        raise InvalidInputError(f"-o {out}: the converted checkpoint is written as safetensors; name it *.safetensors")
    if not src.is_file():
        raise InvalidInputError(f"{src} does not exist (no such file)")
    try:
        raw = torch.load(str(src), map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - whatever unpickling raises, the file cannot be converted here
        raise ArtifactError(f"cannot unpickle {src} ({type(exc).__name__}: {_first_line(exc)}); a pickled module "
                            "needs the library that saved it (e.g. the same open_clip version) installed") from None
    if callable(getattr(raw, "state_dict", None)):
        raw = raw.state_dict()
    state = unwrap_state_dict(raw, src)
    if not state:
        raise InvalidInputError(f"{src} holds no tensors to convert")
    record = {"source_file": src.name, "source_sha256": _file_digest(src), "tensors": len(state)}
    from ..storage import write_tensors

    write_tensors(out, state, record, key=CONVERT_KEY, replaceable=is_converted_file, overwrite=overwrite,
                  what="checkpoint platonic converted")
    return record
