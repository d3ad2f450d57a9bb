"""The builder: cache layout, versioning, report, provenance, determinism, CLI."""

import io
import json
import shutil

import pytest
import torch

from platonic.errors import PlatonicError
from platonic.world.image import build as wb
from platonic.world.image.data import CONTROL_NAMES, TASK_NAMES
from platonic.world.common.weights import load_weights
from platonic.world.image.zoo import MODEL_NAMES


def test_cache_dir_honours_env_and_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "a"))
    assert wb.cache_root() == tmp_path / "a"
    monkeypatch.delenv("PLATONIC_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert wb.cache_root() == tmp_path / "x" / "platonic"


def test_world_dir_is_versioned_by_recipe():
    a = wb.world_dir("tiny", 0)
    assert f"v{wb.WORLD_VERSION}" in a.name and "tiny" in a.name
    assert wb.world_dir("tiny", 1) != a and wb.world_dir("full", 0) != a


def test_world_build_prints_one_line_per_job_when_not_on_a_terminal(tiny_world):
    jobs = len(MODEL_NAMES) * (1 + len(TASK_NAMES))
    lines = [ln for ln in tiny_world["log"].splitlines() if ln.startswith("building world (tiny): ")]
    counted = [ln for ln in lines if " jobs (" in ln]
    assert [ln.split(": ", 1)[1].split(" ", 1)[0] for ln in counted] == [f"{k}/{jobs}" for k in range(1, jobs + 1)]
    assert counted[0].split(", ")[1].startswith("pre-training ") and counted[-1].split(", ")[1].startswith("fine-tuning ")
    assert lines[-1].startswith("building world (tiny): complete")


def test_build_writes_every_artifact_and_report(tiny_world):
    path = tiny_world["path"]
    assert (path / "COMPLETE").exists() and path.parent == tiny_world["root"] / "world"
    build = json.loads((path / "build.json").read_text())
    assert set(build["sources"]) == set(wb.KINDS) and build["sources"]["lora"]["mode"] == "lora"
    assert build["versions"]["torch"] and build["cpu"]["torch_cpu_capability"]  # builds differ across machines: say which
    for m in MODEL_NAMES:
        _, meta = load_weights(path / "models" / m / "base.safetensors")
        assert meta["spec"]["name"] == m and meta["provenance"]["kind"] == "pretrained"
        for t in TASK_NAMES:
            for kind in wb.KINDS:
                _, prov = load_weights(path / "models" / m / "ft" / f"{t}.{kind}.safetensors")
                mode = wb.PROFILES["tiny"].sources[kind].mode  # the profile's own ("linear" for tangent sources)
                assert prov["kind"] == kind and prov["task"] == t and prov["finetune"]["mode"] == mode
                assert prov["weights"] == (wb.TANGENT_WEIGHTS if mode == "linear" else "tower")
    report = json.loads((path / "report.json").read_text())
    for m in MODEL_NAMES:
        r = report["models"][m]
        assert set(r["zero_shot"]) == set(TASK_NAMES) | set(CONTROL_NAMES)
        assert all(set(r[k][kind]) == set(TASK_NAMES) for k in ("finetuned", "oracle") for kind in wb.KINDS)
        assert r["logit_scale"] > 0
    assert set(report["summary"]["per_task"]) == set(TASK_NAMES)
    assert "same_task_cross_model" in report["summary"]["overall"]["full"]
    md = (path / "report.md").read_text()
    assert "| vit-a |" in md and "Checks" in md
    assert not list(path.rglob("*.pt")) and not list(path.rglob("*.pkl"))


def test_cached_world_is_reused(tiny_world):
    before = (tiny_world["path"] / "COMPLETE").stat().st_mtime_ns
    assert wb.ensure_world("tiny", progress=False) == tiny_world["path"]
    assert (tiny_world["path"] / "COMPLETE").stat().st_mtime_ns == before


def test_tiny_build_time_recorded(tiny_world):
    report = json.loads((tiny_world["path"] / "report.json").read_text())
    assert report["timings_s"]["total"] > 0 and report["threads_per_worker"] == 1


@pytest.mark.slow
def test_rebuild_with_same_seed_gives_identical_weights(tiny_world, tmp_path):
    src = tiny_world["path"]
    dst = tmp_path / src.name
    dst.mkdir()
    for f in ("data.safetensors", "captions.safetensors"):
        shutil.copy(src / f, dst / f)
    wb.job_pretrain(str(dst), "tiny", 0, "map-vit")
    wb.job_finetune(str(dst), "tiny", 0, "map-vit", "colours")
    files = ["models/map-vit/base.safetensors", "models/map-vit/ft/colours.full.safetensors", "models/map-vit/ft/colours.lora.safetensors"]
    for rel in files:
        a, _ = load_weights(src / rel)
        b, _ = load_weights(dst / rel)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), rel


