"""The CLI over real architectures: measure -> solve -> apply -> a checkpoint open_clip loads by itself."""

import json
import logging
import warnings

import torch
from tiny_models import get_model
from PIL import Image
from safetensors import safe_open
from safetensors.torch import save_file
from test_measure_transfer import perturbed_state
from typer.testing import CliRunner

from platonic.cli import app


def run(*args):
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_measure_solve_apply_round_trip(tmp_path):
    source = get_model("open_clip:ViT-S-32")
    src_file, ft_file, tgt_file = tmp_path / "src.safetensors", tmp_path / "ft.safetensors", tmp_path / "tgt.safetensors"
    save_file({k: v.contiguous() for k, v in source.module.state_dict().items()}, str(src_file))
    save_file(perturbed_state(source, scale=0.2), str(ft_file))
    target = get_model("open_clip:RN50")
    save_file({k: v.contiguous() for k, v in target.module.state_dict().items()}, str(tgt_file))
    folder = tmp_path / "probes"
    folder.mkdir()
    g = torch.Generator().manual_seed(0)
    for i in range(6):
        pixels = torch.randint(0, 256, (40, 60, 3), dtype=torch.uint8, generator=g).numpy()
        Image.fromarray(pixels).save(folder / f"{i}.png")

    code, out = run("measure", "--model", f"open_clip:ViT-S-32@{src_file}", "--finetuned", ft_file, "--task", "toy",
                    "--probes", folder, "--classes", "cat,dog,bird", "-o", tmp_path / "toy.utd")
    assert code == 0, out
    code, out = run("solve", tmp_path / "toy.utd", "--target", f"open_clip:RN50@{tgt_file}", "-o", tmp_path / "rn50.bank")
    assert code == 0, out
    assert "+1*toy@open_clip:ViT-S-32@" in out
    code, out = run("apply", "--target", f"open_clip:RN50@{tgt_file}", "--bank", tmp_path / "rn50.bank",
                    "--terms", "toy:+1", "--alpha", "0.5", "-o", tmp_path / "edited.safetensors")
    assert code == 0, out

    import open_clip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        reloaded = open_clip.create_model("RN50", pretrained=str(tmp_path / "edited.safetensors"))
        logging.disable(logging.NOTSET)
    assert not torch.equal(reloaded.visual.attnpool.c_proj.weight, target.model.visual.attnpool.c_proj.weight)
    with safe_open(str(tmp_path / "edited.safetensors"), framework="pt") as f:
        record = json.loads(f.metadata()["platonic"])
    assert record["edits"][0]["terms"][0]["task"] == "toy" and record["edits"][0]["alpha"] == 0.5


def test_apply_errors_are_clear(tmp_path):
    code, out = run("apply", "--target", "open_clip:NoSuchNet", "--bank", tmp_path / "x", "--terms", "a:+1", "-o", tmp_path / "o")
    assert code == 2 and "open_clip has no architecture 'NoSuchNet'" in out and "Traceback" not in out
    code, out = run("measure", "--model", "bogus", "--finetuned", "x", "--task", "t", "--probes", tmp_path,
                    "--classes", "a,b", "-o", tmp_path / "d.utd")
    assert code == 2 and "error:" in out


def test_parse_terms():
    from platonic.terms import parse_terms

    assert parse_terms("eurosat:+1, dtd:-0.5,svhn@open_clip:ViT-B-32:2") == {"eurosat": 1.0, "dtd": -0.5, "svhn@open_clip:ViT-B-32": 2.0}
    import pytest

    from platonic import InvalidInputError

    with pytest.raises(InvalidInputError, match="not TASK:COEFFICIENT"):
        parse_terms("eurosat")
    with pytest.raises(InvalidInputError, match="is not a number"):
        parse_terms("eurosat:lots")
