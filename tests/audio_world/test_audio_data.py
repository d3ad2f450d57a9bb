"""The audio world's data (issue 15, item 1): tasks, canonical clips, split hygiene, determinism, errors."""

import hashlib

import numpy as np
import pytest
import torch

from platonic.errors import PlatonicError
from platonic.world.audio import canonical, dataset, instruments, speech, tasks, tools
from platonic.world.image.data import MissingDataError

EXPECTED = {  # name: (classes, template)
    "instrument": (8, "a recording of {} playing."),
    "pitch": (12, "a musical note with the pitch {}."),
    "chord": (6, "a {} chord."),
    "digits": (10, "a voice saying the number {}."),
    "commands": (10, "a voice saying the word {}."),
    "colours": (10, "a voice saying the colour {}."),
    "beats": (6, "the sound of {} beats."),
    "noise": (5, "the sound of {} noise."),
    "tempo": (4, "a rhythm at a {} tempo."),
    "drums": (10, "the sound of a {}."),
    "animals": (10, "a person saying the word {}."),
}
UNIT_SETS = (  # sets whose splits keep units apart (GM programs / kits, speakers)
    "instrument", "pitch", "chord", "drums", "digits", "commands", "colours", "animals")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_set_has_its_classes_one_template_and_caption_pools(name):
    task = tasks.all_sets()[name]
    n, template = EXPECTED[name]
    assert task.n_classes == n == len(set(task.classes)) == len(task.hints)
    assert task.template == template and template.count("{}") == 1
    assert task.prompts == [template.format(c) for c in task.classes]
    pools = tasks.caption_pools(task)
    assert len(pools["name"]) == len(pools["hint"]) == n
    assert all(task.prompts[i] in pools["name"][i] for i in range(n))
    assert set(task.prompts) <= set(tasks.caption_vocabulary())


def test_roles_related_group_and_held_out_task():
    assert len(tasks.TASKS) >= 6 and len(tasks.CONTROLS) >= 2
    assert all(t.role == "task" for t in tasks.TASKS.values()) and all(t.role == "control" for t in tasks.CONTROLS.values())
    assert set(tasks.RELATED_GROUP) <= set(tasks.TASKS) and tasks.HELD_OUT_RELATED in tasks.TASKS
    assert tasks.HELD_OUT_RELATED not in tasks.RELATED_GROUP


def test_canonical_clips_sizes_and_probes(tiny_audio):
    sizes = dataset.SIZES["tiny"]
    assert list(tiny_audio) == list(tasks.all_sets())
    for name, td in tiny_audio.items():
        for split in ("train", "val", "test"):
            s = getattr(td, split)
            per_class = sizes.per_class(td.task, split)
            assert s.pcm.dtype == torch.int16 and s.pcm.shape == (per_class * td.task.n_classes, canonical.CLIP_SAMPLES)
            assert torch.equal(torch.bincount(s.labels, minlength=td.task.n_classes),
                               torch.full((td.task.n_classes,), per_class))
            clips = s.clips
            assert clips.dtype == torch.float32 and clips.abs().amax(dim=1).min() > 0.25  # no silent clip
            assert torch.equal(torch.from_numpy(canonical.to_pcm(clips.numpy())), s.pcm)  # exactly on the PCM grid
        if td.task.role == "task":
            assert td.probes.shape == (min(len(td.train), 30 * td.task.n_classes), canonical.CLIP_SAMPLES)
        else:
            assert len(td.probe_index) == 0


def _digests(pcm: torch.Tensor) -> set[str]:
    return {hashlib.sha256(row.numpy().tobytes()).hexdigest() for row in pcm}


def test_split_hygiene_no_test_voice_program_or_clip_in_train(tiny_audio):
    for name, td in tiny_audio.items():
        train, val, test = (set(getattr(td, s).clip_units()) for s in ("train", "val", "test"))
        if name in UNIT_SETS:
            assert not (test & train) and not (test & val) and not (val & train), name
            assert not any(u == "procedural" for u in train | test)
        assert not (_digests(td.test.pcm) & (_digests(td.train.pcm) | _digests(td.val.pcm))), name
    # the controls' sounds are none of the tasks' test sounds
    task_test = set().union(*(_digests(tiny_audio[n].test.pcm) for n in tasks.TASKS))
    for name in tasks.CONTROLS:
        assert not (_digests(tiny_audio[name].test.pcm) & task_test)


def test_the_unit_splits_are_disjoint_at_the_source():
    programs = instruments.program_split()
    flat = {s: {p for ps in programs[s].values() for p in ps} for s in programs}
    assert not (flat["test"] & flat["train"]) and not (flat["val"] & flat["train"]) and not (flat["test"] & flat["val"])
    assert all(programs[s][f] for s in programs for f in programs[s])  # every family in every split
    kits = instruments.kit_split()
    assert not (set(kits["test"]) & set(kits["train"]))
    voices = {s: set(speech.voice_names(s)) for s in ("train", "val", "test")}
    assert not (voices["test"] & voices["train"]) and not (voices["val"] & voices["train"])
    units = {s: {v.unit for vs in speech.voice_split()[s].values() for v in vs} for s in ("train", "val", "test")}
    assert not (units["test"] & units["train"]) and not (units["test"] & units["val"])
    # one speaker across engines stays in one split (flite kal, kal16 and festival kal_diphone are "kal")
    kal = [s for s in units if "speaker:kal" in units[s]]
    assert len(kal) == 1 and {"flite:kal", "flite:kal16", "festival:kal_diphone"} <= voices[kal[0]]


