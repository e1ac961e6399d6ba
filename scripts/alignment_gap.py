"""What the matmul family reaches by the alignment of its operands' rows (CPU, from data/): for each group of at
least ``--min-gflop`` of work, the best recorded config's TFLOPS, pooled by whether A's rows (K) and B's and C's (N)
are a multiple of 16 bytes apart, which TMA needs and without which Triton neither vectorises nor pipelines the
loads along them (BENCHMARKS, session 14). Whole-space groups and sampled ones apart.

    .venv/bin/python scripts/alignment_gap.py [--data data] [--min-gflop 10] [--out alignment_gap.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from costmodel import dataset  # noqa: E402
from costmodel.kernels.base import DTYPE_BYTES  # noqa: E402


def best_rows(root: str) -> list[dict]:
    """One dict per matmul group: its dims, dtype, whether whole-space (any of its rows), and its fastest ok row."""
    t = dataset.read(root, ["group_id", "exhaustive", "dim_M", "dim_N", "dim_K", "dtype", "config_json", "latency_ms"],
                     filter=(pc.field("kernel") == "matmul") & (pc.field("status") == "ok"))
    t = t.take(pc.sort_indices(t, [("group_id", "ascending"), ("latency_ms", "ascending")]))
    gid = np.asarray(t["group_id"].to_pylist())
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])  # each group's first row: its fastest
    whole = np.maximum.reduceat(np.asarray(t["exhaustive"].to_pylist(), bool), starts)
    return [{**r, "exhaustive": bool(w)} for r, w in zip(t.take(starts).to_pylist(), whole)]


def summary(rows: list[dict]) -> dict:
    tf = np.array([r["tflops"] for r in rows])
    return {"groups": len(rows), "median_tflops": float(np.median(tf)), "p90_tflops": float(np.percentile(tf, 90)),
            "max_tflops": float(tf.max()), "best_is_tma": sum(json.loads(r["config_json"])["TMA"] for r in rows)}


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--min-gflop", default=10.0, show_default=True, help="groups of at least this much work (2*M*N*K)")
@click.option("--out", default=None, help="write the JSON here as well")
def main(data: str, min_gflop: float, out: str | None) -> None:
    classes: dict[str, list[dict]] = {}
    for r in best_rows(data):
        flop = 2.0 * r["dim_M"] * r["dim_N"] * r["dim_K"]
        if flop < min_gflop * 1e9:
            continue
        r["tflops"] = flop / (r["latency_ms"] * 1e-3) / 1e12
        e = DTYPE_BYTES[r["dtype"]]
        a_ok, b_ok = r["dim_K"] * e % 16 == 0, r["dim_N"] * e % 16 == 0
        name = f"A rows {'aligned' if a_ok else 'unaligned'}, B and C rows {'aligned' if b_ok else 'unaligned'}"
        classes.setdefault(name, []).append(r)
    result = {"data": data, "min_gflop": min_gflop, "classes": {
        name: {"all": summary(rows), "whole_space": summary(w) if (w := [r for r in rows if r["exhaustive"]]) else None}
        for name, rows in sorted(classes.items())}}
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


if __name__ == "__main__":
    main()
