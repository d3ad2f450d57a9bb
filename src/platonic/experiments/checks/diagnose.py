"""Why the closed form works or fails on a setup: the ceilings of a last-layer edit, and locality.

Per (model, task), from cached features (`FeatureStore`) and the model's own descriptors:

- `linear_probe`: multinomial logistic regression on the normalised pre-trained train embeddings
  (each coordinate standardised with the train split's mean and std), test top-1 (the information a
  linear read-out of the frozen embedding holds);
- `best_linear_map`: the best d x d map M of the embedding against the frozen prompts, trained with
  cross-entropy on the train split, logits = s * normalise(M z) G^T, test top-1 (what *any* edit of
  the last linear layer could reach; s: the model's logit scale, or 100 where it has none). Both are
  fitted by full-batch L-BFGS for a fixed budget (500 iterations; 50 on the tiny test world), so they are lower bounds of the
  ceilings (measured on the world: 60 iterations read 5-13 points low, 1,000 at most 4 above 500);
- `oracle_alpha05`, `oracle_alpha1`: the model's own descriptor through the closed form, folded at
  alpha (test top-1), and `residual`, the solve's first-order relative residual ||F X G^T - U|| / ||U||;
- locality of the oracle operator at alpha = 1: `own_gain` (its task's accuracy change),
  `others_change` (mean accuracy change of the other tasks), `controls_change` (mean over controls),
  and `motion_ratio`, mean ||D|| on the other tasks' probes over mean ||D|| on its own probes
  (D = the site's embedding change, z -> z + D; > 1: it moves the others more than its task);
- `prompt_leak`: the mean over the other tasks s of ||P_t Gc_s||_F^2 / ||Gc_s||_F^2, with P_t the projector
  onto the span of the task's own prompt embeddings G_t and Gc_s the other task's prompt embeddings
  minus their mean. The operator's output lies in span(G_t) (A = X^T with X = ... L_b^T, method.md
  §1.2), and a shift common to all of s's prompts changes none of its predictions, so this is the
  fraction of the other tasks' class-separating directions the operator can reach at all: 0 means
  a structurally local operator, 1 one that reaches everything. Random subspaces give about
  rank(G_t) / d, and the ranks sum to more than d when the tasks' classes do (104 prompts in 64-d);
- `participation_ratio` of each task's probe embeddings, PR = (sum lambda)^2 / sum lambda^2 of the
  covariance of z / ||z||, and per model of all tasks' probes pooled (the effective number of
  directions the tasks occupy).
"""

from __future__ import annotations

import torch

from ...errors import InvalidInputError
from ...metrics import top1
from ..engine.fastpath import FeatureStore
from ..engine.setup import EvalSet


def participation_ratio(z: torch.Tensor) -> float:
    """(sum lambda)^2 / sum lambda^2 of the covariance of the rows of z / ||z|| (z (n, d)); in [1, d]."""
    x = torch.nn.functional.normalize(z.double(), dim=1)
    x = x - x.mean(dim=0)
    lam = torch.linalg.eigvalsh(x.T @ x / max(1, x.shape[0])).clamp_min(0)
    return float(lam.sum() ** 2 / (lam ** 2).sum()) if float(lam.sum()) > 0 else 1.0


def prompt_leak(own: torch.Tensor, others: list[torch.Tensor]) -> float:
    """Mean over `others` (each (M_s, d)) of ||P Gc_s||_F^2 / ||Gc_s||_F^2; P projects onto the row span of `own` (M, d).

    Gc_s: the rows of normalise(G_s) minus their mean (a shift common to every class moves no prediction).
    """
    if not others:
        return 0.0
    g = torch.nn.functional.normalize(own.double(), dim=1)
    u, s, _ = torch.linalg.svd(g.T, full_matrices=False)  # (d, M) -> left singular vectors span the rows of g
    basis = u[:, s > s.max() * 1e-10]
    fractions = []
    for other in others:
        c = torch.nn.functional.normalize(other.double(), dim=1)
        c = c - c.mean(dim=0)
        total = float(c.pow(2).sum())
        fractions.append(float((c @ basis).pow(2).sum()) / total if total > 0 else 0.0)
    return sum(fractions) / len(fractions)


FIT_ITERATIONS = 500  # L-BFGS iterations of the linear probe and the best linear map


def _fit(parameters: list[torch.Tensor], loss_fn, iterations: int = FIT_ITERATIONS) -> None:
    """Full-batch L-BFGS (strong Wolfe, at most `iterations` steps) on `loss_fn()`; deterministic."""
    opt = torch.optim.LBFGS(parameters, lr=1.0, max_iter=iterations, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)


