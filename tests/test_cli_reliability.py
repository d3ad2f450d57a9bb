"""The command line under bad input: every help renders; every refusal is one line `error: ...` on stderr,
exit code 2, no traceback, and leaves every file as it was (issue 12)."""

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from helpers import make_descriptor
from safetensors.torch import save_file
from test_storage import make_operator
from typer.main import get_command
from typer.testing import CliRunner

from platonic import Descriptor, OperatorBank, Provenance
from platonic.cli import app
from platonic.storage import FORMAT_VERSION


def invoke(*args, env=None):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", **(env or {})})


def assert_one_line_error(result, match=None):
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    if match:
        assert match in lines[0], lines[0]


def _commands(cmd, path=()):
    yield path
    if getattr(cmd, "commands", None):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(get_command(app)))


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "platonic" for p in COMMANDS])
def test_every_command_help_renders(path):
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "Usage:" in result.stdout


def test_experiment_help_shows_the_folder_layouts_literally():
    result = invoke("experiment", "--help")
    assert result.exit_code == 0, result.output
    assert "FOLDER[/test]/CLASS/*" in result.stdout


def test_errors_go_to_stderr_as_one_line(tmp_path):
    (tmp_path / "junk").write_text("not a tensor file")
    result = invoke("inspect", tmp_path / "junk")
    assert_one_line_error(result, "not a readable safetensors file")
    assert result.stdout == ""


def test_usage_errors_are_one_line_too():
    result = invoke("measure", "--model", "open_clip:ViT-S-32")
    assert_one_line_error(result, "Missing option")
    assert "platonic measure --help" in result.stderr or "measure --help" in result.stderr


