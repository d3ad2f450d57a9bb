"""`platonic finetune` on audio-text models with a sound folder (issue 15 item 3): a random-weight
transformers CLAP saved as a directory through the CLI (full and LoRA), and the audio world's zoo
architectures (seeded initial weights, no world build) through `finetune_on_task`, LoRA on their own
`lora_target_modules`."""

import json
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import clip_tokenizer, tiny_hf
from typer.testing import CliRunner

from platonic.cli import app
from platonic.data.resolve import open_task
from platonic.finetuning.training import FinetuneConfig
from platonic.finetuning.output import finetune_on_task
from platonic.finetuning import load_finetuned
from platonic.models import load_model
from platonic.models.audio import CANONICAL_RATE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import sound_folder  # noqa: E402


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def clap_dir(tmp_path_factory):
    """A tiny random-weight ClapModel written as a transformers directory (a spec the CLI loads)."""
    path = tmp_path_factory.mktemp("clap") / "tiny-clap"
    torch.manual_seed(0)
    tiny_hf("clap", tokenizer=clip_tokenizer()).save(path)
    return path


@pytest.fixture(scope="module")
def tones(tmp_path_factory):
    return sound_folder(tmp_path_factory.mktemp("data") / "tones")


@pytest.mark.parametrize("mode", ["lora", "full"])
def test_finetune_on_a_sound_folder_writes_a_clap_source_that_reloads(tmp_path, clap_dir, tones, mode):
    out = tmp_path / f"clap-{mode}"
    result = run("finetune", clap_dir, "--task", f"tones={tones}", "--mode", mode, "--steps", 2, "--batch-size", 3,
                 "--lr", 1e-3, "--template", "the sound of a {} tone.", "-o", out)
    assert result.exit_code == 0, result.output
    assert "(6 train clips, 2 steps" in result.output
    record = json.loads((out / "finetune.json").read_text())
    data = record["data"]
    assert data["modality"] == "audio" and data["clips"] == 6 and data["sample_rate"] == CANONICAL_RATE
    assert data["clip_samples"] == round(0.5 * CANONICAL_RATE)  # CLAP takes any length: the longest clip (0.5 s)
    assert data["prompts"] == ["the sound of a high tone.", "the sound of a low tone."]
    pre = load_model(str(clap_dir))
    if mode == "lora":
        config = json.loads((out / "adapter_config.json").read_text())
        assert set(config["target_modules"]) == set(pre.lora_target_modules) == {"query", "value"}
        assert record["adapter_max_abs_error"] < 1e-5
        assert all("batch_norm.running" in b for b in data["restored_buffers"])  # train mode moved them; restored
    else:
        assert (out / "model.safetensors").is_file() and record["changed_tensors"]
    ft = load_finetuned(pre, out)
    before, after = pre.module.state_dict(), ft.module.state_dict()
    assert any(not torch.equal(after[k], before[k]) for k in before), "the reloaded fine-tune differs"


def test_an_image_model_refuses_a_sound_folder_and_an_audio_model_an_image_folder(tmp_path, clap_dir, tones):
    import numpy as np
    from PIL import Image

    result = run("finetune", "open_clip:ViT-S-32", "--task", f"tones={tones}", "--steps", 1, "-o", tmp_path / "x")
    assert result.exit_code != 0 and "holds sound clips, but open_clip:ViT-S-32 is an image-text model" in result.output
    for split in ("train", "test"):
        for label in ("cat", "dog"):  # two classes: a one-class task is refused before the model loads
            folder = tmp_path / "pics" / split / label
            folder.mkdir(parents=True)
            Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(folder / "0.png")
    result = run("finetune", clap_dir, "--task", f"pics={tmp_path / 'pics'}", "--steps", 1, "-o", tmp_path / "y")
    assert result.exit_code != 0 and "holds images, but" in result.output and "audio-text model" in result.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.parametrize("name", ["cnn", "ast-s", "ast-l", "wav"])
def test_audio_world_architectures_fine_tune_with_lora_on_their_own_targets(tmp_path, tones, name):
    from platonic.world.audio import zoo

    spec = zoo.SPECS[name]
    model = zoo.model_from_state(spec, zoo.build_module(spec, spec.seed).state_dict(), f"test:audio/{name}")
    assert model.canonical_seconds == 1.0
    task = open_task("tones", tones, template="the sound of a {} tone.")
    config = FinetuneConfig(mode="lora", steps=2, batch_size=3, lr=1e-2)
    ft, record = finetune_on_task(model, task, config, tmp_path / name, progress=False)
    assert record["data"]["clip_samples"] == CANONICAL_RATE  # the model's own 1 s, not the data's 0.5 s
    adapter = json.loads((tmp_path / name / "adapter_config.json").read_text())
    assert set(adapter["target_modules"]) == set(model.lora_target_modules) == set(spec.lora_targets)
    assert record["adapter_max_abs_error"] < 1e-5
    reloaded = load_finetuned(model, tmp_path / name)
    clips = task.split("test").decode(seconds=1.0)
    assert torch.allclose(reloaded.encode_audio(clips), ft.encode_audio(clips), atol=1e-4)
    assert not torch.allclose(ft.encode_audio(clips), model.encode_audio(clips))
