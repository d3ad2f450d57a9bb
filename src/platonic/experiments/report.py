"""Experiment results: results.json (versioned schema) and the Markdown tables rendered from it.

A run directory holds:
    results.json   {"schema": "platonic.results", "version": 1, "setup": {...}, "settings": {...},
                    "timings": {...}, "cells": [cell, ...], "diagnostics": {...}}
    tables.md      the tables in the paper's layout, rendered from results.json alone
    *.png          retention bars, alpha trade-off curve, descriptor-cosine heatmaps

`render_tables(results)` is a pure function of the JSON, so `platonic report DIR` reproduces tables.md
byte for byte. Schema: docs/results.md. The plots (`experiments.plots`) are drawn from the summaries
here; `experiments.run.write_run` writes the three together (this module imports neither).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from ..errors import ArtifactError
from ..preflight import nearest_existing
from .registry import PROTOCOLS
from .ta_report import has_task_arithmetic, render_task_arithmetic

SCHEMA = "platonic.results"
VERSION = 1

def new_results(setup: dict, settings: dict) -> dict:
    return {"schema": SCHEMA, "version": VERSION, "setup": setup, "settings": settings, "timings": {}, "cells": [], "diagnostics": {}}


def load_results(path) -> dict:
    """A run's results.json, checked: the schema and version, and the fields the tables are made from."""
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    if not file.is_file():
        raise ArtifactError(f"{file} does not exist; give a run directory written by `platonic experiment`")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{file} is not valid JSON ({exc}); re-run the experiment to write it again") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("version"), int) \
            or data["version"] > VERSION:
        raise ArtifactError(f"{file} is not a platonic results file of version <= {VERSION}")
    problem = _results_problem(data)
    if problem:
        raise ArtifactError(f"{file} is malformed: {problem}; re-run the experiment to write it again")
    return data


_CELL_FIELDS = {"experiment": str, "method": str, "target": str, "sources": list, "tasks": list, "coefficients": list,
                "accuracy": dict, "residuals": list}


def _results_problem(data: dict) -> str | None:
    """What a results record lacks for `render_tables`, or None."""
    for key, kind in (("setup", dict), ("cells", list)):
        if not isinstance(data.get(key), kind):
            return f"'{key}' is missing or not a {kind.__name__}"
    for key in ("timings", "diagnostics", "settings"):
        if key in data and not isinstance(data[key], dict):
            return f"'{key}' is not an object"
    for i, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict):
            return f"cell {i} is not an object"
        for key, kind in _CELL_FIELDS.items():
            if not isinstance(cell.get(key), kind):
                return f"cell {i} has no valid '{key}' ({kind.__name__})"
        if not isinstance(cell.get("alpha"), (int, float)):
            return f"cell {i} has no numeric 'alpha'"
        if not all(isinstance(v, (int, float)) for v in cell["accuracy"].values()):
            return f"cell {i} has a non-numeric accuracy"
    return None


def is_run_directory(path) -> bool:
    """True for a directory holding a platonic results.json (an earlier run)."""
    file = Path(path) / "results.json"
    try:
        return json.loads(file.read_text(encoding="utf-8")).get("schema") == SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def check_run_directory(path) -> None:
    """Refuse a run directory that cannot be written, or that holds something other than an earlier run.

    Accepted: a path that does not exist yet (its nearest existing parent writable), an empty directory,
    or an earlier run's directory (`is_run_directory`), whose results and plots the run replaces.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ArtifactError(f"{path} exists and is not a directory; give a run directory (-o runs/NAME)")
    if path.is_dir() and any(path.iterdir()) and not is_run_directory(path):
        raise ArtifactError(f"{path} is a non-empty directory that is not a platonic run (no results.json); "
                            "give a new or empty directory, or an earlier run's")
    probe, writable = nearest_existing(path)
    if not writable:
        raise ArtifactError(f"cannot write the run directory {path}: {probe} is not writable (or not a directory); "
                            "choose another place")


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.2f}"


def method_means(cells: list[dict], experiment: str) -> dict[str, dict[str, float]]:
    """{method: {column: mean accuracy}} and the cell count under key "_n"."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for c in cells:
        if c["experiment"] == experiment:
            groups[c["method"]].append(c)
    out = {}
    for method, items in groups.items():
        cols = list(items[0]["accuracy"])
        out[method] = {col: _mean(c["accuracy"][col] for c in items) for col in cols}
        out[method]["_n"] = len(items)
        res = [r for c in items for r in c["residuals"]]
        out[method]["_residual"] = _mean(res) if res else float("nan")
    return out


