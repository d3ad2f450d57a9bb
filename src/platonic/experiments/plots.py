"""PNG plots of a run (matplotlib, headless): gains and retention, the strength sweep, cosine heatmaps.

Every plot carries its numbers (bar values, point values, heatmap cells), so it reads at a glance:

- retention.png: gain over zero-shot of the closed form and the oracle per task slot, and the
  closed form's retention (its share of the oracle's gain); a slot whose oracle gain is under one
  point says "n/a" instead of an empty bar;
- alpha_tradeoff.png: task gain and control change against the strength alpha;
- cosine_NAME.png: descriptor-cosine heatmaps, each cell annotated (none for a single label: a 1 x 1
  matrix says nothing the tables do not).

Files are written atomically; `clear_plots` removes the ones an earlier run drew in a directory.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..storage import atomic_write
from .tables import MIN_ORACLE_GAIN, alpha_rows, method_means, retention

PLOT_NAMES = ("retention.png", "alpha_tradeoff.png")
HEATMAP_PREFIX = "cosine_"
CLOSED, ORACLE = "#4c72b0", "#dd8452"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def owned_plots(directory: Path) -> list[Path]:
    """The PNG files of `directory` that a run draws (retention, alpha trade-off, cosine heatmaps)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix == ".png"
                  and (p.name in PLOT_NAMES or p.name.startswith(HEATMAP_PREFIX)))


def clear_plots(directory: Path) -> list[Path]:
    """Remove the plots an earlier run drew in `directory`; returns what was removed."""
    removed = owned_plots(directory)
    for p in removed:
        p.unlink(missing_ok=True)
    return removed


def write_plots(directory: Path, results: dict) -> list[Path]:
    plt = _pyplot()
    cells = results["cells"]
    written = []
    experiments = {c["experiment"] for c in cells}
    if "addition" in experiments:
        fig = _retention_figure(plt, method_means(cells, "addition"))
        if fig is not None:
            written.append(_save(fig, directory / "retention.png", plt))
    if "alpha" in experiments:
        rows = alpha_rows(cells)
        if rows:
            written.append(_save(_alpha_figure(plt, rows), directory / "alpha_tradeoff.png", plt))
    heat = results.get("diagnostics", {}).get("cosine_matrices", {})
    for name, block in heat.items():
        if len(block.get("labels", [])) >= 2:
            written.append(_save(_heatmap_figure(plt, block), directory / f"{HEATMAP_PREFIX}{name}.png", plt))
    return written


def _retention_figure(plt, means: dict):
    """Gains (closed form, oracle) per slot on the left, retention on the right; None without the methods."""
    if not all(m in means for m in ("zero_shot", "closed_form", "oracle")):
        return None
    slots = [s for s in ("A", "B") if s in means["zero_shot"]]
    ret = retention(means)
    gains = {m: [100 * (means[m][s] - means["zero_shot"][s]) for s in slots] for m in ("closed_form", "oracle")}
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.5, 3.4), gridspec_kw={"width_ratios": [1.3, 1]})
    x = list(range(len(slots)))
    width = 0.38
    for offset, method, colour, label in ((-width / 2, "closed_form", CLOSED, "closed form"),
                                          (width / 2, "oracle", ORACLE, "oracle")):
        bars = left.bar([i + offset for i in x], gains[method], width, color=colour, label=label)
        left.bar_label(bars, fmt="%+.2f", fontsize=8, padding=2)
    left.axhline(0, color="black", lw=0.8)
    left.set_xticks(x, [f"task {s}" for s in slots])
    left.set_ylabel("gain over zero-shot (points)")
    left.set_title("Gain over zero-shot", fontsize=10)
    left.legend(fontsize=8, frameon=False)
    _pad_limits(left, [v for vs in gains.values() for v in vs])

    values = [ret.get(s) for s in slots]
    shown = [100 * v if v is not None else 0.0 for v in values]
    bars = right.bar(x, shown, 0.55, color=[CLOSED if v is not None else "none" for v in values])
    right.bar_label(bars, labels=[f"{100 * v:.0f}%" if v is not None else "" for v in values], fontsize=8, padding=2)
    for i, v in enumerate(values):
        if v is None:
            right.text(i, 50, f"n/a\n(oracle gain\nunder {100 * MIN_ORACLE_GAIN:g} point)", ha="center", va="center",
                       fontsize=8, color="grey")
    right.axhline(100, color="grey", lw=0.8, ls="--")
    right.axhline(0, color="black", lw=0.8)
    right.set_xticks(x, [f"task {s}" for s in slots])
    right.set_ylabel("% of the oracle's gain")
    right.set_title("Cross-model retention", fontsize=10)
    _pad_limits(right, shown + [0.0, 100.0])
    return fig


def _pad_limits(ax, values) -> None:
    lo, hi = min(values + [0.0]), max(values + [0.0])
    pad = 0.15 * (hi - lo or 1.0)
    ax.set_ylim(lo - pad, hi + pad)


def _alpha_figure(plt, rows):
    """Task gain and control change (points) against alpha, each point labelled with its value."""
    alphas = [a for a, _, _, _ in rows]
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for values, colour, label, va in (([100 * g for _, g, _, _ in rows], CLOSED, "task gain", "bottom"),
                                      ([100 * k for _, _, k, _ in rows], ORACLE, "control change", "top")):
        ax.plot(alphas, values, marker="o", color=colour, label=label)
        for a, v in zip(alphas, values):
            ax.annotate(f"{v:+.2f}", (a, v), textcoords="offset points", xytext=(0, 5 if va == "bottom" else -5),
                        ha="center", va=va, fontsize=7, color=colour)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(alphas, [f"{a:g}" for a in alphas])
    ax.set_xlabel("strength alpha")
    ax.set_ylabel("change over zero-shot (points)")
    ax.set_title(f"Strength sweep ({rows[0][3]} cells per alpha)", fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    ax.margins(x=0.08, y=0.2)
    return fig


def _heatmap_figure(plt, block: dict):
    """A cosine matrix in [-1, 1], every cell annotated (n/a where undefined)."""
    import numpy as np

    labels = list(block["labels"])
    matrix = np.array([[math.nan if v is None else float(v) for v in row] for row in block["matrix"]])
    n = len(labels)
    side = max(3.6, 0.55 * n + 2.2)
    fig, ax = plt.subplots(figsize=(side + 0.8, side))
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#dddddd")
    im = ax.imshow(np.ma.masked_invalid(matrix), vmin=-1, vmax=1, cmap=cmap)
    size = 8 if n <= 8 else 6
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            v = matrix[i, j]
            text = "n/a" if math.isnan(v) else f"{v:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=size,
                    color="white" if not math.isnan(v) and abs(v) > 0.6 else "black")
    ax.set_xticks(range(n), labels, rotation=45 if n > 4 else 0, ha="right" if n > 4 else "center", fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    ax.set_title(block["title"], fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, label="cosine")
    return fig


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png", metadata={"Software": None}))
    plt.close(fig)
    return path
