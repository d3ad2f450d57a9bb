"""The command line: inspect each artifact kind, clear errors, the demo."""

import json

from helpers import make_descriptor
from test_storage import make_operator
from typer.testing import CliRunner

from platonic import OperatorBank
from platonic.cli import app

runner = CliRunner()


def run(*args):
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_inspect_descriptor_operator_bank(tmp_path):
    make_descriptor(seed=1).save(tmp_path / "d.utd")
    code, out = run("inspect", tmp_path / "d.utd")
    assert code == 0 and "platonic descriptor" in out and "(6, 3)" in out and "task      toy" in out
    make_operator().save(tmp_path / "op")
    code, out = run("inspect", tmp_path / "op")
    assert code == 0 and "platonic operator" in out and "+1*toy@model-a" in out
    OperatorBank("fp-target", [make_operator("a"), make_operator("b", seed=1)]).save(tmp_path / "bank")
    code, out = run("inspect", tmp_path / "bank")
    assert code == 0 and "entries   2" in out and "+1*a@model-a" in out and "+1*b@model-a" in out
    code, out = run("inspect", "--json", tmp_path / "bank")
    assert code == 0 and '"kind": "bank"' in out


def test_inspect_bad_file_is_a_clear_error_not_a_traceback(tmp_path):
    (tmp_path / "junk").write_text("not a tensor file")
    code, out = run("inspect", tmp_path / "junk")
    assert code == 2
    assert "error:" in out and "not a readable safetensors file" in out
    assert "Traceback" not in out


def test_demo_on_the_toy_setup_is_deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PLATONIC_QUIET", "1")
    code1, out1 = run("demo", "--setup", "toy", "-o", tmp_path / "a")
    code2, out2 = run("demo", "--setup", "toy", "-o", tmp_path / "b")
    assert code1 == 0 and code2 == 0, out1
    strip = lambda p: [c for c in json.loads((p / "results.json").read_text())["cells"]]  # noqa: E731
    assert strip(tmp_path / "a") == strip(tmp_path / "b")
    assert "Two-task addition" in out1 and "Negation" in out1 and "Generalisation" in out1
    from platonic.experiments.report import headline_means, render_headline  # the README's table, from the run

    headline = json.loads((tmp_path / "a" / "headline.json").read_text())
    assert headline == json.loads(json.dumps(headline_means(json.loads((tmp_path / "a" / "results.json").read_text()))))
    assert (tmp_path / "a" / "headline.md").read_text() == render_headline(headline)
    assert (tmp_path / "b" / "headline.md").read_text() == render_headline(headline)


def test_version():
    code, out = run("--version")
    assert code == 0 and out.startswith("platonic ")


def test_experiment_and_report_on_the_toy_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("PLATONIC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PLATONIC_QUIET", "1")
    out = tmp_path / "run"
    code, text = run("experiment", "addition", "alpha", "--setup", "toy", "-o", out)
    assert code == 0, text
    assert "Two-task addition" in text and "Strength sweep" in text
    tables = (out / "tables.md").read_bytes()
    code, text = run("report", out, "--no-plots")
    assert code == 0 and (out / "tables.md").read_bytes() == tables
    code, text = run("experiment", "negation", "--setup", "toy", "--alpha", "0.25", "--mu-a", "0.1", "-o", out, "--no-plots")
    assert code == 0, text
    settings = json.loads((out / "results.json").read_text())["settings"]["protocols"]["negation"]
    assert settings == {"alpha": 0.25, "mu_a": 0.1, "mu_b": 1e-6, "kind": "paper", "rank": None, "truncation": "paper",
                        "anchor_weight": 1.0, "anchor_per_task": 64, "anchor_images": None, "sources": "single"}
    code, text = run("experiment", "negation", "--setup", "toy", "--solve", "anchored", "--anchor-weight", "0.5", "-o", out,
                     "--no-plots")
    assert code == 0, text
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["protocols"]["negation"]["kind"] == "anchored"
    assert results["settings"]["protocols"]["negation"]["anchor_weight"] == 0.5
    for bad, message in ((["--anchor-weight", "0.5"], "add --solve anchored"), (["--solve", "ridge"], "unknown solve 'ridge'"),
                         (["--anchor-images", str(tmp_path)], "add --solve anchored")):
        code, text = run("experiment", "negation", "--setup", "toy", *bad, "-o", out, "--no-plots")
        assert code == 2 and message in text, text
    code, text = run("experiment", "subtraction", "--setup", "toy", "-o", out)
    assert code == 2 and "unknown experiment(s) subtraction" in text
    code, text = run("experiment", "addition", "--setup", "mars", "-o", out)
    assert code == 2 and "unknown setup 'mars'" in text
