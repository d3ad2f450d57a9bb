"""The GPU check (scripts/gpu_check.sh -> scripts/gpu_check.py, issue 36), run here on the CPU with tiny models:
every stage runs in float32 and bfloat16, and a mismatch beyond a tolerance makes it exit 1.

No GPU is lent to this project's test machine, so the check's GPU run is not a test; this runs all of it
that runs on the CPU (the same code, `--device cpu --models tiny`)."""

import importlib.util
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPTS / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_gpu_check_runs_every_stage_on_the_cpu_and_fails_on_a_mismatch(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PLATONIC_QUIET", "1")
    check = load_check()
    monkeypatch.setattr(check, "DESCRIPTOR_TOLERANCE", 0.0)  # no bfloat16 descriptor can meet it: the check must fail
    code = check.main(["--device", "cpu", "--models", "tiny", "--steps", "2", "--batch", "8", "--train", "16",
                       "--probes", "16", "--test", "8", "--out", str(tmp_path / "exports")])
    out = capsys.readouterr().out
    assert code == 1 and "GPU check: FAIL" in out
    failures = out.split("GPU check: FAIL", 1)[1].strip().splitlines()
    assert len(failures) == 2 and all("bfloat16 descriptor differs" in line for line in failures)  # nothing else failed
    for stage in ("finetune clip", "measure siglip", "solve clip -> siglip", "adapter siglip -> clip"):
        assert stage in out
    assert out.count("export -> reload relative error") == 4  # both routes, both dtypes
    assert {p.name for p in (tmp_path / "exports").iterdir()} == {f"{d}-{r}" for d in ("float32", "bfloat16")
                                                                 for r in ("closed_form", "adapter")}


def test_the_gpu_check_script_refuses_a_machine_without_a_gpu():
    done = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(Path(__import__("sys").executable)),
                               "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2 and "torch sees no CUDA GPU here" in done.stderr
