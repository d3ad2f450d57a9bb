"""`platonic finetune MODEL --task NAME=SOURCE --mode lora|full|attention -o DIR` (issue 14 item 3): the
directory is written, reloaded as a source and measured, on a random-weight open_clip model."""

import json

import pytest
import torch
from tiny_models import get_model
from PIL import Image
from typer.testing import CliRunner

from platonic.cli import app
from platonic.finetuning import load_finetuned
from platonic.measurement import measure

datasets = pytest.importorskip("datasets")
SPEC = "open_clip:ViT-S-32"


@pytest.fixture
def hf_task(tmp_path):
    """A tiny labelled data set saved to disk: 3 classes, 4 train and 2 test images each."""
    g = torch.Generator().manual_seed(0)
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["red", "green", "blue"])})
    parts = {}
    for split, per_class in (("train", 4), ("test", 2)):
        images, labels = [], []
        for k in range(3):
            for _ in range(per_class):
                base = torch.zeros(3, 1, 1)
                base[k] = 200
                x = (base + 30 * torch.randn(3, 40, 48, generator=g)).clamp(0, 255).to(torch.uint8)
                images.append(Image.fromarray(x.permute(1, 2, 0).numpy()))
                labels.append(k)
        parts[split] = datasets.Dataset.from_dict({"image": images, "label": labels}, features=features)
    datasets.DatasetDict(parts).save_to_disk(str(tmp_path / "colours"))
    return f"colours=hf:{tmp_path / 'colours'}"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_finetune_writes_a_source_that_reloads_and_measures(tmp_path, hf_task, mode):
    out = tmp_path / f"ft-{mode}"
    result = run("finetune", SPEC, "--task", hf_task, "--mode", mode, "--steps", 2, "--batch-size", 4, "--lr", 1e-3,
                 "--orthoreg", 0.1, "-o", out)
    assert result.exit_code == 0, result.output
    record = json.loads((out / "finetune.json").read_text())
    assert record["mode"] == mode and record["config"]["orthoreg"] == 0.1 and len(record["losses"]) == 2
    assert record["data"]["images"] == 12 and len(record["data"]["data_digest"]) == 64
    assert record["data"]["prompts"] == ["a photo of a red.", "a photo of a green.", "a photo of a blue."]
    if mode == "lora":
        assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
        assert record["adapter_max_abs_error"] < 1e-5, "the refactored adapter merges back to the fine-tune"
    else:
        assert (out / "model.safetensors").is_file() and record["changed_tensors"]
    pre = get_model(SPEC)
    ft = load_finetuned(pre, out)
    changed = [k for k, v in ft.module.state_dict().items() if not torch.equal(v, pre.module.state_dict()[k])]
    assert changed, "the reloaded fine-tune differs from the pre-trained model"
    probes = torch.randint(0, 256, (4, 3, 224, 224), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    desc = measure(pre, out, probes, record["data"]["prompts"], "colours", progress=False)
    assert desc.matrix.shape == (4, 3) and desc.norm() > 0
    # the command line measures it as a source too
    torch.save  # noqa: B018 - (no pickle is written: probes go through safetensors)
    from safetensors.torch import save_file

    save_file({"probes": probes}, str(tmp_path / "probes.safetensors"))
    result = run("measure", "--model", SPEC, "--finetuned", out, "--task", "colours", "--probes",
                 tmp_path / "probes.safetensors", "--classes", "red,green,blue", "-o", tmp_path / f"{mode}.utd")
    assert result.exit_code == 0, result.output


def test_finetune_refuses_bad_input_in_one_line(tmp_path, hf_task):
    result = run("finetune", SPEC, "--task", "nosuchtask", "-o", tmp_path / "x")
    assert result.exit_code != 0 and "unknown task 'nosuchtask'; the registry knows" in result.output
    result = run("finetune", SPEC, "--task", hf_task, "--mode", "linear", "-o", tmp_path / "x")
    assert result.exit_code != 0 and "choose lora, full or attention" in result.output
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    result = run("finetune", SPEC, "--task", hf_task, "-o", tmp_path / "taken")
    assert result.exit_code != 0 and "not a previous platonic fine-tune directory" in result.output
    assert all(len(line) for line in result.output.strip().splitlines()[:1])


def test_finetune_runs_epochs_at_a_constant_lr_as_the_papers_sources(tmp_path, hf_task):
    out = tmp_path / "ft-epochs"
    result = run("finetune", SPEC, "--task", hf_task, "--mode", "lora", "--epochs", 1, "--batch-size", 4,
                 "--schedule", "constant", "-o", out)
    assert result.exit_code == 0, result.output
    record = json.loads((out / "finetune.json").read_text())
    assert record["config"]["schedule"] == "constant" and record["config"]["epochs"] == 1
    assert len(record["losses"]) == 3  # one pass over the 12 train images at batch 4
    for args, message in ((("--steps", 2, "--epochs", 1), "steps or epochs"), (("--schedule", "linear"), "schedule")):
        result = run("finetune", SPEC, "--task", hf_task, *args, "-o", tmp_path / "x")
        assert result.exit_code != 0 and message in result.output, result.output
        assert "Traceback" not in result.output
