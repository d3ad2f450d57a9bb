"""Does the world behave like the paper's models? Its acceptance figures, measured by the experiment engine.

Everything goes through the library: `measure` for descriptors (`measure_on_grids`), the fast path for
every closed-form cell (`FeatureStore`: exact for a last-affine edit, see `fastpath`), and `top1` for
accuracy. Per source kind (full, LoRA):

- zero-shot and fine-tuned accuracy of every (model, task) on its test split, and the controls after
  each fine-tune;
- oracle: model i's own descriptor of t, solved on i and folded at alpha = 1; recovery =
  sum_t (acc_oracle - acc_zero_shot) / sum_t (acc_finetuned - acc_zero_shot), per model;
- cross-model: source j's descriptor solved on target i, folded at alpha = 0.5;
- descriptor agreement (`descriptor_cosines`): same-task cross-model cosine, mean over model pairs
  (paper: 0.473), against the cross-task within-model cosine, what model i's fine-tune on s changed
  on t's grid vs its fine-tune on t.

`world_report(path)` writes report.json and report.md into the world's directory (once; cached).
"""

from __future__ import annotations

import json
from pathlib import Path

from ...metrics import top1
from ...storage import atomic_write
from ..engine.diagnostics import descriptor_cosines
from ..engine.fastpath import FeatureStore, single_thread
from ..engine.setup import ExperimentSetup, measure_on_grids
from .diagnose import FIT_ITERATIONS, diagnose

KINDS = ("full", "lora")
REPORT_VERSION = 4
# L-BFGS budget of the diagnostics' two ceilings per world profile: the tiny world exists for tests
# (its figures mean nothing), and 500 iterations there took 6 of its report's 8 minutes.
FIT_ITERATIONS_BY_PROFILE = {"tiny": 50}


def fit_iterations(path: Path) -> int:
    """The diagnostics' fit budget for the world built in `path` (its build.json names the profile)."""
    profile = json.loads((Path(path) / "build.json").read_text()).get("profile")
    return FIT_ITERATIONS_BY_PROFILE.get(profile, FIT_ITERATIONS)


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def measure_world(path: Path, progress: bool = False) -> dict:
    """The raw figures of a built world: per model, per kind, per task; agreement; cross-model cells."""
    from ..setups.world import world_parts

    return measure_parts(world_parts(path), progress=progress, fit_iterations=fit_iterations(path))


