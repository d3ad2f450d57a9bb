"""Where and how forward passes run: the device, the autocast dtype, batch size and decoding workers.

One frozen `Compute` holds what the command line's `--device`, `--dtype`, `--batch-size` and
`--num-workers` (and a recipe's keys of the same names) say:

    device       None: the GPU when there is one (cuda), else cpu; or a torch device ("cpu", "cuda:1")
    dtype        None / "float32": plain float32, no autocast (the default, bit-identical to before);
                 "bfloat16" | "float16": forward passes under torch.autocast in that dtype. Weights stay
                 float32, losses and embeddings are read back in float32, and the ridge solve always
                 runs in float64 (`platonic.solve`): only the matrix products of the towers run narrow.
    batch_size   None: each call's own default (64 for encoding); else inputs per forward pass
    num_workers  0: inputs are decoded in the main process (as before); N > 0: a torch DataLoader with
                 N worker processes decodes the next batches while the model runs (lazy splits only:
                 a tensor already in memory has nothing to decode)

`using(compute)` makes one the active settings of a block (the command line wraps each command in it);
`active()` is what the library reads where a call does not name its own. So the default path, with
nothing set, runs exactly the code it ran before this module existed.

    with using(Compute(dtype="bfloat16", num_workers=4)):
        descriptor = measure(pre, finetuned, probes, prompts, "eurosat")
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Iterator, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidInputError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DtypeName = Literal["float32", "bfloat16", "float16"]


def default_device() -> str:
    """"cuda" when torch sees a GPU, else "cpu" (the default of every --device)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


class Compute(BaseModel):
    """Device, autocast dtype, batch size and decoding workers of the forward passes (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: str | None = None
    dtype: DtypeName | None = None
    batch_size: int | None = Field(None, ge=1)
    num_workers: int = Field(0, ge=0)

    @classmethod
    def parse(cls, device=None, dtype=None, batch_size=None, num_workers=None, where: str = "--") -> "Compute":
        """Compute from the options (None: not given), with one-line errors naming the option and the fix.

        `where` prefixes the option names: "--" for the command line ("--batch-size"), "" for a recipe."""
        flag = (lambda n: f"--{n.replace('_', '-')}") if where == "--" else (lambda n: f"{where}{n}")
        if dtype is not None and dtype not in DTYPES:
            raise InvalidInputError(f"{flag('dtype')} {dtype!r}: choose float32, bfloat16 or float16")
        try:
            made = cls(device=device, dtype=dtype, batch_size=batch_size, num_workers=num_workers or 0)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first["loc"][0]) if first["loc"] else "value"
            raise InvalidInputError(f"{flag(name)} {first.get('input')!r}: {first['msg']}") from None
        made.torch_device()  # a GPU named on a machine without one is refused here, before any model loads
        return made

    def torch_device(self) -> torch.device:
        """The device this process runs on (checked: a missing GPU is a one-line error)."""
        from ._checks import as_device

        return as_device(self.device or default_device())

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype or "float32"]

    @property
    def narrow(self) -> bool:
        """True when forward passes run under autocast (bfloat16 or float16)."""
        return self.dtype not in (None, "float32")

    def autocast(self, device) -> "contextmanager":
        """torch.autocast on `device`'s type in this dtype; a no-op for float32 (the default path is untouched)."""
        if not self.narrow:
            return nullcontext()
        return torch.autocast(torch.device(device).type, dtype=self.torch_dtype)

    def record(self) -> dict:
        """What a results file records: the settings as given (None: the default)."""
        return self.model_dump(mode="json")


DEFAULT = Compute()
_ACTIVE: list[Compute] = [DEFAULT]


def active() -> Compute:
    """The settings of the innermost `using` block (the defaults outside any)."""
    return _ACTIVE[-1]


@contextmanager
def using(compute: Compute | None) -> Iterator[Compute]:
    """Make `compute` the active settings inside the block (None: leave them as they are)."""
    if compute is None:
        yield active()
        return
    _ACTIVE.append(compute)
    try:
        yield compute
    finally:
        _ACTIVE.pop()


def batch_size(default: int) -> int:
    """The active batch size, or `default` where none is set."""
    return active().batch_size or default


def autocast(device) -> "contextmanager":
    """The active settings' autocast on `device` (a no-op for float32)."""
    return active().autocast(device)


def optimizer_step(optimizer, scheduler, scaler=None) -> None:
    """One optimiser and scheduler step; through the float16 GradScaler when there is one (it skips a step
    whose gradients overflowed). The gradients are computed (and unscaled, for clipping) before."""
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)
        scaler.update()
    scheduler.step()


class RowRange:
    """Rows start .. stop of a lazily decoded split, still lazy: indexing decodes only the rows asked for."""

    def __init__(self, inputs, start: int, stop: int):
        self.inputs, self.start, self.stop = inputs, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def shape(self) -> tuple:
        return (len(self), *tuple(self.inputs.shape)[1:])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.inputs[slice(*(self.start + i for i in index.indices(len(self))[:2]))]
        return self.inputs[torch.as_tensor(index) + self.start]


def row_range(inputs, start: int, stop: int):
    """inputs[start:stop]: a view of a tensor, or a `RowRange` of a lazy split (nothing decoded yet)."""
    return inputs[start:stop] if isinstance(inputs, torch.Tensor) else RowRange(inputs, start, stop)


def slices(n: int, size: int) -> list[slice]:
    """Consecutive batches of `size` rows over n rows (the last one shorter)."""
    return [slice(s, min(s + size, n)) for s in range(0, n, size)]


class _Selections(torch.utils.data.Dataset):
    """inputs[selection k] (a slice or an index tensor), decoded in a DataLoader worker."""

    def __init__(self, inputs, selections: list):
        self.inputs, self.selections = inputs, selections

    def __len__(self) -> int:
        return len(self.selections)

    def __getitem__(self, k: int):
        return self.inputs[self.selections[k]]


def batches(inputs, selections, num_workers: int | None = None) -> Iterator:
    """inputs[s] for each selection s (slices or index tensors), in order.

    With workers (`num_workers`, default the active setting) and a lazy split (anything that is not a
    tensor: `LazyImages`, `LazyClips`), a DataLoader decodes them in worker processes, two batches ahead
    of the model; otherwise they are indexed here, exactly as a plain loop would."""
    selections = list(selections)
    workers = active().num_workers if num_workers is None else num_workers
    if workers == 0 or isinstance(inputs, torch.Tensor) or len(selections) < 2:
        for s in selections:
            yield inputs[s]
        return
    loader = torch.utils.data.DataLoader(_Selections(inputs, selections), batch_size=None, shuffle=False,
                                         num_workers=min(workers, len(selections)), prefetch_factor=2)
    yield from loader


__all__ = ["Compute", "DEFAULT", "DTYPES", "RowRange", "active", "autocast", "batch_size", "batches", "default_device",
           "row_range", "slices", "using"]
