"""Writes never lose a file: same-kind replacement, atomic swaps, temporaries cleaned after a kill, the umask (issue 12)."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import make_descriptor

import platonic
from platonic import ArtifactError, Descriptor
from platonic.storage import atomic_directory, atomic_write

SRC = Path(platonic.__file__).resolve().parents[1]  # the tree under test, for the subprocesses


def test_writes_respect_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        make_descriptor().save(tmp_path / "d.utd")
        atomic_directory(tmp_path / "out", lambda tmp: (tmp / "f").write_text("x"), replaceable=lambda p: True)
    finally:
        os.umask(old)
    assert (tmp_path / "d.utd").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "out" / "f").stat().st_mode & 0o777 == 0o640


def test_a_file_output_replaces_only_its_own_kind(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ArtifactError, match="not a previous platonic descriptor file.*--overwrite"):
        make_descriptor().save(tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "mine"
    make_descriptor(seed=1).save(tmp_path / "d.utd")
    make_descriptor(seed=2).save(tmp_path / "d.utd")  # a previous descriptor is replaced
    assert torch.equal(Descriptor.load(tmp_path / "d.utd").matrix, make_descriptor(seed=2).matrix)
    make_descriptor().save(tmp_path / "notes.txt", overwrite=True)
    assert Descriptor.load(tmp_path / "notes.txt").task == "toy"


def test_a_directory_output_refuses_foreign_and_working_directories(tmp_path, monkeypatch):
    user = tmp_path / "user"
    user.mkdir()
    (user / "thesis.tex").write_text("years of work")
    write = lambda tmp: (tmp / "model.bin").write_text("new")  # noqa: E731
    with pytest.raises(ArtifactError, match="not a previous"):
        atomic_directory(user, write, replaceable=lambda p: False)
    assert (user / "thesis.tex").read_text() == "years of work"
    monkeypatch.chdir(user)
    for path in (Path("."), Path(".."), user):
        with pytest.raises(ArtifactError, match="working directory"):
            atomic_directory(path, write, replaceable=lambda p: True, overwrite=True)
    monkeypatch.chdir(tmp_path)
    atomic_directory(user, write, replaceable=lambda p: False, overwrite=True)  # asked for: swapped out
    assert sorted(p.name for p in user.iterdir()) == ["model.bin"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failed_write_removes_its_temporary(tmp_path):
    def boom(tmp):
        Path(tmp, "half").write_text("x") if Path(tmp).is_dir() else Path(tmp).write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_directory(tmp_path / "out", boom, replaceable=lambda p: True)
    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "f", boom)
    assert list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_next_write_removes_what_a_killed_writer_left(tmp_path):
    dead = _dead_pid()
    (tmp_path / f".d.utd.{dead}.abc.tmp").write_bytes(b"\0" * 1000)  # a killed file write
    (tmp_path / f".out.{dead}.xyz.tmp").mkdir()  # a killed directory write
    (tmp_path / f".out.{dead}.xyz.tmp" / "model.safetensors").write_bytes(b"\0" * 1000)
    live = tmp_path / f".d.utd.{os.getpid()}.live.tmp"
    live.write_text("a write in progress")
    (tmp_path / "unrelated.tmp").write_text("not ours")
    make_descriptor().save(tmp_path / "d.utd")
    atomic_directory(tmp_path / "out", lambda tmp: (tmp / "f").write_text("x"), replaceable=lambda p: True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["d.utd", "out", live.name, "unrelated.tmp"])


def test_an_old_directory_moved_aside_by_a_killed_swap_is_restored(tmp_path):
    """Where the file system cannot exchange two paths, a kill between the two renames leaves the old
    directory aside: the next write to the path puts it back first (then replaces it properly)."""
    from platonic.storage import clean_stale_temporaries

    dead = _dead_pid()
    aside = tmp_path / f".out.{dead}.q.old"
    aside.mkdir()
    (aside / "f").write_text("old")
    assert clean_stale_temporaries(tmp_path / "out") == [aside]
    assert (tmp_path / "out" / "f").read_text() == "old"


KILLER = textwrap.dedent("""
    import os, signal, sys, json
    from pathlib import Path
    sys.path.insert(0, {src!r}); sys.path.insert(0, {tests!r})
    import platonic.storage as storage
    from helpers import make_descriptor
    root, point = Path(sys.argv[1]), sys.argv[2]
    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)
    if point == "file":
        storage.os.replace = die  # killed after the temporary is written, before the rename
        make_descriptor(seed=2).save(root / "d.utd")
    else:
        real_write = lambda tmp: (tmp / "version").write_text("new")
        if point == "write":
            write = lambda tmp: ((tmp / "version").write_text("ne"), die())
        else:
            write = real_write
            target = {{"exchange": "exchange_paths", "cleanup": "_remove"}}[point]
            setattr(storage, target, die)
        storage.atomic_directory(root / "out", write, replaceable=lambda p: True)
