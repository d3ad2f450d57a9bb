"""Diagnostics computed from descriptors alone."""

from __future__ import annotations

from itertools import combinations


def descriptor_cosines(models: list[str], tasks: list[str], on_grid: dict) -> dict:
    """The paper's Figure 1: descriptor cosine across models (same task) and across tasks (same model).

    on_grid[(m, s, t)] is what model m's fine-tune on task s changed on task t's grid; the descriptor
    of (m, t) is on_grid[(m, t, t)]. Cross-task entries compare (m, s on t) with (m, t on t).
    """
    def mean(xs):
        xs = list(xs)
        return sum(xs) / len(xs) if xs else None  # a setup with one task has no cross-task pairs

    own = {(m, t): on_grid[(m, t, t)] for m in models for t in tasks}
    summary = {t: {"cross_model": mean(own[(a, t)].cosine(own[(b, t)]) for a, b in combinations(models, 2)),
                   "cross_task": mean(on_grid[(m, s, t)].cosine(own[(m, t)]) for m in models for s in tasks if s != t)}
               for t in tasks}
    model_matrix = [[mean(own[(a, t)].cosine(own[(b, t)]) for t in tasks) for b in models] for a in models]
    task_matrix = [[mean(on_grid[(m, s, t)].cosine(own[(m, t)]) for m in models) for t in tasks] for s in tasks]
    return {"cosine": summary, "cosine_matrices": {
        "models": {"title": "same task, across models\n(mean over tasks)", "labels": models, "matrix": model_matrix},
        "tasks": {"title": "fine-tune on row task vs column task's\ndescriptor, on its grid (mean over models)",
                  "labels": tasks, "matrix": task_matrix},
    }}
