"""Issue 18: what a recorded Helion group's knobs buy, on the CPU. For one group (kernel, problem; every dtype of it
under data/), each ok config's score (the group's best latency over its own) summarised by the flattened tile loop
and its loop order, by elements per thread (tile elements / (32 x num_warps)) and by the load indexing: count,
mean, median and max of the scores. Session 20: swiglu's 1,000-config population, where leave-one-kernel-out stays
at 0.905.

    .venv/bin/python scripts/experiments/helion_group_knobs.py --kernel helion:swiglu --problem M=5634,N=16752
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pyarrow.dataset as pds

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from costmodel import dataset  # noqa: E402
from costmodel.dataset import canonical_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def knobs(c: dict) -> dict:
    b = c["block_sizes"]
    return {"flatten": bool((c.get("flatten_loops") or [False])[0]),
            "loop_order": "".join(map(str, (c.get("loop_orders") or [[0, 1]])[0])),
            "elems_per_thread": float(np.prod(b)) / (32 * c["num_warps"]),
            "loads_tensor_descriptor": sum(i == "tensor_descriptor" for i in c["indexing"][:2])}


@click.command()
@click.option("--kernel", required=True)
@click.option("--problem", required=True, help="dims, e.g. M=5634,N=16752")
def main(kernel: str, problem: str) -> None:
    prob = {k: int(v) for k, v in (kv.split("=") for kv in problem.split(","))}
    t = dataset.read(str(ROOT / "data"), ["problem_json", "config_json", "status", "latency_ms"],
                     (pds.field("kernel") == kernel) & (pds.field("problem_json") == canonical_json(prob))).to_pandas()
    if t.empty:
        raise click.UsageError(f"no rows of {kernel} {problem} under data/")
    ok = t[t.status == "ok"].copy()
    ok = pd.concat([ok.reset_index(drop=True), pd.DataFrame([knobs(json.loads(c)) for c in ok.config_json])], axis=1)
    ok["score"] = ok.latency_ms.min() / ok.latency_ms
    ok["elems_per_thread"] = pd.cut(ok.elems_per_thread, [0, 4, 8, 16, 32, 64, 128, np.inf])
    out = {"kernel": kernel, "problem": prob, "rows": len(t), "ok": len(ok)}
    for by in (["flatten", "loop_order"], ["elems_per_thread"], ["loads_tensor_descriptor"]):
        g = ok.groupby(by, observed=True).score.agg(["count", "mean", "median", "max"]).round(3)
        out[",".join(by)] = {" ".join(map(str, k if isinstance(k, tuple) else (k,))): v for k, v in
                             g.to_dict("index").items()}
        print(g.to_string(), file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
