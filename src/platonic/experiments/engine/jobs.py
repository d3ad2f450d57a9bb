"""The jobs of an experiment run that a launch of several processes spreads (`platonic.distributed.spread`).

A job computes one independent piece of a run and leaves it in a shared on-disk cache: the features of
one (model, data set) in the embedding cache, one source fine-tune's descriptors (its embeddings on
every grid), one cached fine-tune (weight space, OrthoReg sources), one gradient-ascent baseline, one
adapter fit. The run itself then goes on exactly as in one process, on the main process, and finds
everything in the caches; so its results are those of one process, and a launch killed half way
resumes with the jobs it had not finished (a finished one is a cache hit).

Phase one (`phase_one`) needs nothing but the setup; the protocols' own jobs (adapter cells) need the
descriptors, which every process reads back from the cache after phase one.
"""

from __future__ import annotations

from ...distributed import Job
from ...measurement import design_rows, target_grid
from .fastpath import FeatureStore


def _warm(store: FeatureStore, model: str, inputs, prompts) -> str:
    """Encode `inputs` and `prompts` on `model` into the store's embedding cache; "encoded" or "cached"."""
    encoder = store.setup.models[model]
    hit = store.cache.probes_path(encoder, inputs).exists()
    store.cache.probes(encoder, inputs, progress=False)
    store.cache.texts(encoder, list(prompts))
    return "cached" if hit else "encoded"


def feature_jobs(store: FeatureStore) -> list[Job]:
    """Every evaluation set and every task's probe grid (and anchored pool) on every model."""
    setup = store.setup
    sets = [t.test for t in setup.tasks.values()] + list(setup.controls.values())
    jobs = []
    for model in setup.models:
        for s in sets:
            jobs.append(Job(f"features {model}/{s.name}", lambda m=model, s=s: _warm(store, m, s.inputs, s.prompts),
                            cost=len(s.labels)))
        for task, spec in setup.tasks.items():
            def grid(m=model, task=task, spec=spec) -> str:
                target_grid(setup.models[m], spec.probes, spec.prompts, cache=store.cache, progress=False)
                pool = store.pool(task)
                if pool is not None:
                    design_rows(setup.models[m], pool[0], cache=store.cache, progress=False)
                return "encoded"

            jobs.append(Job(f"probe grid {model}/{task}", grid, cost=len(spec.probes)))
    return jobs


def descriptor_jobs(setup) -> list[Job]:
    """One job per source fine-tune of a setup whose descriptors are measured on first use (`MeasuredGrids`)."""
    jobs = getattr(setup.descriptors, "source_jobs", None)
    return jobs() if jobs is not None else []


def finetune_jobs(setup, lambdas=(0.0,)) -> list[Job]:
    """One job per cached fine-tune (model, task, OrthoReg lambda) of `setup.baselines["finetunes"]`, with its
    descriptor on the task's grid (what weight_space and orthoreg_sources read)."""
    sources = setup.baselines.get("finetunes")
    if sources is None:
        return []

    def job(model: str, task: str, lam: float) -> Job:
        def run() -> str:
            sources.task_vector(model, task, lam)
            sources.descriptor(model, task, lam)
            return "fine-tuned"

        config = sources.config(task, lam)
        cost = config.total_steps(len(sources.train[task][1])) * config.batch_size
        return Job(f"fine-tune {model}/{task} lambda {lam:g}", run, cost=cost)

    return [job(m, t, float(lam)) for lam in lambdas for m in setup.models for t in setup.tasks]


def phase_one(store: FeatureStore, lambdas=None) -> list[Job]:
    """The jobs that need nothing but the setup: features, descriptors, and (given `lambdas`) cached fine-tunes."""
    extra = finetune_jobs(store.setup, lambdas) if lambdas is not None else []
    return [*descriptor_jobs(store.setup), *extra, *feature_jobs(store)]


__all__ = ["descriptor_jobs", "feature_jobs", "finetune_jobs", "phase_one"]
