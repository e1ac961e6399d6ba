"""Issue 18: would a learnt "does it run" filter cut the Helion tuner's failed compiles (CPU)?

The race's attention tunes timed 11-15 configs of which 3-8 did not run (Triton's layout pass fails on many
wgmma-sized query tiles); their measure phase took 17.5-52.0 s of 19.5-54.9 s (bench_helion-h200-2026-12-02-s23*).
Over held-out shapes (``helion_model.shape_folds``, 3 folds): per fold the ranker (the shipped recipe, twin rows
too) and a classifier (XGBoost ``binary:logistic`` on the same features, Helion rows only: did the config run) are
fitted on the other folds; per held-out group, the tuner's policy is replayed on the recorded rows (top k, then
helion_refill.timed's second batch of REFILL x as many as did not run), once over all candidates and once over those
the classifier gives P(run) >= each threshold. Per kernel and policy: geomean score (group best / best timed), the
configs timed and how many of them did not run (each a wasted compile). The recorded rows answer every timing.

    .venv/bin/python scripts/experiments/helion_validity.py [--k 8] [--thresholds 0.2,0.5] [--out FILE]
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]
from costmodel import model  # noqa: E402
from costmodel.evaluation import geomean  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402
from helion_refill import timed  # noqa: E402

REFILL = 2  # tuner/helion.py's


def classifier(x: np.ndarray, ran: np.ndarray, seed: int):
    """The shipped runs classifier's recipe (helion_model.fit_runs) on feature rows ``x``."""
    import xgboost as xgb

    return xgb.train({**helion_model.RUN_PARAMS, "seed": seed, "nthread": 2},
                     xgb.DMatrix(x, label=ran.astype(np.float32)), num_boost_round=helion_model.RUN_ROUNDS)


def replay(order: np.ndarray, ran: np.ndarray, gains: np.ndarray, k: int) -> dict:
    t = timed(order, ran, k, 1, REFILL) if len(order) else order
    return {"score": float(gains[t].max()) if len(t) else 0.0, "timed": len(t), "failed": int((~ran[t]).sum())}


@click.command()
@click.option("--k", default=8, show_default=True)
@click.option("--thresholds", default="0.2,0.5", show_default=True, help="P(run) below which a config is dropped")
@click.option("--seed", default=0, show_default=True)
@click.option("--twin-labels", is_flag=True, help="the classifier learns from the twins' rows too (their Triton runs)")
@click.option("--out", default=None, help="write the JSON here too")
def main(k: int, thresholds: str, seed: int, twin_labels: bool, out: str | None) -> None:
    import pyarrow as pa
    import xgboost as xgb

    cuts = [float(t) for t in thresholds.split(",")]
    table, _ = helion_model.training_table(ROOT / "data")
    x, twin = helion_model.table_matrix(table), helion_model.is_twin(table)
    ran = np.array(table["status"].to_pylist()) == "ok"
    gains, fold = model.gains(table), helion_model.shape_folds(table, 3)
    gids, kernels = np.array(table["group_id"].to_pylist()), np.array(table["kernel"].to_pylist())
    params = dataclasses.replace(helion_model.PARAMS, seed=seed)
    policies = ["all", *(f"p_run>={c}" for c in cuts)]
    groups, auc = [], []
    for f in range(3):
        held = (fold == f) & ~twin
        ranker, _ = model.fit(table.filter(pa.array(~held)), params, helion_model.FEATURES)
        train_cls = ~held if twin_labels else ~held & ~twin
        clf = classifier(x[train_cls], ran[train_cls], seed)
        score, p_run = ranker.inplace_predict(x[held]), clf.predict(xgb.DMatrix(x[held]))
        rows = np.flatnonzero(held)
        auc.append(_auc(p_run, ran[rows]))
        for gid in sorted(set(gids[rows])):
            mine = gids[rows] == gid
            idx, s, p = rows[mine], score[mine], p_run[mine]
            if not (gains[idx] > 0).any():
                continue
            g = {"group_id": gid, "kernel": kernels[idx[0]], "configs": len(idx), "ran": int(ran[idx].sum())}
            for name, keep in zip(policies, [np.ones(len(idx), bool), *(p >= c for c in cuts)]):
                order = np.flatnonzero(keep)[np.argsort(-s[keep], kind="stable")]
                g[name] = replay(order, ran[idx], gains[idx], k)
            groups.append(g)
    result = {"k": k, "refill": REFILL, "seed": seed, "twin_labels": twin_labels, "held_out_auc_by_fold": auc, "per_kernel": {}, "groups": groups}
    for kern in sorted({g["kernel"] for g in groups}):
        mine = [g for g in groups if g["kernel"] == kern]
        result["per_kernel"][kern] = {"groups": len(mine), **{name: {
            "geomean_score": float(geomean(np.maximum([g[name]["score"] for g in mine], 1e-3))),
            "timed": int(sum(g[name]["timed"] for g in mine)), "failed": int(sum(g[name]["failed"] for g in mine))}
            for name in policies}}
        click.echo(f"{kern}: " + "; ".join(f"{n} {v['geomean_score']:.3f} timed {v['timed']} failed {v['failed']}"
                                           for n, v in result["per_kernel"][kern].items() if n != "groups"), err=True)
    text = json.dumps(result, indent=1)
    if out:
        Path(out).write_text(text + "\n")
    click.echo(text)


def _auc(p: np.ndarray, y: np.ndarray) -> float | None:
    """Area under the ROC curve of ``p`` for labels ``y`` (rank form); None with one class."""
    from scipy.stats import rankdata

    pos, neg = y.sum(), (~y).sum()
    if not pos or not neg:
        return None
    r = rankdata(p)
    return float((r[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


if __name__ == "__main__":
    main()