def measure_parts(world, progress: bool = False, diagnostics: bool = True, fit_iterations: int = FIT_ITERATIONS) -> dict:
    """`measure_world` on a loaded world (`WorldParts`, or the audio world's parts: anything with models,
    tasks, controls, `finetuned(model, task, kind)` and `split(name, split)`).

    diagnostics=False leaves out `checks.diagnose` (linear probe, best linear map, locality,
    participation ratio: the slow part) and so the checks that read it; fit_iterations: the L-BFGS budget
    of its two ceilings."""
    models, tasks, controls = world.models, world.tasks, world.controls
    names, task_names, control_names = list(models), list(tasks), list(controls)
    out = {"models": {m: {"zero_shot": {}, "finetuned": {}, "controls_after": {}, "oracle": {}} for m in names},
           "agreement": {}, "transfer": {}}
    with single_thread():
        base_store = FeatureStore(ExperimentSetup("world", models, tasks, controls, {}))
        for m in names:
            sets = {**{t: tasks[t].test for t in task_names}, **controls}
            out["models"][m]["zero_shot"] = {s: base_store.accuracy(m, e) for s, e in sets.items()}
        for kind in KINDS:
            after: dict = {}

            def load(model: str, task: str, kind=kind, after=after):
                ft = world.finetuned(model, task, kind)
                for name, eval_set in [(task, tasks[task].test), *controls.items()]:
                    z = base_store.cache.probes(ft, eval_set.inputs, progress=False).z.double()
                    after[(model, task, name)] = top1(z, base_store.prompt_embeddings(model, eval_set), eval_set.labels)
                return ft

            descriptors, on_grid = measure_on_grids(models, tasks, load, progress=progress)
            store = FeatureStore(ExperimentSetup("world", models, tasks, controls, descriptors), cache=base_store.cache)
            for m in names:
                r = out["models"][m]
                r["finetuned"][kind] = {t: after[(m, t, t)] for t in task_names}
                r["controls_after"][kind] = {t: {c: after[(m, t, c)] for c in control_names} for t in task_names}
                r["oracle"][kind] = {}
                for t in task_names:
                    store.operator(m, (m, t), descriptors[(m, t)])
                    r["oracle"][kind][t] = store.accuracy(m, tasks[t].test, [((m, t), 1.0)], alpha=1.0)
            cells = {}
            for tgt in names:
                for t in task_names:
                    for src in names:
                        if src != tgt:
                            store.operator(tgt, (src, t), descriptors[(src, t)])
                            cells[f"{src}->{tgt}/{t}"] = store.accuracy(tgt, tasks[t].test, [((src, t), 1.0)], alpha=0.5)
                store.drop_deltas(tgt)
            out["transfer"][kind] = cells
            if kind == "full" and diagnostics:  # the default source kind: ceilings of a last-layer edit, locality, effective rank
                train = {t: world.split(t, "train") for t in task_names}
                out["diagnostics"] = diagnose(store, train, descriptors, progress=progress, fit_iterations=fit_iterations)
            cos = descriptor_cosines(names, task_names, on_grid)["cosine"]
            out["agreement"][kind] = {t: {"same_task_cross_model": c["cross_model"], "cross_task_within_model": c["cross_task"]}
                                      for t, c in cos.items()}
    for m in names:
        out["models"][m].update({"logit_scale": models[m].logit_scale, "embed_dim": models[m].embed_dim,
                                 "site": models[m].edit_site.describe(), "fingerprint": models[m].fingerprint})
    return out


def summarise(report: dict) -> dict:
    """The acceptance numbers: per model means, gains, recovery; per task cosines; overall means; checks."""
    models = report["models"]
    tasks = list(report["agreement"]["full"])
    controls = list(next(iter(models.values()))["controls_after"]["full"][tasks[0]])
    s = {"per_model": {}, "per_task": {}, "overall": {}}
    for m, r in models.items():
        zs = _mean(r["zero_shot"][t] for t in tasks)
        row = {"zero_shot": zs, "controls_zero_shot": {c: r["zero_shot"][c] for c in controls}, "logit_scale": r["logit_scale"]}
        for kind in KINDS:
            ft = _mean(r["finetuned"][kind][t] for t in tasks)
            gain = sum(r["finetuned"][kind][t] - r["zero_shot"][t] for t in tasks)
            oracle_gain = sum(r["oracle"][kind][t] - r["zero_shot"][t] for t in tasks)
            cross = [v for k, v in report["transfer"][kind].items() if k.split("->")[1].startswith(m + "/")]
            row[kind] = {"finetuned": ft, "gain": ft - zs, "oracle_alpha1": _mean(r["oracle"][kind][t] for t in tasks),
                         "oracle_recovery": oracle_gain / gain if gain else float("nan"), "cross_model_alpha05": _mean(cross),
                         "controls_after": {c: _mean(r["controls_after"][kind][t][c] for t in tasks) for c in controls}}
        if "diagnostics" in report:
            diag = report["diagnostics"][m]["tasks"]
            row["diagnostics"] = {key: _mean(diag[t][key] for t in tasks) for key in next(iter(diag.values()))}
            row["diagnostics"]["pooled_participation_ratio"] = report["diagnostics"][m]["participation_ratio"]
            row["finetuned_vs_probe_worst"] = min(r["finetuned"]["full"][t] - diag[t]["linear_probe"] for t in tasks)
        s["per_model"][m] = row
    for kind in KINDS:
        ag = report["agreement"][kind]
        for t in tasks:
            row = s["per_task"].setdefault(t, {})
            row[kind] = dict(ag[t])
            row["zero_shot_mean"] = _mean(models[m]["zero_shot"][t] for m in models)
            row["zero_shot_max"] = max(models[m]["zero_shot"][t] for m in models)
            row["zero_shot_min"] = min(models[m]["zero_shot"][t] for m in models)
        s["overall"][kind] = {
            "same_task_cross_model": _mean(ag[t]["same_task_cross_model"] for t in tasks),
            "cross_task_within_model": _mean(ag[t]["cross_task_within_model"] for t in tasks),
            **{key: _mean(s["per_model"][m][kind][name] for m in models) for key, name in (
                ("oracle_recovery", "oracle_recovery"), ("finetune_gain", "gain"),
                ("cross_model_alpha05", "cross_model_alpha05"), ("oracle_alpha1", "oracle_alpha1"))},
        }
    s["overall"]["zero_shot"] = _mean(s["per_model"][m]["zero_shot"] for m in models)
    s["checks"] = checks(s)
    return s


