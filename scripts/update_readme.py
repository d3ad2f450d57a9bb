"""Paste the demo's headline tables into the README and keep their figures beside it.

    python scripts/update_readme.py runs/demo

Reads RUN/headline.json (written by `platonic demo`), renders it (`platonic.experiments.report.render_headline`)
between the README's `<!-- headline:start -->` and `<!-- headline:end -->` markers, and copies the JSON to
docs/headline.json, from which tests/test_readme.py renders the README's table again.
"""

import json
import shutil
import sys
from pathlib import Path

from platonic.experiments.report import render_headline

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- headline:start -->", "<!-- headline:end -->"


def paste(readme: str, table: str) -> str:
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{table.rstrip()}\n{END}{after}"


def main(run: Path) -> None:
    headline = json.loads((run / "headline.json").read_text())
    readme = ROOT / "README.md"
    readme.write_text(paste(readme.read_text(), render_headline(headline)))
    shutil.copyfile(run / "headline.json", ROOT / "docs" / "headline.json")
    print(f"README.md: headline of {headline['setup']} pasted; docs/headline.json written")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/demo"))
