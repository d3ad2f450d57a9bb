"""Artifacts on disk: safetensors tensors plus one JSON metadata record. Never pickle.

Every platonic file is a safetensors file whose header metadata has one key, "platonic", holding
JSON: {"format": "platonic", "format_version": 1, "kind": "descriptor" | "operator" | "bank", ...}.
Writes go to a temporary file in the target directory and are renamed into place, so a reader sees
either the old file or the whole new one; an existing file is replaced only when it is a previous
artifact of the same kind (or with overwrite=True). Temporaries are named .NAME.PID.RANDOM.tmp: a
failed write removes its own, and the next write to the same path removes those of killed writers.
Files and directories get the modes the umask asks for. Loading reads tensors and JSON only; it
executes no code. torch is imported only to read or write tensors: the checks a command runs before its
work (what a path holds, whether it may be replaced) read headers alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors import safe_open

from .errors import ArtifactError, InvalidInputError

if TYPE_CHECKING:
    import torch

FORMAT_NAME = "platonic"
EXPORT_RECORD_FILE = "platonic_provenance.json"  # the provenance of an export directory (`layouts.PROVENANCE_FILE`)
FORMAT_VERSION = 1
KINDS = ("descriptor", "operator", "bank")


def current_umask() -> int:
    """The process's umask (read from /proc where it can be, so that nothing is changed meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _respect_umask(path: Path) -> None:
    """mkstemp / mkdtemp create 0600 files and 0700 directories, and some writers (safetensors inside an
    export directory) 0600 files too: give `path`, and everything below a directory, the mode the umask
    asks for."""
    mask = current_umask()
    for root, dirs, files in os.walk(path) if path.is_dir() else ():
        for name in dirs:
            os.chmod(Path(root) / name, 0o777 & ~mask)
        for name in files:
            if not (Path(root) / name).is_symlink():
                os.chmod(Path(root) / name, 0o666 & ~mask)
    os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~mask)