def checks(s: dict) -> dict:
    """PASS / FAIL of each acceptance bar of the world (docs/world.md; issue 10's bars); without diagnostics
    in the report, the bars that need them are left out."""
    pm = s["per_model"]
    out = {
        "zero_shot_25_75_every_model": all(0.25 <= r["zero_shot"] <= 0.75 for r in pm.values()),
        "no_task_above_95_zero_shot_by_every_model": all(t["zero_shot_min"] <= 0.95 for t in s["per_task"].values()),
    }
    if all("diagnostics" in r for r in pm.values()):
        out.update({
            "participation_ratio_16_every_model": all(r["diagnostics"]["pooled_participation_ratio"] >= 16 for r in pm.values()),
            "full: finetuned_at_least_linear_probe_minus_2_every_cell": all(r["finetuned_vs_probe_worst"] >= -0.02 for r in pm.values()),
            "full: oracle_local (others' mean change <= own gain / 3)": all(
                abs(r["diagnostics"]["others_change"]) <= r["diagnostics"]["own_gain"] / 3 for r in pm.values()),
        })
    for kind in KINDS:
        o = s["overall"][kind]
        out[f"{kind}: finetune_gain_15_every_model"] = all(r[kind]["gain"] >= 0.15 for r in pm.values())
        out[f"{kind}: same_task_cosine_0.3_above_cross_task"] = o["same_task_cross_model"] >= o["cross_task_within_model"] + 0.3
        out[f"{kind}: oracle_recovery_50"] = o["oracle_recovery"] >= 0.5
    return out


def world_report(path, progress: bool = False, force: bool = False) -> dict:
    """The world's report (measured once, then read from report.json); writes report.json and report.md."""
    from ...world.image.build import built_kinds, ensure_sources
    from .report import markdown_report

    def measure() -> dict:
        if built_kinds(path):
            ensure_sources(path, progress=progress)  # the report reads both source kinds
        return measure_world(Path(path), progress=progress)

    return write_report(path, measure, markdown_report, force=force)


def write_report(path, measure, markdown, force: bool = False, bars=None, name: str = "report") -> dict:
    """NAME.json / NAME.md (`name`, default report) of a built world at `path`: `measure()` -> raw figures,
    summarised and checked, with the build's timings; `markdown(report)` -> the Markdown page. Read back from
    NAME.json when current. bars(report) -> {check: bool}: the world's own acceptance bars, in place of issue
    10's (`checks`)."""
    path = Path(path)
    target = path / f"{name}.json"
    if target.exists() and not force:
        report = json.loads(target.read_text())
        if report.get("report_version") == REPORT_VERSION:
            if bars is not None:
                report["summary"]["checks"] = bars(report)
            return report
    report = measure()
    report["summary"] = summarise(report)
    if bars is not None:
        report["summary"]["checks"] = bars(report)
    build = json.loads((path / "build.json").read_text())
    report.update({"report_version": REPORT_VERSION, **{k: build[k] for k in (
        "profile", "seed", "world_version", "recipe", "workers", "threads_per_worker", "timings_s", "pretrain", "finetune_seconds")}})
    atomic_write(target, lambda tmp: Path(tmp).write_text(json.dumps(report, indent=1, sort_keys=True)))
    atomic_write(path / f"{name}.md", lambda tmp: Path(tmp).write_text(markdown(report)))
    return report
