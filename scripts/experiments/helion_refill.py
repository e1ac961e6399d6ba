"""Issue 18: what a second batch buys the Helion tuner where some of its top k do not run (CPU).

Per group of the Helion rows one collect run recorded (``--run``; groups the model never saw when that run came after
it), the model ranks the group's recorded configs; the tuner's first batch is its top k. Then, for each policy
(refills, factor): up to ``refills`` more batches, each ``factor`` times as many of the next ranked as the configs
timed so far that did not run short of k (status not ok), taken in rank order. Per policy: each group's score (the
group's best latency / the best latency among the configs timed; 0 where none ran) and how many configs it timed,
and their geomean over the groups. The recorded rows answer every timing: nothing runs.

    .venv/bin/python scripts/experiments/helion_refill.py --run 20261202T074103-2b7569 [--model nvidia-h200] [--k 8]
        [--out helion_refill.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from costmodel import dataset, model  # noqa: E402
from costmodel.evaluation import geomean  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402

POLICIES = [(0, 1), (1, 1), (1, 2), (2, 1), (2, 2)]


def timed(order: np.ndarray, ran: np.ndarray, k: int, refills: int, factor: int) -> np.ndarray:
    """The configs (indices, rank order ``order``) a tuner times: the top k, then up to ``refills`` batches of
    ``factor`` times as many as it is short of k that ran."""
    n = min(k, len(order))
    for _ in range(refills):
        short = k - int(ran[order[:n]].sum())
        if short <= 0 or n >= len(order):
            break
        n = min(len(order), n + factor * short)
    return order[:n]


@click.command()
@click.option("--run", "run_id", required=True, help="the collect run whose Helion groups are ranked")
@click.option("--data", default=str(ROOT / "data"), show_default=True)
@click.option("--model", "where", default="nvidia-h200", show_default=True, help="a Helion model: GPU slug or dir")
@click.option("--k", default=8, show_default=True)
@click.option("--out", default=None, help="write the JSON here too")
def main(run_id: str, data: str, where: str, k: int, out: str | None) -> None:
    cm = helion_model.load(where)
    recorded = dataset.read(data, columns=["group_id", "run_id"], filter=pc.field("run_id") == run_id)
    groups = sorted(set(recorded["group_id"].to_pylist()))
    if not groups:
        raise click.UsageError(f"no rows of run {run_id} under {data}")
    table, _ = helion_model.training_table(data, cm.gpu, twin_per_group=0)
    table = table.filter(pc.is_in(table["group_id"], pa.array(groups)))
    scores = model.predict(cm, helion_model.table_matrix(table))
    gains, ok = model.gains(table), np.array(table["status"].to_pylist()) == "ok"
    gids = np.array(table["group_id"].to_pylist())
    result = {"run": run_id, "model_data_hash": cm.meta["data"]["hash"], "k": k, "groups": {}, "policies": {}}
    for gid in groups:
        rows = np.flatnonzero(gids == gid)
        order = rows[np.argsort(-scores[rows], kind="stable")]
        result["groups"][gid] = {"problem": table["problem_json"][int(rows[0])].as_py(),
                                 "dtype": table["dtype"][int(rows[0])].as_py(), "configs": len(rows),
                                 "ran_in_top_k": int(ok[order[:k]].sum())}
        for refills, factor in POLICIES:
            t = timed(order, ok, k, refills, factor)
            result["groups"][gid][f"{refills}x{factor}"] = {"score": float(gains[t].max()), "timed": len(t)}
    for refills, factor in POLICIES:
        key = f"{refills}x{factor}"
        per = [g[key] for g in result["groups"].values()]
        result["policies"][key] = {"geomean_score": float(geomean(np.maximum([p["score"] for p in per], 1e-3))),
                                   "timed": [p["timed"] for p in per]}
        click.echo(f"refills {refills}, factor {factor}: geomean {result['policies'][key]['geomean_score']:.3f}, "
                   f"timed {result['policies'][key]['timed']}", err=True)
    text = json.dumps(result, indent=1)
    if out:
        Path(out).write_text(text + "\n")
    click.echo(text)


if __name__ == "__main__":
    main()
