"""Running a recipe (`platonic run RECIPE.yaml`): measure, solve, apply, export, evaluate.

One run directory, filled beside its path and swapped in atomically (`storage.atomic_directory`):

    RUN/recipe.yaml, recipe.json          the resolved recipe (relative paths made absolute)
    RUN/results.json                      library versions, device, fine-tunes (trained / cached), every
                                          cell's accuracies beside the target's zero-shot, exports, timings
    RUN/tables.md                         one short table per edit, and the exports
    RUN/descriptors/SOURCE.TASK.utd       every descriptor measured (N probes x M prompts)
    RUN/banks/TARGET.from-SOURCE.bank     the closed-form operators of each (target, source)
    RUN/adapters/EXPORT/                  the peft adapter of an exported adapter-route cell
    RUN/<export path>/                    each exported model, in its own library's format, with a card

A cell is (composition, target, source). Closed-form cells are evaluated on cached features (the fast
path, `experiments.engine.fastpath`: z_new = z + alpha sum_l c_l D_l, exact for an edit at the last affine);
adapter cells fit a LoRA on the target (method.md §1.4), merge it and encode everything again. Each
export is the real edited model; its accuracies are measured end to end and recorded beside the
cell's, so the run checks its own fast path.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import yaml

from ..compute import Compute, using
from ..data.probe_files import load_probes
from ..distributed import current, join, launch_size, on_main, process_device, solo
from ..environment import device_record, library_versions
from ..errors import InvalidInputError
from ..experiments.engine import FeatureStore, accuracy_end_to_end, cached_adapt, finetuned_model
from ..experiments.engine.setup import ExperimentSetup
from ..experiments.setups import made_source, read_data, task_finetune
from ..finetuning import load_finetuned
from ..hashing import tensor_digest
from ..layouts import RECIPE_SCHEMA, is_recipe_run
from ..measurement import EmbeddingCache, measure
from ..models import load_model
from ..progress import track
from ..solve_config import SolveConfig
from ..storage import atomic_directory
from .config import Recipe, recipe_json
from .launch import spread_recipe
from .report import render_recipe_tables

SCHEMA = RECIPE_SCHEMA
VERSION = 1


def _label(composition: dict[str, float]) -> str:
    return ",".join(f"{task}:{c:+g}" for task, c in composition.items())


class _Run:
    """The state of one run: models, data, descriptors, feature stores, fitted adapters."""

    def __init__(self, recipe: Recipe, device: str, progress: bool):
        self.recipe, self.device, self.progress = recipe, device, progress
        self.cache = EmbeddingCache()
        self.finetunes: dict[str, str] = {}
        self.adapters: dict[tuple, object] = {}
        self.stores: dict[SolveConfig, FeatureStore] = {}

    # -- data, sources, descriptors ------------------------------------------------------------------
    def load(self) -> None:
        recipe = self.recipe
        config = recipe.experiment_config()
        recipe.check_files()  # every path, before any model loads
        self.models = {name: load_model(spec, device=self.device) for name, spec in recipe.models.items()}
        self.tasks, self.train, self.controls = read_data(self.models, recipe.tasks, recipe.controls, config, self.progress)

    def source(self, model: str, task: str):
        listed = self.recipe.sources.get(model, {}).get(task)
        if listed is not None:
            return load_finetuned(self.models[model], listed, require_pinned_revision=self.recipe.require_pinned)
        block = task_finetune(self.recipe.finetune, task, self.recipe.tasks[task].finetune)
        tau, hit = made_source(self.models[model], task, self.train[task], self.tasks[task].prompts, block)
        self.finetunes[f"{model}/{task}"] = "cached" if hit else "trained"
        return finetuned_model(self.models[model], tau, block.mode)

    def measure(self) -> None:
        self.descriptors = {}
        pairs = sorted(self.recipe.needed_sources())
        for model, task in track(pairs, description="measuring descriptors", enabled=self.progress):
            spec = self.tasks[task]
            self.descriptors[(model, task)] = measure(self.models[model], self.source(model, task), spec.probes,
                                                      spec.prompts, task, cache=self.cache, progress=False,
                                                      device=self.device)
        self.setup = ExperimentSetup(self.recipe.name, self.models, self.tasks, self.controls, self.descriptors)

    # -- evaluation ----------------------------------------------------------------------------------
    def store(self, edit) -> FeatureStore:
        settings = edit.solve
        if settings not in self.stores:
            pool = None if settings.anchor_images is None else load_probes(settings.anchor_images, "anchor_images")
            self.stores[settings] = FeatureStore(self.setup, cache=self.cache, solve=settings, anchor_images=pool)
        return self.stores[settings]

    def sets(self, composition: dict[str, float]) -> dict:
        return {**{task: self.tasks[task].test for task in composition}, **self.controls}

    def zero_shot(self) -> dict[str, dict[str, float]]:
        store = next(iter(self.stores.values()), None) or FeatureStore(self.setup, cache=self.cache)
        every = {**{t: s.test for t, s in self.tasks.items()}, **self.controls}
        return {target: {name: store.accuracy(target, s) for name, s in every.items()} for target in self.models}

    def operator(self, edit, composition, target, source):
        """(sum_l c_l O_l on `target` from `source`'s descriptors, {task: residual})."""
        store, total, residuals = self.store(edit), None, {}
        for task, c in composition.items():
            op = store.operator(target, ("real", source, task), self.descriptors[(source, task)])
            residuals[task] = op.residual
            total = c * op if total is None else total + c * op
        return total, residuals

    def closed_form_cell(self, edit, composition, target, source) -> dict:
        store = self.store(edit)
        _, residuals = self.operator(edit, composition, target, source)
        terms = [(("real", source, task), c) for task, c in composition.items()]
        alpha = edit.strength(composition)
        accuracy = {name: store.accuracy(target, s, terms, alpha) for name, s in self.sets(composition).items()}
        return {"alpha": alpha, "accuracy": accuracy, "residuals": {k: round(float(v), 6) for k, v in residuals.items()
                                                                  if v is not None}}

    def adapter_cell(self, edit, composition, target, source) -> dict:
        pairs = [(c, self.descriptors[(source, task)]) for task, c in composition.items()]
        probes = {self.descriptors[(source, task)].grid.probe_digest: self.tasks[task].probes for task in composition}
        adapter, _ = cached_adapt(self.models[target], pairs, config=edit.adapter, probes=probes, cache=self.cache)
        self.adapters[(edit.name, _label(composition), target, source)] = adapter
        model = adapter.merge_into(copy.deepcopy(self.models[target]))
        accuracy = {name: accuracy_end_to_end(model, s, self.cache) for name, s in self.sets(composition).items()}
        return {"accuracy": accuracy, "steps": adapter.report.get("steps"),
                "relative_residual": adapter.report.get("relative_residual")}

    def cells(self) -> list[dict]:
        out = []
        work = [(edit, *cell) for edit in self.recipe.edits for cell in self.recipe.cells_of(edit)]
        for edit, composition, target, source in track(work, description="evaluating edits", enabled=self.progress):
            run = self.closed_form_cell if edit.route == "closed_form" else self.adapter_cell
            out.append({"edit": edit.name, "route": edit.route, "target": target, "source": source,
                        "terms": dict(composition), **run(edit, composition, target, source)})
        return out

    # -- exports -------------------------------------------------------------------------------------
    def edited_model(self, edit, composition, target, source):
        from ..transfer import apply

        model = copy.deepcopy(self.models[target])
        if edit.route == "closed_form":
            op, _ = self.operator(edit, composition, target, source)
            apply(model, op, alpha=edit.strength(composition))
            return model, None
        adapter = self.adapters[(edit.name, _label(composition), target, source)]
        return adapter.merge_into(model), adapter

    def export(self, export, root: Path, resolved: dict) -> dict:
        from ..transfer import save_model

        edit, composition, target, source = self.recipe.export_cell(export)
        model, adapter = self.edited_model(edit, composition, target, source)
        provenance = {"recipe": resolved, "run": {"recipe": self.recipe.name, "edit": edit.name, "source": source,
                                                 "source_spec": self.recipe.models[source]},
                      **({"base_model": export.base_model} if export.base_model else {})}
        if adapter is not None:
            provenance["adapter_dir"] = f"adapters/{export.path}"
            (root / "adapters" / export.path).parent.mkdir(parents=True, exist_ok=True)
            adapter.save(root / "adapters" / export.path)
        path = root / export.path
        path.parent.mkdir(parents=True, exist_ok=True)
        save_model(model, path, provenance)
        end_to_end = {name: accuracy_end_to_end(model, s) for name, s in self.sets(composition).items()}
        return {"path": export.path, "edit": edit.name, "route": edit.route, "target": target, "source": source,
                "terms": dict(composition), "spec": model.spec, "fingerprint": model.fingerprint,
                "accuracy_end_to_end": end_to_end}

    def save_artifacts(self, root: Path) -> None:
        from ..bank import OperatorBank

        (root / "descriptors").mkdir()
        for (model, task), d in self.descriptors.items():
            d.save(root / "descriptors" / f"{model}.{task}.utd")
        banks: dict[tuple[str, str], OperatorBank] = {}
        for store in self.stores.values():
            for target, key, op in store.solved_operators():
                _, source, _ = key
                bank = banks.setdefault((target, source), OperatorBank(op.target))
                bank.add(op, replace=True)
        if banks:
            (root / "banks").mkdir()
        for (target, source), bank in banks.items():
            bank.save(root / "banks" / f"{target}.from-{source}.bank")


def run_recipe(recipe: Recipe, output, *, device: str | None = None, progress: bool = True, overwrite: bool = False,
               compute: Compute | None = None, log=None) -> dict:
    """Run `recipe` and write its run directory `output` atomically (module docstring); returns results.

    An existing `output` is replaced only when it is a previous recipe run, or with `overwrite`.
    compute: device, autocast dtype, batch size and decoding workers (default: the recipe's keys, with
    `device` for its device). In a launch of several processes (`platonic.distributed`) the recipe's
    independent jobs are spread over them first (`recipe.launch`); the main process then runs the recipe as
    one process would, from the caches, and writes the run; every process returns the results. `log`
    prints one line per job.
    """
    output = Path(output)
    if output.exists() and not (is_recipe_run(output) or overwrite):
        raise InvalidInputError(f"{output} exists and is not a previous platonic run; choose a new -o or pass --overwrite")
    settings = compute or recipe.compute(device=device)
    join(settings.torch_device())
    settings = settings.model_copy(update={"device": process_device(str(settings.torch_device()))})
    with using(settings):
        group = current()
        if not group.parallel:
            return _run_recipe(recipe, output, settings, progress, overwrite)
        run = _Run(recipe, settings.device, progress)
        run.load()
        launched = spread_recipe(run, log)

        def alone() -> dict:
            with solo():
                return _run_recipe(recipe, output, settings, progress, overwrite, run, launched)

        return group.agree(on_main(alone))


def _run_recipe(recipe: Recipe, output: Path, settings: Compute, progress: bool, overwrite: bool,
                run: _Run | None = None, launched: dict | None = None) -> dict:
    """The recipe in this process alone (on a launch's main process, after the jobs: `run` already loaded, and
    `launched` {"model/task": "trained"} for the sources a process of the launch fine-tuned)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    timings, started = {}, time.perf_counter()
    if run is None:
        run = _Run(recipe, settings.device, progress)
        run.load()
    timings["load_s"] = round(time.perf_counter() - started, 3)
    t = time.perf_counter()
    run.measure()
    run.finetunes.update({k: v for k, v in (launched or {}).items() if v == "trained" and k in run.finetunes})
    timings["measure_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    cells = run.cells()
    zero_shot = run.zero_shot()
    timings["evaluate_s"] = round(time.perf_counter() - t, 3)
    resolved = recipe_json(recipe)
    results = {"schema": SCHEMA, "version": VERSION, "recipe": resolved, "versions": library_versions(),
               "device": {**device_record(settings.device), "processes": launch_size()},
               "compute": settings.model_dump(mode="json", exclude={"device"}), "finetunes": run.finetunes,
               "models": {name: {"spec": m.spec, "fingerprint": m.base_fingerprint, "embed_dim": m.embed_dim,
                                 "edit_site": m.edit_site.describe(), "family": m.family}
                          for name, m in run.models.items()},
               "descriptors": {f"{m}.{t}": {"shape": list(d.shape), "norm": float(d.norm()),
                                           "sha256": tensor_digest(d.matrix)}
                               for (m, t), d in run.descriptors.items()},
               "zero_shot": zero_shot, "cells": cells, "exports": [], "timings": timings}

    def write(tmp: Path) -> None:
        t0 = time.perf_counter()
        run.save_artifacts(tmp)
        for export in track(recipe.exports, description="exporting", enabled=progress):
            results["exports"].append(run.export(export, tmp, resolved))
        timings["export_s"] = round(time.perf_counter() - t0, 3)
        timings["total_s"] = round(time.perf_counter() - started, 3)
        (tmp / "recipe.json").write_text(json.dumps(resolved, indent=2, sort_keys=True))
        (tmp / "recipe.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
        (tmp / "results.json").write_text(json.dumps(results, indent=2))  # insertion order: a re-render equals tables.md
        (tmp / "tables.md").write_text(render_recipe_tables(results))

    atomic_directory(output, write, replaceable=is_recipe_run, overwrite=overwrite, what="platonic run directory")
    return results
