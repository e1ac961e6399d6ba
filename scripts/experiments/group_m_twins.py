"""Issue 17, CPU: does GROUP_M change a matmul's time where the grid of tiles is one row or one column? From the H200
rows of today's matmul kernel (``model.training_table``), every pair of configs that ran and differ in GROUP_M alone
(1 and 8) in one group: the ratio of their times (GROUP_M=8 over GROUP_M=1), by the grid's shape (one row of tiles,
one column, or more of both), as median, p5 and p95, and the mean absolute log ratio. The source of
``costmodel.kernels.matmul.GROUP_M_ALONE``'s comment.

Then what leaving the twins out of the space does to a tune: on the shipped model's held-out whole-space groups,
``tuner.tune`` (k 8, objective graph, as scripts/replay_tune.py) replayed over every recorded config (``before``: the
space with both GROUP_M values) and over those valid today (``after``). Both read a matmul config at its valid twin's
recorded time, since the two run one kernel; the truth is the best of the group so read. Otherwise the twins' space
would hold the faster of two re-timings of one kernel, a best no tuner that times one of them can be held to.

    .venv/bin/python scripts/experiments/group_m_twins.py [--out FILE.json]
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import tuner.tune as tune_mod  # noqa: E402
from costmodel import dataset, model  # noqa: E402
from costmodel.benchmark import ReplayBenchmarker  # noqa: E402
from costmodel.hardware import KNOWN  # noqa: E402
from costmodel.kernels import get_family  # noqa: E402
from replay_tune import _figures, emit, groups  # noqa: E402

MATMUL = get_family("matmul")


def grid(problem: dict, config: dict) -> str:
    rows, cols = -(-problem["M"] // config["BLOCK_M"]), -(-problem["N"] // config["BLOCK_N"])
    return "one_row" if rows == 1 else "one_column" if cols == 1 else "rows_and_columns"


def pair_ratios(data: str) -> dict:
    """The time ratios of GROUP_M twins in the data, by the grid's shape."""
    table, _ = model.training_table(data)
    table = table.filter(pc.and_(pc.equal(table["kernel"], "matmul"), pc.equal(table["status"], "ok")))
    pairs = collections.defaultdict(dict)
    for gid, pj, cj, ms in zip(*(table[n].to_pylist() for n in ("group_id", "problem_json", "config_json",
                                                                   "latency_ms"))):
        c = json.loads(cj)
        rest = dataset.twin_key(c, "GROUP_M")
        pairs[(gid, rest)][c["GROUP_M"]] = (ms, json.loads(pj), c)
    ratios = collections.defaultdict(list)
    for d in pairs.values():
        if 1 in d and 8 in d:
            ratios[grid(d[1][1], d[1][2])].append(d[8][0] / d[1][0])
    result = {}
    for kind in ("one_row", "one_column", "rows_and_columns"):
        r = np.array(ratios[kind])
        result[kind] = {"pairs": len(r), "median": round(float(np.median(r)), 4),
                        "p5": round(float(np.quantile(r, 0.05)), 4), "p95": round(float(np.quantile(r, 0.95)), 4),
                        "mean_abs_log": round(float(np.mean(np.abs(np.log(r)))), 4)} if len(r) else {"pairs": 0}
    return result


def as_twins(g: pa.Table, problem: dict) -> pa.Table:
    """A matmul group whose every config reads its valid twin's recorded time and status (its own where the twin
    was not recorded)."""
    configs = g["config_json"].to_pylist()
    recorded = dict(zip(configs, zip(g["latency_ms"].to_pylist(), g["status"].to_pylist())))
    read = []
    for cj in configs:
        c = json.loads(cj)
        twin = dataset.canonical_json(MATMUL.twin(problem, c))
        read.append(recorded.get(twin, recorded[cj]))
    for i, name in enumerate(("latency_ms", "status")):
        col = g.schema.get_field_index(name)
        g = g.set_column(col, g.schema.field(col), pa.array([r[i] for r in read], g.schema.field(col).type))
    return g


def tune_ratios(cm, rows: pa.Table, valid_on) -> list[tuple[str, dict, str, float]]:
    """(kernel, problem, dtype, best / tune's best) of each of ``cm``'s held-out whole-space groups in ``rows``, each
    matmul config read at its valid twin's time; the candidates are the recorded configs valid on ``valid_on`` (a
    hardware record; None: every one recorded)."""
    t = rows.filter(pc.is_in(rows["group_id"], pa.array(sorted(set(cm.meta["heldout"]["groups"])))))
    out = []
    for g, family, problem, dtype, _, exhaustive in groups(t):
        if not exhaustive:
            continue
        g = as_twins(g, problem) if family == "matmul" else g
        best = pc.min(g.filter(pc.equal(g["status"], "ok"))["latency_ms"]).as_py()
        bench = ReplayBenchmarker(g)
        res = tune_mod.tune(family, problem, dtype, bench, k=8, cost_model=cm, hw=KNOWN[cm.gpu], objective="graph",
                            configs=bench.recorded_configs(family, problem, dtype, valid_on))
        out.append((family, problem, dtype, best / res.best["latency_ms"]))
    return out


def replays(data: str) -> dict:
    """best / tune's best on the shipped model's held-out whole-space groups, before and after."""
    cm = model.load("nvidia-h200", gpu="nvidia-h200")
    rows = dataset.read(data)
    before, after = tune_ratios(cm, rows, None), tune_ratios(cm, rows, KNOWN[cm.gpu])
    changed = [{"kernel": f, "problem": p, "dtype": d, "before": round(b, 4), "after": round(a, 4)}
               for (f, p, d, b), (*_, a) in zip(before, after) if abs(b - a) > 1e-4]
    return {"model_data_hash": cm.meta["data"]["hash"], "before": _figures(np.array([r[-1] for r in before])),
            "after": _figures(np.array([r[-1] for r in after])), "changed": changed}


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--out", default=None, help="write the JSON here as well")
def main(data: str, out: str | None) -> None:
    emit({"pairs": pair_ratios(data), "tune": replays(data)}, Path(out) if out else None)


if __name__ == "__main__":
    main()
