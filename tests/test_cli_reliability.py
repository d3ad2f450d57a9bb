"""The command line under bad input: every help renders; every refusal is one line `error: ...` on stderr,
exit code 2, no traceback, and leaves every file as it was (issue 12)."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
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
    (w / "ftdir").mkdir()
    (w / "ftdir" / "finetune.json").write_text(json.dumps({"kind": "finetune", "mode": "full", "model": "open_clip:ViT-S-32",
                                                          "data": {"task": "t"}, "losses": [1.0, 0.5]}))
    (w / "run2").mkdir()
    (w / "run2" / "results.json").write_text(json.dumps({"schema": "platonic.results", "version": 1, "setup": {}}))
    (w / "images").mkdir()
    from PIL import Image

    Image.new("RGB", (64, 64)).save(w / "images" / "0.png")
    _image_folder(w / "trainless", {"training": ("a", "b"), "test": ("a", "b")})  # no train/: never cut its test
    _image_folder(w / "testonly", {"test": ("a", "b")})
    _image_folder(w / "oneclass", {"train": ("a",), "test": ("a",)})
    _image_folder(w / "emptyclass", {"train": ("a",), "test": ("a", "b")})
    (w / "emptyclass" / "train" / "b").mkdir()
    _image_folder(w / "fine", {"train": ("a", "b"), "test": ("a", "b")})
    (w / "nanprobes").mkdir()
    Image.fromarray(np.where(np.eye(8, dtype=bool), np.nan, 0.5).astype(np.float32), mode="F").save(
        w / "nanprobes" / "0.tif")
    (make_descriptor(seed=3) * 1e30).save(w / "huge.utd", overwrite=True)
    (w / "recipe_missing.yaml").write_text(
        "name: r\nmodels: {a: open_clip:ViT-S-32, b: open_clip:RN50}\ntasks: {toy: {data: nodata}}\n"
        "sources: {a: {toy: ft-a.safetensors}, b: {toy: ft-b.safetensors}}\nedits: [{name: e, terms: ['toy:+1']}]\n")
    (w / "recipe.yaml").write_text(
        "name: r\nmodels: {a: open_clip:ViT-S-32, b: open_clip:RN50}\ntasks: {toy: {data: fine}}\n"
        "sources: {a: {toy: ft.safetensors}, b: {toy: ft.safetensors}}\nedits: [{name: e, terms: ['toy:+1']}]\n")
    (w / "plain.yaml").write_text(
        "models: {a: open_clip:ViT-S-32, b: open_clip:RN50}\n"
        "tasks: {toy: {data: toydata}}\n"
        "sources: {a: {toy: ft-a.safetensors}, b: {toy: ft-b.safetensors}}\n")
    (w / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    return w


def _image_folder(root: Path, layout: dict) -> None:
    """root/SPLIT/CLASS/0.png for each split and class of `layout` ({split: classes})."""
    from PIL import Image

    for split, classes in layout.items():
        for cls in classes:
            (root / split / cls).mkdir(parents=True)
            Image.new("RGB", (8, 8), (40, 80, 120)).save(root / split / cls / "0.png")


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


FT = ("finetune", "open_clip:ViT-S-32", "--task")


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
    ("demo: unknown setup", ("demo", "--setup", "mars", "-o", "newrun"),
     "the demo runs on world, audio-world, trunk-world, toy"),
    ("demo: output is a foreign directory", ("demo", "--setup", "toy", "-o", "userdir"), "not a platonic run"),
    ("world path: unknown profile", ("world", "path", "--profile", "nosuch"), "unknown world profile"),
    ("world build: unknown profile", ("world", "build", "--profile", "nosuch"), "unknown world profile"),
    ("world trunk-build: unknown profile", ("world", "trunk-build", "--profile", "nosuch"), "unknown trunk world profile"),
    ("world build: no workers", ("world", "build", "--workers", "0"), "--workers"),
    # issue 34: strict data, bounds, no-op edits, outputs inside inputs, paths --check names
    ("finetune: training/ and test/, no train/", (*FT, "t=trainless", "-o", "ft"),
     "no train split: it holds the folder(s) test, training"),
    ("finetune: a test split alone", (*FT, "t=testonly", "-o", "ft"),
     "never trains on a test split"),
    ("finetune: one class", (*FT, "t=oneclass", "-o", "ft"), "1 class"),
    ("finetune: an empty class folder", (*FT, "t=emptyclass", "-o", "ft"),
     "empty class folder(s) b"),
    ("finetune: epochs 1e12", (*FT, "t=fine", "--epochs", "1e12", "-o", "ft"),
     "lower --epochs"),
    ("finetune: seed 2**70", (*FT, "t=fine", "--seed", str(2 ** 70), "-o", "ft"),
     "--seed"),
    ("finetune: output inside its data folder", (*FT, "t=fine", "-o", "fine/ft"),
     "inside the input folder"),
    ("measure: --prompts with --classes", ("measure", *M, "--prompts", "prompts.txt", "--classes", "a,b", "-o", "new.utd"),
     "not both"),
    ("measure: a probe image with NaN pixels", ("measure", "--model", "open_clip:ViT-S-32", "--finetuned", "ft.safetensors",
                                                "--task", "toy", "--probes", "nanprobes", "--classes", "a,b", "-o",
                                                "new.utd"), "non-finite"),
    ("measure: output inside the probe folder", ("measure", "--model", "open_clip:ViT-S-32", "--finetuned",
                                                 "ft.safetensors", "--task", "toy", "--probes", "images", "--classes",
                                                 "a,b", "-o", "images/0.png", "--overwrite"), "inside the input folder"),
    ("solve: --anchor-weight without the anchored solve", ("solve", "d.utd", "--target", "open_clip:ViT-S-32",
                                                           "--anchor-weight", "2", "-o", "new.bank"), "--solve anchored"),
    ("solve: mu_a 1e300", ("solve", "d.utd", "--target", "open_clip:ViT-S-32", "--mu-a", "1e300", "-o", "new.bank"),
     "--mu-a must be at most"),
    ("solve: a descriptor scaled by 1e30", ("solve", "huge.utd", "--target", "open_clip:ViT-S-32", "-o", "new.bank"),
     "entries up to"),
    ("apply: alpha 0", (*A, "--alpha", "0", "-o", "out.safetensors"), "no edit"),
    ("apply: a zero coefficient", ("apply", "--target", "open_clip:ViT-S-32", "--bank", "b.bank", "--terms", "toy:0",
                                   "-o", "out.safetensors"), "no edit"),
    ("apply: adapter --max-steps 0", (*AD, "-o", "out.safetensors", "--max-steps", "0"), "no edit"),
    ("apply: a transformers export named *.safetensors", (*HF, "-o", "x.safetensors"), "is a directory"),
    ("apply: adapter dir inside the export", ("apply", "--route", "adapter", "--target", "hf:org/some-clip",
                                              "--descriptors", "d.utd", "--terms", "toy:+1", "-o", "hf_export.safetensors",
                                              "--adapter-dir", "hf_export.safetensors/ad"), "inside the export"),
    ("run --check: a missing data folder", ("run", "recipe_missing.yaml", "--check"), "do not exist"),
    ("run: an experiment setup given as a recipe", ("run", "plain.yaml"), "platonic experiment NAME --setup"),
    ("experiment: a recipe given as the setup", ("experiment", "addition", "--setup", "recipe.yaml", "-o", "newrun"),
     "platonic run recipe.yaml"),
    ("experiment: alpha 1e30", ("experiment", "addition", "--setup", "toy", "--alpha", "1e30", "-o", "newrun"),
     "times their norm"),
    ("experiment: alpha 0", ("experiment", "addition", "--setup", "toy", "--alpha", "0", "-o", "newrun"), "no edit"),
    ("experiment: mu_a 1e300", ("experiment", "addition", "--setup", "toy", "--mu-a", "1e300", "--mu-b", "1e-6", "-o",
                                "newrun"), "--mu-a must be at most"),
    ("report: a fine-tune directory", ("report", "ftdir"), "is a fine-tune directory (platonic finetune), not a run"),
    ("experiment: an unknown baseline", ("experiment", "negation", "--setup", "toy", "--baselines", "oracle", "-o",
                                         "newrun"), "not a baseline of negation"),
    ("experiment: --baselines where no experiment has them", ("experiment", "addition", "--setup", "toy", "--baselines",
                                                              "none", "-o", "newrun"), "--baselines applies to negation"),
    ("experiment: --ascent-steps without gradient ascent", ("experiment", "negation", "--setup", "toy", "--baselines",
                                                            "target_as_source", "--ascent-steps", "5", "-o", "newrun"),
     "--ascent-steps is the gradient-ascent baseline's budget"),
    ("experiment: --ascent-steps 0", ("experiment", "negation", "--setup", "toy", "--ascent-steps", "0", "-o", "newrun"),
     "--ascent-steps must be a positive number"),
    ("inspect: a directory of no platonic file", ("inspect", "userdir"), "holds no platonic file"),
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


# refusals answered before torch loads (issue 34: every error took 3-4 s, the import of torch and the backends);
# benchmarks/bench_cli.py prints the times, this checks what is imported
BEFORE_TORCH = [
    "measure: missing prompts file", "measure: template with two {}", "measure: missing fine-tune file",
    "measure: output is the fine-tune", "measure: output over a bank", "measure: probe folder missing",
    "measure: --prompts with --classes", "solve: a descriptor twice", "solve: two of one task and source",
    "solve: missing descriptor", "solve: unknown solve kind", "solve: mu_a 1e300", "apply: infinite alpha",
    "apply: output is the bank", "apply: export over a foreign file", "apply: missing bank", "apply: bank is a descriptor",
    "apply: unknown route", "apply: adapter rank 0", "apply: alpha 0", "apply: a transformers export named *.safetensors",
    "inspect: missing file", "inspect: a text file", "report: not a run directory", "report: a fine-tune directory",
    "finetune: seed 2**70", "finetune: output inside its data folder", "world build: no workers",
]
PROBE = """
import json, sys
from platonic.cli import app
try:
    app(sys.argv[1:], prog_name="platonic")
