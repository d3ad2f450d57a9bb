"""The world report as Markdown (report.json holds the same numbers and every cell; see checks.world)."""

from __future__ import annotations

from ...world.image.data import CONTROL_NAMES, TASK_NAMES


def _p(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown_report(report: dict, task_names=TASK_NAMES, control_names=CONTROL_NAMES, title: str = "platonic world report") -> str:
    """The report page; `task_names` / `control_names` are the world's (the audio world passes its own)."""
    TASK_NAMES, CONTROL_NAMES = list(task_names), list(control_names)  # noqa: N806 - the page's columns
    s = report["summary"]
    kinds = [k for k in s["overall"] if k != "zero_shot"]  # the source kinds measured (full, lora)
    models = report["models"]
    lines = [f"# {title} ({report['profile']}, seed {report['seed']}, {report['recipe']})", ""]
    t = report["timings_s"]
    lines += [f"Build: {t['total']:.0f} s total ({', '.join(f'{k} {v:.0f} s' for k, v in t.items() if k != 'total')}); "
              f"{report['workers']} worker processes x {report['threads_per_worker']} thread.", ""]
    lines += [f"## Per model (means over the {len(TASK_NAMES)} tasks; accuracies in %)", "",
              "| model | d | site | logit scale | zero-shot | full FT | LoRA FT | oracle full (a=1) | oracle LoRA (a=1) | recovery full | recovery LoRA | cross-model full (a=.5) | cross-model LoRA (a=.5) | "
              + " | ".join(f"{c} zs / after full FT" for c in CONTROL_NAMES) + " |",
              "|" + "---|" * (13 + len(CONTROL_NAMES))]
    for m, r in s["per_model"].items():
        ctrl = " | ".join(f"{_p(r['controls_zero_shot'][c])} / {_p(r['full']['controls_after'][c])}" for c in CONTROL_NAMES)
        lines.append(f"| {m} | {models[m]['embed_dim']} | {models[m]['site']} | {r['logit_scale']:.1f} | {_p(r['zero_shot'])} | "
                     f"{_p(r['full']['finetuned'])} | {_p(r['lora']['finetuned'])} | {_p(r['full']['oracle_alpha1'])} | "
                     f"{_p(r['lora']['oracle_alpha1'])} | {r['full']['oracle_recovery']:.2f} | {r['lora']['oracle_recovery']:.2f} | "
                     f"{_p(r['full']['cross_model_alpha05'])} | {_p(r['lora']['cross_model_alpha05'])} | {ctrl} |")
    lines += ["", "## Per task", "",
              "| task | zero-shot mean (min-max) | same-task cross-model cos (full) | cross-task cos (full) | same-task cos (LoRA) | cross-task cos (LoRA) |",
              "|---|---|---|---|---|---|"]
    for task, r in s["per_task"].items():
        lines.append(f"| {task} | {_p(r['zero_shot_mean'])} ({_p(r['zero_shot_min'])}-{_p(r['zero_shot_max'])}) | "
                     f"{r['full']['same_task_cross_model']:.3f} | {r['full']['cross_task_within_model']:.3f} | "
                     f"{r['lora']['same_task_cross_model']:.3f} | {r['lora']['cross_task_within_model']:.3f} |")
    o = s["overall"]
    lines += ["", "## Overall", "", f"- mean zero-shot: {_p(o['zero_shot'])}%"]
    for kind in kinds:
        k = o[kind]
        lines.append(f"- {kind}: fine-tune gain {_p(k['finetune_gain'])} points; same-task cross-model cosine "
                     f"{k['same_task_cross_model']:.3f} vs cross-task {k['cross_task_within_model']:.3f}; oracle recovery "
                     f"{k['oracle_recovery']:.2f}; oracle (a=1) {_p(k['oracle_alpha1'])}%; cross-model (a=0.5) {_p(k['cross_model_alpha05'])}%")
    if "diagnostics" in report:
        lines += [""] + diagnostics_table(report, len(TASK_NAMES))
    lines += ["", "## Checks", ""] + [f"- {'PASS' if v else 'FAIL'}: {k}" for k, v in s["checks"].items()]
    lines += ["", "## Every cell (accuracy %, test split)", "",
              "| model | " + " | ".join(TASK_NAMES) + " | " + " | ".join(CONTROL_NAMES) + " |", "|" + "---|" * (1 + len(TASK_NAMES) + len(CONTROL_NAMES))]
    for m, r in models.items():
        lines.append(f"| {m} zero-shot | " + " | ".join(_p(r["zero_shot"][x]) for x in TASK_NAMES + CONTROL_NAMES) + " |")
        for kind in kinds:
            lines.append(f"| {m} {kind} FT | " + " | ".join(_p(r["finetuned"][kind][x]) for x in TASK_NAMES) + " | "
                         + " | ".join(_p(sum(r["controls_after"][kind][x][c] for x in TASK_NAMES) / len(TASK_NAMES)) for c in CONTROL_NAMES) + " |")
            lines.append(f"| {m} oracle {kind} | " + " | ".join(_p(r["oracle"][kind][x]) for x in TASK_NAMES) + " |" + " |" * len(CONTROL_NAMES))
    return "\n".join(lines) + "\n"


def diagnostics_table(report: dict, n_tasks: int = len(TASK_NAMES)) -> list[str]:
    """The diagnostics section (Markdown lines): per model, means over the tasks (experiments.checks.diagnose)."""
    s = report["summary"]
    lines = [f"## Diagnostics (full sources; means over the {n_tasks} tasks, accuracies in %)", "",
              "Linear probe: softmax regression on the pre-trained embeddings; best linear map: the best d x d map "
              "of the embedding against the frozen prompts (CE on train). Locality of the oracle operator at alpha 1: "
              "own gain, mean change of the other tasks and of the controls (points), and how much more it moves the "
              "other tasks' embeddings than its own (motion ratio). Prompt leak: the fraction of the other tasks' "
              "class-separating prompt directions inside the span of the task's own prompts, which bounds what the "
              "operator can reach (0: local by construction). PR: participation ratio of the probe embeddings "
              "(per task, mean; and all tasks pooled).", "",
              "| model | zero-shot | full FT | linear probe | best linear map | oracle a=.5 | oracle a=1 | residual | own gain | "
              "others | controls | motion ratio | prompt leak | PR per task | PR pooled |", "|" + "---|" * 15]
    for m, r in s["per_model"].items():
        d = r["diagnostics"]
        lines.append(f"| {m} | {_p(r['zero_shot'])} | {_p(r['full']['finetuned'])} | {_p(d['linear_probe'])} | "
                     f"{_p(d['best_linear_map'])} | {_p(d['oracle_alpha05'])} | {_p(d['oracle_alpha1'])} | {d['residual']:.2f} | "
                     f"{100 * d['own_gain']:+.1f} | {100 * d['others_change']:+.1f} | {100 * d['controls_change']:+.1f} | "
                     f"{d['motion_ratio']:.2f} | {d['prompt_leak']:.2f} | {d['participation_ratio']:.1f} | "
                     f"{d['pooled_participation_ratio']:.1f} |")
    lines += ["", "Every (model, task):", "",
              "| model / task | zero-shot | full FT | linear probe | best linear map | oracle a=.5 | oracle a=1 | residual | "
              "others | controls | motion ratio | prompt leak | PR |", "|" + "---|" * 13]
    for m, per in report["diagnostics"].items():
        for t, d in per["tasks"].items():
            lines.append(f"| {m} / {t} | {_p(d['zero_shot'])} | {_p(report['models'][m]['finetuned']['full'][t])} | "
                         f"{_p(d['linear_probe'])} | {_p(d['best_linear_map'])} | {_p(d['oracle_alpha05'])} | "
                         f"{_p(d['oracle_alpha1'])} | {d['residual']:.2f} | {100 * d['others_change']:+.1f} | "
                         f"{100 * d['controls_change']:+.1f} | {d['motion_ratio']:.2f} | {d['prompt_leak']:.2f} | "
                         f"{d['participation_ratio']:.1f} |")
    return lines