def _descriptor_without_grid(path: Path) -> None:
    record = {"format": "platonic", "format_version": FORMAT_VERSION, "kind": "descriptor",
              "provenance": Provenance().to_json()}
    save_file({"matrix": torch.zeros(2, 2)}, str(path), metadata={"platonic": json.dumps(record)})


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A working directory of inputs, some good, some bad; the cache beside it."""
    w = tmp_path / "work"
    w.mkdir()
    monkeypatch.chdir(w)
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PLATONIC_QUIET", "1")
    make_descriptor(seed=1).save(w / "d.utd")
    make_descriptor(seed=2).save(w / "d_again.utd")  # same task and source as d.utd
    OperatorBank("fp-target", [make_operator("toy")]).save(w / "b.bank")
    OperatorBank("fp-target", [make_operator("toy")]).save(tmp_path / "outside.bank")
    _descriptor_without_grid(w / "nogrid.utd")
    (w / "prompts.txt").write_text("a photo of a cat.\na photo of a dog.\n")
    (w / "latin1.txt").write_bytes(b"caf\xe9 au lait\n")
    save_file({"probes": torch.zeros(2, 3, 8, 8, dtype=torch.uint8)}, str(w / "probes.safetensors"))
    save_file({"w": torch.zeros(2)}, str(w / "ft.safetensors"))
    (w / "t.safetensors").write_bytes(b"weights the user cares about")
    (w / "notes.txt").write_text("the user's notes")
    save_file({"w": torch.zeros(1)}, str(w / "oc_export.safetensors"),
              metadata={"platonic": json.dumps({"arch": "ViT-S-32", "spec": "open_clip:ViT-S-32", "edits": []})})
    (w / "hf_export.safetensors").mkdir()  # a transformers export directory, oddly named
    (w / "hf_export.safetensors" / "config.json").write_text("{}")
    (w / "hf_export.safetensors" / "platonic_provenance.json").write_text(json.dumps({"spec": "hf:org/x"}))
    (w / "userdir").mkdir()
    (w / "userdir" / "thesis.tex").write_text("years of work")
    (w / "run").mkdir()
    (w / "run" / "results.json").write_text("{not json")
    (w / "run2").mkdir()
    (w / "run2" / "results.json").write_text(json.dumps({"schema": "platonic.results", "version": 1, "setup": {}}))
    (w / "images").mkdir()
    from PIL import Image

    Image.new("RGB", (64, 64)).save(w / "images" / "0.png")
    (w / "plain.yaml").write_text(
        "models: {a: open_clip:ViT-S-32, b: open_clip:RN50}\n"
        "tasks: {toy: {data: toydata}}\n"
        "sources: {a: {toy: ft-a.safetensors}, b: {toy: ft-b.safetensors}}\n")
    (w / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    return w


def _snapshot(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (p.stat().st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
        else:
            out[str(p.relative_to(root))] = ("dir", p.stat().st_mode)
    return out


M = ("--model", "open_clip:ViT-S-32", "--finetuned", "ft.safetensors", "--task", "toy", "--probes", "probes.safetensors")


A = ("apply", "--target", "open_clip:ViT-S-32", "--bank", "b.bank", "--terms", "toy:+1")


HF = ("apply", "--target", "hf:org/some-clip", "--bank", "b.bank", "--terms", "toy:+1")


AD = ("apply", "--route", "adapter", "--target", "open_clip:ViT-S-32", "--descriptors", "d.utd", "--terms", "toy:+1")


BAD_INPUTS = [
    # measure
    ("measure: missing prompts file", ("measure", *M, "--prompts", "nosuch.txt", "-o", "new.utd"), "does not exist"),
    ("measure: prompts not UTF-8", ("measure", *M, "--prompts", "latin1.txt", "-o", "new.utd"), "not UTF-8"),
    ("measure: template with two {}", ("measure", *M, "--classes", "a,b", "--template", "{} and {}", "-o", "new.utd"),
     "exactly one"),
    ("measure: template without {}", ("measure", *M, "--classes", "a,b", "--template", "a photo", "-o", "new.utd"),
     "exactly one"),
    ("measure: batch size 0", ("measure", *M, "--classes", "a,b", "--batch-size", "0", "-o", "new.utd"), "--batch-size"),
    ("measure: no such device", ("measure", *M, "--classes", "a,b", "--device", "tpu:0", "-o", "new.utd"), "device"),
    ("measure: missing fine-tune file", ("measure", "--model", "open_clip:ViT-S-32", "--finetuned", "ft-missing.safetensors",
                                         "--task", "toy", "--probes", "probes.safetensors", "--classes", "a,b", "-o", "new.utd"),
     "does not exist"),
    ("measure: output is the fine-tune", ("measure", *M, "--classes", "a,b", "-o", "ft.safetensors"), "also an input"),
    ("measure: output is the probes", ("measure", *M, "--classes", "a,b", "-o", "probes.safetensors"), "also an input"),
    ("measure: output is a foreign file", ("measure", *M, "--classes", "a,b", "-o", "notes.txt"), "--overwrite"),
    ("measure: output over a bank", ("measure", *M, "--classes", "a,b", "-o", "b.bank"), "not a previous platonic descriptor"),
    ("measure: output directory missing", ("measure", *M, "--classes", "a,b", "-o", "nodir/new.utd"), "does not exist"),
    ("measure: cache cannot be written", ("measure", *M, "--classes", "a,b", "-o", "new.utd"), "cache"),
    ("measure: probe folder missing", ("measure", "--model", "open_clip:ViT-S-32", "--finetuned", "ft.safetensors", "--task",
                                       "toy", "--probes", "noprobes", "--classes", "a,b", "-o", "new.utd"), "does not exist"),
    ("measure: probe image over PIL's limit", ("measure", "--model", "open_clip:ViT-S-32", "--finetuned", "ft.safetensors",
                                               "--task", "toy", "--probes", "images", "--classes", "a,b", "-o", "new.utd"),
     "size limit"),
    # solve
    ("solve: output is its input", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "-o", "d.utd"), "also an input"),
    ("solve: a descriptor twice", ("solve", "d.utd", "d.utd", "--target", "open_clip:ViT-S-32", "-o", "new.bank"),
     "given twice"),
    ("solve: two of one task and source", ("solve", "d.utd", "d_again.utd", "--target", "open_clip:ViT-S-32", "-o", "new.bank"),
     "one operator per (source, task)"),
    ("solve: missing descriptor", ("solve", "nosuch.utd", "--target", "open_clip:ViT-S-32", "-o", "new.bank"), "does not exist"),
    ("solve: output over a descriptor", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "-o", "d_again.utd"),
     "not a previous platonic bank"),
    ("solve: no such device", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "--device", "cuda:9", "-o", "new.bank"),
     "cuda"),
    ("solve: unknown solve kind", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "--solve", "fancy", "-o", "new.bank"),
     "solve kind must be one of paper, anchored"),
    ("solve: anchored without a pool", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "--solve", "anchored",
                                        "-o", "new.bank"), "--anchor-images DIR"),
    ("solve: a pool the paper's solve ignores", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "--anchor-images",
                                                 "probes.safetensors", "-o", "new.bank"), "pass --solve anchored"),
    ("solve: zero anchor weight", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "--solve", "anchored",
                                   "--anchor-images", "probes.safetensors", "--anchor-weight", "0", "-o", "new.bank"),
     "--anchor-weight must be a finite number > 0"),
    ("solve: output is the pool", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "--solve", "anchored",
                                   "--anchor-images", "probes.safetensors", "-o", "probes.safetensors"), "also an input"),
    # apply
    ("apply: a task twice", ("apply", "--target", "open_clip:ViT-S-32", "--bank", "b.bank", "--terms", "toy:+1,toy:-1",
                             "-o", "out.safetensors"), "given twice"),
    ("apply: infinite alpha", (*A, "--alpha", "inf", "-o", "out.safetensors"), "finite"),
    ("apply: NaN alpha", (*A, "--alpha", "nan", "-o", "out.safetensors"), "finite"),
    ("apply: infinite coefficient", ("apply", "--target", "open_clip:ViT-S-32", "--bank", "b.bank", "--terms", "toy:inf",
                                     "-o", "out.safetensors"), "finite"),
    ("apply: output is the target's weights", ("apply", "--target", "open_clip:ViT-S-32@t.safetensors", "--bank", "b.bank",
                                               "--terms", "toy:+1", "-o", "t.safetensors"), "also an input"),
    ("apply: output is the bank", (*A, "-o", "b.bank"), "also an input"),
    ("apply: export over a foreign file", (*A, "-o", "t.safetensors"), "--overwrite"),
    ("apply: export directory holds an input", (*HF, "-o", "."), "contains the input b.bank"),
    ("apply: export replaces the working directory", ("apply", "--target", "hf:org/some-clip", "--bank", "../outside.bank",
                                                      "--terms", "toy:+1", "-o", "."), "working directory"),
    ("apply: export over a foreign directory", (*HF, "-o", "userdir"), "--overwrite"),
    ("apply: transformers export over an open_clip export", (*HF, "-o", "oc_export.safetensors"),
     "not a previous platonic transformers export"),
    ("apply: open_clip export over a transformers export", (*A, "-o", "hf_export.safetensors"), "a directory"),
    ("apply: open_clip export not .safetensors", (*A, "-o", "out.bin"), "*.safetensors"),
    ("apply: missing bank", ("apply", "--target", "open_clip:ViT-S-32", "--bank", "nosuch.bank", "--terms", "toy:+1",
                             "-o", "out.safetensors"), "does not exist"),
    ("apply: bank is a descriptor", ("apply", "--target", "open_clip:ViT-S-32", "--bank", "d.utd", "--terms", "toy:+1",
                                     "-o", "out.safetensors"), "not a 'bank'"),
    ("apply: unknown route", (*A, "--route", "teleport", "-o", "out.safetensors"), "--route"),
    ("apply: adapter dir is a foreign directory", (*AD, "-o", "out.safetensors", "--adapter-dir", "userdir"),
     "adapter directory"),
    ("apply: adapter dir is the export", (*AD, "-o", "out.safetensors", "--adapter-dir", "out.safetensors"), "export's own path"),
    ("apply: adapter rank 0", (*AD, "-o", "out.safetensors", "--rank", "0"), "rank"),
    # inspect
    ("inspect: descriptor without its grid", ("inspect", "nogrid.utd"), "missing metadata 'grid'"),
    ("inspect: a text file", ("inspect", "notes.txt"), "not a readable safetensors file"),
    ("inspect: missing file", ("inspect", "nosuch.utd"), "does not exist"),
    # report
    ("report: results.json not JSON", ("report", "run"), "not valid JSON"),
    ("report: results.json without cells", ("report", "run2"), "malformed"),
    ("report: not a run directory", ("report", "userdir"), "does not exist"),
    # experiment
    ("experiment: a name twice", ("experiment", "addition", "addition", "--setup", "toy", "-o", "newrun"), "more than once"),
    ("experiment: unknown name", ("experiment", "subtraction", "--setup", "toy", "-o", "newrun"), "unknown experiment"),
    ("experiment: generalization without a related group", ("experiment", "generalization", "--setup", "plain.yaml",
                                                            "-o", "newrun"), "related group"),
    ("experiment: missing source files", ("experiment", "addition", "--setup", "plain.yaml", "-o", "newrun"),
     "of the setup do not exist"),
    ("experiment: setup not UTF-8", ("experiment", "addition", "--setup", "latin1.yaml", "-o", "newrun"), "not UTF-8"),
    ("experiment: output is a foreign directory", ("experiment", "addition", "--setup", "toy", "-o", "userdir"),
     "not a platonic run"),
    ("experiment: output is a file", ("experiment", "addition", "--setup", "toy", "-o", "notes.txt"), "not a directory"),
    ("experiment: unknown setup", ("experiment", "addition", "--setup", "mars", "-o", "newrun"), "unknown setup"),
    ("experiment: --device on a built-in setup", ("experiment", "addition", "--setup", "toy", "--device", "cuda", "-o",
                                                  "newrun"), "built-in setups run on the CPU"),
    ("experiment: --device on the world's task_arithmetic", ("experiment", "task_arithmetic", "--device", "cuda:0", "-o",
                                                             "newrun"), "built-in setups run on the CPU"),
    # demo and world
    ("demo: unknown setup", ("demo", "--setup", "mars", "-o", "newrun"), "the demo runs on world, audio-world, toy"),
    ("demo: output is a foreign directory", ("demo", "--setup", "toy", "-o", "userdir"), "not a platonic run"),
    ("world path: unknown profile", ("world", "path", "--profile", "nosuch"), "unknown world profile"),
    ("world build: unknown profile", ("world", "build", "--profile", "nosuch"), "unknown world profile"),
    ("world build: no workers", ("world", "build", "--workers", "0"), "--workers"),
]


@pytest.mark.parametrize("name,args,match", BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_is_one_line_error_and_changes_no_file(work, monkeypatch, name, args, match):
    env = {}
    if name == "measure: cache cannot be written":
        env["PLATONIC_CACHE"] = str(work / "notes.txt" / "cache")
    if name == "measure: probe image over PIL's limit":
        from PIL import Image

        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # the 64 x 64 image is over twice the limit
    before = _snapshot(work)
    result = invoke(*args, env=env)
    assert_one_line_error(result, match)
    assert _snapshot(work) == before, "a refused command created or changed a file"


def test_cuda_without_a_gpu_is_refused_before_loading(work, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = invoke("measure", *M, "--classes", "a,b", "--device", "cuda", "-o", "new.utd")
    assert_one_line_error(result, "no CUDA GPU is available here; use --device cpu")
    assert not (work / "new.utd").exists()


def test_an_unwritable_output_directory_is_refused_before_any_work(work, monkeypatch):
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p).name == "ro" else real(p, mode, **kw))
    (work / "ro").mkdir()  # tests run as root here, so unwritable is simulated
    for args in (("measure", *M, "--classes", "a,b", "-o", "ro/new.utd"),
                 ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "-o", "ro/new.bank"),
                 ("experiment", "addition", "--setup", "toy", "-o", "ro/run")):
        assert_one_line_error(invoke(*args), "not writable")


def test_duplicate_terms_are_refused_not_collapsed():
    from platonic import InvalidInputError
    from platonic.terms import parse_terms

    with pytest.raises(InvalidInputError, match="'shapes' is given twice.*summed coefficient"):
        parse_terms("shapes:+1,shapes:-1")
    bank = OperatorBank("fp-target", [make_operator("shapes")])
    with pytest.raises(InvalidInputError, match="name the same bank entry"):
        bank.compose({"shapes": 1.0, "shapes@model-a": -1.0})


def test_inspect_on_an_exported_model_names_it(tmp_path):
    record = {"arch": "ViT-S-32", "spec": "open_clip:ViT-S-32", "platonic_version": "0.1.0",
              "edits": [{"route": "closed_form", "alpha": 0.5, "terms": [{"coefficient": 1.0, "task": "toy", "source": "a"}]}]}
    save_file({"w": torch.zeros(1)}, str(tmp_path / "m.safetensors"), metadata={"platonic": json.dumps(record)})
    result = invoke("inspect", tmp_path / "m.safetensors")
    assert result.exit_code == 0, result.output
    assert "a model exported by platonic" in result.stdout and "+1*toy@a at alpha = 0.5" in result.stdout
    assert "Upgrade" not in result.output
    from platonic import ArtifactError

    with pytest.raises(ArtifactError, match="model checkpoint exported by platonic.*open_clip:ViT-S-32@"):
        Descriptor.load(tmp_path / "m.safetensors")