except SystemExit as exc:
    print(json.dumps({"code": exc.code, "heavy": [m for m in ("torch", "open_clip", "transformers", "peft")
                                                  if m in sys.modules]}))
"""


@pytest.mark.parametrize("name", BEFORE_TORCH)
def test_a_refusal_imports_no_torch(work, name):
    import subprocess
    import sys

    args = next(row[1] for row in BAD_INPUTS if row[0] == name)
    src = str(Path(__import__("platonic").__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True, cwd=work,
                          env={**os.environ, "PYTHONPATH": src}, timeout=120)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"code": 2, "heavy": []}, (out, proc.stderr)
    assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_piped_table_keeps_every_cell(tmp_path):
    """Issue 34: piped output was cut at 80 columns, and the source of `+1*shapes@...` disappeared."""
    source = "open_clip:ViT-B-32/laion2b_s34b_b79k-fine-tuned-on-shapes-for-twelve-epochs"
    OperatorBank("fp-target", [make_operator("shapes", source=source)]).save(tmp_path / "b.bank")
    result = CliRunner().invoke(app, ["inspect", str(tmp_path / "b.bank")], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert f"+1*shapes@{source}" in result.stdout


WARNER = """
import warnings
import typer
from platonic.cli.errors import OneLineErrors
demo = typer.Typer(cls=OneLineErrors)
@demo.command()
def warn() -> None:
    warnings.warn("open_clip:ViT-S-32: no pretrained tag given,\\nthe model has RANDOM weights", UserWarning)