def _table(title: str, means: dict, order, columns: list[str], column_labels: dict) -> list[str]:
    lines = [f"### {title}", "", "| method | " + " | ".join(column_labels.get(c, c) for c in columns) + " | cells | mean solve residual |",
             "|---|" + "---|" * (len(columns) + 2)]
    for method in order:
        if method in means:
            m = means[method]
            res = m["_residual"]
            lines.append(f"| {PROTOCOLS.label(method)} | " + " | ".join(_pct(m[c]) for c in columns)
                         + f" | {m['_n']} | {'-' if res != res else f'{res:.3f}'} |")
    return lines + [""]


MIN_ORACLE_GAIN = 0.01  # retention is a ratio of gains: below a 1-point oracle gain it is noise, not a figure


def retention(means: dict) -> dict[str, float | None]:
    """(closed form - zero-shot) / (oracle - zero-shot) per task slot, from the table means.

    None for a slot whose oracle gain is under MIN_ORACLE_GAIN (the ratio would be meaningless).
    """
    out = {}
    for slot in ("A", "B"):
        try:
            gain = means["oracle"][slot] - means["zero_shot"][slot]
            out[slot] = (means["closed_form"][slot] - means["zero_shot"][slot]) / gain if gain >= MIN_ORACLE_GAIN else None
        except KeyError:
            continue
    return out


def _retention_text(value: float | None) -> str:
    return f"retention {100 * value:.1f}%" if value is not None else f"retention n/a (oracle gain under {100 * MIN_ORACLE_GAIN:g} point)"


def alpha_rows(cells: list[dict]) -> list[tuple[float, float, float, int]]:
    """(alpha, mean task gain, mean control change, cells) against each cell's own zero-shot."""
    zero = {(c["target"], c["tasks"][0]): c["accuracy"] for c in cells if c["experiment"] == "alpha" and c["method"] == "zero_shot"}
    by_alpha: dict[float, list[tuple[float, float]]] = defaultdict(list)
    for c in cells:
        if c["experiment"] == "alpha" and c["method"] == "closed_form":
            z = zero[(c["target"], c["tasks"][0])]
            controls = [k for k in c["accuracy"] if k != "A"]
            by_alpha[c["alpha"]].append((c["accuracy"]["A"] - z["A"], _mean(c["accuracy"][k] - z[k] for k in controls)))
    return [(a, _mean(g for g, _ in v), _mean(k for _, k in v), len(v)) for a, v in sorted(by_alpha.items())]


def _protocol_table(protocol, experiment: str, cells: list[dict], controls: list[str]) -> list[str]:
    """The table of one experiment's records (methods, title and columns from its registry entry); for
    addition, the gains over zero-shot and the retention of the oracle's gain under it."""
    means = method_means(cells, experiment)
    lines = _table(protocol.title, means, protocol.methods, [*protocol.columns, *controls], protocol.column_labels)
    ret = retention(means) if experiment == "addition" else {}
    if ret:
        gains = {m: {s: 100 * (means[m][s] - means["zero_shot"][s]) for s in ret} for m in ("closed_form", "oracle")}
        lines += ["Gain over zero-shot (points): " + "; ".join(
            f"task {s}: closed form {gains['closed_form'][s]:+.2f}, oracle {gains['oracle'][s]:+.2f}, "
            f"{_retention_text(ret[s])}" for s in ret), ""]
    return lines


