"""The command line answers `--help` and refuses bad input without importing torch (issue 34).

Importing torch and the backends took 3-4 s of every command, `--help` and one-line errors included.
The tests check what is imported, not how long it takes (timers are flaky on a shared machine):
benchmarks/bench_cli.py prints the times.
"""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import platonic

SRC = Path(platonic.__file__).resolve().parents[1]

PROBE = """
import json, sys
from platonic.cli import app
try:
    app(sys.argv[1:], prog_name="platonic")
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in ("torch", "open_clip", "transformers", "peft", "numpy") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def run_cli(*args, cwd=None):
    """Run `platonic ARGS` in a fresh interpreter: (exit code, heavy modules imported, stderr)."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(SRC), "PLATONIC_QUIET": "1"}, timeout=120)
    last = proc.stdout.strip().splitlines()[-1]
    out = json.loads(last)
    return out["code"], out["heavy"], proc.stderr


def test_importing_the_command_line_imports_no_torch():
    proc = subprocess.run([sys.executable, "-c", "import sys, platonic.cli; print(sorted(m for m in ('torch', "
                           "'open_clip', 'transformers', 'numpy', 'pydantic') if m in sys.modules))"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize("args", [(), ("--help",), ("apply", "--help"), ("experiment", "--help"), ("world", "--help"),
                                  ("finetune", "--help"), ("run", "--help"), ("--version",)],
                         ids=lambda a: " ".join(a) or "platonic")
def test_help_imports_no_torch(args):
    code, heavy, _ = run_cli(*args)
    assert code in (0, None, 2) and heavy == []  # `platonic` alone prints its help (click's exit code for it)


def test_the_help_texts_say_what_the_registry_says():
    """--help names the experiments and their defaults without importing the engine; they must agree."""
    from platonic.cli import experiments as cli
    from platonic.experiments.registry import PROTOCOLS
    from platonic.finetuning import GRADIENT_ASCENT

    assert cli.EXPERIMENT_NAMES == cli.experiment_names()
    for setting, text in cli.REGISTRY_DEFAULTS.items():
        assert text == cli.registry_defaults(setting), setting
    assert cli.NEGATION_BASELINES == ", ".join(PROTOCOLS["negation"].baselines)
    assert cli.ASCENT_STEPS == GRADIENT_ASCENT.steps


def test_the_facade_is_lazy_and_complete():
    proc = subprocess.run([sys.executable, "-c", "import sys, platonic; print('torch' in sys.modules)"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr
    for name in platonic.__all__:
        assert getattr(platonic, name) is not None and name in dir(platonic)
    importlib.import_module("platonic.solve")  # the submodule must not hide the function of the same name
    assert callable(platonic.solve) and platonic.solve.__module__ == "platonic.solve"
    with pytest.raises(AttributeError):
        platonic.no_such_name  # noqa: B018
    namespace: dict = {}
    exec("from platonic import *", namespace)
    assert set(platonic.__all__) <= set(namespace)


@pytest.mark.parametrize("args", [("experiment", "nosuch"), ("world", "path", "--profile", "nosuch"),
                                  ("world", "audio-path", "--profile", "big"), ("world", "build", "--profile", "x")],
                         ids=lambda a: " ".join(a))
def test_a_wrong_experiment_or_world_profile_is_refused_before_torch_loads(args):
    code, heavy, err = run_cli(*args)
    assert code == 2 and heavy == [] and err.startswith("error: unknown "), err


def test_the_world_profiles_the_command_line_knows_are_the_builds():
    from platonic.cli import world as cli
    from platonic.world.audio.build import PROFILES as AUDIO
    from platonic.world.image.build import PROFILES as IMAGE

    assert set(cli.PROFILES) == set(IMAGE) == set(AUDIO)
