"""The audio world's models on labelled sound folders (issue 15 item 3): `platonic finetune world:audio/NAME`
and a YAML setup of world:audio models through `platonic experiment addition`; clips are the models' 1 s."""

import json
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from platonic.cli import app
from platonic.models.audio import CANONICAL_RATE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import sound_folder  # noqa: E402


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def test_finetune_and_an_experiment_on_audio_world_models_read_sound_folders(tiny_audio_world, tmp_path):
    sound_folder(tmp_path / "data" / "pitch", {"train": 3, "test": 2})
    sound_folder(tmp_path / "data" / "tempo", {"train": 3, "test": 2}, seconds=(0.3, 1.4))  # longer than 1 s: cut
    out = tmp_path / "ft-wav"
    result = run("finetune", "world:audio/wav", "--task", f"pitch={tmp_path / 'data' / 'pitch'}", "--mode", "lora",
                 "--steps", 2, "--batch-size", 3, "--lr", 1e-2, "-o", out)
    assert result.exit_code == 0, result.output
    record = json.loads((out / "finetune.json").read_text())
    assert record["data"]["clip_samples"] == CANONICAL_RATE and record["adapter_max_abs_error"] < 1e-5

    setup = {"name": "audio world models", "models": {"cnn": "world:audio/cnn", "ast": "world:audio/ast-s"},
             "tasks": {"pitch": {"data": "data/pitch"}, "tempo": {"data": "data/tempo"}},
             "controls": {"others": {"data": "data/pitch/test"}},
             "finetune": {"mode": "lora", "steps": 1, "batch_size": 3, "lr": 1e-3}}
    (tmp_path / "setup.yaml").write_text(yaml.safe_dump(setup))
    result = run("experiment", "addition", "--setup", tmp_path / "setup.yaml", "-o", tmp_path / "run", "--no-plots")
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["setup"]["tasks"]["tempo"] == {"classes": 2, "probes": 6, "test": 4}
    assert any(c["experiment"] == "addition" and c["method"] == "closed_form" for c in results["cells"])

    mixed = {**setup, "models": {"cnn": "world:audio/cnn", "vit": "open_clip:ViT-S-32"}}
    (tmp_path / "mixed.yaml").write_text(yaml.safe_dump(mixed))
    result = run("experiment", "addition", "--setup", tmp_path / "mixed.yaml", "-o", tmp_path / "run2", "--no-plots")
    assert result.exit_code != 0 and "mixes modalities (audio-text: cnn; image-text: vit)" in result.output
