"""Markdown tables of experiment results, rendered from results.json cells alone (`report.render_tables`).

Each registry entry (`experiments.registry.Protocol.report`) names one of the renderers here, which take
(protocol, results, registry): the generic table of method means (`protocol_table`), the strength sweep
(`alpha_table`), the plain-vs-OrthoReg summary (`orthoreg_sources_tables`), the adapter route beside the
closed form (`adapter_table`). The summaries the plots draw (`method_means`, `retention`, `alpha_rows`)
live here too.
"""

from __future__ import annotations

from collections import defaultdict


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def percent(x: float) -> str:
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


def method_table(title: str, means: dict, order, columns: list[str], column_labels: dict, label) -> list[str]:
    """A Markdown table of method means: rows in `order`, `label(method)` their names, then cells and residual."""
    lines = [f"### {title}", "", "| method | " + " | ".join(column_labels.get(c, c) for c in columns) + " | cells | mean solve residual |",
             "|---|" + "---|" * (len(columns) + 2)]
    for method in order:
        if method in means:
            m = means[method]
            res = m["_residual"]
            lines.append(f"| {label(method)} | " + " | ".join(percent(m[c]) for c in columns)
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


def family_retention(results: dict, experiment: str = "addition") -> list[dict]:
    """Cross-model retention per (source family, target family), from the closed-form cells.

    For every closed-form cell and task slot k, with source s_k and target t: the transfer gain
    acc_k - zero_shot_k and the target's own oracle gain oracle_k - zero_shot_k on the same target and tasks;
    retention = sum of transfer gains / sum of oracle gains over a family pair's (cell, slot)s, None under
    MIN_ORACLE_GAIN on average. Families are `results["setup"]["models"][NAME]["family"]` (a run without them
    gives []). Rows: {"source", "target", "models" (the (source, target) model pairs), "slots", "gain",
    "oracle_gain", "retention"}, sorted by family pair."""
    models = results.get("setup", {}).get("models", {})
    family = {name: m.get("family") for name, m in models.items()}
    if not family or None in family.values():
        return []
    reference = {(c["method"], c["target"], tuple(c["tasks"])): c["accuracy"] for c in results["cells"]
                 if c["experiment"] == experiment and c["method"] in ("zero_shot", "oracle")}
    sums: dict[tuple[str, str], list] = defaultdict(lambda: [0.0, 0.0, 0, set()])
    for c in results["cells"]:
        if c["experiment"] != experiment or c["method"] != "closed_form":
            continue
        key = (c["target"], tuple(c["tasks"]))
        zero, oracle = reference.get(("zero_shot", *key)), reference.get(("oracle", *key))
        if zero is None or oracle is None:
            continue
        for slot, source in zip(("A", "B"), c["sources"]):
            row = sums[(family[source], family[c["target"]])]
            row[0] += c["accuracy"][slot] - zero[slot]
            row[1] += oracle[slot] - zero[slot]
            row[2] += 1
            row[3].add((source, c["target"]))
    out = []
    for (src, tgt), (gain, oracle_gain, n, pairs) in sorted(sums.items()):
        out.append({"source": src, "target": tgt, "models": sorted(pairs), "slots": n, "gain": gain / n,
                    "oracle_gain": oracle_gain / n,
                    "retention": gain / oracle_gain if oracle_gain / n >= MIN_ORACLE_GAIN else None})
    return out


def _family_table(results: dict) -> list[str]:
    rows = family_retention(results)
    if not rows:
        return []
    lines = ["Retention per (source family, target family): closed form and the target's own oracle, gain over "
             "zero-shot (points), mean over cells and task slots", "",
             "| source family | target family | model pairs | slots | closed form | oracle | retention |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ret = "n/a" if r["retention"] is None else f"{100 * r['retention']:.1f}%"
        lines.append(f"| {r['source']} | {r['target']} | {len(r['models'])} | {r['slots']} | {100 * r['gain']:+.2f} | "
                     f"{100 * r['oracle_gain']:+.2f} | {ret} |")
    return lines + [""]


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


def protocol_table(protocol, results: dict, registry) -> list[str]:
    """The table of one experiment's records (methods, title and columns from its registry entry); for
    addition, the gains over zero-shot and the retention of the oracle's gain under it."""
    experiment, cells, controls = protocol.name, results["cells"], _controls(results)
    means = method_means(cells, experiment)
    lines = method_table(protocol.title, means, protocol.methods, [*protocol.columns, *controls], protocol.column_labels,
                         registry.label)
    ret = retention(means) if experiment == "addition" else {}
    if ret:
        gains = {m: {s: 100 * (means[m][s] - means["zero_shot"][s]) for s in ret} for m in ("closed_form", "consensus", "oracle")
                 if m in means}
        lines += ["Gain over zero-shot (points): " + "; ".join(
            f"task {s}: closed form {gains['closed_form'][s]:+.2f}, "
            + (f"consensus {gains['consensus'][s]:+.2f}, " if "consensus" in gains else "")
            + f"oracle {gains['oracle'][s]:+.2f}, {_retention_text(ret[s])}" for s in ret), ""]
        lines += _family_table(results)
    cos = results.get("diagnostics", {}).get("consensus_cosine") if "consensus" in means else None
    if cos:
        lines += ["Cosine to the target's own descriptor (mean over targets and tasks): consensus "
                  f"{_mean(v['consensus'] for v in cos.values()):.3f}, single source {_mean(v['single'] for v in cos.values()):.3f}; "
                  "per task: " + ", ".join(f"{t} {v['consensus']:.2f} / {v['single']:.2f}" for t, v in cos.items()), ""]
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


def orthoreg_sources_tables(protocol, results: dict, registry) -> list[str]:
    """The protocol's table, then the plain-vs-OrthoReg summary table of an orthoreg_sources run (Markdown lines)."""
    return protocol_table(protocol, results, registry) + _orthoreg_summary_table(results)


def _orthoreg_summary_table(results: dict) -> list[str]:
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


def adapter_table(protocol, results: dict, registry) -> list[str]:
    """The adapter route beside the closed form on the same cells of `protocol` (records "NAME/adapter")."""
    name, cells, controls = f"{protocol.name}/adapter", results["cells"], _controls(results)
    lines = method_table(f"{protocol.adapter_title} (accuracy %)", method_means(cells, name), registry.methods(name),
                         [*protocol.columns, *controls], protocol.column_labels, registry.label)
    fits = [c["fit"] for c in cells if c["experiment"] == name and c["method"] == "adapter"]
    return lines + [f"Adapter fits: {len(fits)}, mean {_mean(f['seconds'] for f in fits):.1f} s and "
                    f"{_mean(f['steps'] for f in fits):.0f} steps each; the residual column is the fit's "
                    "relative residual ||UTD_live - c U|| / ||c U|| for the adapter, the solve's for the closed form.", ""]




def alpha_table(protocol, results: dict, registry) -> list[str]:
    """The strength sweep: task gain and control change against alpha."""
    lines = [f"### {protocol.title}", "", "| alpha | task gain (points) | control change (points) | cells |", "|---|---|---|---|"]
    lines += [f"| {a:g} | {100 * g:+.2f} | {100 * k:+.2f} | {n} |" for a, g, k, n in alpha_rows(results["cells"])]
    return lines + [""]


def _controls(results: dict) -> list[str]:
    return list(results["setup"].get("controls", {}))
