"""Labelled sound (issue 15 item 3): sound folders and hf: data sets with an Audio column are data sources
whose splits decode to canonical clips (n, T) float32 at 16 kHz, only the rows asked for."""

import io

import numpy as np
import pytest
import soundfile
import torch
from PIL import Image

from platonic.data import sources
from platonic.data.audio import MAX_SECONDS, clip_samples
from platonic.data.resolve import open_task
from platonic.data.sources import parse_source, task_split
from platonic.errors import InvalidInputError, PlatonicError
from platonic.models import audio as audio_models
from platonic.models.audio import CANONICAL_RATE, resample

from helpers import RATE, call_log, sound_folder, tone

@pytest.fixture
def sounds(tmp_path):
    return sound_folder(tmp_path / "tones")


@pytest.fixture
def counted(monkeypatch):
    """Counts the sound files decoded (platonic.models.audio.read_audio is the one decoder)."""
    return call_log(monkeypatch, audio_models, "read_audio")


def test_a_sound_folder_gives_splits_labels_and_class_names_without_decoding(sounds, counted):
    source = parse_source(sounds)
    assert source.splits() == ["train", "test"]
    train = source.split("train")
    assert train.modality == "audio" and train.class_names == ("high", "low")  # class folders, sorted
    assert train.labels.tolist() == [0, 0, 0, 1, 1, 1] and len(source.split("test")) == 4
    assert len(train.digest()) == 64 and not counted


def test_decoding_gives_canonical_clips_at_16_khz_of_the_splits_longest_length(sounds, counted):
    train = parse_source(sounds).split("train")
    clips = train.decode([4, 0])
    assert clips.dtype == torch.float32 and clips.shape == (2, round(0.5 * CANONICAL_RATE))  # longest clip: 0.5 s
    assert len(counted) == 2, "only the rows asked for are decoded"
    high = resample(tone(2000.0, 0.5), RATE, CANONICAL_RATE)  # row 0: high/0.wav, 0.5 s
    assert np.allclose(clips[1].numpy(), high, atol=1e-4)
    low = resample(tone(300.0, 0.5), RATE, CANONICAL_RATE)[: round(0.5 * CANONICAL_RATE)]  # row 4: low/1.wav, 0.5 s
    assert np.allclose(clips[0].numpy()[: len(low)], low, atol=1e-4)
    short = train.decode([3])[0]  # low/0.wav: 0.25 s, zero-padded at the end
    assert short[round(0.25 * CANONICAL_RATE) + 1:].abs().max() == 0 and short[:100].abs().max() > 0
    spectrum = np.abs(np.fft.rfft(clips[1].numpy()))
    assert abs(np.argmax(spectrum) * CANONICAL_RATE / clips.shape[1] - 2000) < 5  # the tone survives resampling
    # a model that names its clip length (the audio world's: 1.0 s) gets exactly that, cut or padded
    assert train.decode([0, 1], seconds=1.0).shape == (2, CANONICAL_RATE)
    assert train.decode([0], seconds=0.1).shape == (1, 1600)
    batches = list(train.batches(range(6), batch_size=4, seconds=1.0))
    assert [tuple(b.shape) for b in batches] == [(4, 16000), (2, 16000)]


def test_the_length_rule_caps_the_longest_clip_at_ten_seconds():
    assert clip_samples(None, 3.2) == 3.2 * CANONICAL_RATE
    assert clip_samples(None, 42.0) == MAX_SECONDS * CANONICAL_RATE == 160_000
    assert clip_samples(1.0, 42.0) == CANONICAL_RATE  # a model's own length wins
    with pytest.raises(InvalidInputError, match="positive length"):
        clip_samples(None, 0.0)


def test_a_lazy_split_decodes_the_rows_it_is_indexed_with(sounds, counted):
    train = parse_source(sounds).split("train")
    lazy = train.lazy(seconds=None)
    assert lazy.shape == (6, 8000) and len(lazy) == 6 and lazy.key == "8000@16000Hz" and not counted
    batch = lazy[torch.tensor([5, 1])]
    assert batch.shape == (2, 8000) and len(counted) == 2
    assert torch.equal(batch, train.decode([5, 1]))


