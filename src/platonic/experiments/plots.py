"""PNG plots of a run (matplotlib, headless): retention bars, alpha trade-off, cosine heatmaps."""

from __future__ import annotations

from pathlib import Path

from .report import alpha_rows, method_means, retention


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(directory: Path, results: dict) -> list[Path]:
    plt = _pyplot()
    cells = results["cells"]
    written = []
    experiments = {c["experiment"] for c in cells}
    if "addition" in experiments:
        means = method_means(cells, "addition")
        ret = {slot: v for slot, v in retention(means).items() if v is not None}
        if ret:
            fig, ax = plt.subplots(figsize=(4, 3))
            ax.bar([f"task {k}" for k in ret], [100 * v for v in ret.values()], color="#4c72b0")
            ax.axhline(100, color="grey", lw=0.8, ls="--")
            ax.set_ylabel("% of the oracle's gain")
            ax.set_title("Cross-model retention")
            written.append(_save(fig, directory / "retention.png", plt))
    if "alpha" in experiments:
        rows = alpha_rows(cells)
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([100 * k for _, _, k, _ in rows], [100 * g for _, g, _, _ in rows], marker="o")
        for a, g, k, _ in rows:
            ax.annotate(f"α={a:g}", (100 * k, 100 * g), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xlabel("control change (points)")
        ax.set_ylabel("task gain (points)")
        ax.set_title("Strength trade-off")
        written.append(_save(fig, directory / "alpha_tradeoff.png", plt))
    heat = results.get("diagnostics", {}).get("cosine_matrices", {})
    for name, block in heat.items():
        fig, ax = plt.subplots(figsize=(4.5, 4))
        im = ax.imshow(block["matrix"], vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(len(block["labels"])), block["labels"], rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(block["labels"])), block["labels"], fontsize=7)
        ax.set_title(block["title"], fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
        written.append(_save(fig, directory / f"cosine_{name}.png", plt))
    return written


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
    return path