""")


@pytest.mark.parametrize("point", ["file", "write", "exchange", "cleanup"])
def test_kill_during_a_write_leaves_old_or_new(tmp_path, point):
    make_descriptor(seed=1).save(tmp_path / "d.utd")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "version").write_text("old")
    script = KILLER.format(src=str(SRC), tests=str(Path(__file__).parent))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path), point], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert Descriptor.load(tmp_path / "d.utd").matrix.shape == (6, 3)  # the old file, whole
    assert (tmp_path / "out" / "version").read_text() in ("old", "new")
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert left, "the killed writer left no temporary: the kill came too late to test anything"
    make_descriptor(seed=3).save(tmp_path / "d.utd")  # the next writes clean up after the killed one
    atomic_directory(tmp_path / "out", lambda tmp: (tmp / "version").write_text("newer"), replaceable=lambda p: True)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert (tmp_path / "out" / "version").read_text() == "newer"


def test_a_write_sweeps_what_killed_writers_left_beside_any_output_of_its_folder(tmp_path):
    """Issue 34: a killed export's hidden temporary stayed until a later write to that same path; now any write
    into the folder, or `platonic clean`, removes every dead platonic writer's temporaries there (marked
    `.platonic-`), and leaves other programs' files alone."""
    dead = _dead_pid()
    export = tmp_path / f".exp.{dead}.platonic-k1ll3d00.tmp"
    export.mkdir()
    (export / "model.safetensors").write_bytes(b"\0" * 1000)
    (tmp_path / f".bank.bank.{dead}.platonic-abcdefgh.tmp").write_bytes(b"\0")
    foreign = tmp_path / f".notes.{dead}.abcdefgh.tmp"  # not marked: another program's
    foreign.write_text("not ours")
    make_descriptor().save(tmp_path / "d.utd")  # a write to another output of the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["d.utd", foreign.name])


def test_platonic_clean_sweeps_a_folder_and_the_cache(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from platonic.cli import app

    dead = _dead_pid()
    cache = tmp_path / "cache" / "embeddings"
    cache.mkdir(parents=True)
    (cache / f".x.safetensors.{dead}.platonic-abcdefgh.tmp").write_bytes(b"\0")
    work = tmp_path / "work"
    work.mkdir()
    (work / f".exp.{dead}.platonic-abcdefgh.tmp").mkdir()
    aside = work / f".exp.{dead}.platonic-ijklmnop.old"  # a previous export moved aside, the new one never came
    aside.mkdir()
    (aside / "config.json").write_text("{}")
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(app, ["clean", str(work)])
    assert result.exit_code == 0, result.output
    assert "3 stale temporaries" in result.stdout
    assert list(cache.iterdir()) == [] and sorted(p.name for p in work.iterdir()) == ["exp"]
    assert (work / "exp" / "config.json").read_text() == "{}"


def test_files_inside_a_directory_output_follow_the_umask(tmp_path):
    """Issue 34: weight files inside export directories were 0600 whatever the umask (their writer makes them so)."""
    def write(tmp):
        (tmp / "weights").write_bytes(b"\0")
        os.chmod(tmp / "weights", 0o600)
        (tmp / "sub").mkdir(mode=0o700)
        (tmp / "sub" / "f").write_text("x")
        os.chmod(tmp / "sub" / "f", 0o600)

    old = os.umask(0o022)
    try:
        atomic_directory(tmp_path / "out", write, replaceable=lambda p: True)
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "out").rglob("*")}
    assert modes == {"weights": 0o644, "sub": 0o755, "f": 0o644}
