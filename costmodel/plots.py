"""Evaluation plots (matplotlib with the Agg backend, imported only here and only when plots are asked for)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from costmodel.evaluation import CURVE_LEN, Evaluation, geomean


def write_plots(ev: Evaluation, out: str | Path) -> list[str]:
    """best_so_far.png: geomean fraction of the best vs configs benchmarked, per strategy (model order, random,
    default first); predicted_vs_measured_rank.png: rank percentiles of every config that ran."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    steps = np.arange(1, CURVE_LEN + 1)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for strategy in ("model", "random", "default-first"):
        curves = np.array([g.curves[strategy] for g in ev.groups])
        curves = curves[~np.isnan(curves).any(axis=1)]
        if len(curves):
            ax.plot(steps, geomean(curves, axis=0),
                    label=f"{strategy} ({len(curves)} groups)")
    ax.set(xscale="log", xlabel="configs benchmarked", ylabel="fraction of best latency (geomean)",
           title=f"best so far, {ev.split} split ({len(ev.groups)} groups)")
    ax.grid(alpha=0.3)
    ax.legend()
    paths = [out / "best_so_far.png", out / "predicted_vs_measured_rank.png"]
    fig.savefig(paths[0], dpi=120, bbox_inches="tight")
    plt.close(fig)

    ranks = np.concatenate([g.ranks for g in ev.groups])
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.hexbin(ranks[:, 1], ranks[:, 0], gridsize=40, cmap="viridis", bins="log", extent=(0, 1, 0, 1))
    ax.plot([0, 1], [0, 1], color="white", lw=1, ls="--")
    ax.set(xlabel="measured rank (0 = fastest)", ylabel="predicted rank (0 = predicted fastest)",
           title=f"predicted vs measured rank, {ev.split} split")
    fig.savefig(paths[1], dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [str(p) for p in paths]
