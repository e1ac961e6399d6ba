"""H200, issue 16: may ``time_eager`` spend its budget over all its rounds instead of on each one?

A config in an already-compiled class costs the collector about 26 ms, 15 of them in ``time_eager``: 3 rounds of
back-to-back calls, each round sized to the whole budget (5 ms). Sizing each round to a third of it changes how
``eager_ms`` is measured for kernels between about 2.5 and 500 us (shorter ones are capped at 200 calls a round,
longer ones floored at 10 either way). Before any data is collected that way, this measures both ways on recorded
(group, config) pairs of that range, in one process, alternating which goes first: the new/old ratio against the
old way's own repeat (old/old, the noise band), and the seconds each way took. Rows and a summary to --out.

    PYTHONPATH=. python3 scripts/experiments/check_eager_budget.py [--pairs 40] [--out eager_budget.json]
"""

from __future__ import annotations

import json
import time

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from costmodel import dataset, hardware
from costmodel.benchmark import EAGER_ROUNDS, IsolatedBenchmarker, time_eager
from costmodel.kernels import family_names, get_family

BUDGET_MS = IsolatedBenchmarker.budget_ms  # the collector's default


def pairs_in_range(data: str, gpu: str, n: int, seed: int) -> list[dict]:
    t = dataset.read(data, ["gpu", "kernel", "problem_json", "dtype", "config_json", "status", "eager_ms"])
    t = t.filter(pc.and_(pc.equal(t["gpu"], gpu), pc.equal(t["status"], "ok")))
    t = t.filter(pc.is_in(t["kernel"], pa.array(family_names())))  # the Triton families (fam.bind)
    eager = t["eager_ms"].to_numpy(zero_copy_only=False)
    keep = np.flatnonzero((eager >= 0.003) & (eager <= 0.4))  # where the per-round budget sets the call count
    idx = np.random.default_rng(seed).choice(keep, size=min(n, len(keep)), replace=False)
    return t.take(idx).to_pylist()


def both_ways(row: dict, hw, rounds: int) -> dict:
    import torch

    fam, problem = get_family(row["kernel"]), json.loads(row["problem_json"])
    inputs = fam.make_inputs(problem, row["dtype"], "cuda")
    out = fam.make_output(problem, row["dtype"], "cuda")
    call = fam.bind(problem, inputs, out, json.loads(row["config_json"]), hw)
    call()
    torch.cuda.synchronize()
    ways = {"old": BUDGET_MS, "new": BUDGET_MS / EAGER_ROUNDS, "old_again": BUDGET_MS}
    ms = {w: [] for w in ways}
    secs = {w: 0.0 for w in ways}
    names = list(ways)
    for r in range(rounds):
        for w in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            ms[w].append(time_eager(call, "cuda", ways[w]))
            secs[w] += time.perf_counter() - t0
    med = {w: float(np.median(v)) for w, v in ms.items()}
    return {"kernel": row["kernel"], "problem": problem, "dtype": row["dtype"], "recorded_eager_ms": row["eager_ms"],
            "eager_ms": med, "new_over_old": med["new"] / med["old"], "old_again_over_old": med["old_again"] / med["old"],
            "seconds": {w: s / rounds for w, s in secs.items()}}


@click.command()
@click.option("--data", default="data")
@click.option("--pairs", default=40)
@click.option("--rounds", default=4)
@click.option("--seed", default=0)
@click.option("--out", default="eager_budget.json")
def main(data: str, pairs: int, rounds: int, seed: int, out: str) -> None:
    hw = hardware.current()
    rows = [both_ways(r, hw, rounds) for r in pairs_in_range(data, hw.gpu, pairs, seed)]
    dev = {k: np.abs(np.array([r[k] for r in rows]) - 1) for k in ("new_over_old", "old_again_over_old")}
    summary = {"pairs": len(rows), "budget_ms": BUDGET_MS, "rounds": rounds,
               **{f"{k}_median_abs_dev": float(np.median(v)) for k, v in dev.items()},
               **{f"{k}_p90_abs_dev": float(np.quantile(v, 0.9)) for k, v in dev.items()},
               "seconds_per_config": {w: float(np.mean([r["seconds"][w] for r in rows])) for w in ("old", "new")}}
    json.dump({"summary": summary, "rows": rows}, open(out, "w"), indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