def _parent(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


MARK = "platonic-"  # in every temporary's name, so that a sweep of a folder touches platonic's own only
_TEMPORARY = re.compile(rf"^\.(?P<name>.+)\.(?P<pid>\d+)\.{MARK}[a-z0-9_]+\.(?P<kind>tmp|old|new|new\.json)$")


def _temp_prefix(path: Path) -> str:
    """Temporaries beside `path` are named .NAME.PID.platonic-RANDOM.{tmp,old,new}: the pid says whether a
    writer lives, the mark that platonic wrote them."""
    return f".{path.name}.{os.getpid()}.{MARK}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def clean_stale_temporaries(path) -> list[Path]:
    """Remove what interrupted writes to `path` left beside it; returns what was removed or restored.

    A temporary `.NAME.PID.RANDOM.tmp` (a half-written file or directory) is deleted once its writer PID
    no longer runs. A `.NAME.PID.RANDOM.new` (a whole directory parked until another output was written:
    `stage_pending`) is put in place when that output's record names it, and deleted otherwise. A
    `.NAME.PID.RANDOM.old` (a previous directory moved aside during a swap) is renamed back to `path` when
    `path` is missing, and deleted otherwise. Temporaries of live writers are left alone.
    """
    path = Path(path)
    parent = _parent(path)
    prefix = f".{path.name}."
    found = []
    try:
        names = os.listdir(parent)
    except OSError:
        return found
    for name in sorted((n for n in names if n.startswith(prefix) and _kind_rank(n) is not None), key=_kind_rank):
        pid = name[len(prefix):].split(".", 1)[0]
        entry = parent / name
        if not pid.isdigit() or _pid_alive(int(pid)) or not (entry.exists() or entry.is_symlink()):
            continue
        if name.endswith(".new"):
            _settle_pending(entry, path)
        elif name.endswith(".old") and not (path.exists() or path.is_symlink()):
            os.replace(entry, path)
        elif not (name.endswith(".new.json") and Path(str(entry).removesuffix(".json")).exists()):
            _remove(entry)
        found.append(entry)
    return found


def _kind_rank(name: str) -> int | None:
    """The order a cleanup settles temporaries in: a parked directory first (it may take `path` before a
    moved-aside .old is judged), then .tmp, .old, and last the sidecars of parked directories."""
    for rank, end in enumerate((".new.json", ".new", ".tmp", ".old")):
        if name.endswith(end):
            return (3, 0, 1, 2)[rank]
    return None


def sweep_stale_temporaries(directory) -> list[Path]:
    """`clean_stale_temporaries` for every output of `directory` that a dead platonic writer left temporaries
    of (marked names only: another program's files are never touched); returns what was removed or restored."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in sorted({m["name"] for m in map(_TEMPORARY.match, names) if m and not _pid_alive(int(m["pid"]))}):
        found += clean_stale_temporaries(Path(directory) / name)
    return found


def _settle_pending(pending: Path, path: Path) -> None:
    """A parked directory of a dead writer: put in place at `path` when the output it waited for records it
    (its sidecar's "commit_if": {"path", "key", "value"}), else deleted."""
    sidecar = Path(f"{pending}.json")
    try:
        rule = json.loads(sidecar.read_text())["commit_if"]
        other = Path(rule["path"])
        record = json.loads((other / EXPORT_RECORD_FILE).read_text()) if other.is_dir() else platonic_record(other)
        committed = bool(record) and record.get(rule["key"]) == rule["value"]
    except (OSError, ValueError, KeyError, TypeError):
        committed = False
    if committed and not (path.exists() or path.is_symlink()):
        os.rename(pending, path)
    elif committed and exchange_paths(pending, path):
        _remove(pending)  # it now holds what was at `path`
    else:
        _remove(pending)
    sidecar.unlink(missing_ok=True)


def refuse_existing(path: Path, replaceable, overwrite: bool, what: str) -> None:
    """Raise ArtifactError when `path` exists, `replaceable(path)` is false and `overwrite` is not given."""
    path = Path(path)
    exists = path.exists() or path.is_symlink()
    if exists and not overwrite and not (replaceable is None or replaceable(path)):
        raise ArtifactError(f"{path} exists and is not a previous {what}; choose a new path, remove it, "
                            "or pass --overwrite (overwrite=True) to replace it")


def _refuse_working_directory(path: Path) -> None:
    resolved, cwd = path.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ArtifactError(f"{path} is the working directory or contains it, and a write would replace it; "
                            "give a new directory name, e.g. -o edited/")


def atomic_write(path, write, replaceable=None, overwrite: bool = False, what: str = "file of this kind") -> Path:
    """Call write(tmp_path) on a temporary file next to `path`, then rename it to `path`.

    With `replaceable` (a predicate), an existing `path` is replaced only when `replaceable(path)` holds
    or `overwrite` is true; without it, any existing file is replaced (caches). The temporary is
    removed when `write` fails, and temporaries that an interrupted (killed) earlier write to the same
    path left behind are removed first. The file gets the mode the umask asks for.
    """
    path = Path(path)
    if path.is_dir():
        raise ArtifactError(f"{path} is a directory; give a file name to write to")
    parent = _parent(path)
    if not parent.exists():
        raise ArtifactError(f"cannot write {path}: directory {parent} does not exist; create it first")
    refuse_existing(path, replaceable, overwrite, what)
    clean_stale_temporaries(path)
    sweep_stale_temporaries(parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=parent)
    except OSError as exc:
        raise ArtifactError(f"cannot write {path}: {exc.strerror} in {parent}; choose a writable directory") from None
    os.close(fd)
    try:
        write(tmp)
        _respect_umask(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2 = None


def exchange_paths(a, b) -> bool:
    """Swap two existing paths in one atomic step (Linux renameat2 RENAME_EXCHANGE).

    Returns False where the system or file system cannot (then nothing was changed).
    """
    global _renameat2
    import ctypes
    import errno

    if _renameat2 is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _renameat2 = libc.renameat2
        except (OSError, AttributeError):
            _renameat2 = False
    if _renameat2 is False:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise ArtifactError(err, f"cannot swap the new output into place ({os.strerror(err)})", str(b))


def atomic_directory(path, write, replaceable, overwrite: bool = False, what: str = "output of this kind") -> Path:
    """Fill a temporary directory beside `path` with write(tmp_dir), then put it in place.

    An existing `path` is replaced only when `replaceable(path)` says it is a previous artifact of the
    same kind, or `overwrite` is true; anything else is refused, as is the working directory (or one
    that contains it). The new directory is swapped in: in one atomic exchange where the file system
    can (Linux renameat2), so a reader, or a kill at any moment, finds the old or the new directory at
    `path`, never neither; elsewhere the old one is renamed aside first and, after a kill in between,
    renamed back by the next write to `path` (`clean_stale_temporaries`). The old one is then deleted.
    """
    path = Path(path)
    parent = _parent(path)
    if not parent.is_dir():
        raise ArtifactError(f"cannot write {path}: directory {parent} does not exist; create it first")
    _refuse_working_directory(path)
    refuse_existing(path, lambda p: p.is_dir() and replaceable(p), overwrite, what)
    tmp = stage_directory(path, write)
    old = None
    try:
        if not (path.exists() or path.is_symlink()):
            os.rename(tmp, path)
        elif exchange_paths(tmp, path):
            _remove(tmp)  # it now holds the old directory
        else:
            old = move_aside(path)
            os.rename(tmp, path)
            _remove(old)
    except BaseException:
        if tmp.exists() or tmp.is_symlink():
            _remove(tmp)
        if old is not None and (old.exists() or old.is_symlink()):
            restore_aside(old, path)
        raise
    return path


def save_file(tensors: dict[str, torch.Tensor], filename, metadata: dict | None = None) -> None:
    """safetensors' `save_file`, imported when tensors are first written (so that checks stay torch-free)."""
    from safetensors.torch import save_file as write

    write(tensors, str(filename), metadata=metadata)


def stage_directory(path, write) -> Path:
    """A temporary directory beside `path` filled by write(tmp), with the modes the umask asks for, not yet in
    place (`atomic_directory` swaps it in; `stage_pending` parks it). What killed writers left beside `path`,
    and beside any other output of its folder, is swept first. A failed write removes its temporary."""
    path = Path(path)
    parent = _parent(path)
    clean_stale_temporaries(path)
    sweep_stale_temporaries(parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".tmp", dir=parent))
    except OSError as exc:
        raise ArtifactError(f"cannot write {path}: {exc.strerror} in {parent}; choose a writable directory") from None
    try:
        write(tmp)
        _respect_umask(tmp)
    except BaseException:
        _remove(tmp)
        raise
    return tmp


def stage_pending(path, write, commit_if: dict) -> Path:
    """A whole directory for `path` (write(tmp)), parked beside it as .NAME.PID.platonic-RANDOM.new until
    another output is written (the adapter route: an adapter and its export appear together). `commit_if`
    = {"path": OTHER, "key": K, "value": V}: the parked directory belongs in place once OTHER's record
    (its platonic_provenance.json, or a file's platonic metadata) says K = V. `commit_pending` puts it in
    place; after a kill, the next write beside it (or `platonic clean`) does, or deletes it when the other
    output never recorded it."""
    tmp = stage_directory(path, write)
    pending = tmp.with_name(tmp.name.removesuffix(".tmp") + ".new")
    Path(f"{pending}.json").write_text(json.dumps({"commit_if": commit_if}))
    os.rename(tmp, pending)
    return pending


def move_aside(path) -> Path | None:
    """Rename an existing `path` to .NAME.PID.platonic-RANDOM.old beside it (put back by `restore_aside`, or by a
    cleanup after a kill when `path` is still missing); None when nothing is there."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        return None
    aside = Path(tempfile.mkdtemp(prefix=_temp_prefix(path), suffix=".old", dir=_parent(path)))
    os.rmdir(aside)
    os.rename(path, aside)
    return aside


def restore_aside(aside: Path | None, path) -> None:
    """Put back what `move_aside` moved, unless something took `path` since."""
    if aside is not None and not (Path(path).exists() or Path(path).is_symlink()):
        os.rename(aside, path)


def commit_pending(pending: Path, path) -> Path:
    """Put a parked directory (`stage_pending`) in place at `path` (missing, or swapped with what is there)."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        os.rename(pending, path)
    elif exchange_paths(pending, path):
        _remove(pending)
    else:
        raise ArtifactError(f"cannot put {path} in place: it appeared meanwhile and cannot be swapped; remove it")
    Path(f"{pending}.json").unlink(missing_ok=True)
    return path


def discard(path: Path | None) -> None:
    """Delete what a transaction moved aside (`move_aside`) once its replacement is in place; None: nothing."""
    if path is not None:
        _remove(path)


def drop_pending(pending: Path) -> None:
    """Delete a parked directory and its sidecar (its other output was not written)."""
    _remove(pending)
    Path(f"{pending}.json").unlink(missing_ok=True)


def write_artifact(path, kind: str, tensors: dict[str, torch.Tensor], meta: dict, overwrite: bool = False) -> Path:
    """Atomically write `tensors` and JSON-serialisable `meta` as a platonic artifact of `kind`.

    An existing file at `path` is replaced only when it is a platonic artifact of the same kind (a
    previous descriptor, operator or bank), or with `overwrite`.
    """
    if kind not in KINDS:
        raise InvalidInputError(f"unknown artifact kind {kind!r}; one of {', '.join(KINDS)}")
    record = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": kind, **meta}
    return write_tensors(path, tensors, record, replaceable=lambda p: artifact_kind(p) == kind, overwrite=overwrite,
                         what=f"platonic {kind} file")


def write_tensors(path, tensors: dict[str, torch.Tensor], record: dict | None = None, key: str = FORMAT_NAME,
                  replaceable=None, overwrite: bool = False, what: str = "file of this kind", make_parents: bool = False) -> Path:
    """Atomically write `tensors` (copied to CPU, contiguous) as safetensors, with `record` as JSON metadata
    under `key`: the one writer behind artifacts, world weights and caches. A missing parent folder is an
    error unless `make_parents` (caches and builds create their own layout; a user's -o path must exist)."""
    payload = {name: t.detach().cpu().contiguous().clone() for name, t in tensors.items()}
    metadata = None if record is None else {key: json.dumps(record, sort_keys=True)}
    if make_parents:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda tmp: save_file(payload, tmp, metadata=metadata), replaceable=replaceable,
                        overwrite=overwrite, what=what)


def file_metadata(path) -> dict:
    """The string metadata of a safetensors file's header (no tensor is read, and torch is not imported)."""
    with safe_open(str(path), framework="numpy") as f:
        return f.metadata() or {}


def platonic_record(path, key: str = FORMAT_NAME) -> dict | None:
    """The JSON record under metadata `key` of a safetensors file, or None (not such a file, unreadable)."""
    try:
        raw = file_metadata(path).get(key)
        record = json.loads(raw) if raw is not None else None
    except Exception:  # noqa: BLE001 - anything unreadable is simply not a platonic file
        return None
    return record if isinstance(record, dict) else None


def artifact_kind(path) -> str | None:
    """"descriptor", "operator" or "bank" for a platonic artifact file, else None."""
    path = Path(path)
    record = platonic_record(path) if path.is_file() else None
    return record.get("kind") if record and record.get("format") == FORMAT_NAME else None


def read_header(path, kind: str | None = None) -> dict:
    """The JSON record of a platonic artifact, without loading its tensors (nor torch); checks the kind when
    given, so that a command refuses a wrong file before its work."""
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} does not exist")
    if path.is_dir():
        raise ArtifactError(f"{path} is a directory, not a platonic file")
    try:
        metadata = file_metadata(path)
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for bad headers
        raise ArtifactError(
            f"{path} is not a readable safetensors file ({type(exc).__name__}: {exc}); "
            "it may be truncated or of another format — re-create it with platonic"
        ) from None
    raw = metadata.get(FORMAT_NAME)
    if raw is None:
        raise ArtifactError(
            f"{path} is a safetensors file but not a platonic artifact (no '{FORMAT_NAME}' metadata); "
            "it may be a model checkpoint — pass a descriptor, operator or bank file"
        )
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: its platonic metadata is not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ArtifactError(f"{path}: its platonic metadata is not a JSON object; re-create the file with platonic")
    if record.get("format") != FORMAT_NAME and "arch" in record:
        raise ArtifactError(
            f"{path} is a model checkpoint exported by platonic (open_clip {record['arch']}), not a descriptor, "
            f"operator or bank; load it as open_clip:{record['arch']}@{path}"
        )
    version = record.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ArtifactError(
            f"{path} has format version {version!r}; this platonic reads up to {FORMAT_VERSION}. Upgrade platonic."
        )
    if kind is not None and record.get("kind") != kind:
        raise ArtifactError(f"{path} holds a {record.get('kind')!r}, not a {kind!r}; pass a {kind} file")
    return record


def read_artifact(path, kind: str | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """(tensors, record) of a platonic artifact; checks the kind when given."""
    record = read_header(path, kind)
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except Exception as exc:  # noqa: BLE001
        raise ArtifactError(f"{path}: its tensors cannot be read ({type(exc).__name__}: {exc}); the file may be truncated") from None
    return tensors, record


def require_keys(path, record: dict, tensors: dict, tensor_names=(), meta_keys=()) -> None:
    """Raise ArtifactError naming what a well-formed artifact of this kind lacks."""
    missing = [f"tensor {n!r}" for n in tensor_names if n not in tensors]
    missing += [f"metadata {k!r}" for k in meta_keys if k not in record]
    if missing:
        raise ArtifactError(f"{path} is an incomplete {record.get('kind')} artifact: missing {', '.join(missing)}")
