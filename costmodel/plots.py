"""Evaluation plots (matplotlib with the Agg backend, imported only here and only when plots are asked for)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from costmodel.evaluation import CURVE_LEN, Evaluation, geomean


def write_plots(ev: Evaluation, out: str | Path) -> list[str]:
    """best_so_far.png: geomean fraction of the best vs configs benchmarked, per strategy (model order, random,
    default first); predicted_vs_measured_rank.png: rank percentiles of every config that ran, a panel per kernel
    family."""
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

    _rank_panels(ev, paths[1])
    return [str(p) for p in paths]


def _rank_panels(ev: Evaluation, path: Path) -> None:
    """One panel per kernel family (families rank differently: pooled, the largest spaces hid the others), hexbins
    of (measured, predicted) rank percentile on one log colour scale with its colour bar."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    families = sorted({g.kernel for g in ev.groups})
    ranks = {f: np.concatenate([g.ranks for g in ev.groups if g.kernel == f] or [np.empty((0, 2))]) for f in families}
    ncols = min(3, max(1, len(families)))
    nrows = -(-max(1, len(families)) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols + 1.2, 4.2 * nrows), squeeze=False,
                             layout="constrained")
    hexes = []
    for ax, family in zip(axes.flat, families):
        r = ranks[family]
        hexes.append(ax.hexbin(r[:, 1], r[:, 0], gridsize=25, cmap="viridis", mincnt=1, extent=(0, 1, 0, 1)))
        ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
        groups = sum(g.kernel == family for g in ev.groups)
        ax.set(title=f"{family}\n{groups} groups, {len(r)} configs", xlim=(0, 1), ylim=(0, 1),
               xlabel="measured rank (0 = fastest)", ylabel="predicted rank (0 = predicted fastest)"
               if ax in axes[:, 0] else None)
    for ax in axes.flat[len(families):]:
        ax.set_visible(False)
    if hexes:  # one colour scale for every panel
        norm = LogNorm(vmin=1, vmax=max([1.0] + [float(h.get_array().max()) for h in hexes if h.get_array().size]))
        for h in hexes:
            h.set_norm(norm)
        fig.colorbar(hexes[0], ax=axes.ravel().tolist(), label="configs per hexagon (log scale)")
    fig.suptitle(f"predicted vs measured rank, {ev.split} split")
    fig.savefig(path, dpi=120)
    plt.close(fig)
