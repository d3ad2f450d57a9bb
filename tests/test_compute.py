"""The compute settings, the single-process side of `platonic.distributed` and locked cache writes (issue 36).

No model and no launch here: the options' one-line errors, that the defaults change nothing (no autocast,
no DataLoader), that DataLoader workers decode the same batches, how a launch's work is shared, and that
a cache entry is written once.
"""

import multiprocessing

import pytest
import torch
from typer.testing import CliRunner

from platonic.cli import app
from platonic.compute import Compute, active, batches, slices, using
from platonic.distributed import SOLO, Group, Job, current, on_main, solo, spread
from platonic.errors import InvalidInputError
from platonic.locks import LOCK_NAME, write_once


@pytest.mark.parametrize("options, message", [
    ({"dtype": "float8"}, "--dtype 'float8': choose float32, bfloat16 or float16"),
    ({"batch_size": 0}, "--batch-size 0"),
    ({"num_workers": -1}, "--num-workers -1"),
    ({"device": "tpu"}, "device 'tpu'"),
])
def test_bad_settings_are_one_line_errors_naming_the_option(options, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(")) as caught:
        Compute.parse(**options)
    assert "\n" not in str(caught.value)


def test_a_gpu_named_on_a_machine_without_one_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InvalidInputError, match="no CUDA GPU is available here; use --device cpu"):
        Compute.parse(device="cuda")
    assert Compute.parse().torch_device().type == "cpu"  # the default: the GPU when present, else the CPU


def test_the_defaults_run_no_autocast_and_the_narrow_dtypes_do():
    assert active() == Compute() and not Compute().narrow and not Compute(dtype="float32").narrow
    assert type(Compute().autocast("cpu")).__name__ == "nullcontext"
    with using(Compute(dtype="bfloat16")):
        assert active().narrow
        with active().autocast("cpu"):
            assert (torch.nn.Linear(4, 4)(torch.randn(2, 4))).dtype == torch.bfloat16
    assert active() == Compute()  # the block's settings end with it


class _Lazy:
    """Enough of a lazily decoded split (not a tensor): rows on indexing."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index] * 2


def test_workers_decode_the_same_batches_as_the_main_process():
    data = torch.arange(50.0).reshape(25, 2)
    parts = slices(25, 4) + [torch.tensor([3, 1, 4])]
    plain = list(batches(_Lazy(data), parts, num_workers=0))
    workers = list(batches(_Lazy(data), parts, num_workers=2))
    assert len(plain) == 8 and all(torch.equal(a, b) for a, b in zip(plain, workers))
    assert torch.equal(plain[-1], data[[3, 1, 4]] * 2)


def test_a_launch_shares_rows_and_jobs_and_one_process_does_everything():
    groups = [Group(i, 3) for i in range(3)]
    assert [list(range(10))[g.shard(10)] for g in groups] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert [g.mine("abcdefg") for g in groups] == [["a", "d", "g"], ["b", "e"], ["c", "f"]]
    assert [g.mine("abcdefg", [1] * 7) for g in groups] == [g.mine("abcdefg") for g in groups]  # equal costs
    # costs: the longest first to the least loaded (svhn-like 7 beside 1s): loads 7, 6, 6 instead of 10, 4, 5
    assert [g.mine("abcdefg", [7, 3, 3, 1, 1, 2, 2]) for g in groups] == [["a"], ["b", "d", "f"], ["c", "e", "g"]]
    assert current() is SOLO and SOLO.shard(5) == slice(0, 5) and SOLO.agree(7) == 7 and on_main(lambda: 3) == 3
    ran = []
    done = spread([Job("a", lambda: ran.append("a") or "ran"), Job("b", lambda: "never", done=lambda: True)])
    assert done == {"a": "ran", "b": "cached"} and ran == ["a"]
    with solo():
        assert current() is SOLO


def _write(path, n):
    return write_once(path, lambda: path.write_text(str(n)))


def test_a_cache_entry_is_written_once_by_whichever_process_comes_first(tmp_path):
    path = tmp_path / "entry.txt"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        written = pool.starmap(_write, [(path, n) for n in range(8)])
    assert sum(written) == 1 and path.read_text() in {str(n) for n in range(8)}
    assert (tmp_path / LOCK_NAME).exists()


def test_the_closed_form_refuses_the_adapter_fits_settings(tmp_path):
    result = CliRunner().invoke(app, ["apply", "--target", "open_clip:ViT-S-32", "--bank", str(tmp_path / "b.bank"),
                                      "--terms", "a:+1", "--dtype", "bfloat16", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "folds the bank into the weights without a forward pass" in result.output


def test_a_world_is_built_on_the_cpu_in_float32(tmp_path):
    result = CliRunner().invoke(app, ["world", "build", "--profile", "tiny", "--dtype", "bfloat16"])
    assert result.exit_code == 2 and "a world is built on the cpu in float32" in result.output
