"""The adapter route writes its export and its peft adapter together or not at all (issue 34, defects 3 and 4).

A kill at every write step leaves the old export alone (its adapter moved aside at most, which a cleanup
puts back) or the new export with its adapter (in place, or parked beside it, which a cleanup puts in
place); a failure writes nothing; an adapter directory inside the export is refused.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from tiny_models import clip_tokenizer, tiny_hf
from test_measure_transfer import PROMPTS, probes_n

import platonic
from platonic import Descriptor, InvalidInputError, ProbeGrid
from platonic.adapter import Adapter
from platonic.exports import adapt_and_export
from platonic.storage import sweep_stale_temporaries

HERE = Path(__file__).resolve().parent
SRC = Path(platonic.__file__).resolve().parents[1]
OPTIONS = {"rank": 2, "lora_alpha": 4.0, "max_steps": 2, "batch_size": 4}


def route_args(model, root: Path, scale: float = 0.01) -> tuple:
    """The arguments of one adapter-route export of `model` into root/exp (adapter root/exp.adapter), for a
    descriptor of `scale`."""
    probes = probes_n(4)
    grid = ProbeGrid.from_probes("toy", PROMPTS, probes)
    desc = Descriptor(scale * torch.randn(grid.shape, generator=torch.Generator().manual_seed(0)), grid)
    return (model, [desc], {"toy": 1.0}, root / "exp.adapter", root / "exp", OPTIONS,
            {grid.probe_digest: model.canonical(probes)})


def route(model, root: Path, scale: float):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return adapt_and_export(*route_args(model, root, scale))


def state(root: Path) -> tuple[str | None, str | None]:
    """(the adapter digest the export's provenance names, the digest of the adapter directory beside it)."""
    record = json.loads((root / "exp" / "platonic_provenance.json").read_text())
    adapter = root / "exp.adapter"
    return record.get("adapter_digest"), (Adapter.load(adapter).digest() if adapter.exists() else None)


KILLER = textwrap.dedent("""
    import os, signal, sys, warnings
    from pathlib import Path
    sys.path.insert(0, {src!r}); sys.path.insert(0, {here!r})
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(1)
    import platonic.storage as storage
    from platonic.adapter import Adapter
    from tiny_models import clip_tokenizer, tiny_hf
    from test_adapter_route_safety import route
    root, point = Path(sys.argv[1]), sys.argv[2]
    model = tiny_hf("clip", tokenizer=clip_tokenizer())
    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)
    def after(real):
        return lambda *a, **k: (real(*a, **k), die())
    if point == "stage":  # inside the adapter's write, before it is parked
        Adapter.write_files = after(Adapter.write_files)
    elif point == "export":  # inside the export's write, before its swap
        model.model.save_pretrained = after(model.model.save_pretrained)
    else:
        name = {{"park": "stage_pending", "aside": "move_aside", "swap": "exchange_paths", "commit": "commit_pending",
                 "discard": "discard"}}[point]
        setattr(storage, name, after(getattr(storage, name)) if point in ("park", "aside") else die)
    route(model, root, 0.05)
""")
# where a kill lands -> what a cleanup leaves: the old pair or the new one
POINTS = {"stage": "old", "park": "old", "aside": "old", "export": "old", "swap": "old", "commit": "new",
          "discard": "new"}


@pytest.fixture(scope="module")
def clip():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tiny_hf("clip", tokenizer=clip_tokenizer())


@pytest.mark.parametrize("point", list(POINTS))
def test_a_kill_at_every_write_step_leaves_the_old_export_alone_or_the_new_one_with_its_adapter(tmp_path, clip, point):
    import copy

    tmp_path = tmp_path / "out"  # beside the cache the fixture puts in tmp_path
    tmp_path.mkdir()
    route(copy.deepcopy(clip), tmp_path, 0.01)  # the old export and its adapter
    old = state(tmp_path)
    assert old[0] is not None and old[0] == old[1]
    proc = subprocess.run([sys.executable, "-c", KILLER.format(src=str(SRC), here=str(HERE)), str(tmp_path), point],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    exported, adapter = state(tmp_path)
    if exported == old[0]:
        assert adapter in (old[1], None), "a new adapter beside the old export"
    else:
        parked = [p.name for p in tmp_path.iterdir() if p.name.endswith(".new")]
        assert adapter == exported or (adapter is None and parked), "the new export without its adapter"
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")], "the kill came too late to test anything"
    result = subprocess.run([sys.executable, "-c", "from platonic.cli import app; app()", "clean", str(tmp_path),
                             "--no-cache"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)},
                            timeout=120)
    assert result.returncode == 0, result.stderr
    exported, adapter = state(tmp_path)
    assert adapter == exported and (exported == old[0]) == (POINTS[point] == "old"), (point, exported, adapter, old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "exp.adapter"]


def test_a_failed_merge_or_export_writes_nothing(tmp_path, clip, monkeypatch):
    import copy

    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    def refuse(self, model):
        raise InvalidInputError("merging the adapter gave non-finite weights")

    with monkeypatch.context() as patch:
        patch.setattr(Adapter, "merge_into", refuse)
        with pytest.raises(InvalidInputError, match="non-finite"):
            route(copy.deepcopy(clip), tmp_path, 0.01)
    assert list(tmp_path.iterdir()) == [], "a failed merge wrote an adapter"
    route(copy.deepcopy(clip), tmp_path, 0.01)
    old = state(tmp_path)

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr("platonic.transfer.save_model", disk_full)
    with pytest.raises(OSError, match="No space"):
        route(copy.deepcopy(clip), tmp_path, 0.05)
    assert state(tmp_path) == old and sorted(p.name for p in tmp_path.iterdir()) == ["exp", "exp.adapter"]
    assert sweep_stale_temporaries(tmp_path) == []


def test_a_fit_no_closer_than_no_edit_is_exported_with_a_warning(tmp_path, clip, monkeypatch):
    """Issue 34: an adapter fit with relative residual 1.094 (worse than no edit) was exported silently."""
    import copy

    monkeypatch.setitem(OPTIONS, "max_steps", 0)  # the untrained adapter: no change, relative residual 1
    with pytest.warns(UserWarning, match="relative residual is toy"):
        adapt_and_export(*route_args(copy.deepcopy(clip), tmp_path))
    assert (tmp_path / "exp").is_dir() and (tmp_path / "exp.adapter").is_dir()
