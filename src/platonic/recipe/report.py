"""tables.md of a recipe run: per edit, each cell's accuracies beside the target's zero-shot; the exports."""

from __future__ import annotations

import json
from pathlib import Path


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.2f}"


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def render_recipe_tables(results: dict) -> str:
    """Markdown: one table per edit (zero-shot -> edited, in %), a mean line, the exports' end-to-end check."""
    recipe, zero = results["recipe"], results["zero_shot"]
    controls = list(recipe.get("controls", {}))
    device = results.get("device", {})
    lines = [f"# Recipe `{recipe['name']}`", "",
             f"{len(recipe['models'])} models, {len(recipe['tasks'])} tasks, {len(controls)} controls; "
             f"run on {device.get('device', '?')} ({device.get('name') or '?'}) in "
             f"{results.get('timings', {}).get('total_s', 0):.1f} s. Accuracies in %, zero-shot -> edited.", ""]
    for edit in recipe["edits"]:
        cells = [c for c in results["cells"] if c["edit"] == edit["name"]]
        lines += [f"## Edit `{edit['name']}` ({edit['route'].replace('_', ' ')})", ""]
        header = ["target", "source", "terms", "alpha", "tasks (mean)", *controls]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        task_gain, control_gain = [], []
        for c in cells:
            z = zero[c["target"]]
            tasks = list(c["terms"])
            before, after = _mean(z[t] for t in tasks), _mean(c["accuracy"][t] for t in tasks)
            row = [c["target"], c["source"], " ".join(f"{v:+g}*{t}" for t, v in c["terms"].items()),
                   "-" if c.get("alpha") is None else f"{c['alpha']:g}", f"{_pct(before)} -> {_pct(after)}"]
            row += [f"{_pct(z[k])} -> {_pct(c['accuracy'][k])}" for k in controls]
            lines.append("| " + " | ".join(row) + " |")
            task_gain.append(after - before)
            control_gain += [c["accuracy"][k] - z[k] for k in controls]
        mean_task, mean_control = _mean(task_gain), _mean(control_gain)
        lines += ["", f"Mean over {len(cells)} cells: tasks {'-' if mean_task is None else f'{100 * mean_task:+.2f}'} "
                  f"points, controls {'-' if mean_control is None else f'{100 * mean_control:+.2f}'} points.", ""]
    if results.get("exports"):
        lines += ["## Exports", "", "| path | target | source | terms | end to end (tasks, controls) |", "|---|---|---|---|---|"]
        for e in results["exports"]:
            acc = e["accuracy_end_to_end"]
            lines.append(f"| `{e['path']}` | {e['target']} | {e['source']} | "
                         f"{' '.join(f'{v:+g}*{t}' for t, v in e['terms'].items())} | "
                         f"{', '.join(f'{k} {_pct(v)}' for k, v in acc.items())} |")
        lines.append("")
    return "\n".join(lines)


def rerender_recipe_run(directory) -> str:
    """`platonic report RUN`: a recipe run's tables.md written again from its results.json; returns the text."""
    from ..errors import ArtifactError
    from ..storage import atomic_write

    file = Path(directory) / "results.json"
    try:
        text = render_recipe_tables(json.loads(file.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"{file} cannot be rendered ({type(exc).__name__}: {exc}); run the recipe again") from None
    atomic_write(Path(directory) / "tables.md", lambda tmp: Path(tmp).write_text(text))
    return text