def test_a_tangent_profile_stores_dtheta_and_loads_the_expansion(tiny_world, tmp_path, monkeypatch):
    """A profile whose full sources fine-tune in the tangent space (mode "linear") stores dtheta, not the
    (unchanged) tower, and world:NAME/TASK is then f(x; theta_0) + J f(x; theta_0) dtheta."""
    import dataclasses

    from platonic.experiments.setups.world import world_data
    from platonic.finetuning.linearize import LinearizedEncoder, tangent_forward
    from platonic.world.backend import load_world_model

    src, dst = tiny_world["path"], tmp_path / "tangent-world"
    (dst / "models" / "vit-a").mkdir(parents=True)
    for rel in ("data.safetensors", "captions.safetensors", "models/vit-a/base.safetensors"):
        shutil.copy(src / rel, dst / rel)
    tiny = wb.PROFILES["tiny"]
    tangent = tiny.sources["full"].model_copy(update={"mode": "linear", "lr": 3e-3})
    monkeypatch.setitem(wb.PROFILES, "tiny", dataclasses.replace(tiny, sources={**tiny.sources, "full": tangent}))
    wb.job_finetune(str(dst), "tiny", 0, "vit-a", "fashion", ("full",))
    delta, meta = load_weights(dst / "models" / "vit-a" / "ft" / "fashion.full.safetensors")
    assert meta["weights"] == wb.TANGENT_WEIGHTS and meta["finetune"]["mode"] == "linear"
    assert any(v.abs().max() > 0 for v in delta.values())
    base, full = load_world_model("vit-a", root=dst), load_world_model("vit-a/fashion", root=dst)
    assert isinstance(full, LinearizedEncoder) and full.spec == "world:vit-a/fashion"
    b, f = base.module.state_dict(), full.base.module.state_dict()
    assert all(torch.equal(b[k], f[k]) for k in b)  # theta_0 itself is unchanged
    x = world_data(dst)["fashion"].test.images[:8]
    names = sorted(delta)
    base.tower.eval()
    with torch.no_grad():
        expected = tangent_forward(base, names, [delta[n] for n in names], base.prepare_probes(x))
    assert torch.allclose(full.encode_probes(x).z, expected.float(), atol=1e-6)
    assert not torch.allclose(full.encode_probes(x).z, base.encode_probes(x).z, atol=1e-4)


def test_cli_build_uses_cache(tiny_world):
    from typer.testing import CliRunner

    from platonic.cli.world import world_app

    result = CliRunner().invoke(world_app, ["build", "--profile", "tiny", "--quiet"])
    assert result.exit_code == 0, result.output
    assert str(tiny_world["path"]) in result.output and ("PASS" in result.output or "FAIL" in result.output)
    bad = CliRunner().invoke(world_app, ["build", "--profile", "huge"])
    assert bad.exit_code != 0