def linear_probe(z_train: torch.Tensor, y_train: torch.Tensor, z_test: torch.Tensor, y_test: torch.Tensor,
                 classes: int, weight_decay: float = 1e-4, iterations: int = FIT_ITERATIONS) -> float:
    """Test top-1 of softmax regression W (C, d), b (C,) fitted on standardised normalise(z_train) (n, d)."""
    x, xt = (torch.nn.functional.normalize(t.double(), dim=1) for t in (z_train, z_test))
    mean, std = x.mean(dim=0), x.std(dim=0).clamp_min(1e-8)  # the probe's weight decay acts on unit-variance inputs
    x, xt = (x - mean) / std, (xt - mean) / std
    W = torch.zeros(classes, x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    _fit([W, b], lambda: torch.nn.functional.cross_entropy(x @ W.T + b, y_train) + weight_decay * W.pow(2).sum(), iterations)
    with torch.no_grad():
        return float(((xt @ W.T + b).argmax(1) == y_test).double().mean())


def best_linear_map(z_train: torch.Tensor, y_train: torch.Tensor, z_test: torch.Tensor, y_test: torch.Tensor,
                    prompts: torch.Tensor, scale: float, iterations: int = FIT_ITERATIONS) -> float:
    """Test top-1 of the best map M (d, d), from I, for CE(scale * normalise(z M^T) G^T, y) on the train split."""
    G = torch.nn.functional.normalize(prompts.double(), dim=1)
    x = z_train.double()
    M = torch.eye(x.shape[1], dtype=torch.float64, requires_grad=True)
    _fit([M], lambda: torch.nn.functional.cross_entropy(scale * torch.nn.functional.normalize(x @ M.T, dim=1) @ G.T, y_train),
         iterations)
    with torch.no_grad():
        return top1(z_test.double() @ M.T, G, y_test)


def _logit_scale(model) -> float:
    """The model's learned logit scale; 100 (CLIP's trained value) for a model that has none."""
    try:
        return model.logit_scale
    except InvalidInputError:
        return 100.0


def diagnose(store: FeatureStore, train: dict[str, EvalSet], descriptors: dict, progress: bool = False,
             fit_iterations: int = FIT_ITERATIONS) -> dict:
    """The table above for every (model, task) of `store.setup`; train[task] is its labelled train split.

    fit_iterations: the L-BFGS budget of the linear probe and the best linear map (the two ceilings).

    descriptors[(model, task)]: the model's own descriptor of the task (its oracle).
    """
    from ...progress import track

    setup = store.setup
    tasks, controls = list(setup.tasks), list(setup.controls)
    out = {}
    for m in track(list(setup.models), description="diagnosing", enabled=progress):
        model = setup.models[m]
        zero = {s: store.accuracy(m, setup.tasks[s].test) for s in tasks}
        zero_controls = {c: store.accuracy(m, setup.controls[c]) for c in controls}
        rows = {}
        probe_z = {t: store.cache.probes(model, setup.tasks[t].probes, progress=False).z for t in tasks}  # read once
        task_prompts = {t: store.prompt_embeddings(m, setup.tasks[t].test) for t in tasks}
        for t in tasks:
            spec = setup.tasks[t]
            z_train, z_test = store.features(m, train[t]).z, store.features(m, spec.test).z
            prompts = store.prompt_embeddings(m, spec.test)
            key = (m, t)  # the oracle: the model's own descriptor (the key checks.world solves it under)
            op = store.operator(m, key, descriptors[(m, t)])
            at = {a: store.accuracy(m, spec.test, [(key, 1.0)], alpha=a) for a in (0.5, 1.0)}
            others = [store.accuracy(m, setup.tasks[s].test, [(key, 1.0)], alpha=1.0) - zero[s] for s in tasks if s != t]
            ctrl = [store.accuracy(m, setup.controls[c], [(key, 1.0)], alpha=1.0) - zero_controls[c] for c in controls]
            own_motion = store.delta(m, spec.test, key).norm(dim=1).mean()
            other_motion = torch.stack([store.delta(m, setup.tasks[s].test, key).norm(dim=1).mean() for s in tasks if s != t]).mean()
            rows[t] = {
                "zero_shot": zero[t],
                "linear_probe": linear_probe(z_train, train[t].labels, z_test, spec.test.labels, len(spec.prompts),
                                             iterations=fit_iterations),
                "best_linear_map": best_linear_map(z_train, train[t].labels, z_test, spec.test.labels, prompts, _logit_scale(model),
                                                   iterations=fit_iterations),
                "oracle_alpha05": at[0.5], "oracle_alpha1": at[1.0], "residual": op.residual,
                "own_gain": at[1.0] - zero[t], "others_change": sum(others) / len(others) if others else 0.0,
                "controls_change": sum(ctrl) / len(ctrl) if ctrl else 0.0,
                "motion_ratio": float(other_motion / own_motion) if float(own_motion) > 0 else float("nan"),
                "prompt_leak": prompt_leak(task_prompts[t], [task_prompts[s] for s in tasks if s != t]),
                "participation_ratio": participation_ratio(probe_z[t]),
            }
        out[m] = {"tasks": rows, "participation_ratio": participation_ratio(torch.cat(list(probe_z.values())))}
        store.drop_deltas(m)
    return out
