"""Data parallel in a launch of two CPU processes (issue 36): `platonic finetune`, `measure` and the adapter
route give what one process gives, and the launch that accelerate's --cpu flag cannot make is refused.

Tolerances. Two processes sum each batch's gradient from two shards, one process from one: the same
numbers in another order, so float32 rounding differs in the last bits and AdamW, which divides by
the gradient's running RMS, carries the difference on. We compare the weights to 1e-5 (absolute;
the weights are O(0.1) and a step moves them by about the lr, 1e-3: 1e-5 is 1% of one step): a
wrong shard or a gradient counted twice moves them by a whole step. Features are per row and each
process encodes whole batches of the batch size one process uses, so the cached features must be
bit-identical.

The attention fine-tune (ATT-FT) is compared rather than a full one: a full fine-tune also trains the
attention's key biases, whose gradient is exactly zero (softmax ignores a shift of all keys), so
what AdamW sees there is rounding noise, which it scales up to a full step whatever the order.
"""

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from launching import environment, launch_command, run, save_tiny_pair
from safetensors.torch import load_file
from image_folders import write_image_folder
from typer.testing import CliRunner

from platonic.cli import app
from platonic.descriptor import Descriptor

pytestmark = pytest.mark.slow
WEIGHTS_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random-weight transformers CLIP (hidden size 32) saved as a local directory, another draw of it (a
    "fine-tune" of the first, as a model spec), and an image-folder task."""
    root = tmp_path_factory.mktemp("tiny")
    save_tiny_pair(root / "tiny-clip", root / "tiny-clip-other")
    write_image_folder(root / "reds", ("crimson", "scarlet"), {"train": 6, "test": 3}, 0)
    return root


def test_a_two_process_finetune_equals_one_process_with_the_same_global_batch(tiny, tmp_path):
    args = ["finetune", tiny / "tiny-clip", "--task", f"reds={tiny / 'reds'}", "--mode", "attention", "--steps", 6,
            "--batch-size", 4, "--lr", 1e-3, "--orthoreg", 0.1]
    run([*args, "-o", tmp_path / "one"])
    run([*args, "-o", tmp_path / "two"], processes=2)
    one, two = load_file(str(tmp_path / "one" / "model.safetensors")), load_file(str(tmp_path / "two" / "model.safetensors"))
    assert one.keys() == two.keys() and len(one) == 8  # q, k, v, out of two blocks
    assert max(float((one[k] - two[k]).abs().max()) for k in one) < WEIGHTS_TOLERANCE
    records = [json.loads((tmp_path / d / "finetune.json").read_text()) for d in ("one", "two")]
    assert records[1]["compute"] == {"dtype": None, "processes": 2} and "compute" not in records[0]
    assert records[0]["losses"] == pytest.approx(records[1]["losses"], abs=1e-5)


def test_a_two_process_measure_fills_the_cache_with_the_features_of_one_process(tiny, tmp_path, monkeypatch):
    ft = tiny / "tiny-clip-other"
    caches = {}
    for processes in (1, 2):
        caches[processes] = tmp_path / f"cache{processes}"
        monkeypatch.setenv("PLATONIC_CACHE", str(caches[processes]))
        run(["measure", "--model", tiny / "tiny-clip", "--finetuned", ft, "--task", "reds", "--probes",
             tiny / "reds" / "train" / "crimson", "--classes", "crimson,scarlet", "--batch-size", 2,
             "-o", tmp_path / f"m{processes}.utd"], processes=processes)
    files = sorted(p.name for p in (caches[1] / "embeddings").glob("*.safetensors"))
    assert len(files) == 3 and files == sorted(p.name for p in (caches[2] / "embeddings").glob("*.safetensors"))
    for name in files:  # 6 probes in batches of 2: process 0 encodes batch 0, process 1 batches 1 and 2
        one, two = load_file(str(caches[1] / "embeddings" / name)), load_file(str(caches[2] / "embeddings" / name))
        assert all(torch.equal(one[k], two[k]) for k in one)
    assert torch.equal(Descriptor.load(tmp_path / "m1.utd").matrix, Descriptor.load(tmp_path / "m2.utd").matrix)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process's threads from /proc")
def test_a_launched_process_ends_with_no_thread_of_its_process_group_left(tmp_path):
    """A command joins the launch, then imports a transformers model module (which imports torch.distributed.nn,
    through FSDP); at exit, once platonic has left the group, none of gloo's threads may be left for the
    interpreter's shutdown (where a process now and then aborted after its work was done)."""
    script = tmp_path / "ends.py"
    script.write_text(textwrap.dedent("""
        import atexit, os
        from pathlib import Path

        # registered before the launch is joined, so it runs after platonic leaves the group; the file is named
        # now, as a default, since the launcher's runpy takes __file__ away before exit
        def threads(out=Path(__file__).with_name(f"threads-{os.environ['RANK']}.txt")):
            names = sorted(Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task"))
            out.write_text(" ".join(names))

        atexit.register(threads)
        from platonic.distributed import join

        group = join("cpu")
        import transformers.models.clip.modeling_clip  # noqa: F401
        assert group.any(True)
    """))
    done = subprocess.run(launch_command([str(script)], 2), env=environment(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ends = {rank: (tmp_path / f"threads-{rank}.txt").read_text() for rank in (0, 1)}  # one file each: no interleaving
    assert all(ends.values()) and not any("gloo" in names for names in ends.values()), ends


def test_accelerates_cpu_flag_which_starts_one_process_is_refused_with_the_command_that_works(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")  # what `accelerate launch --cpu --num_processes 2` leaves
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    result = CliRunner().invoke(app, ["finetune", "open_clip:ViT-S-32", "--task", "x", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "accelerate launch --multi_gpu --num_processes N -m platonic.cli" in result.output


def test_a_two_process_adapter_fit_equals_one_process(tiny, tmp_path):
    """The adapter route's fit is data parallel too: the adapter of a 2-process launch equals one process's (1e-5)."""
    descriptor = tmp_path / "d.utd"
    result = CliRunner().invoke(app, ["measure", "--model", str(tiny / "tiny-clip"), "--finetuned",
                                      str(tiny / "tiny-clip-other"), "--task", "reds", "--probes",
                                      str(tiny / "reds" / "train"), "--classes", "crimson,scarlet", "-o", str(descriptor)])
    assert result.exit_code == 0, result.output
    args = ["apply", "--route", "adapter", "--target", tiny / "tiny-clip-other", "--descriptors", descriptor,
            "--probes", tiny / "reds" / "train", "--terms", "reds:+1", "--max-steps", 4, "--batch-size", 4]
    run([*args, "-o", tmp_path / "one"])
    run([*args, "-o", tmp_path / "two"], processes=2)
    one, two = (load_file(str(tmp_path / f"{d}.adapter" / "adapter_model.safetensors")) for d in ("one", "two"))
    assert one.keys() == two.keys() and len(one) == 8  # LoRA A and B on q and v of two blocks
    assert max(float((one[k] - two[k]).abs().max()) for k in one) < WEIGHTS_TOLERANCE