@demo.command()
def other() -> None:
    pass
demo(["warn"])
"""


def test_warnings_print_as_one_line_without_a_source_path():
    """Issue 34: random weights printed a raw UserWarning with the path of the code that warned."""
    import subprocess
    import sys

    src = str(Path(__import__("platonic").__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", WARNER], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": src}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "warning: open_clip:ViT-S-32: no pretrained tag given, the model has RANDOM weights\n"


def test_inspect_reads_a_finetune_directory(work):
    result = invoke("inspect", "ftdir")
    assert result.exit_code == 0, result.output
    assert "a full fine-tune of open_clip:ViT-S-32" in result.stdout and "loss 1 -> 0.5" in result.stdout


def test_random_bytes_are_not_called_a_pickle(tmp_path):
    """Issue 34: random bytes named .pt got "pickled objects, convert --trust-pickle"."""
    from platonic import ArtifactError
    from platonic.finetuning import read_state_dict

    (tmp_path / "noise.pt").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ArtifactError, match="not a torch checkpoint: it is neither torch.save's zip archive nor a pickle"):
        read_state_dict(tmp_path / "noise.pt")


def test_a_class_without_train_images_is_named(tmp_path):
    from platonic.data.resolve import open_task
    from platonic.finetuning import train_split

    _image_folder(tmp_path / "d", {"train": ("a", "b"), "test": ("a", "b", "c")})
    with pytest.warns(UserWarning, match="class\\(es\\) c have no train images"):
        train = train_split(open_task("t", str(tmp_path / "d")))
    assert len(train) == 2
