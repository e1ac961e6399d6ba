"""Issue 16's top-1: does a second model that reorders only the first model's top 8 raise top-1 (CPU, inner splits)?

    PYTHONPATH=. python3 scripts/experiments/rerank_top.py --inner 1,2,3 '{"min_gain": 0.8}' '{"min_gain": 0.5}'

Stage 1 is the shipped recipe (model.TrainParams() with ``--base``'s fields over it). Each spec trains stage 2 on the rows of each training group
within ``min_gain`` of the group's best (gain = best / latency), with TrainParams fields ``params`` over the
defaults; at evaluation stage 2 reorders stage 1's top ``k`` of each held-out group (``blend``: by the mean of the
two models' ranks instead of stage 2's alone). The set of the top 8 never changes, so top-8 and p10 cannot move;
only top-1 and top-4 can. Same inner splits and output keys as scripts/compare_params.py (one JSON line per spec and
split), which never see the held-out split's test groups.

Session 11's run (scripts/results/rerank_top-inner-2026-12-01-s11.jsonl) was on the recipe of its day, which is
``--base '{"max_depth": 6, "colsample_bytree": 0.8}'`` since: no spec raised top-1 over whole-space groups by more
than 0.001 on average (stage 1 alone 0.9288; the reorders 0.9217-0.9293), and every one lowered top-1 over all groups
(0.917 to 0.869-0.914).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from costmodel import evaluation, model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: compare_params
from compare_params import EXHAUSTIVE, _round  # noqa: E402


@dataclass
class Reordered:
    """A booster stand-in for evaluation.evaluate: stage 1's scores, its top ``k`` of each group reordered."""
    first: object
    second: object
    bounds: np.ndarray
    k: int
    blend: bool

    def set_param(self, _):
        pass

    def inplace_predict(self, x):
        s1, s2 = self.first.inplace_predict(x), self.second.inplace_predict(x)
        out = s1.astype(np.float64).copy()
        for lo, hi in zip(self.bounds[:-1], self.bounds[1:]):
            top = lo + np.argsort(-s1[lo:hi], kind="stable")[: self.k]
            key = s2[top]
            if self.blend:  # mean of the two ranks among the top k (lower is better), as a score
                r1 = np.arange(len(top))
                r2 = np.argsort(np.argsort(-key, kind="stable"), kind="stable")
                key = -(r1 + r2) - 1e-3 * r1
            order = np.argsort(-key, kind="stable")
            out[top[order]] = out[lo:hi].max() + 1 + np.arange(len(top))[::-1]
        return out


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--gpu", default="nvidia-h200", show_default=True)
@click.option("--inner", default="1,2,3", show_default=True)
@click.option("--base", default="{}", show_default=True, help="TrainParams fields (JSON) over the defaults, both stages")
@click.argument("specs", nargs=-1, required=True)
def main(data: str, gpu: str, inner: str, base: str, specs: tuple[str, ...]) -> None:
    table, _ = model.training_table(data, gpu)
    table = model.select_groups(table, evaluation.split_groups(table, "heldout")[0].train)
    for s in inner.split(","):
        part = evaluation.split_groups(table, "heldout", int(s))[0]
        train, test = model.select_groups(table, part.train), model.select_groups(table, part.test)
        first, _ = model.fit(train, model.TrainParams(**json.loads(base)))
        gain = model.gains(train)
        for spec in specs:
            opts = json.loads(spec)
            near = train.filter(gain >= opts.get("min_gain", 0.8))
            second, info = model.fit(near, model.TrainParams(**{**json.loads(base), **opts.get("params", {})}))
            booster = Reordered(first, second, model.group_bounds(test), opts.get("k", 8), opts.get("blend", False))
            ev = evaluation.evaluate(model.CostModel(booster, {"gpu": gpu}), test, train, part.name).summary()
            print(json.dumps({"rerank": opts, "split": f"inner:{s}", "groups": ev["groups"], "trees": info["trees"],
                              "stage2_rows": near.num_rows, "top1": round(ev["top1_score"], 4),
                              "top8": round(ev["top8_score"], 4), "p10_top8": round(ev["p10_top8_score"], 4),
                              "matmul_top8": round(ev["per_kernel"]["matmul"]["top8_score"], 4),
                              **{k: _round(ev.get(k)) for k in EXHAUSTIVE},
                              "matmul_top8_exhaustive": _round(ev["per_kernel"]["matmul"].get("top8_exhaustive"))}),
                  flush=True)


if __name__ == "__main__":
    main()