def test_line_progress_prints_one_line_per_step_off_a_terminal(monkeypatch):
    from platonic.progress import LineProgress

    monkeypatch.delenv("PLATONIC_QUIET", raising=False)
    log = io.StringIO()
    bar = LineProgress(3, "building world (tiny)", stream=log)
    for what in ("pre-training a", "fine-tuning a/x", "evaluating a"):
        bar.step(what)
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("building world (tiny): 3/3 jobs (100%), evaluating a done")

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    LineProgress(3, "x", stream=tty).step("a")  # a rich bar shows it there
    quiet = io.StringIO()
    monkeypatch.setenv("PLATONIC_QUIET", "1")
    LineProgress(3, "x", stream=quiet).step("a")
    assert tty.getvalue() == "" and quiet.getvalue() == ""


def test_world_profile_errors_derive_from_platonic_error(monkeypatch):
    from platonic import PlatonicError
    from platonic.world.image.build import default_profile, world_dir

    with pytest.raises(PlatonicError, match="unknown world profile 'nosuch'"):
        world_dir("nosuch")
    monkeypatch.setenv("PLATONIC_WORLD_PROFILE", "nosuch")
    with pytest.raises(PlatonicError, match="PLATONIC_WORLD_PROFILE"):
        default_profile()


def test_lora_sources_built_later_are_the_ones_built_at_once(tiny_world, tmp_path):
    """The demo's world has full sources only; the report (or a world:NAME/TASK/lora load) adds the
    LoRA sources with the same seeds, so a world built in two steps holds the same weights."""
    from platonic.world.backend import load_world_model

    src = tiny_world["path"]
    dst = tmp_path / src.name
    for rel in ("data.safetensors", "captions.safetensors",
                *(f"models/{m}/base.safetensors" for m in MODEL_NAMES),
                *(f"models/{m}/ft/{t}.full.safetensors" for m in MODEL_NAMES for t in TASK_NAMES)):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / rel, dst / rel)
    build = json.loads((src / "build.json").read_text())
    build["finetune_seconds"] = {k: {"full": v["full"]} for k, v in build["finetune_seconds"].items()}
    build["kinds"] = ["full"]
    (dst / "build.json").write_text(json.dumps(build))
    (dst / "COMPLETE").write_text(json.dumps({"built": 0, "kinds": ["full"]}))
    assert wb.built_kinds(dst) == ("full",) and wb.built_kinds(src) == wb.KINDS

    load_world_model("vit-a/colours/lora", root=dst)  # first use of a LoRA source builds them all
    assert wb.built_kinds(dst) == wb.KINDS
    for m in MODEL_NAMES:
        for t in TASK_NAMES:
            rel = f"models/{m}/ft/{t}.lora.safetensors"
            a, prov_a = load_weights(src / rel)
            b, prov_b = load_weights(dst / rel)
            assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), rel
            assert prov_a["finetune"] == prov_b["finetune"]
    after = json.loads((dst / "build.json").read_text())
    assert after["kinds"] == list(wb.KINDS) and all(set(v) == set(wb.KINDS) for v in after["finetune_seconds"].values())
    assert after["timings_s"]["train_lora_sources_later"] > 0
    before = (dst / "COMPLETE").stat().st_mtime_ns
    assert wb.ensure_sources(dst) == dst and (dst / "COMPLETE").stat().st_mtime_ns == before  # nothing left to build


def test_source_kinds_and_unbuilt_worlds_are_refused_by_name(tmp_path):
    with pytest.raises(PlatonicError, match="'qlora'"):
        wb.check_kinds(("full", "qlora"))
    assert wb.check_kinds(("lora", "full")) == wb.KINDS and wb.built_kinds(tmp_path) == ()
    with pytest.raises(PlatonicError, match="platonic world build"):
        wb.ensure_sources(tmp_path)



def test_load_weights_reads_only_the_keys_asked_for(tmp_path):
    from platonic.world.common.weights import save_weights

    path = save_weights(tmp_path / "w.safetensors", {"a": torch.ones(2), "b": torch.zeros(3)}, {"kind": "test"})
    some, meta = load_weights(path, keys=("b", "missing"))
    assert list(some) == ["b"] and torch.equal(some["b"], torch.zeros(3)) and meta == {"kind": "test"}
    assert set(load_weights(path)[0]) == {"a", "b"}
