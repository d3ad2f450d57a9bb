"""bfloat16 autocast end to end on the CPU (issue 36): finetune -> measure -> solve -> apply (both routes)
runs, and stays within stated tolerances of float32 on descriptors and on edited accuracy.

Tolerances, and why. bfloat16 keeps 8 significant bits: an image-prompt affinity in [-1, 1] comes back
with an error of a few 1e-3 (the tower's matrix products are rounded all the way up), and a descriptor
entry is the difference of two such affinities (fine-tuned minus pre-trained), so it carries that error
in absolute terms, whatever its own size. We bound it at 5e-3 per entry and ask the descriptor to point
the same way (cosine >= 0.999) for a fine-tune that moves affinities by about 0.1; a fine-tune that
moves them by 0.02 keeps a cosine near 0.998 (docs/scale.md). Edited accuracy (the toy setup's
addition and negation grids, test sets of 300 items, one item = 0.33 points; the bfloat16 fine-tunes
are the end-to-end test's): bfloat16
moves only predictions at the decision boundary, so the mean change over every accuracy stays under
0.5 points and no single accuracy moves by more than 2 points (6 items).
"""

import warnings

import pytest
import torch
from launching import save_tiny_pair
from image_folders import write_image_folder
from typer.testing import CliRunner

from platonic.cli import app
from platonic.compute import Compute, using
from platonic.descriptor import Descriptor
from platonic.experiments.run import run_experiments
from platonic.experiments.setups import toy_setup
from platonic.measurement import measure
from platonic.models import load_model

pytestmark = pytest.mark.slow
ENTRY_TOLERANCE = 5e-3
COSINE = 0.999
MEAN_POINTS, MAX_POINTS = 0.5, 2.0


def invoke(*args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_bfloat16_runs_finetune_measure_solve_and_apply_end_to_end_on_the_cpu(tmp_path):
    save_tiny_pair(tmp_path / "a", tmp_path / "b")
    write_image_folder(tmp_path / "reds", ("crimson", "scarlet"), {"train": 6, "test": 3}, 0)
    narrow = ["--dtype", "bfloat16"]
    invoke("finetune", tmp_path / "a", "--task", f"reds={tmp_path / 'reds'}", "--mode", "attention", "--steps", 3,
           "--batch-size", 4, "--lr", 1e-2, "-o", tmp_path / "ft", *narrow)
    probes, prompts = tmp_path / "reds" / "train", ["--classes", "crimson,scarlet"]
    for dtype in ("float32", "bfloat16"):
        invoke("measure", "--model", tmp_path / "a", "--finetuned", tmp_path / "ft", "--task", "reds", "--probes", probes,
               *prompts, "--dtype", dtype, "-o", tmp_path / f"{dtype}.utd")
    wide, low = (Descriptor.load(tmp_path / f"{d}.utd").matrix for d in ("float32", "bfloat16"))
    assert float((wide - low).abs().max()) < ENTRY_TOLERANCE
    invoke("solve", tmp_path / "bfloat16.utd", "--target", tmp_path / "b", "--probes", probes, "-o", tmp_path / "b.bank",
           *narrow)
    invoke("apply", "--target", tmp_path / "b", "--bank", tmp_path / "b.bank", "--terms", "reds:+1", "-o", tmp_path / "cf")
    invoke("apply", "--route", "adapter", "--target", tmp_path / "b", "--descriptors", tmp_path / "bfloat16.utd",
           "--probes", probes, "--terms", "reds:+1", "--max-steps", 3, "--batch-size", 4, "-o", tmp_path / "ad", *narrow)
    assert (tmp_path / "cf" / "config.json").is_file() and (tmp_path / "ad" / "config.json").is_file()
    assert (tmp_path / "ad.adapter" / "adapter_model.safetensors").is_file()


def test_bfloat16_descriptors_stay_within_the_tolerance_of_float32(tmp_path):
    save_tiny_pair(tmp_path / "a", tmp_path / "b")
    write_image_folder(tmp_path / "reds", ("crimson", "scarlet"), {"train": 6}, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pre = load_model(str(tmp_path / "a"))
    ft = pre.copy_for_new_weights()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():  # a fine-tune that moves affinities by about 0.1
        for p in ft.tower.parameters():
            p.add_(0.3 * (p.std() if p.numel() > 1 else p.abs()) * torch.randn(p.shape, generator=g))
    got = {}
    for dtype in (None, "bfloat16"):
        with using(Compute(dtype=dtype)):
            got[dtype] = measure(pre, ft, tmp_path / "reds", ["a photo of crimson.", "a photo of scarlet."], "reds",
                                 progress=False).matrix.double()
    wide, low = got[None], got["bfloat16"]
    assert float(wide.abs().max()) > 0.05
    assert float((wide - low).abs().max()) < ENTRY_TOLERANCE
    assert float(wide.flatten() @ low.flatten() / (wide.norm() * low.norm())) > COSINE


def test_bfloat16_edited_accuracy_stays_within_the_tolerance_of_float32():
    cells = {}
    for dtype in (None, "bfloat16"):
        with using(Compute(dtype=dtype)):
            cells[dtype] = run_experiments(toy_setup(), ["addition", "negation"], progress=False, plots=False,
                                           trained_baselines=False)["cells"]
    changes = [100 * abs(a["accuracy"][k] - b["accuracy"][k]) for a, b in zip(cells[None], cells["bfloat16"])
               for k in a["accuracy"]]
    assert len(changes) > 1000 and [c["method"] for c in cells[None]] == [c["method"] for c in cells["bfloat16"]]
    assert sum(changes) / len(changes) < MEAN_POINTS and max(changes) < MAX_POINTS
