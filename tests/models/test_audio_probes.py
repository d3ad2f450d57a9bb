"""Audio probes: sound files become the canonical 16 kHz waveforms every audio model resamples from."""

import numpy as np
import pytest
import soundfile
import torch

from platonic import InvalidInputError
from platonic.data.probe_files import load_probes
from platonic.models.audio import CANONICAL_RATE, canonical_audio, resample

from tiny_models import get_model


def tone(freq: float, seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.fixture
def sound_folder(tmp_path):
    folder = tmp_path / "clips"
    (folder / "b").mkdir(parents=True)
    left, right = tone(440, 0.5, 44100), tone(660, 0.5, 44100)
    soundfile.write(folder / "a.wav", np.stack([left, right], axis=1), 44100)  # stereo, 44.1 kHz, 0.5 s
    soundfile.write(folder / "b" / "c.flac", tone(300, 0.75, 22050), 22050)  # mono, 22.05 kHz, 0.75 s
    (folder / "notes.txt").write_text("not a sound")
    return folder, (left + right) / 2


def test_files_become_mono_16_khz_clips_padded_to_the_longest(sound_folder):
    folder, mono = sound_folder
    clips = canonical_audio(folder)
    assert clips.dtype == torch.float32 and clips.shape == (2, round(0.75 * CANONICAL_RATE))
    first = resample(soundfile.read(folder / "a.wav", dtype="float32")[0].mean(axis=1), 44100, CANONICAL_RATE)
    assert np.allclose(first, resample(mono, 44100, CANONICAL_RATE), atol=1e-4)  # channels averaged (the wav is 16-bit)
    assert torch.equal(clips[0, : len(first)], torch.from_numpy(first)) and not clips[0, len(first):].any()
    spectrum = np.abs(np.fft.rfft(clips[1].numpy()))
    assert abs(np.argmax(spectrum) * CANONICAL_RATE / clips.shape[1] - 300) < 3  # the tone survives resampling
    assert canonical_audio(folder, seconds=0.25).shape == (2, 4000)
    assert torch.equal(load_probes(folder), clips)  # the CLI's --probes DIR


def test_a_clap_model_reads_sound_folders_and_resamples_to_its_own_rate(sound_folder):
    folder, _ = sound_folder
    clap = get_model("hf:tiny-clap")
    canon = clap.canonical(folder)
    assert torch.equal(canon, canonical_audio(folder))
    extractor = clap.feature_extractor
    assert extractor.sampling_rate == 48000
    by_hand = extractor([w.numpy() for w in resample(canon, CANONICAL_RATE, 48000)], sampling_rate=48000,
                        truncation="rand_trunc", return_tensors="pt")["input_features"]
    assert torch.allclose(clap.prepare_probes(canon)["input_features"].float(), by_hand.float())
    assert clap.encode_audio(canon).shape == (2, clap.embed_dim)


def test_bad_sound_input_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="holds no sound files"):
        canonical_audio(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.wav").write_bytes(b"RIFF not really")
    with pytest.raises(InvalidInputError, match=r"cannot decode the sound file .*x.wav .*give wav, flac or ogg") as info:
        canonical_audio(tmp_path / "bad")
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidInputError, match="seconds must be positive"):
        canonical_audio(tmp_path / "bad", seconds=0)
    with pytest.raises(InvalidInputError, match="at 16 kHz, or a folder of sound files"):
        get_model("hf:tiny-clap").canonical(torch.zeros(2, 3, 4))
