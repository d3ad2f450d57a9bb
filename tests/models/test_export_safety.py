"""Model exports on real architectures with random weights (issue 12): they never delete a user's directory,
survive a kill, and carry their tokenizer and image processor."""

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from tiny_models import clip_tokenizer, get_model, tiny_hf
from test_measure_transfer import PROMPTS, probes_n

import platonic
from platonic import ArtifactError
from platonic.models import load_model

HERE = Path(__file__).resolve().parent
SRC = Path(platonic.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clip_with_tokenizer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tiny_hf("clip", tokenizer=clip_tokenizer())


def quiet_save(model, path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.save(path, {"tag": kwargs.pop("tag", "x")}, **kwargs)


def test_apply_refuses_foreign_existing_directory(tmp_path, clip_with_tokenizer):
    user = tmp_path / "user"
    user.mkdir()
    (user / "thesis.tex").write_text("years of work")
    with pytest.raises(ArtifactError, match="not a previous platonic transformers export.*--overwrite"):
        quiet_save(clip_with_tokenizer, user)
    assert sorted(p.name for p in user.iterdir()) == ["thesis.tex"]
    assert [p.name for p in tmp_path.iterdir()] == ["user"]  # and no temporary left beside it


def test_a_previous_export_is_replaced_and_overwrite_swaps_a_foreign_one(tmp_path, clip_with_tokenizer):
    out = tmp_path / "exp"
    quiet_save(clip_with_tokenizer, out, tag="old")
    quiet_save(clip_with_tokenizer, out, tag="new")
    assert json.loads((out / "platonic_provenance.json").read_text())["tag"] == "new"
    user = tmp_path / "user"
    user.mkdir()
    (user / "scratch").write_text("x")
    quiet_save(clip_with_tokenizer, user, tag="forced", overwrite=True)
    assert not (user / "scratch").exists() and (user / "config.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "user"]


KILLER = textwrap.dedent("""
    import os, signal, sys, warnings
    from pathlib import Path
    sys.path.insert(0, {src!r}); sys.path.insert(0, {here!r})
    warnings.simplefilter("ignore")
    import torch
    torch.set_num_threads(1)
    import platonic.storage as storage
    from tiny_models import clip_tokenizer, tiny_hf
    root = Path(sys.argv[1])
    model = tiny_hf("clip", tokenizer=clip_tokenizer())
    points = ("write", "exchange", "cleanup")
    for point in points:
        (root / point).mkdir()
        model.save(root / point / "exp", {{"tag": "old"}})
    with torch.no_grad():
        model.model.visual_projection.weight.mul_(2.0)
    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)
    for point in points:
        pid = os.fork()
        if pid == 0:
            if point == "write":
                real = model.model.save_pretrained
                model.model.save_pretrained = lambda *a, **k: (real(*a, **k), die())
            else:
                setattr(storage, {{"exchange": "exchange_paths", "cleanup": "_remove"}}[point], die)
            model.save(root / point / "exp", {{"tag": "new"}})
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(point, os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
""")


def test_kill_during_export_leaves_old_or_new(tmp_path, clip_with_tokenizer):
    script = KILLER.format(src=str(SRC), here=str(HERE))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["write", "True", "exchange", "True", "cleanup", "True"], proc.stdout
    original = clip_with_tokenizer.model.visual_projection.weight
    for point, expected in (("write", "old"), ("exchange", "old"), ("cleanup", "new")):
        exp = tmp_path / point / "exp"
        assert json.loads((exp / "platonic_provenance.json").read_text())["tag"] == expected
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reloaded = load_model(str(exp))
        factor = 1.0 if expected == "old" else 2.0
        assert torch.allclose(reloaded.model.visual_projection.weight, factor * original)
        assert [p.name for p in (tmp_path / point).iterdir() if p.name.startswith(".")], "nothing to clean up"
        quiet_save(clip_with_tokenizer, exp, tag="next")  # the next export removes what the killed one left
        assert [p.name for p in (tmp_path / point).iterdir()] == ["exp"]


def test_export_keeps_the_tokenizer_and_image_processor(tmp_path, clip_with_tokenizer):
    quiet_save(clip_with_tokenizer, tmp_path / "exp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reloaded = load_model(str(tmp_path / "exp"))
    ids = lambda m: m.tokenizer(PROMPTS)["input_ids"]  # noqa: E731
    assert ids(reloaded) == ids(clip_with_tokenizer)
    assert torch.allclose(reloaded.encode_texts(PROMPTS), clip_with_tokenizer.encode_texts(PROMPTS), atol=1e-6)
    assert reloaded._mean_std() == clip_with_tokenizer._mean_std()
    probes = probes_n(2)
    assert torch.allclose(reloaded.encode_probes(probes).z, clip_with_tokenizer.encode_probes(probes).z, atol=1e-6)


@pytest.mark.parametrize("kind,expected", [("siglip", "SiglipImageProcessor"), ("siglip2", "Siglip2ImageProcessor"),
                                           ("clap", "ClapFeatureExtractor")])
def test_export_writes_the_input_processor_of_every_family(tmp_path, kind, expected):
    from transformers import AutoFeatureExtractor, AutoImageProcessor

    model = get_model(f"hf:tiny-{kind}")
    quiet_save(model, tmp_path / "exp")
    record = json.loads((tmp_path / "exp" / "platonic_provenance.json").read_text())
    assert record["saved"] == [expected]  # the test models' tokenizer is a plain callable: not saved (warned)
    loader = AutoFeatureExtractor if kind == "clap" else AutoImageProcessor
    assert type(loader.from_pretrained(tmp_path / "exp")).__name__.removesuffix("Fast") == expected


def test_files_inside_an_export_directory_follow_the_umask(tmp_path, clip_with_tokenizer):
    """Defect 16: weight files inside export directories were 0600 under umask 022."""
    old = os.umask(0o022)
    try:
        quiet_save(clip_with_tokenizer, tmp_path / "exp")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "exp").rglob("*") if p.is_file()}
    assert "model.safetensors" in modes and set(modes.values()) == {0o644}, modes
