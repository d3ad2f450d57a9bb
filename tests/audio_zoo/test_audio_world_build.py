"""The audio world's build (issue 15, item 2): artifacts, sources, report with the checks, cache, determinism."""

import json
import shutil

import pytest
import torch

from platonic.errors import InvalidInputError, PlatonicError
from platonic.models import load_model
from platonic.world.audio import build as ab
from platonic.world.audio.tasks import CONTROL_NAMES, TASK_NAMES
from platonic.world.audio.zoo import MODEL_NAMES, AudioWorldModel, load_weights
from platonic.world.common.kinds import built_kinds

CHECKS = ("zero_shot_25_75_every_model", "full: finetune_gain_15_every_model", "lora: finetune_gain_15_every_model",
          "full: same_task_cosine_0.3_above_cross_task", "lora: same_task_cosine_0.3_above_cross_task",
          "full: oracle_recovery_50", "lora: oracle_recovery_50")


def test_tiny_build_and_report_take_at_most_90_cpu_seconds(tiny_audio_world):
    """Data, zoo, sources and report from nothing. CPU time (this process and its workers / renderers), which
    other jobs sharing the cores do not inflate; the wall time is printed by the fixture."""
    assert tiny_audio_world["cpu_seconds"] <= 90, tiny_audio_world["cpu_seconds"]


def test_build_prints_one_line_per_job_when_not_on_a_terminal(tiny_audio_world):
    jobs = len(MODEL_NAMES) * (1 + len(TASK_NAMES))
    lines = [ln for ln in tiny_audio_world["log"].splitlines() if ln.startswith("building audio world (tiny): ")]
    counted = [ln for ln in lines if " jobs (" in ln]
    assert [ln.split(": ", 1)[1].split(" ", 1)[0] for ln in counted] == [f"{k}/{jobs}" for k in range(1, jobs + 1)]
    assert lines[-1].startswith("building audio world (tiny): complete")


def test_build_writes_every_model_and_source_with_provenance(tiny_audio_world):
    path = tiny_audio_world["path"]
    assert (path / "COMPLETE").exists() and path.parent == tiny_audio_world["root"] / "audio-world"
    build = json.loads((path / "build.json").read_text())
    assert set(build["sources"]) == set(ab.KINDS) and build["sources"]["lora"]["mode"] == "lora"
    assert build["versions"]["torch"] and build["cpu"]["torch_cpu_capability"]  # builds differ across machines: say which
    assert build["threads_per_worker"] == 1 and build["timings_s"]["total"] > 0
    # first use builds the full sources alone; the report (which reads both kinds) added the LoRA ones
    assert tiny_audio_world["kinds_first"] == ("full",)
    assert built_kinds(path) == ab.KINDS and build["kinds"] == list(ab.KINDS)
    assert build["timings_s"]["train_lora_sources_later"] > 0
    for m in MODEL_NAMES:
        _, meta = load_weights(path / "models" / m / "base.safetensors")
        assert meta["spec"]["name"] == m and meta["provenance"]["kind"] == "pretrained"
        for t in TASK_NAMES:
            for kind in ab.KINDS:
                _, prov = load_weights(path / "models" / m / "ft" / f"{t}.{kind}.safetensors")
                assert prov["kind"] == kind and prov["task"] == t and prov["finetune"]["mode"] == kind
    assert not list(path.rglob("*.pt")) and not list(path.rglob("*.pkl"))


def test_sources_load_by_spec_and_differ_from_the_base(tiny_audio_world):
    base = load_model("world:audio/cnn")
    assert isinstance(base, AudioWorldModel) and base.modality == "audio"
    full = load_model("world:audio/cnn/pitch")
    lora = load_model("world:audio/cnn/pitch/lora")
    assert full.spec == "world:audio/cnn/pitch" and lora.spec == "world:audio/cnn/pitch/lora"
    b, f, lo = (dict(x.tower.named_parameters()) for x in (base, full, lora))
    assert b.keys() == f.keys() == lo.keys()  # LoRA merged back into the plain weights
    assert not all(torch.equal(b[k], f[k]) for k in b) and not all(torch.equal(b[k], lo[k]) for k in b)
    assert torch.equal(base.module.text.net[0].weight, full.module.text.net[0].weight)  # text head frozen


def test_report_has_every_cell_and_the_image_worlds_checks(tiny_audio_world):
    report = tiny_audio_world["report"]
    path = tiny_audio_world["path"]
    assert json.loads((path / "report.json").read_text())["summary"]["checks"] == report["summary"]["checks"]
    for m in MODEL_NAMES:
        r = report["models"][m]
        assert set(r["zero_shot"]) == set(TASK_NAMES) | set(CONTROL_NAMES)
        assert all(set(r[k][kind]) == set(TASK_NAMES) for k in ("finetuned", "oracle") for kind in ab.KINDS)
        assert all(0.0 <= v <= 1.0 for v in r["zero_shot"].values())
    s = report["summary"]
    assert set(s["per_task"]) == set(TASK_NAMES) and set(s["per_model"]) == set(MODEL_NAMES)
    assert set(CHECKS) <= set(s["checks"])
    md = (path / "report.md").read_text()
    assert "audio world report" in md and "| ast-l |" in md and "## Checks" in md and "| drums |" in md


