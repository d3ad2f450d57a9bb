"""Time the closed-form solve at paper scale against the straightforward two-SVD evaluation.

Prints, for each size, the time of `platonic.solve` (Cholesky of the smaller Gram of F, thin SVD of
the small G), of `solve_reference` (thin SVDs of F and G^T, method.md §1.2 as written), their ratio,
the max relative difference of the results (inputs in float64, so that the difference measures the
method and not the rounding of a float32 output), and the ratio to the time of forming F^T F alone (the
floor: any exact method reads F at least once into a d x d product). Then a bank of 8 descriptors
on one grid: one `RidgeSolver` + `solve_many` against 8 reference solves, and against the reference
with its SVDs computed once.

Target (issue 2): >= 3x faster than the reference at the large size, results within 1e-8 relative.

    python benchmarks/bench_solve.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import torch

from platonic import RidgeSolver, solve, solve_reference


def embeddings(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """Unit rows with a shared mean direction and a decaying spectrum, like real CLIP embeddings."""
    scales = torch.logspace(0, -1.5, d, dtype=torch.float64)
    x = torch.randn(n, d, generator=gen, dtype=torch.float64) * scales + 0.6 * torch.randn(1, d, generator=gen, dtype=torch.float64) * scales
    return torch.nn.functional.normalize(x, dim=1)


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def bench_size(n: int, m: int, d: int, repeat: int) -> None:
    gen = torch.Generator().manual_seed(0)
    F, G = embeddings(n, d, gen), embeddings(m, d, gen)
    U = 0.02 * torch.randn(n, m, generator=gen, dtype=torch.float64)
    t_floor, _ = best_of(lambda: F.T @ F, repeat)
    t_fast, X_fast = best_of(lambda: solve(F, G, U), repeat)
    t_ref, X_ref = best_of(lambda: solve_reference(F, G, U), repeat)
    print(f"N={n:>6} M={m:>4} d={d:>5} | platonic.solve {t_fast:7.3f} s | two-SVD reference {t_ref:7.3f} s | "
          f"speed-up {t_ref / t_fast:5.2f}x | max rel diff {rel(X_fast, X_ref):.2e} | "
          f"F^T F alone {t_floor:6.3f} s (solve = {t_fast / t_floor:4.2f}x floor)")


def bench_bank(n: int, m: int, d: int, k: int, repeat: int) -> None:
    gen = torch.Generator().manual_seed(1)
    F, G = embeddings(n, d, gen), embeddings(m, d, gen)
    Us = [0.02 * torch.randn(n, m, generator=gen, dtype=torch.float64) for _ in range(k)]

    def fast():
        return RidgeSolver(F, G).solve_many(Us)

    def reference_each():
        return torch.stack([solve_reference(F, G, U) for U in Us])

    def reference_factored_once():
        La, sa, RaT = torch.linalg.svd(F, full_matrices=False)
        Lb, sb, RbT = torch.linalg.svd(G.T, full_matrices=False)
        wa = sa / (sa**2 + 1e-2 * (sa**2).mean())
        wb = sb / (sb**2 + 1e-6 * (sb**2).mean())
        return torch.stack([RaT.T @ ((La.T @ U.double() @ RbT.T) * wa[:, None] * wb[None, :]) @ Lb.T for U in Us])

    t_fast, X_fast = best_of(fast, repeat)
    t_each, X_each = best_of(reference_each, repeat)
    t_once, X_once = best_of(reference_factored_once, repeat)
    print(f"bank of {k} on N={n} M={m} d={d} | RidgeSolver.solve_many {t_fast:7.3f} s | "
          f"{k} reference solves {t_each:7.3f} s ({t_each / t_fast:5.2f}x) | "
          f"reference, SVDs once {t_once:7.3f} s ({t_once / t_fast:5.2f}x) | "
          f"max rel diff {max(rel(a, b) for a, b in zip(X_fast, X_each)):.2e}, {max(rel(a, b) for a, b in zip(X_fast, X_once)):.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (seconds)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.quick:
        bench_size(1200, 40, 768, args.repeat)
        bench_bank(1200, 40, 768, 8, args.repeat)
        return
    bench_size(1200, 40, 768, args.repeat)
    bench_size(12000, 400, 1024, args.repeat)
    bench_bank(12000, 400, 1024, 8, args.repeat)


if __name__ == "__main__":
    main()
