"""The OrthoReg paper's benchmark (method.md §2): weight-space task arithmetic per fine-tuning flavour,
without and with OrthoReg, on a `TaskArithmeticSetup`.

For each model and flavour (full, attention = ATT-FT, lora = LoRA-ATT, linear = tangent), each task t
is fine-tuned on its train split (text tower frozen, prompt head frozen) into tau_t, once plainly
(lambda = 0) and once per OrthoReg weight lambda of the grid. Then

- addition, per merge rule of `merges` (`platonic.merging`: "sum" = sum_t tau_t, task arithmetic; "ties",
  "dare", "iso_c", "tsv_m"): theta_0 + alpha * merge(tau_1..tau_n), alpha in linspace(0, 1, 21) chosen by the
  mean normalised accuracy on the tasks' *validation* splits (normalised = merged accuracy / the task's
  own fine-tune's); the test splits are encoded once, at the chosen alpha: absolute and normalised
  accuracy per task. Every rule merges the same fine-tunes and uses the same alpha grid;
- lambda, per merge rule: the grid value whose merged model (at its chosen alpha) has the highest mean
  *absolute* validation accuracy (ties: the smaller lambda). Not the normalised one: a lambda that spoils
  the fine-tunes shrinks the denominator and would win on the ratio while the merged model gains nothing;
- negation (for `negation_flavours`; one task vector, so no merge rule): theta_0 - alpha * tau_t, alpha the grid value with the lowest
  validation accuracy on t among those keeping every control's validation accuracy >= 95% of its
  zero-shot; reported on the test splits (target t, controls);
- the cosine between the task vectors, per flavour, plain and with OrthoReg (heatmaps).

Speed: every evaluation encodes all the sets it needs in one batched pass; alpha = 0 is the cached
zero-shot; a linearised model's output is linear in its task vector, so for "linear" every alpha is
f_0 + alpha * (f(tau) - f_0) from one tangent pass (exact, not an approximation). Fine-tunes are
cached (`finetune_cache`). Each phase's time is recorded and printed.

Cells (results.json, docs/results.md): experiment "task_arithmetic/addition" | "task_arithmetic/negation",
method = flavour, plus "merge" (the rule; negation: "sum"), "orthoreg" (bool), "lambda", "alpha",
accuracies and normalised accuracies.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ...errors import InvalidInputError
from ...finetuning.attention import attention_weight_names
from ...merging import MERGE_RULES, merge_rule
from ...task_vector import TaskVector
from ..engine import EvalSet, Features, TaskVectorRecipe, Variants, aligned, cached_task_vector, check_lambdas, val_subset
from ..setups import TaskArithmeticSetup

FLAVOURS = ("full", "attention", "lora", "linear")
ALPHAS = tuple(round(i / 20, 2) for i in range(21))  # np.linspace(0, 1, 21)
DEFAULT_LAMBDAS = (0.1, 1.0, 10.0)
CONTROL_KEEP = 0.95
EXPERIMENT = "task_arithmetic"


def check_merges(merges: Sequence[str]) -> list[str]:
    """Refuse unknown, repeated or no merge rules (before any fine-tune)."""
    merges = list(merges)
    if not merges:
        raise InvalidInputError(f"name one or more merge rules: {', '.join(MERGE_RULES)}")
    for m in merges:
        merge_rule(m)
    if len(set(merges)) != len(merges):
        raise InvalidInputError("a merge rule is named more than once; name each once")
    return merges


def check_flavours(setup: TaskArithmeticSetup, flavours: Sequence[str]) -> None:
    """Refuse unknown or repeated flavours, and flavours a model cannot do (before any fine-tune)."""
    flavours = list(flavours)
    unknown = [f for f in flavours if f not in FLAVOURS]
    if unknown or not flavours:
        raise InvalidInputError(f"unknown flavour(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(FLAVOURS)}")
    if len(set(flavours)) != len(flavours):
        raise InvalidInputError("a flavour is named more than once; name each once")
    for name, model in setup.models.items():
        if "attention" in flavours or "lora" in flavours:
            try:
                attention_weight_names(model.tower, f"model {name} ({model.spec})", model.runs_in_forward)
            except InvalidInputError as exc:
                raise InvalidInputError(f"{exc}; or leave this model out (--models)") from None


def _cosines(taus: dict[str, TaskVector]) -> list[list[float]]:
    names = list(taus)
    return [[taus[a].cosine(taus[b]) for b in names] for a in names]


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


@dataclass
class _Run:
    """One (model, flavour, lambda): its task vectors, fine-tuned accuracies and the chosen alpha."""

    lam: float
    taus: dict[str, TaskVector]
    merged: TaskVector
    ft_val: dict[str, float]
    alpha: float
    val_curve: dict[float, float]  # alpha -> mean normalised validation accuracy
    val_absolute: float  # mean absolute validation accuracy of the merged model at the chosen alpha


def run_task_arithmetic(setup: TaskArithmeticSetup, flavours: Sequence[str] = FLAVOURS, lambdas: Sequence[float] = DEFAULT_LAMBDAS,
                        recipe: TaskVectorRecipe | None = None, negation_flavours: Sequence[str] | None = None,
                        val_size: int | None = None, progress: bool = True, log: Callable[[str], None] | None = None,
                        merges: Sequence[str] = ("sum",)) -> dict:
    """Fine-tune, merge, negate and report; returns {"cells", "timings", "settings", "diagnostics"}.

    val_size: at most this many items of each validation split (task and control) are used for the
    choices (a seeded subset; None: all). negation_flavours: the flavours negation runs for (default: all).
    merges: the merge rules of the addition (`platonic.merging.MERGE_RULES`; default the sum alone).
    """
    recipe = recipe or TaskVectorRecipe()
    flavours = list(flavours)
    merges = check_merges(merges)
    check_flavours(setup, flavours)
    lambdas = check_lambdas(lambdas)
    negation_flavours = flavours if negation_flavours is None else list(negation_flavours)
    stray = [f for f in negation_flavours if f not in flavours]
    if stray:
        raise InvalidInputError(f"negation flavour(s) {', '.join(stray)} are not among the flavours run ({', '.join(flavours)})")
    if val_size is not None and val_size < 1:
        raise InvalidInputError("val_size must be a positive number of items (or None: the whole split)")
    say = log or (lambda msg: None)
    tasks = list(setup.tasks)
    val = {t: val_subset(setup.tasks[t].val, val_size) for t in tasks}
    test = {t: setup.tasks[t].test for t in tasks}
    cval = {c: val_subset(ctrl.val, val_size) for c, ctrl in setup.controls.items()}
    ctest = {c: ctrl.test for c, ctrl in setup.controls.items()}
    timings: dict[str, float] = {}
    cells: list[dict] = []
    heatmaps: dict[str, dict] = {}
    chosen_lambda: dict[str, dict[str, float]] = {}
    per_merge: dict[str, dict[str, dict[str, float]]] = {}

    def timed(phase: str, start: float) -> None:
        timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - start

    for mname, model in setup.models.items():
        feats = Features(model)
        zero: dict[str, torch.Tensor] = {}

        def zero_shot(sets, _feats=feats, _zero=zero, _model=model):
            missing = [s for s in sets if s.name not in _zero]
            if missing:
                _zero.update(_feats.encode(_model, missing))
            return {s.name: _zero[s.name] for s in sets}

        start = time.perf_counter()
        zero_shot([*val.values(), *cval.values(), *test.values(), *ctest.values()])
        timed("zero-shot encodes", start)
        zs_val_ctrl = {c: feats.accuracy(zero[s.name], s) for c, s in cval.items()}
        zs_test = {**{t: feats.accuracy(zero[s.name], s) for t, s in test.items()},
                   **{c: feats.accuracy(zero[s.name], s) for c, s in ctest.items()}}
        cells.append({"experiment": f"{EXPERIMENT}/addition", "method": "zero_shot", "target": mname, "sources": [],
                      "tasks": tasks, "coefficients": [], "alpha": 0.0, "orthoreg": False, "lambda": 0.0,
                      "accuracy": zs_test, "normalized": {}, "residuals": []})

        for flavour in flavours:
            variants = Variants(feats, flavour, zero_shot)
            runs: dict[tuple[str, float], _Run] = {}
            for lam in (0.0, *lambdas):
                start = time.perf_counter()
                taus, hits = {}, 0
                for i, t in enumerate(tasks):
                    train = setup.tasks[t].train
                    tau, hit = cached_task_vector(model, t, train.inputs, train.labels, setup.tasks[t].prompts,
                                                  recipe.config(flavour, lam, i))
                    taus[t], hits = tau, hits + hit
                taus = aligned(taus)
                timed("fine-tunes (or cache reads)", start)
                say(f"{mname} {flavour} lambda {lam:g}: {len(tasks)} task vectors ({hits} from the cache), "
                    f"{time.perf_counter() - start:.1f} s")
                start = time.perf_counter()
                ft_val = {t: feats.accuracy(variants.features(taus[t], 1.0, [val[t]])[val[t].name], val[t]) for t in tasks}
                for rule in merges:
                    runs[(rule, lam)] = _choose_alpha(feats, variants, lam, taus, ft_val, rule, val, tasks)
                    run = runs[(rule, lam)]
                    say(f"  {merge_rule(rule).label}: alpha {run.alpha:g} (validation: mean normalised accuracy "
                        f"{100 * run.val_curve[run.alpha]:.2f}, absolute {100 * run.val_absolute:.2f})")
                timed("addition: alpha on validation", start)
                say(f"  alpha on validation, {time.perf_counter() - start:.1f} s")
            for rule in merges:
                lam_star = max(lambdas, key=lambda x: (runs[(rule, x)].val_absolute, -x))
                per_merge.setdefault(mname, {}).setdefault(flavour, {})[rule] = lam_star
                say(f"{mname} {flavour} {merge_rule(rule).label}: lambda {lam_star:g} chosen on validation")
            chosen_lambda.setdefault(mname, {})[flavour] = per_merge[mname][flavour][merges[0]]
            for rule in merges:
                for orthoreg in (False, True):
                    run = runs[(rule, per_merge[mname][flavour][rule] if orthoreg else 0.0)]
                    start = time.perf_counter()
                    ft_test = {t: feats.accuracy(variants.features(run.taus[t], 1.0, [test[t]])[test[t].name], test[t]) for t in tasks}
                    z = variants.features(run.merged, run.alpha, [*test.values(), *ctest.values()])
                    acc = {**{t: feats.accuracy(z[test[t].name], test[t]) for t in tasks},
                           **{c: feats.accuracy(z[s.name], s) for c, s in ctest.items()}}
                    cells.append({"experiment": f"{EXPERIMENT}/addition", "method": flavour, "merge": rule, "target": mname,
                                  "sources": [mname], "tasks": tasks, "coefficients": [1.0] * len(tasks), "alpha": run.alpha,
                                  "orthoreg": orthoreg, "lambda": run.lam, "accuracy": acc,
                                  "normalized": {t: acc[t] / max(ft_test[t], 1e-12) for t in tasks},
                                  "finetuned": ft_test, "finetuned_val": run.ft_val,
                                  "val_curve": {f"{a:g}": v for a, v in run.val_curve.items()},
                                  "lambda_scores": {f"{x:g}": runs[(rule, x)].val_absolute for x in lambdas} if orthoreg else {},
                                  "residuals": []})
                    timed("addition: test at the chosen alpha", start)
                    if rule != merges[0]:
                        continue
                    label = f"{flavour}{' + OrthoReg' if orthoreg else ''}"
                    heatmaps[f"ta_{mname}_{flavour}_{'orthoreg' if orthoreg else 'plain'}"] = {
                        "title": f"task-vector cosine, {mname}, {label}" + (f" (lambda {run.lam:g})" if orthoreg else ""),
                        "labels": tasks, "matrix": _cosines(run.taus)}
                    if flavour in negation_flavours:
                        start = time.perf_counter()
                        cells += _negation(feats, variants, mname, flavour, orthoreg, run, tasks, val, test, cval, ctest, zs_val_ctrl)
                        timed("negation", start)
            variants.forget()
    return {"cells": cells, "timings": timings,
            "settings": {"flavours": flavours, "lambdas": list(lambdas), "alphas": list(ALPHAS), "recipe": recipe.model_dump(),
                         "negation_flavours": negation_flavours, "val_size": val_size, "control_keep": CONTROL_KEEP,
                         "merges": merges, "merge_papers": {m: merge_rule(m).paper for m in merges},
                         "chosen_lambda": chosen_lambda, "chosen_lambda_per_merge": per_merge},
            "diagnostics": {"cosine_matrices": heatmaps}}


def _choose_alpha(feats, variants, lam, taus, ft_val, rule, val, tasks) -> _Run:
    """The merged vector of `rule` and its alpha on validation (the mean normalised accuracy; ties: the smaller alpha)."""
    merged = TaskVector.merge(taus.values(), rule=rule)
    curve, absolute = {}, {}
    for a in ALPHAS:
        z = variants.features(merged, a, list(val.values()))
        accs = {t: feats.accuracy(z[val[t].name], val[t]) for t in tasks}
        curve[a] = _mean(accs[t] / max(ft_val[t], 1e-12) for t in tasks)
        absolute[a] = _mean(accs.values())
    best = max(ALPHAS, key=lambda a: (curve[a], -a))
    return _Run(lam, taus, merged, ft_val, best, curve, absolute[best])


def task_arithmetic_jobs(setup: TaskArithmeticSetup, flavours: Sequence[str] = FLAVOURS,
                         lambdas: Sequence[float] = DEFAULT_LAMBDAS, recipe: TaskVectorRecipe | None = None,
                         **_: object) -> list:
    """One job per fine-tune of `run_task_arithmetic` (model, flavour, lambda, task), into the fine-tune cache
    (a launch spreads them; the run then reads every task vector back). Other options do not change them."""
    from ...distributed import Job

    recipe = recipe or TaskVectorRecipe()

    def job(mname: str, flavour: str, lam: float, i: int, t: str):
        def run() -> str:
            train = setup.tasks[t].train
            _, hit = cached_task_vector(setup.models[mname], t, train.inputs, train.labels, setup.tasks[t].prompts,
                                        recipe.config(flavour, lam, i))
            return "cached" if hit else "fine-tuned"

        config = recipe.config(flavour, lam, i)
        return Job(f"fine-tune {mname}/{t} {flavour} lambda {lam:g}", run,
                   cost=config.total_steps(len(setup.tasks[t].train.labels)) * config.batch_size)

    return [job(m, f, float(lam), i, t) for m in setup.models for f in flavours for lam in (0.0, *lambdas)
            for i, t in enumerate(setup.tasks)]


def _negation(feats, variants, mname, flavour, orthoreg, run, tasks, val, test, cval, ctest, zs_val_ctrl) -> list[dict]:
    """theta_0 - alpha tau_t per task: alpha on validation under the control constraint (`negation_alpha`), then
    the test splits."""
    cells = []
    for t in tasks:
        tau = run.taus[t]
        best = negation_alpha(feats, variants, tau, val[t], cval, zs_val_ctrl)
        z = variants.features(tau, -best, [test[t], *ctest.values()])
        acc = {"A": feats.accuracy(z[test[t].name], test[t]), **{c: feats.accuracy(z[s.name], s) for c, s in ctest.items()}}
        cells.append({"experiment": f"{EXPERIMENT}/negation", "method": flavour, "merge": "sum", "target": mname, "sources": [mname],
                      "tasks": [t], "coefficients": [-1.0], "alpha": best, "orthoreg": orthoreg, "lambda": run.lam,
                      "accuracy": acc, "residuals": []})
    return cells


def negation_alpha(feats: Features, variants: Variants, tau: TaskVector, task_val: EvalSet, cval: dict[str, EvalSet],
                   zs_val_ctrl: dict[str, float], alphas: Sequence[float] = ALPHAS) -> float:
    """The alpha of theta_0 - alpha tau: among `alphas` where every control keeps >= CONTROL_KEEP x its zero-shot
    validation accuracy (`zs_val_ctrl`), the one with the lowest validation accuracy on the task (ties: the smaller).

    Per alpha the controls' splits are encoded one after another, stopping at the first that fails, and the task's
    split only where all keep: the rule usually allows only the smallest alphas, so most candidates end at their
    first control (the same choice as encoding every split at every alpha). alpha 0 (zero-shot) always keeps."""
    scores = {}
    for a in alphas:
        if all(feats.accuracy(variants.features(tau, -a, [s])[s.name], s) >= CONTROL_KEEP * zs_val_ctrl[c]
               for c, s in cval.items()):
            scores[a] = feats.accuracy(variants.features(tau, -a, [task_val])[task_val.name], task_val)
    return min(scores, key=lambda a: (scores[a], a))
