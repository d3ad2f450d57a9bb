"""Experiment results: results.json (versioned schema) and the Markdown tables rendered from it.

A run directory holds:
    results.json   {"schema": "platonic.results", "version": 1, "setup": {...}, "settings": {...},
                    "timings": {...}, "cells": [cell, ...], "diagnostics": {...}}
    tables.md      the tables in the paper's layout, rendered from results.json alone
    *.png          retention bars, alpha trade-off curve, descriptor-cosine heatmaps

`render_tables(results)` is a pure function of the JSON, so `platonic report DIR` reproduces tables.md
byte for byte. Schema: docs/results.md. The plots (`experiments.plots`) are drawn from the summaries
in `experiments.tables`; `experiments.run.write_run` writes the three together (this module imports neither).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ArtifactError
from ..layouts import EXPERIMENT_SCHEMA, is_run_directory
from ..preflight import nearest_existing
from .registry import PROTOCOLS
from .tables import adapter_table, method_means, percent

SCHEMA = EXPERIMENT_SCHEMA
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


def render_tables(results: dict) -> str:
    """All tables of a run as Markdown; a pure function of the results JSON.

    Each experiment's tables come from its registry entry's report function, in registry order, each
    followed by its adapter-route table when the run fitted one; then descriptor cosines and timings.
    """
    lines = [f"# Results: {results['setup'].get('name', 'experiment')}", ""]
    experiments = {c["experiment"] for c in results["cells"]}
    for protocol in PROTOCOLS.values():
        if protocol.has_records(experiments):
            lines += protocol.report(protocol, results, PROTOCOLS)
        if f"{protocol.name}/adapter" in experiments:
            lines += adapter_table(protocol, results, PROTOCOLS)
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
                lines.append(f"| {label} | " + " | ".join(percent(means[c]) for c in columns) + f" | {means['_n']} |")
        lines.append("")
    return "\n".join(lines)


HEADLINE = {"addition": ("zero_shot", "random", "closed_form", "oracle"),
            "negation": ("zero_shot", "closed_form", "target_as_source", "gradient_ascent"),
            "generalization": ("zero_shot", "one_operator", "two_two_sources")}


def headline_means(results: dict) -> dict:
    """The figures of the headline table (`render_headline`): per experiment of `HEADLINE`, the mean accuracy
    of its headline methods per column and their cell counts, and the setup's name and controls (JSON)."""
    cells = results["cells"]
    out = {"setup": results["setup"].get("name", "experiment"), "controls": list(results["setup"].get("controls", {})),
           "experiments": {}}
    for name, methods in HEADLINE.items():
        means = method_means(cells, name)
        rows = {m: {k: v for k, v in means[m].items() if k != "_residual"} for m in methods if m in means}
        if rows:
            out["experiments"][name] = rows
    return out


def render_headline(headline: dict) -> str:
    """The demo's headline tables (Markdown) from `headline_means`: addition, negation, generalisation."""
    controls = headline["controls"]
    lines = []
    for name, rows in headline["experiments"].items():
        protocol = PROTOCOLS[name]
        columns = [*protocol.columns, *controls]
        lines += [f"| {protocol.title.split(' (')[0].lower()} | "
                  + " | ".join(protocol.column_labels.get(c, c) for c in columns) + " | cells |",
                  "|---|" + "---|" * (len(columns) + 1)]
        lines += [f"| {PROTOCOLS.label(m)} | " + " | ".join(percent(v[c]) for c in columns) + f" | {v['_n']} |"
                  for m, v in rows.items()]
        lines.append("")
    return "\n".join(lines)
