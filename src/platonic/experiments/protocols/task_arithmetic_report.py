"""The task-arithmetic tables (method.md §2's layout) rendered from results.json cells alone.

Summary per model: rows flavour x merge rule x {plain, + OrthoReg}; columns addition absolute and
normalised accuracy (means over tasks), negation target and control accuracy (means over tasks; the
negation is of one task vector, shown on the first rule's rows), the chosen alpha and lambda, and the
mean off-diagonal cosine between the flavour's task vectors. Then the absolute (normalised) accuracy per
task. A cell without "merge" (a run before merge rules) is the sum.
"""

from __future__ import annotations

from collections import defaultdict

from ...merging import MERGE_RULES

LABELS = {"full": "full FT", "attention": "ATT-FT", "lora": "LoRA-ATT", "linear": "TTA (linear)"}
FLAVOUR_ORDER = ("full", "attention", "lora", "linear")
REFERENCE = ("Paper (ViT-L-14, 8 tasks, addition absolute / normalised): full FT 84.07 / 89.19 -> + OrthoReg 88.23 / 100.08; "
             "TTA 86.19 / 93.14 -> 87.52 / 96.44; ATT-FT 87.81 / 93.59 -> 90.41 / 100.05; LoRA-ATT 87.02 -> 89.16 absolute; "
             "negation (ATT-FT) target 24.85 -> 14.67, control 76.42 -> 75.40. Merge rules, FusionBench (ViT-B/32, 8 tasks, "
             "absolute): task arithmetic 68.0, TIES 72.2, layer-wise AdaMerging 82.6, TSV-M 83.1.")


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def _pct(x) -> str:
    return "-" if x is None or x != x else f"{100 * x:.2f}"


def _off_diagonal(matrix) -> float | None:
    n = len(matrix)
    vals = [matrix[i][j] for i in range(n) for j in range(n) if i != j]
    return _mean(vals) if vals else None


def _merge(cell: dict) -> str:
    return cell.get("merge", "sum")


def _row_label(flavour: str, merge: str, orthoreg: bool) -> str:
    rule = "" if merge == "sum" else f", {MERGE_RULES[merge].label if merge in MERGE_RULES else merge}"
    return f"{LABELS[flavour]}{rule}{' + OrthoReg' if orthoreg else ''}"


def render_task_arithmetic(results: dict) -> list[str]:
    cells = [c for c in results["cells"] if c["experiment"].startswith("task_arithmetic/")]
    heat = results.get("diagnostics", {}).get("cosine_matrices", {})
    controls = list(results.get("setup", {}).get("controls", {}))
    lam_grid = results.get("settings", {}).get("task_arithmetic", {}).get("lambdas")
    lines = []
    models = list(dict.fromkeys(c["target"] for c in cells))
    for model in models:
        add = {(c["method"], _merge(c), c["orthoreg"]): c for c in cells
               if c["target"] == model and c["experiment"].endswith("/addition")}
        neg = defaultdict(list)
        for c in cells:
            if c["target"] == model and c["experiment"].endswith("/negation"):
                neg[(c["method"], c["orthoreg"])].append(c)
        zero = add.get(("zero_shot", "sum", False))
        tasks = zero["tasks"] if zero else next(iter(add.values()))["tasks"]
        lines += [f"### Task arithmetic, {model}: {len(tasks)}-task addition and negation (accuracy %)", "",
                  "| fine-tuning | addition: absolute | addition: normalised | negation: target | negation: control | "
                  "alpha | lambda | task-vector cosine (mean off-diagonal) |", "|---|---|---|---|---|---|---|---|"]
        if zero:
            zs_ctrl = _mean(zero["accuracy"][k] for k in controls) if controls else None
            lines.append(f"| zero-shot | {_pct(_mean(zero['accuracy'][t] for t in tasks))} | - | "
                         f"{_pct(_mean(zero['accuracy'][t] for t in tasks))} | {_pct(zs_ctrl)} | 0 | - | - |")
        flavours = [f for f in FLAVOUR_ORDER if any(k[0] == f for k in add)]
        merges = list(dict.fromkeys(k[1] for k in add if k[0] != "zero_shot"))
        rows = [(f, m, o) for f in flavours for m in merges for o in (False, True) if (f, m, o) in add]
        for flavour, merge, orthoreg in rows:
            c = add[(flavour, merge, orthoreg)]
            n = neg.get((flavour, orthoreg), []) if merge == merges[0] else []
            target = _mean(x["accuracy"]["A"] for x in n) if n else None
            control = _mean(_mean(x["accuracy"][k] for k in controls) for x in n) if n and controls else None
            cos = heat.get(f"ta_{model}_{flavour}_{'orthoreg' if orthoreg else 'plain'}")
            off = _off_diagonal(cos["matrix"]) if cos else None
            alphas = "/".join(sorted({f"{x['alpha']:g}" for x in n}, key=float)) if n else ""
            lines.append(f"| {_row_label(flavour, merge, orthoreg)} | {_pct(_mean(c['accuracy'][t] for t in tasks))} "
                         f"| {_pct(_mean(c['normalized'][t] for t in tasks))} | {_pct(target)} | {_pct(control)} | "
                         f"{c['alpha']:g}{f' (negation: {alphas})' if alphas else ''} | "
                         f"{c['lambda']:g} | {'-' if off is None else f'{off:.3f}'} |")
        rules = "; ".join(f"{MERGE_RULES[m].label}: {MERGE_RULES[m].paper}" for m in merges if m in MERGE_RULES and m != "sum")
        lines += ["", f"alpha on validation from linspace(0, 1, 21) by mean normalised accuracy; lambda on validation "
                  f"from {lam_grid if lam_grid else 'the grid'}, per merge rule{f' ({rules})' if rules else ''}; negation: the alpha "
                  "with the lowest validation accuracy on the task among those keeping every control >= 95% of its zero-shot "
                  "validation accuracy; control = mean over "
                  f"{', '.join(controls) or 'no controls'}.", "", REFERENCE, ""]
        lines += [f"Per task, addition (absolute / normalised %), {model}:", "",
                  "| fine-tuning | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
        if zero:
            lines.append("| zero-shot | " + " | ".join(_pct(zero["accuracy"][t]) for t in tasks) + " |")
        for flavour, merge, orthoreg in rows:
            c = add[(flavour, merge, orthoreg)]
            lines.append(f"| {_row_label(flavour, merge, orthoreg)} | "
                         + " | ".join(f"{_pct(c['accuracy'][t])} / {_pct(c['normalized'][t])}" for t in tasks) + " |")
        lines.append("")
    return lines


def task_arithmetic_tables(protocol, results: dict, registry) -> list[str]:
    """The registry's report function of the task-arithmetic experiment (`render_task_arithmetic`)."""
    return render_task_arithmetic(results)
