"""Job parallel in a launch of two CPU processes (issue 36): `platonic run` and `platonic experiment` spread
their jobs, the main process writes the same results.json as one process, and a killed launch resumes
without redoing the jobs it had finished (and then still writes the results of one process).

Same results: the jobs (source fine-tunes, measurements, encodings, adapter fits) compute with the code
and settings one process uses, one torch thread each as in the one-process reference, and leave their
results in the caches the main process then reads. So every figure, digest and artifact must be equal;
only the timings and the record of the machine (the number of processes) may differ.
"""

import json

import pytest
import yaml
from launching import kill_when, run, save_tiny_pair
from image_folders import write_image_folder

pytestmark = pytest.mark.slow
MACHINE = ("timings", "device")  # how long it took, and on how many processes


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """Two random-weight transformers CLIPs (one a perturbed copy), two image-folder tasks, a `finetune:` block
    (LoRA, cached), closed-form edits, an adapter edit and an export."""
    root = tmp_path_factory.mktemp("recipe")
    save_tiny_pair(root / "tiny-a", root / "tiny-b")
    for seed, (task, classes) in enumerate({"reds": ("crimson", "scarlet"), "blues": ("navy", "sky_blue")}.items()):
        write_image_folder(root / "data" / task, classes, {"train": 6, "test": 3}, seed)
    recipe = {"name": "tiny", "models": {"a": "tiny-a", "b": "tiny-b"},
              "tasks": {"reds": {"data": "data/reds"}, "blues": {"data": "data/blues"}},
              "finetune": {"mode": "lora", "steps": 3, "batch_size": 4, "lr": 1e-2}, "probes_per_class": 3,
              "edits": [{"name": "add", "terms": "reds:+1,blues:+1"},
                        {"name": "forget", "terms": ["reds:-1"], "sources": "self"},
                        {"name": "fit", "terms": {"blues": 1}, "route": "adapter", "targets": ["a"], "sources": ["b"],
                         "adapter": {"max_steps": 3, "batch_size": 4}}],
              "exports": [{"edit": "add", "target": "a", "path": "exports/a-add"}]}
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    return root


@pytest.fixture(scope="module")
def alone(recipe, tmp_path_factory):
    """results.json of the recipe run by one process, on a cache of its own."""
    out = tmp_path_factory.mktemp("alone")
    run(["run", recipe / "recipe.yaml", "-o", out / "run"], cache=out / "cache")
    return json.loads((out / "run" / "results.json").read_text())


def _jobs(stdout: str) -> dict[str, str]:
    """{job name: what it reported} from the lines `process K/N: NAME: STATUS in S s` of a launch."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("process ") and line.count(": ") >= 2:
            _, name, status = line.split(": ", 2)
            out[name] = status.rsplit(" in ", 1)[0]
    return out


def _without(results: dict, *keys) -> dict:
    return {k: v for k, v in results.items() if k not in keys}


def test_a_killed_two_process_run_resumes_without_redoing_its_jobs_and_writes_the_results_of_one_process(
        recipe, alone, tmp_path):
    cache, args = tmp_path / "cache", ["run", recipe / "recipe.yaml", "-o", tmp_path / "run"]

    def finished() -> list:
        return sorted((cache / "finetunes").rglob("*.safetensors")) if (cache / "finetunes").is_dir() else []

    kill_when(args, lambda: len(finished()) >= 1, cache=cache)
    kept = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in finished()}
    assert kept and not (tmp_path / "run" / "results.json").exists()
    done = run(args, processes=2, cache=cache)
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in kept} == kept  # read, not written again
    sources = {name: status for name, status in _jobs(done.stdout).items() if name in alone["finetunes"]}
    assert sorted(sources.values()).count("cached") == len(kept) and len(sources) == 4
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["finetunes"] == sources  # what each source job found is what the run records
    assert results["device"]["processes"] == 2 and alone["device"]["processes"] == 1
    assert _without(results, *MACHINE, "finetunes") == _without(alone, *MACHINE, "finetunes")
    assert _jobs(done.stdout)["adapter fit (blues:+1) on a from b"] == "fitted"
    assert {line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("process ")} == \
        {"process 1/2", "process 2/2"}  # both processes took jobs


def test_a_two_process_experiment_writes_the_results_of_one_process(recipe, tmp_path):
    """addition and negation on a YAML setup: its source fine-tunes (a `finetune:` block), every encoding, the
    gradient-ascent baselines and an adapter cell of each are jobs of the launch."""
    setup = {"name": "tiny", "models": {"a": str(recipe / "tiny-a"), "b": str(recipe / "tiny-b")},
             "tasks": {"reds": {"data": str(recipe / "data" / "reds")}, "blues": {"data": str(recipe / "data" / "blues")}},
             "finetune": {"mode": "lora", "steps": 3, "batch_size": 4, "lr": 1e-2}, "probes_per_class": 3,
             "gradient_ascent": {"mode": "full", "steps": 2, "batch_size": 4, "lr": 1e-3}}
    (tmp_path / "setup.yaml").write_text(yaml.safe_dump(setup))
    args = ["experiment", "addition", "negation", "--setup", tmp_path / "setup.yaml", "--adapter-cells", 1,
            "--adapter-max-steps", 2, "--no-plots"]
    runs = {}
    for processes in (1, 2):
        done = run([*args, "-o", tmp_path / f"run{processes}"], processes=processes, cache=tmp_path / f"cache{processes}")
        runs[processes] = json.loads((tmp_path / f"run{processes}" / "results.json").read_text())
    jobs = _jobs(done.stdout)
    assert {jobs[k] for k in ("a/reds", "a/blues", "b/reds", "b/blues")} == {"trained"}
    assert sum(name.startswith("adapter cell") for name in jobs) == 2  # one addition cell, one negation cell
    assert sum(name.startswith("gradient ascent") for name in jobs) == 4 and "features b/blues" in jobs
    assert runs[2]["settings"].pop("compute")["processes"] == 2 and "compute" not in runs[1]["settings"]
    for results in runs.values():
        results["settings"].pop("created")
        for cell in results["cells"]:
            cell.get("fit", {}).pop("seconds", None)
    assert runs[2]["diagnostics"]["finetunes"] == {"a/blues": "trained", "a/reds": "trained", "b/blues": "trained",
                                                   "b/reds": "trained"}
    assert _without(runs[2], "timings") == _without(runs[1], "timings")
