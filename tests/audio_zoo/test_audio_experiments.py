"""The audio world's experiments (issue 15, item 4): the paper's protocols on `--setup audio-world`, and a
cross-family check (an audio-world descriptor solved into a random-weight transformers CLAP, folded,
exported and reloaded by transformers alone)."""

import json
import logging
import warnings

import pytest
import torch
from typer.testing import CliRunner

from platonic.errors import InvalidInputError
from platonic.world.audio.tasks import CONTROL_NAMES, HELD_OUT_RELATED, RELATED_GROUP, TASK_NAMES
from platonic.world.audio.zoo import MODEL_NAMES

PROTOCOLS = ("addition", "negation", "generalization")


@pytest.fixture(scope="module")
def audio_setup(tiny_audio_world):
    from platonic.experiments.setups import load_setup

    return load_setup("audio-world")  # the session's tiny audio world ($PLATONIC_WORLD_PROFILE, $PLATONIC_CACHE)


def test_audio_world_setup_describes_the_audio_world(audio_setup, tiny_audio_world):
    assert audio_setup.name.startswith(f"audio world ({tiny_audio_world['path'].name}")
    assert set(audio_setup.models) == set(MODEL_NAMES) and set(audio_setup.tasks) == set(TASK_NAMES)
    assert set(audio_setup.controls) == set(CONTROL_NAMES)
    assert audio_setup.related_group == RELATED_GROUP and audio_setup.held_out == HELD_OUT_RELATED
    assert all(m.modality == "audio" for m in audio_setup.models.values())
    assert set(audio_setup.descriptors) == {(m, t) for m in MODEL_NAMES for t in TASK_NAMES}
    assert {"gradient_ascent", "task_vector", "finetunes"} <= set(audio_setup.baselines)
    probes = audio_setup.tasks["pitch"].probes
    assert probes.dtype == torch.float32 and probes.shape[1] == 16000


def test_audio_world_setup_refuses_unknown_names(tiny_audio_world):
    from platonic.experiments.setups.audio_world import audio_world_setup

    with pytest.raises(InvalidInputError, match="unknown audio world model.*cnn"):
        audio_world_setup(path=tiny_audio_world["path"], models=["vit-a"], progress=False)
    with pytest.raises(InvalidInputError, match="at least two tasks"):
        audio_world_setup(path=tiny_audio_world["path"], tasks=["pitch"], progress=False)


def test_the_papers_protocols_run_on_a_slice_of_the_audio_world_from_the_cli(tiny_audio_world, tmp_path):
    """addition, negation (with the gradient-ascent baseline) and generalisation; two models, the related group,
    the held-out task and one more (the whole tiny world would fine-tune 36 gradient-ascent baselines)."""
    from platonic.cli import app

    runner = CliRunner()
    tasks = [*RELATED_GROUP, HELD_OUT_RELATED, "noise"]
    run = runner.invoke(app, ["experiment", *PROTOCOLS, "--setup", "audio-world", "--models", "cnn,wav",
                              "--tasks", ",".join(tasks), "--no-plots", "-o", str(tmp_path / "run")])
    assert run.exit_code == 0, run.output
    cells = json.loads((tmp_path / "run" / "results.json").read_text())["cells"]
    assert {c["experiment"] for c in cells} == set(PROTOCOLS)
    assert {c["target"] for c in cells} == {"cnn", "wav"} and {t for c in cells for t in c["tasks"]} == set(tasks)
    negation = [c for c in cells if c["experiment"] == "negation"]
    assert {c["method"] for c in negation} == {"zero_shot", "closed_form", "target_as_source", "gradient_ascent"}
    assert all(set(CONTROL_NAMES) <= set(c["accuracy"]) for c in negation)
    held = [c for c in cells if c["experiment"] == "generalization"]
    assert {tuple(c["tasks"]) for c in held if c["method"] == "zero_shot"} == {(HELD_OUT_RELATED,)}
    assert {t for c in held if c["method"] != "zero_shot" for t in c["tasks"]} == set(RELATED_GROUP)
    assert "Negation" in (tmp_path / "run" / "tables.md").read_text()
    bad = runner.invoke(app, ["experiment", "addition", "--setup", "audio-world", "--models", "vit-a", "-o",
                              str(tmp_path / "bad")])
    assert bad.exit_code != 0 and "unknown audio world model" in bad.output


