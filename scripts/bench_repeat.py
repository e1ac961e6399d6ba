"""Timing repeatability: re-time random recorded (group, config) pairs and compare with the dataset.

    PYTHONPATH=. python3 scripts/bench_repeat.py --data data --pairs 200 [--out repeat.json]
"""

from __future__ import annotations

import json
from collections import defaultdict

import click
import numpy as np
import pyarrow.compute as pc

from costmodel import dataset, hardware
from costmodel.benchmark import IsolatedBenchmarker


@click.command()
@click.option("--data", default="data")
@click.option("--pairs", default=200)
@click.option("--seed", default=0)
@click.option("--out", default="repeat.json")
def main(data: str, pairs: int, seed: int, out: str) -> None:
    hw = hardware.current()
    t = dataset.read(data, ["gpu", "kernel", "problem_json", "dtype", "config_json", "status", "latency_ms"])
    t = t.filter(pc.and_(pc.equal(t["gpu"], hw.gpu), pc.equal(t["status"], "ok")))
    idx = np.random.default_rng(seed).choice(t.num_rows, size=min(pairs, t.num_rows), replace=False)
    rows = t.take(idx).to_pylist()
    by_group = defaultdict(list)
    for r in rows:
        by_group[(r["kernel"], r["problem_json"], r["dtype"])].append(r)
    diffs = []
    with IsolatedBenchmarker(hw) as bench:
        for (kernel, pj, dtype), rs in by_group.items():
            ms = bench.measure(kernel, json.loads(pj), dtype, [json.loads(r["config_json"]) for r in rs])
            diffs += [abs(m.latency_ms - r["latency_ms"]) / r["latency_ms"] for m, r in zip(ms, rs) if m.ok]
    d = np.array(diffs)
    report = {"gpu": hw.gpu, "pairs": len(rows), "retimed_ok": len(d), "median_rel_diff": float(np.median(d)),
              "p90_rel_diff": float(np.quantile(d, 0.9)), "share_within_2pct": float((d <= 0.02).mean())}
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
