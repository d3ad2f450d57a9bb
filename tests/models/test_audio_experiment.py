"""A YAML / option experiment setup on audio-text models with sound folders (issue 15 item 3): probes,
test, val and controls are canonical clips; `platonic experiment addition` runs on two tiny CLAPs."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile
import torch
import yaml
from tiny_models import clip_tokenizer, tiny_hf
from typer.testing import CliRunner

from platonic import InvalidInputError
from platonic.cli import app
from platonic.experiments.setups import config_from_options, input_form
from platonic.models.audio import CANONICAL_RATE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import RATE, sound_folder, tone  # noqa: E402


@pytest.fixture(scope="module")
def audio_world_on_disk(tmp_path_factory):
    """Two tiny random-weight CLAPs (other seeds) as transformers directories, two sound tasks (one with a
    val split), and a control folder without split folders."""
    root = tmp_path_factory.mktemp("audio-setup")
    for seed in (0, 1):
        torch.manual_seed(seed)
        tiny_hf("clap", tokenizer=clip_tokenizer()).save(root / f"clap{seed}")
    sound_folder(root / "data" / "pitch", {"train": 3, "val": 1, "test": 2})
    sound_folder(root / "data" / "tempo", {"train": 3, "test": 2}, rate=RATE, seconds=(0.3, 0.6))
    for cls, freq in (("hum", 100.0), ("beep", 3000.0), ("chirp", 1200.0)):
        (root / "data" / "others" / cls).mkdir(parents=True)
        for i in range(2):
            soundfile.write(root / "data" / "others" / cls / f"{i}.ogg", tone(freq, 0.4), RATE)
    return root


def test_experiment_addition_runs_on_audio_models_and_sound_folders(audio_world_on_disk):
    root = audio_world_on_disk
    setup = {"name": "two tiny claps", "models": {"a": "clap0", "b": "clap1"},
             "tasks": {t: {"data": f"data/{t}", "template": "the sound of a {} tone."} for t in ("pitch", "tempo")},
             "controls": {"others": {"data": "data/others"}},
             "finetune": {"mode": "lora", "steps": 1, "batch_size": 3, "lr": 1e-3},
             "probes_per_class": 2}
    (root / "setup.yaml").write_text(yaml.safe_dump(setup))
    out = root / "run"
    result = CliRunner().invoke(app, ["experiment", "addition", "--setup", str(root / "setup.yaml"), "-o", str(out),
                                      "--no-plots"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert set(results["setup"]["models"]) == {"a", "b"}
    assert results["setup"]["tasks"]["pitch"] == {"classes": 2, "probes": 4, "test": 4}
    assert results["setup"]["controls"]["others"] == {"classes": 3, "test": 6}
    cells = [c for c in results["cells"] if c["experiment"] == "addition" and c["method"] == "closed_form"]
    assert cells and all(c["target"] not in c["sources"] for c in cells)


def test_an_audio_setup_builds_clips_for_probes_val_test_and_controls(audio_world_on_disk, monkeypatch):
    from platonic.experiments.setups import data as data_module
    from platonic.experiments.setups import yaml as config_module

    root = audio_world_on_disk
    config = config_from_options([f"a={root / 'clap0'}", f"b={root / 'clap1'}"], [f"pitch={root / 'data' / 'pitch'}"],
                                 [f"others={root / 'data' / 'others'}"], [], task_arithmetic=True)  # no sources needed
    calls = {}
    real = data_module.read_task

    def spy(name, cfg, size, cfg_all, **form):
        calls[name] = spec, train = real(name, cfg, size, cfg_all, **form)
        return spec, train

    monkeypatch.setattr(data_module, "read_task", spy)
    monkeypatch.setattr(config_module, "measure_on_grids", lambda *a, **k: ({}, {}))  # the data only
    monkeypatch.setattr(config_module, "descriptor_cosines", lambda *a, **k: {})
    setup = config_module.config_setup(config, progress=False)
    spec, (lazy, labels) = calls["pitch"]
    longest = round(0.5 * CANONICAL_RATE)  # CLAP takes any length: each split's longest clip (0.5 s)
    assert spec.probes.dtype == torch.float32 and spec.probes.shape == (6, longest)  # 30 per class: all 6
    assert spec.prompts == ("this is a sound of high.", "this is a sound of low.")  # sound's default template
    assert spec.test.inputs.shape == (4, longest) and spec.val.inputs.shape == (2, longest)
    assert setup.controls["others"].inputs.shape == (6, round(0.4 * CANONICAL_RATE))
    assert lazy.shape == (6, longest) and labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert np.isfinite(spec.probes.numpy()).all() and spec.probes.abs().max() > 0


def test_setups_refuse_mixed_modalities_and_clip_lengths():
    image = SimpleNamespace(modality="image", canonical_size=224, canonical_seconds=None)
    clap = SimpleNamespace(modality="audio", canonical_size=224, canonical_seconds=None)
    world = SimpleNamespace(modality="audio", canonical_size=224, canonical_seconds=1.0)
    other = SimpleNamespace(modality="audio", canonical_size=224, canonical_seconds=2.0)
    assert input_form({"clap": clap}) == ("audio", 224, None)
    assert input_form({"clap": clap, "cnn": world}) == ("audio", 224, 1.0)  # CLAP takes the world's 1 s too
    with pytest.raises(InvalidInputError, match=r"mixes modalities \(audio-text: clap; image-text: vit\)"):
        input_form({"vit": image, "clap": clap})
    with pytest.raises(InvalidInputError, match="different lengths"):
        input_form({"cnn": world, "long": other})