def test_a_folder_without_split_folders_is_cut_80_20_and_the_parts_share_one_length(tmp_path):
    root = tmp_path / "flat"
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(5):
            soundfile.write(root / cls / f"{i}.flac", tone(440.0, 0.1 * (i + 1)), RATE)
    source = parse_source(root)
    train, test = task_split(source, "train"), task_split(source, "test")
    assert (len(train), len(test)) == (8, 2) and train.modality == test.modality == "audio"
    assert train.clip_samples() == test.clip_samples() == round(0.5 * CANONICAL_RATE)


def test_an_hf_data_set_with_an_audio_column_is_a_source(tmp_path, counted):
    datasets = pytest.importorskip("datasets")

    def wav(x, rate):
        buffer = io.BytesIO()
        soundfile.write(buffer, x, rate, format="WAV")
        return buffer.getvalue()

    parts = {}
    for split, n in (("train", 3), ("test", 2)):
        rows = [{"bytes": wav(tone(f, 0.2 + 0.1 * i, 8000), 8000), "path": None} for f in (300.0, 900.0) for i in range(n)]
        ds = datasets.Dataset.from_dict({"audio": rows, "label": [k for k in (0, 1) for _ in range(n)]})
        # cast, not encode: datasets' own audio encoding needs torchcodec; platonic decodes with soundfile
        parts[split] = ds.cast(datasets.Features({"audio": datasets.Audio(),
                                                  "label": datasets.ClassLabel(names=["low", "high"])}))
    datasets.DatasetDict(parts).save_to_disk(str(tmp_path / "hfsound"))
    task = open_task("tones", f"hf:{tmp_path / 'hfsound'}")
    train = task.split("train")
    assert train.modality == "audio" and train.labels.tolist() == [0, 0, 0, 1, 1, 1] and not counted
    assert task.prompts(train) == ("this is a sound of low.", "this is a sound of high.")  # sound's default template
    clips = train.decode([2, 3])
    assert clips.shape == (2, round(0.4 * CANONICAL_RATE)) and len(counted) == 2  # longest: 0.4 s
    expected = resample(tone(300.0, 0.4, 8000), 8000, CANONICAL_RATE)
    assert np.allclose(clips[0].numpy(), expected, atol=1e-4)


def test_mixed_folders_wrong_modalities_and_bad_files_are_one_line_errors(tmp_path, sounds):
    mixed = sound_folder(tmp_path / "mixed")
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(mixed / "train" / "low" / "x.png")
    with pytest.raises(InvalidInputError, match=r"mixes image files \(e.g. low/x.png\) and sound files") as err:
        parse_source(mixed).split("train")
    assert "\n" not in str(err.value) and isinstance(err.value, PlatonicError)

    clips = parse_source(sounds).split("test")
    with pytest.raises(InvalidInputError, match="holds sound clips, but open_clip:ViT-S-32 is an image-text model"):
        clips.require("image", "open_clip:ViT-S-32")
    clips.require("audio", "hf:laion/clap")
    images = tmp_path / "pics" / "test" / "cat"
    images.mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(images / "0.png")
    pics = parse_source(tmp_path / "pics").split("test")
    assert pics.modality == "image"
    with pytest.raises(InvalidInputError, match="holds images, but world:audio/cnn is an audio-text model; give it a "
                                                "folder of sound files"):
        pics.require("audio", "world:audio/cnn")

    (sounds / "test" / "low" / "broken.wav").write_bytes(b"RIFF not really a wave file")
    broken = parse_source(sounds).split("test")
    with pytest.raises(InvalidInputError, match="cannot read the sound file .*broken.wav") as err:
        broken.decode()  # the length rule reads the headers first
    assert "\n" not in str(err.value)
    with pytest.raises(InvalidInputError, match="cannot decode the sound file .*broken.wav"):
        broken.decode(seconds=1.0)


def test_sources_module_names_the_audio_forms():
    assert "sound folder" in sources.__doc__ and "Audio" in sources.__doc__