@pytest.mark.parametrize("name, split", [("chord", "test"), ("commands", "train"), ("beats", "val"), ("drums", "test")])
def test_the_same_seed_renders_bitwise_the_same_clips(name, split):
    """commands/train at seed 3 draws espeak-ng, flite and festival voices: every engine is covered."""
    a = dataset.render_split(name, split, 2, seed=3)
    b = dataset.render_split(name, split, 2, seed=3)
    assert torch.equal(a.pcm, b.pcm) and torch.equal(a.labels, b.labels) and a.clip_units() == b.clip_units()
    c = dataset.render_split(name, split, 2, seed=4)
    assert not torch.equal(a.pcm, c.pcm)


def test_save_and_load_round_trip(tiny_audio, tmp_path):
    part = {n: tiny_audio[n] for n in ("pitch", "animals")}
    path = dataset.save_audio_data(tmp_path / "audio" / "data.safetensors", part, {"seed": 0})
    back = dataset.load_audio_data(path)
    for name, td in part.items():
        for split in ("train", "val", "test"):
            x, y = getattr(td, split), getattr(back[name], split)
            assert torch.equal(x.pcm, y.pcm) and torch.equal(x.labels, y.labels) and x.clip_units() == y.clip_units()
        assert torch.equal(td.probe_index, back[name].probe_index)


def _one_line_naming(exc, package):
    message = str(exc)
    assert isinstance(exc, MissingDataError) and isinstance(exc, PlatonicError)
    assert "\n" not in message and f"`{package}`" in message and "make debian" in message


@pytest.mark.parametrize("program", list(tools.PROGRAMS))
def test_a_missing_program_names_its_debian_package(program, monkeypatch, tmp_path):
    real = tools.shutil.which
    monkeypatch.setattr(tools.shutil, "which", lambda name: None if name == program else real(name))
    with pytest.raises(MissingDataError) as info:
        dataset.build_audio_data(dataset.SIZES["tiny"], seed=0, names=["noise"], progress=False)
    _one_line_naming(info.value, tools.PROGRAMS[program])


def test_a_missing_soundfont_or_voice_names_its_package(monkeypatch, tmp_path):
    monkeypatch.setattr(tools, "SOUNDFONT", tmp_path / "none.sf2")
    with pytest.raises(MissingDataError) as info:
        tools.require_audio_packages()
    _one_line_naming(info.value, "fluid-soundfont-gm")
    monkeypatch.undo()
    monkeypatch.setattr(tools, "FESTIVAL_VOICE_DIR", tmp_path)
    with pytest.raises(MissingDataError) as info:
        tools.require_audio_packages()
    _one_line_naming(info.value, "festvox-kallpc16k")


def test_a_failing_engine_raises_one_line():
    with pytest.raises(tools.RenderError) as info:
        tools.run(["fluidsynth", "-n", "-i", "-q", "-F", "/dev/null", "/nonexistent.sf2", "/nonexistent.mid"])
    assert isinstance(info.value, PlatonicError) and "\n" not in str(info.value) and "fluidsynth failed" in str(info.value)


def test_resample_keeps_a_tone_and_the_kind_of_array():
    t = np.arange(canonical.SAMPLE_RATE) / canonical.SAMPLE_RATE
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    up = canonical.resample(tone, 16000, 44100)
    assert up.dtype == np.float32 and up.shape == (44100,)
    back = canonical.resample(up, 44100, 16000)
    assert np.abs(back[200:-200] - tone[200:-200]).max() < 1e-2
    batch = canonical.resample(torch.from_numpy(np.stack([tone, tone])), 16000, 22050)
    assert isinstance(batch, torch.Tensor) and batch.shape == (2, 22050)
    assert canonical.resample(tone, 16000, 16000) is not None and np.array_equal(canonical.resample(tone, 16000, 16000), tone)


def test_the_audio_data_is_not_in_the_image_world_recipe():
    from platonic.world.image import build
    from platonic.world.audio import tasks

    # the image world's key is its declared recipe: its own tasks and models, no audio task or control
    record = build.recipe_record(build.PROFILES["tiny"], 0)
    assert set(record["tasks"]) == set(build.world_data.all_sets()) and set(record["specs"]) == set(build.MODEL_NAMES)
    assert not set(record["tasks"]) & (set(tasks.all_sets()) - set(build.world_data.all_sets()))


def test_make_debian_installs_every_package_the_audio_world_names():
    makefile = (tools.Path(__file__).resolve().parents[2] / "Makefile").read_text()
    block = makefile.split("DEB_PACKAGES :=", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    listed = set(block.split("\n", 1)[0].split())
    assert set(tools.DEBIAN_PACKAGES) <= listed