def orthoreg_summary(cells: list[dict], controls: list[str]) -> dict[str, dict]:
    """Per kind ("plain", "orthoreg"): mean A / B / controls of its closed form, its retention against its
    own oracle and against the plain oracle (per slot; None under a 1-point oracle gain), and the control
    loss (zero-shot minus closed form, mean over controls, in accuracy units)."""
    means = method_means(cells, "orthoreg_sources")
    zs = means.get("zero_shot")
    out = {}
    for kind in ("plain", "orthoreg"):
        cf, own = means.get(f"{kind}_sources"), means.get(f"{kind}_oracle")
        if zs is None or cf is None or own is None:
            continue
        row = {"means": cf, "oracle": own, "retention": {}, "retention_vs_plain_oracle": {}}
        for slot in ("A", "B"):
            for name, oracle in (("retention", own), ("retention_vs_plain_oracle", means.get("plain_oracle", own))):
                gain = oracle[slot] - zs[slot]
                row[name][slot] = (cf[slot] - zs[slot]) / gain if gain >= MIN_ORACLE_GAIN else None
        row["control_loss"] = sum(zs[c] - cf[c] for c in controls) / len(controls) if controls else None
        out[kind] = row
    return out


def _orthoreg_sources_table(results: dict) -> list[str]:
    """The plain-vs-OrthoReg summary table of an orthoreg_sources run (Markdown lines)."""
    cells, controls = results["cells"], list(results["setup"].get("controls", {}))
    diag = results.get("diagnostics", {}).get("orthoreg_sources", {})
    rows = orthoreg_summary(cells, controls)
    if not rows:
        return []
    cos = diag.get("cross_model_cosine", {})
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    lines = ["### Plain vs OrthoReg descriptor sources (cross-model addition, closed form)", "",
             "| sources | lambda | task A | task B | " + " | ".join(controls) + " | retention A / B (own oracle) | "
             "retention A / B (plain oracle) | control loss (points) | descriptor cosine across models |",
             "|---|---|---|---|" + "---|" * len(controls) + "---|---|---|---|"]
    for kind, lam in (("plain", 0.0), ("orthoreg", diag.get("chosen_lambda"))):
        if kind not in rows:
            continue
        r = rows[kind]
        c = cos.get(f"{lam:g}") if lam is not None else None
        loss = "-" if r["control_loss"] is None else f"{100 * r['control_loss']:+.2f}"
        lines.append(f"| {kind} | {'-' if lam is None else f'{lam:g}'} | {100 * r['means']['A']:.2f} | {100 * r['means']['B']:.2f} | "
                     + " | ".join(f"{100 * r['means'][k]:.2f}" for k in controls)
                     + f" | {pct(r['retention']['A'])} / {pct(r['retention']['B'])}"
                     f" | {pct(r['retention_vs_plain_oracle']['A'])} / {pct(r['retention_vs_plain_oracle']['B'])}"
                     f" | {loss}"
                     f" | {'-' if c is None else f'{c:.3f}'} |")
    val = diag.get("validation", {})
    if val:
        lines += ["", "lambda on validation (mean closed-form accuracy of tasks A and B on their val splits): "
                  + ", ".join(f"lambda {k}: {100 * v:.2f}" for k, v in val.items())
                  + f"; chosen {diag.get('chosen_lambda', 0):g} (lambda 0 = the plain sources, shown, never chosen)"]
    return lines + [""]


