"""The command line on real architectures with random weights (issue 12): refusals are one line and
write nothing; solve then apply on one random-weight spec round-trips; bad fine-tunes are named."""

import warnings

import pytest
import torch
from conftest import get_model, tiny_hf
from safetensors.torch import save_file
from test_measure_transfer import PROMPTS, perturbed_state, probes_n
from typer.testing import CliRunner

from platonic import Descriptor, InvalidInputError, ProbeGrid
from platonic.cli import app
from platonic.models import load_model


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def one_line_error(result, match):
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output and match in lines[0], lines[0]


def test_solve_refuses_a_tokenizer_that_cannot_encode_the_prompts(tmp_path):
    with pytest.warns(UserWarning, match="has none; load it with tokenizer="):
        tiny_hf("clip").save(tmp_path / "exp", {})  # its tokenizer is a plain callable: not saved
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = load_model(str(tmp_path / "exp"))  # transformers builds an empty-vocabulary tokenizer for it
    with pytest.raises(InvalidInputError, match="cannot encode them"):
        bare.encode_texts(PROMPTS)
    probes = probes_n(3)
    save_file({"probes": probes}, str(tmp_path / "probes.safetensors"))
    grid = ProbeGrid.from_probes("toy", PROMPTS, probes)
    Descriptor(torch.randn(grid.shape), grid).save(tmp_path / "toy.utd")
    result = run("solve", tmp_path / "toy.utd", "--target", tmp_path / "exp", "--probes", tmp_path / "probes.safetensors",
                 "-o", tmp_path / "exp.bank")
    one_line_error(result, "unknown tokens only")
    assert not (tmp_path / "exp.bank").exists()


def test_solve_then_apply_on_a_random_spec_round_trips(tmp_path):
    """`solve` and `apply` on one random-weight spec see one model, so apply is not refused; a huge alpha is."""
    source = get_model("open_clip:ViT-S-32")
    save_file(perturbed_state(source, scale=0.2), str(tmp_path / "ft.safetensors"))
    save_file({"probes": probes_n(4)}, str(tmp_path / "probes.safetensors"))
    assert run("measure", "--model", "open_clip:ViT-S-32", "--finetuned", tmp_path / "ft.safetensors", "--task", "toy",
               "--probes", tmp_path / "probes.safetensors", "--classes", "cat,dog", "-o", tmp_path / "toy.utd").exit_code == 0
    target = "open_clip:ViT-S-32@seed=7"
    result = run("solve", tmp_path / "toy.utd", "--target", target, "-o", tmp_path / "t.bank")
    assert result.exit_code == 0, result.output
    result = run("apply", "--target", target, "--bank", tmp_path / "t.bank", "--terms", "toy:+1",
                 "-o", tmp_path / "edited.safetensors")
    assert result.exit_code == 0, result.output
    result = run("apply", "--target", target, "--bank", tmp_path / "t.bank", "--terms", "toy:+1", "--alpha", "1e30",
                 "-o", tmp_path / "huge.safetensors")
    one_line_error(result, "times their norm")
    assert not (tmp_path / "huge.safetensors").exists()


def test_apply_refuses_to_write_over_its_own_target_checkpoint(tmp_path):
    model = get_model("open_clip:ViT-S-32")
    ckpt = tmp_path / "t.safetensors"
    save_file({k: v.contiguous() for k, v in model.module.state_dict().items()}, str(ckpt))
    before = ckpt.read_bytes()
    result = run("apply", "--target", f"open_clip:ViT-S-32@{ckpt}", "--bank", tmp_path / "any.bank", "--terms", "toy:+1",
                 "-o", ckpt)
    one_line_error(result, "also an input")
    assert ckpt.read_bytes() == before


def test_measure_refuses_to_write_an_all_zero_descriptor(tmp_path):
    pre = get_model("open_clip:ViT-S-32")
    same = {k: v.contiguous() for k, v in pre.module.state_dict().items() if k.startswith("visual.")}
    save_file(same, str(tmp_path / "same.safetensors"))  # a "fine-tune" that is the pre-trained tower
    save_file({"probes": probes_n(2)}, str(tmp_path / "probes.safetensors"))
    result = run("measure", "--model", "open_clip:ViT-S-32", "--finetuned", tmp_path / "same.safetensors", "--task", "toy",
                 "--probes", tmp_path / "probes.safetensors", "--classes", "cat,dog", "-o", tmp_path / "zero.utd")
    one_line_error(result, "changed nothing on these probes")
    assert not (tmp_path / "zero.utd").exists()


def test_anchored_solve_on_the_command_line_records_the_pool(tmp_path):
    """`solve --solve anchored --anchor-images DIR`: a folder of unlabeled images, loaded like probe images;
    the bank's operators record the kind, weight and pool digest, and `inspect` shows the kind."""
    from PIL import Image

    from platonic import OperatorBank

    probes = probes_n(4)
    save_file({"probes": probes}, str(tmp_path / "probes.safetensors"))
    grid = ProbeGrid.from_probes("toy", PROMPTS, probes)
    Descriptor(0.01 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(0)), grid).save(tmp_path / "toy.utd")
    pool = tmp_path / "pool"
    pool.mkdir()
    g = torch.Generator().manual_seed(5)
    for i in range(3):
        Image.fromarray(torch.randint(0, 256, (40, 60, 3), dtype=torch.uint8, generator=g).numpy()).save(pool / f"{i}.png")
    result = run("solve", tmp_path / "toy.utd", "--target", "open_clip:ViT-S-32", "--probes", tmp_path / "probes.safetensors",
                 "--solve", "anchored", "--anchor-images", pool, "--anchor-weight", "2", "-o", tmp_path / "a.bank")
    assert result.exit_code == 0, result.output
    assert "anchored w=2" in result.output
    (op,) = list(OperatorBank.load(tmp_path / "a.bank"))
    assert op.solve_record["kind"] == "anchored" and op.solve_record["anchor_weight"] == 2.0
    assert op.solve_record["n_anchor"] == 3 and len(op.solve_record["anchor_digest"]) == 64
    result = run("solve", tmp_path / "toy.utd", "--target", "open_clip:ViT-S-32", "--probes", tmp_path / "probes.safetensors",
                 "--solve", "anchored", "--anchor-images", tmp_path / "nopool", "-o", tmp_path / "b.bank")
    one_line_error(result, "--anchor-images")
    assert not (tmp_path / "b.bank").exists()