def test_cached_world_is_reused(tiny_audio_world):
    before = (tiny_audio_world["path"] / "COMPLETE").stat().st_mtime_ns
    assert ab.ensure_audio_world("tiny", progress=False) == tiny_audio_world["path"]
    assert (tiny_audio_world["path"] / "COMPLETE").stat().st_mtime_ns == before


def test_rebuild_with_same_seed_gives_identical_weights(tiny_audio_world, tmp_path):
    src = tiny_audio_world["path"]
    dst = tmp_path / src.name
    dst.mkdir()
    for f in ("inputs.json", "captions.safetensors"):
        shutil.copy(src / f, dst / f)
    ab.job_pretrain(str(dst), "tiny", 0, "wav")
    ab.job_finetune(str(dst), "tiny", 0, "wav", "noise")
    for rel in ("models/wav/base.safetensors", "models/wav/ft/noise.full.safetensors", "models/wav/ft/noise.lora.safetensors"):
        a, _ = load_weights(src / rel)
        b, _ = load_weights(dst / rel)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), rel


def test_recipe_hash_covers_the_recipe_and_leaves_the_image_world_alone(monkeypatch):
    from platonic.world.image import build as image_build

    tiny = ab.PROFILES["tiny"]
    assert ab.recipe_hash(tiny, 0) == ab.recipe_hash(tiny, 0) != ab.recipe_hash(tiny, 1)
    assert ab.audio_world_dir("tiny") != ab.audio_world_dir("full")
    image_record = image_build.recipe_record(image_build.PROFILES["tiny"], 0)  # no audio spec or task in it
    assert set(image_record["specs"]) == set(image_build.MODEL_NAMES) and not set(image_record["specs"]) & set(ab.MODEL_NAMES)
    assert set(image_record["tasks"]) == set(image_build.world_data.all_sets())
    assert set(ab.recipe_record(tiny, 0)) == {"version", "recipe", "data", "seed", "pretrain", "replay_per_task",
                                              "sources", "specs"}


@pytest.mark.parametrize("spec, match", [("world:audio/nope", "cnn"), ("world:audio/cnn/notatask", "task"),
                                         ("world:audio/cnn/pitch/half", "lora")])
def test_unknown_audio_models_are_one_platonic_error(tiny_audio_world, spec, match):
    with pytest.raises(InvalidInputError, match=match) as info:
        load_model(spec)
    assert isinstance(info.value, PlatonicError)


def test_unknown_profile_is_refused(monkeypatch):
    with pytest.raises(InvalidInputError, match="tiny, full"):
        ab.audio_world_dir("huge")
    monkeypatch.setenv("PLATONIC_WORLD_PROFILE", "huge")
    with pytest.raises(PlatonicError, match="PLATONIC_WORLD_PROFILE"):
        ab.default_profile()


def test_cli_audio_build_uses_the_cache_builds_without_its_report_and_refuses_an_unknown_profile(tiny_audio_world):
    from typer.testing import CliRunner

    from platonic.cli.world import world_app

    result = CliRunner().invoke(world_app, ["audio-build", "--profile", "tiny", "--quiet", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert str(tiny_audio_world["path"]) in result.output and "zero_shot_25_75_every_model" in result.output
    built_only = CliRunner().invoke(world_app, ["audio-build", "--profile", "tiny", "--quiet", "--workers", "1", "--no-report"])
    assert built_only.exit_code == 0, built_only.output
    assert str(tiny_audio_world["path"]) in built_only.output and "PASS" not in built_only.output + built_only.stderr
    assert "report" not in built_only.output
    where = CliRunner().invoke(world_app, ["audio-path", "--profile", "tiny"])
    assert where.exit_code == 0 and where.output.strip() == str(tiny_audio_world["path"])
    bad = CliRunner().invoke(world_app, ["audio-build", "--profile", "huge"])
    assert bad.exit_code != 0


def test_the_tiny_audio_worlds_weights_are_pinned(tiny_audio_world):
    """A change of what the audio build trains must bump its RECIPE_VERSION and re-pin (scripts/pin_tiny_worlds.py).

    The pins were written from a build of both source kinds at once; the fixture builds the full sources first and
    its report adds the LoRA ones later, so this also holds the later LoRA sources to the joint build's weights."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from weight_pins import differences

    pins_file = Path(__file__).with_name("tiny_audio_world_pins.json")
    assert json.loads(pins_file.read_text())["recipe"] == ab.RECIPE_VERSION, "re-pin with scripts/pin_tiny_worlds.py"
    changed = differences(tiny_audio_world["path"], pins_file)
    assert not changed, ("the tiny audio world's weights moved without a RECIPE_VERSION bump: " + "; ".join(changed[:5]))