def _adapter_table(protocol, cells: list[dict], controls: list[str]) -> list[str]:
    """The adapter route beside the closed form on the same cells of `protocol` (records "NAME/adapter")."""
    name = f"{protocol.name}/adapter"
    lines = _table(f"{protocol.adapter_title} (accuracy %)", method_means(cells, name), PROTOCOLS.methods(name),
                   [*protocol.columns, *controls], protocol.column_labels)
    fits = [c["fit"] for c in cells if c["experiment"] == name and c["method"] == "adapter"]
    return lines + [f"Adapter fits: {len(fits)}, mean {_mean(f['seconds'] for f in fits):.1f} s and "
                    f"{_mean(f['steps'] for f in fits):.0f} steps each; the residual column is the fit's "
                    "relative residual ||UTD_live - c U|| / ||c U|| for the adapter, the solve's for the closed form.", ""]


def render_tables(results: dict) -> str:
    """All tables of a run as Markdown; a pure function of the results JSON."""
    cells = results["cells"]
    controls = list(results["setup"].get("controls", {}))
    lines = [f"# Results: {results['setup'].get('name', 'experiment')}", ""]
    experiments = {c["experiment"] for c in cells}
    if has_task_arithmetic(cells):
        lines += render_task_arithmetic(results)
    for name in ("addition", "negation", "generalization"):
        if name in experiments:
            lines += _protocol_table(PROTOCOLS[name], name, cells, controls)
    for name in ("addition", "negation"):
        if f"{name}/adapter" in experiments:
            lines += _adapter_table(PROTOCOLS[name], cells, controls)
    if "weight_space" in experiments:
        lines += _protocol_table(PROTOCOLS["weight_space"], "weight_space", cells, controls)
    if "orthoreg_sources" in experiments:
        lines += _protocol_table(PROTOCOLS["orthoreg_sources"], "orthoreg_sources", cells, controls)
        lines += _orthoreg_sources_table(results)
    if "alpha" in experiments:
        lines += [f"### {PROTOCOLS['alpha'].title}", "",
                  "| alpha | task gain (points) | control change (points) | cells |", "|---|---|---|---|"]
        lines += [f"| {a:g} | {100 * g:+.2f} | {100 * k:+.2f} | {n} |" for a, g, k, n in alpha_rows(cells)]
        lines.append("")
    cos = results.get("diagnostics", {}).get("cosine")
    if cos:
        lines += ["### Descriptor cosine", "", "| task | same task, across models | across tasks, within a model |", "|---|---|---|"]
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        lines += [f"| {t} | {fmt(v['cross_model'])} | {fmt(v['cross_task'])} |" for t, v in cos.items()]
        lines.append("")
    timings = results.get("timings", {})
    if timings:
        lines += ["### Timings", ""] + [f"- {k}: {v:.1f} s" for k, v in timings.items()] + [""]
    return "\n".join(lines)


def render_solve_comparison(paper: dict, anchored: dict) -> str:
    """The closed form solved the paper's way beside the anchored solve, on the same cells (Markdown).

    paper, anchored: results of the same setup and experiments, differing only in the solve.
    """
    controls = list(paper["setup"].get("controls", {}))
    pool = anchored["settings"]["protocols"]
    lines = ["### The paper's solve and the anchored solve (beyond the paper), closed form on the same cells", ""]
    for name in ("addition", "negation"):
        if name not in pool:
            continue
        protocol = PROTOCOLS[name]
        a, b = method_means(paper["cells"], name), method_means(anchored["cells"], name)
        columns = [*protocol.columns, *controls]
        lines += [f"{protocol.title}; anchored: pool weight {pool[name]['anchor_weight']:g}, pool "
                  f"{pool[name]['anchor_per_task']} probes of every other task", "",
                  "| method | " + " | ".join(protocol.column_labels.get(c, c) for c in columns) + " | cells |",
                  "|---|" + "---|" * (len(columns) + 1)]
        for label, means in (("zero-shot", a.get("zero_shot")), ("closed form, paper's solve", a.get("closed_form")),
                             ("closed form, anchored solve", b.get("closed_form"))):
            if means:
                lines.append(f"| {label} | " + " | ".join(_pct(means[c]) for c in columns) + f" | {means['_n']} |")
        lines.append("")
    return "\n".join(lines)
