"""The trunk world's acceptance figures, measured by the experiment engine like the image world's.

The built trunk world is read by `experiments.setups.trunk_world_parts` (its three open_clip models, the image
world's eight tasks, three controls, its last-stage and LoRA sources); every figure comes from the image world's code
(`checks.world.measure_parts`, `summarise`), checked against issue 33's bars (`trunk_world_checks`). `trunk_world_report(path)` writes report.json and report.md
into the trunk world's directory (once; cached).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..setups.trunk_world import trunk_world_parts
from .world import fit_iterations, measure_parts, write_report


def trunk_world_report(path, progress: bool = False, force: bool = False, diagnostics: bool = True,
                       students: bool = False) -> dict:
    """The trunk world's report (measured once, then read from report.json); both source kinds are built first.
    students: the report of the trunk models and the towers trained from scratch together (report-students.json,
    the students built first where they are not, and measured again when they were built since)."""
    from ...world.image.data import TASK_NAMES
    from ...world.image.trunkworld.build import ensure_sources
    from ...world.image.trunkworld.recipe import CONTROL_NAMES, MODEL_NAMES, STUDENT_NAMES
    from ...world.image.trunkworld.students import MARKER as STUDENTS_MARKER
    from ...world.image.trunkworld.students import ensure_students
    from .report import markdown_report

    if students:
        ensure_students(path, ("full", "lora"), progress=progress)
        built = json.loads((Path(path) / STUDENTS_MARKER).read_text())
        stored = Path(path) / "report-students.json"
        if stored.exists() and json.loads(stored.read_text()).get("students_build", {}).get("recipe") != built["recipe"]:
            force = True  # the students were built again (another recipe) since this report was measured

    def measure() -> dict:
        ensure_sources(path, progress=progress)  # the report reads both source kinds
        names = MODEL_NAMES + STUDENT_NAMES if students else MODEL_NAMES
        report = measure_parts(trunk_world_parts(Path(path), models=list(names)), progress=progress,
                               diagnostics=diagnostics, fit_iterations=fit_iterations(path))
        if students:
            report["students_build"] = json.loads((Path(path) / STUDENTS_MARKER).read_text())
        return report

    def markdown(report: dict) -> str:
        title = "platonic trunk world report" + (", with the towers trained from scratch" if students else "")
        page = markdown_report(report, TASK_NAMES, CONTROL_NAMES, title=title)
        if "students_build" in report:
            built = report["students_build"]
            pre = ", ".join(f"{n} {e['pretrain']['seconds']:.0f} s ({e['pretrain']['steps']} steps)"
                            for n, e in built["built"].items() if "pretrain" in e)
            times = ", ".join(f"{k} {v:.0f} s" for k, v in built["timings_s"].items())
            page += f"\nStudents ({built['recipe']}): built in {times}; pre-training {pre}.\n"
        return page

    return write_report(path, measure, markdown, force=force, bars=trunk_world_checks,
                        name="report-students" if students else "report")


def trunk_world_checks(report: dict) -> dict:
    """PASS / FAIL of issue 33's bars: every model's zero-shot 25-75 %, no task above 95 % zero-shot or fine-tuned,
    participation ratio >= 16; full sources: gain >= 12 points, oracle recovery >= 0.6 (every model, and the mean),
    locality (others' mean change / own gain at alpha 1) <= 1/3; LoRA sources: recovery >= 0.5; same-task
    cross-model descriptor cosine >= 0.3 above cross-task. The bars that need the diagnostics are left out without
    them."""
    s = report["summary"]
    pm, models = s["per_model"], report["models"]
    tasks = list(s["per_task"])
    cells = [models[m][key][kind][t] for m in models for key, kind in (("finetuned", "full"), ("finetuned", "lora"))
             for t in tasks] + [models[m]["zero_shot"][t] for m in models for t in tasks]
    out = {
        "zero_shot_25_75_every_model": all(0.25 <= r["zero_shot"] <= 0.75 for r in pm.values()),
        "no_task_above_95_zero_shot_or_finetuned": max(cells) <= 0.95,
        "full: finetune_gain_12_every_model": all(r["full"]["gain"] >= 0.12 for r in pm.values()),
        "full: oracle_recovery_60_every_model": all(r["full"]["oracle_recovery"] >= 0.6 for r in pm.values()),
        "full: oracle_recovery_60_mean": s["overall"]["full"]["oracle_recovery"] >= 0.6,
        "lora: oracle_recovery_50_every_model": all(r["lora"]["oracle_recovery"] >= 0.5 for r in pm.values()),
    }
    for kind in ("full", "lora"):
        o = s["overall"][kind]
        out[f"{kind}: same_task_cosine_0.3_above_cross_task"] = o["same_task_cross_model"] >= o["cross_task_within_model"] + 0.3
    if all("diagnostics" in r for r in pm.values()):
        out["participation_ratio_16_every_model"] = all(r["diagnostics"]["pooled_participation_ratio"] >= 16
                                                        for r in pm.values())
        out["full: oracle_local_every_model (others' mean change <= own gain / 3)"] = all(
            abs(r["diagnostics"]["others_change"]) <= r["diagnostics"]["own_gain"] / 3 for r in pm.values())
    return out
