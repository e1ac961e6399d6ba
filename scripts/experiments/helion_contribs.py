"""Issue 18: why the Helion model ranks Helion quick's pick below costmodel's on raced rows (CPU, nothing timed).

Per race row (``bench_helion.py`` output): the model's score of quick's pick and of costmodel's, and the features that
part them most, by XGBoost's per-feature contributions (``pred_contribs``, SHAP values of the booster): for each, its
value in either config and how much it adds to quick's score less costmodel's. Which of the two ran faster is the
row's (``graph_ms``); whether the data bears out a feature's pull is for the rows of the kernel's groups to say.

    .venv/bin/python scripts/experiments/helion_contribs.py \
        scripts/results/bench_helion-retimed-h200-2026-12-03-s26a.jsonl [--only 8,11] [--model nvidia-h200] \
        [--top 6] [--json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from costmodel.helion import configs  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402


def contributions(cm, row: dict) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(feature names and "bias", the two configs' features, their contributions), quick's pick first."""
    import xgboost as xgb

    picks = [configs.config_json(row[who]["config"]) for who in ("quick", "costmodel")]
    x = helion_model.matrix([row["kernel"]] * 2, [row["problem"]] * 2, [row["dtype"]] * 2, picks)
    names = cm.meta["feature_names"]
    return [*names, "bias"], x, cm.booster.predict(xgb.DMatrix(x, feature_names=names), pred_contribs=True)


def apart(cm, row: dict, top: int) -> dict:
    names, x, c = contributions(cm, row)
    diff = c[0] - c[1]
    order = np.argsort(-np.abs(diff))[:top]
    graph = row.get("graph_ms", {})
    return {"index": row.get("index"), "kernel": row["kernel"], "problem": row["problem"], "dtype": row["dtype"],
            "score": {"quick": float(c[0].sum()), "costmodel": float(c[1].sum())},
            "graph_ms": {w: graph.get(w) for w in ("quick", "costmodel")},
            "apart": [{"feature": names[i], "quick": _num(x[0, i]), "costmodel": _num(x[1, i]),
                       "quick_less_costmodel": round(float(diff[i]), 4)} for i in order]}


def _num(v) -> float | None:
    return None if np.isnan(v) else round(float(v), 4)


@click.command()
@click.argument("rows", type=click.Path(exists=True, dir_okay=False))
@click.option("--only", default="", help="comma-separated race indices (default: every row with both picks)")
@click.option("--model", default="nvidia-h200", help="a Helion model directory or GPU slug")
@click.option("--top", default=6, help="features shown per row, the largest differences first")
@click.option("--json", "as_json", is_flag=True, help="one JSON object a row on stdout")
def main(rows: str, only: str, model: str, top: int, as_json: bool) -> None:
    wanted = {int(i) for i in only.split(",")} if only else None
    cm = helion_model.load(model)
    for line in Path(rows).read_text().splitlines():
        r = json.loads(line)
        both = all("config" in r.get(w, {}) for w in ("quick", "costmodel"))
        if not both or (wanted and r.get("index") not in wanted):
            continue
        out = apart(cm, r, top)
        if as_json:
            print(json.dumps(out))
            continue
        print(f"{r['kernel']} {r['problem']} {r['dtype']}: score quick {out['score']['quick']:.2f}, "
              f"costmodel {out['score']['costmodel']:.2f}; graph ms {out['graph_ms']}")
        for a in out["apart"]:
            print(f"  {a['feature']:<28} quick {a['quick']}, costmodel {a['costmodel']}: "
                  f"{a['quick_less_costmodel']:+.3f}")


if __name__ == "__main__":
    main()
