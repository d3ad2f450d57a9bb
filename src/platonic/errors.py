"""Error types. Every message names the problem and, where there is one, the fix.

Every error platonic raises on purpose derives from `PlatonicError` (so a caller, and the command line,
catches one type) and also from the builtin a caller would expect (ValueError, TypeError, OSError).
"""

from __future__ import annotations


class PlatonicError(Exception):
    """Base class of every error platonic raises on purpose."""


class InvalidInputError(PlatonicError, ValueError):
    """An argument is ill-formed: wrong rank or shape, NaN/Inf, empty, duplicated."""


class InvalidOperationError(PlatonicError, TypeError):
    """An operation the objects do not support, e.g. the product of two descriptors."""


class GridMismatchError(PlatonicError, ValueError):
    """Two objects measured on different probe grids were combined where one grid is required."""


class ArtifactError(PlatonicError, OSError):
    """A file is missing, truncated, foreign, or of another kind or format version."""


class MissingDataError(PlatonicError, FileNotFoundError):
    """A Debian data package an embedded world is built from (data, fonts, icons, sound engines) is not installed."""


class FingerprintMismatchError(PlatonicError, ValueError):
    """An operator solved for one target model was applied to another."""


class EditSiteError(PlatonicError, ValueError):
    """An operator does not fit the edit site it is folded into (form or shape)."""


class ZeroDescriptorWarning(UserWarning):
    """A fine-tune changed nothing on the probes: its descriptor is all zeros (an operator from it is no edit)."""


class PickledCheckpointError(ArtifactError):
    """A checkpoint needs unpickling (it holds Python objects beyond tensors); platonic loads no code.

    The message names the one explicit conversion: `platonic convert --trust-pickle FILE -o FILE.safetensors`.
    """


class UnpinnedRevisionError(PlatonicError, ValueError):
    """A hub source names no pinned commit while pinning is required (`--require-pinned`)."""
