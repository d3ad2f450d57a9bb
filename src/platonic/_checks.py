"""Small input checks shared by the pure functions and the value objects.

torch is imported inside the checks that need it: the command line runs `as_finite_scalar` and
`check_device` before anything heavy loads, so that a refusal costs no torch import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import InvalidInputError

if TYPE_CHECKING:
    import torch


def as_matrix(name: str, value, *, rows: int | None = None, cols: int | None = None) -> torch.Tensor:
    """Return `value` as a finite 2-D floating tensor, or raise naming `name` and what is wrong."""
    import torch

    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value)
        except Exception as exc:  # noqa: BLE001 - re-raised with the argument's name
            raise InvalidInputError(f"{name} must be a 2-D tensor; got {type(value).__name__} ({exc})") from None
    if value.ndim != 2:
        raise InvalidInputError(f"{name} must be a 2-D matrix; got shape {tuple(value.shape)} (rank {value.ndim})")
    if value.shape[0] == 0 or value.shape[1] == 0:
        raise InvalidInputError(f"{name} is empty (shape {tuple(value.shape)}); it needs at least one row and column")
    if not value.is_floating_point():
        value = value.to(torch.get_default_dtype())
    if rows is not None and value.shape[0] != rows:
        raise InvalidInputError(f"{name} has {value.shape[0]} rows; expected {rows}")
    if cols is not None and value.shape[1] != cols:
        raise InvalidInputError(f"{name} has {value.shape[1]} columns; expected {cols}")
    if not torch.isfinite(value).all():
        bad = int((~torch.isfinite(value)).sum())
        raise InvalidInputError(f"{name} contains {bad} NaN/Inf entries; check the embeddings or descriptor that produced it")
    return value


def as_finite_scalar(name: str, value) -> float:
    """Return `value` as a finite Python float, or raise naming `name`."""
    if hasattr(value, "numel") and hasattr(value, "item"):  # a tensor (torch is not imported for a float)
        if value.numel() != 1:
            raise InvalidInputError(f"{name} must be a scalar; got a tensor of shape {tuple(value.shape)}")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"{name} must be a real number; got {type(value).__name__}")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidInputError(f"{name} must be finite; got {value}")
    return value


def as_device(device) -> "torch.device":
    """`device` ("cpu", "cuda", "cuda:1", "mps", a torch.device) as a torch.device that exists here, or raise.

    Checked before any model is built, so that `--device cuda` on a machine without a GPU is one clear
    error instead of a failure deep inside a library.
    """
    import torch

    try:
        dev = device if isinstance(device, torch.device) else torch.device(str(device))
    except (RuntimeError, TypeError, ValueError):
        raise InvalidInputError(f"device {device!r} is not a torch device; use e.g. cpu, cuda or cuda:0") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise InvalidInputError(f"device {device!r}: no CUDA GPU is available here; use --device cpu")
        if dev.index is not None and dev.index >= count:
            raise InvalidInputError(f"device {device!r}: this machine has {count} CUDA GPU(s) (cuda:0 to cuda:{count - 1})")
    elif dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InvalidInputError(f"device {device!r}: Apple's MPS backend is not available here; use --device cpu")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise InvalidInputError(f"device {device!r}: platonic runs on cpu, cuda or mps")
    return dev


def check_device(device) -> None:
    """Refuse a device that does not exist here (`as_device`); None (the default: a GPU when present, else
    the CPU) and "cpu" are accepted without importing torch."""
    if device is None or (isinstance(device, str) and device == "cpu"):
        return
    as_device(device)
