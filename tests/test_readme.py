"""The README's Python example runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {})  # noqa: S102 - our own README
    assert "solve residual" in capsys.readouterr().out
    assert (tmp_path / "digits.utd").exists()


def test_readme_shows_the_two_commands():
    text = README.read_text()
    assert "make demo" in text and "make test" in text


def test_the_headline_table_is_the_one_the_demo_wrote():
    """The README's headline tables are `render_headline` of the demo's own figures (docs/headline.json, written by
    `platonic demo` as runs/demo/headline.json and copied by scripts/update_readme.py), not pasted by hand."""
    import json

    from platonic.experiments.report import render_headline

    text = README.read_text()
    block = text.split("<!-- headline:start -->", 1)[1].split("<!-- headline:end -->", 1)[0].strip()
    headline = json.loads((README.parent / "docs" / "headline.json").read_text())
    assert block and block == render_headline(headline).strip()
    assert set(headline["experiments"]) == {"addition", "negation", "generalization"}


def test_the_distribution_is_platonic_ta_and_installs_platonic():
    """PyPI's `platonic` is another project: we ship as platonic-ta, keep `import platonic` and the
    `platonic` command, and nothing in the library looks the distribution up by name."""
    import tomllib

    root = README.parents[0]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["name"] == "platonic-ta"
    assert project["scripts"] == {"platonic": "platonic.cli:app"}
    assert "platonic-ta" in README.read_text()
    lookups = re.compile(r"(version|distribution|metadata|files|requires)\(\s*[\"']platonic[\"']")
    offenders = [str(p) for p in (root / "src" / "platonic").rglob("*.py") if lookups.search(p.read_text())]
    assert not offenders