def tiny_clap():
    """A random-weight transformers CLAP (small HTSAT audio tower, small RoBERTa text tower)."""
    from open_clip.tokenizer import SimpleTokenizer
    from transformers import ClapConfig

    from platonic.models.hf_backend import from_config

    tok = SimpleTokenizer(context_length=16)

    def tokenize(texts):
        ids = tok(texts)
        return {"input_ids": ids, "attention_mask": (ids != 0).long()}

    text = dict(vocab_size=49408, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=40)
    config = ClapConfig(text_config=text, audio_config=dict(depths=[1, 1], num_attention_heads=[2, 2],
                                                            patch_embeds_hidden_size=16, hidden_size=32), projection_dim=24)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.manual_seed(0)
            return from_config(config, spec="hf:tiny-clap", tokenizer=tokenize)
        finally:
            logging.disable(logging.NOTSET)


def test_an_audio_world_descriptor_moves_into_a_transformers_clap_and_its_export_reloads_alone(
        tiny_audio_world, tmp_path):
    """measure on world:audio/cnn -> solve into CLAP -> fold -> save_pretrained -> transformers alone: the
    reloaded CLAP's audio embeddings equal the folded model's, and differ from the unedited CLAP's."""
    from transformers import ClapFeatureExtractor, ClapModel

    from platonic import apply, load_model, measure, save_model, solve_bank
    from platonic.experiments.checks.audio_world import audio_world_parts
    from platonic.models.audio import CANONICAL_RATE, resample

    world = audio_world_parts(tiny_audio_world["path"], models=["cnn"])
    task = world.tasks["pitch"]
    descriptor = measure(load_model("world:audio/cnn"), load_model("world:audio/cnn/pitch"), task.probes, task.prompts,
                         "pitch", progress=False)
    clap = tiny_clap()
    before = clap.encode_probes(task.test.inputs).z
    bank = solve_bank(clap, [descriptor], probes={descriptor.grid.probe_digest: task.probes}, progress=False)
    apply(clap, bank, {"pitch": 1.0}, alpha=0.5)
    edited = clap.encode_probes(task.test.inputs).z
    assert not torch.allclose(edited, before, atol=1e-4)
    save_model(clap, tmp_path / "clap-pitch")

    reloaded = ClapModel.from_pretrained(tmp_path / "clap-pitch").eval()  # transformers alone, no platonic
    extractor = ClapFeatureExtractor.from_pretrained(tmp_path / "clap-pitch")
    waves = resample(task.test.inputs.float(), CANONICAL_RATE, extractor.sampling_rate)
    feats = extractor([w.numpy() for w in waves], sampling_rate=extractor.sampling_rate, truncation="rand_trunc",
                      return_tensors="pt")
    with torch.no_grad():
        pooled = reloaded.audio_model(input_features=feats["input_features"], is_longer=feats["is_longer"]).pooler_output
        z = reloaded.audio_projection(pooled)
    assert torch.allclose(z, edited, atol=1e-5, rtol=1e-4), (z - edited).abs().max()


def test_world_probes_feed_platonic_measure_on_the_command_line(tiny_audio_world, tmp_path):
    """`platonic world probes --audio` writes a task's probes and prompts; `platonic measure` reads them."""
    from safetensors.torch import load_file

    from platonic.cli import app
    from platonic.experiments.checks.audio_world import audio_world_parts
    from platonic import Descriptor

    runner = CliRunner()
    out = tmp_path / "pitch.safetensors"
    wrote = runner.invoke(app, ["world", "probes", "pitch", "--audio", "--profile", "tiny", "-o", str(out)])
    assert wrote.exit_code == 0, wrote.output
    task = audio_world_parts(tiny_audio_world["path"], models=["cnn"]).tasks["pitch"]
    assert torch.equal(load_file(str(out))["probes"], task.probes)
    assert tuple(out.with_suffix(".txt").read_text().splitlines()) == task.prompts
    again = runner.invoke(app, ["world", "probes", "pitch", "--audio", "--profile", "tiny", "-o", str(out)])
    assert again.exit_code != 0 and "--overwrite" in again.output
    unknown = runner.invoke(app, ["world", "probes", "fashion", "--audio", "--profile", "tiny", "-o", str(tmp_path / "f.safetensors")])
    assert unknown.exit_code != 0 and "unknown audio world task" in unknown.output
    measured = runner.invoke(app, ["measure", "--model", "world:audio/cnn", "--finetuned", "world:audio/cnn/pitch",
                                   "--task", "pitch", "--probes", str(out), "--prompts", str(out.with_suffix(".txt")),
                                   "-o", str(tmp_path / "pitch.utd")])
    assert measured.exit_code == 0, measured.output
    descriptor = Descriptor.load(tmp_path / "pitch.utd")
    assert descriptor.grid.shape == (len(task.probes), len(task.prompts)) and descriptor.grid.task == "pitch"
