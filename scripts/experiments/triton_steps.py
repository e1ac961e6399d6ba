"""Issue 17 (tune >= 0.95 of the space's best): would steps to neighbours after the Triton tuner help? (CPU replay)

On the shipped model's held-out groups measured over the whole valid space, ``tuner.tune`` runs with the Replay
benchmarker (objective graph, as replay_tune.py); then ``tuner.tune._steps`` (what ``costmodel tune --steps`` runs),
from the fastest config it timed, up to ``--rounds`` steps: the recorded configs that ran one step from it
(``space.neighbours``: one knob, or the tile reshaped), not timed yet, ranked by the model, the first ``--local``
timed (the recorded latency), again from the new fastest while a step finds a faster one. ``tune_configs``: the configs the tune timed before the steps. Geomean, p10 and min of the
group's best / the tuner's best, before and after the steps, the configs the steps timed, and each group's figures.
Nothing new is measured: whole-space groups hold every neighbour's recorded time.

    .venv/bin/python scripts/experiments/triton_steps.py [--local 6] [--rounds 4] [--out F]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
from replay_tune import _figures, emit, groups  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--local", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cm = model.load("nvidia-h200", gpu="nvidia-h200")
    t = dataset.read(args.data)
    t = t.filter(pc.is_in(t["group_id"], pa.array(sorted(set(cm.meta["heldout"]["groups"])))))
    before, after, extra, rows = [], [], [], []
    for g, family, problem, dtype, best, exhaustive in groups(t):
        if not exhaustive:
            continue
        ok = g.filter(pc.equal(g["status"], "ok"))
        recorded = dict(zip(ok["config_json"].to_pylist(), ok["latency_ms"].to_pylist()))
        bench = ReplayBenchmarker(g)
        cands = bench.recorded_configs(family, problem, dtype, KNOWN[cm.gpu])  # valid today, as a live tune's
        res = tune_mod.tune(family, problem, dtype, bench, k=8, cost_model=cm, hw=KNOWN[cm.gpu], configs=cands,
                            objective="graph")
        ran = [c for c in cands if dataset.canonical_json(c) in recorded]
        ranked = tune_mod.rank_candidates(family, problem, dtype, KNOWN[cm.gpu], cm, ran)
        got, _ = tune_mod._steps(bench, family, problem, dtype, ranked, res.measurements, "graph", args.rounds,
                                 args.local)
        ms, n = min([m.latency_ms for m in got if m.ok], default=res.best["latency_ms"]), len(got)
        before.append(best / res.best["latency_ms"])
        after.append(best / min(ms, res.best["latency_ms"]))
        extra.append(n)
        tuned = {dataset.canonical_json(m.config) for m in res.measurements}
        rows.append({"kernel": family, "problem": problem, "dtype": dtype, "before": round(before[-1], 4),
                     "after": round(after[-1], 4), "step_configs": n, "tune_configs": len(tuned)})
    out = {"model_data_hash": cm.meta["data"]["hash"], "local": args.local, "rounds": args.rounds,
           "before": _figures(np.array(before)), "after": _figures(np.array(after)),
           "step_configs_mean": round(float(np.mean(extra)), 1), "groups": rows}
    emit(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
