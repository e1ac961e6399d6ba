"""What a family reaches by the alignment of its operands' rows (CPU, from data/): for each group of enough work, the
best recorded config's rate, pooled by whether the rows its loads run along lie a multiple of 16 bytes apart (which
TMA needs, and without which Triton does not vectorise, nor, for matmul, pipeline, the loads along them: BENCHMARKS,
session 14). matmul: TFLOPS, by A's rows (K) and B's and C's (N), groups of at least ``--min-gflop``; the row-wise
families: GB/s of their least traffic (``min_bytes``), by the rows (N), groups of at least ``--min-mb``. Whole-space
groups and sampled ones apart. With ``--line 128`` the aligned rows part further: those 128 bytes apart (a whole
cache line) and those 16 but not 128 (session 41: every large shape of issue 17 short of torch.matmul has such rows).

    .venv/bin/python scripts/alignment_gap.py [--data data] [--min-gflop 10] [--min-mb 64] [--line 128] [--out FILE]
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
from costmodel.kernels import get_family  # noqa: E402
from costmodel.kernels.base import DTYPE_BYTES  # noqa: E402

ROWWISE = ("softmax", "layernorm", "rmsnorm")


def best_rows(root: str, kernel: str) -> list[dict]:
    """One dict per group of ``kernel``: its problem, dtype, whether whole-space (any of its rows), and its fastest
    ok row."""
    t = dataset.read(root, ["group_id", "exhaustive", "problem_json", "dtype", "config_json", "latency_ms"],
                     filter=(pc.field("kernel") == kernel) & (pc.field("status") == "ok"))
    t = t.take(pc.sort_indices(t, [("group_id", "ascending"), ("latency_ms", "ascending")]))
    gid = np.asarray(t["group_id"].to_pylist())
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])  # each group's first row: its fastest
    whole = np.maximum.reduceat(np.asarray(t["exhaustive"].to_pylist(), bool), starts)
    return [{**r, "problem": json.loads(r["problem_json"]), "exhaustive": bool(w)}
            for r, w in zip(t.take(starts).to_pylist(), whole)]


def aligned(n: int, dtype: str, line: int | None = None) -> str:
    """Rows of ``n`` elements: "aligned" (16 bytes apart, what TMA takes) or "unaligned"; with ``line``, aligned rows
    part into "aligned to {line}" and "aligned to 16 only"."""
    row = n * DTYPE_BYTES[dtype]
    if row % 16:
        return "unaligned"
    return "aligned" if line is None else f"aligned to {line}" if row % line == 0 else "aligned to 16 only"


def pooled(root: str, kernel: str, min_gflop: float, min_mb: float, line: int | None = None) -> dict[str, list[dict]]:
    """The groups of enough work, by alignment class, each with its best config's ``rate``."""
    fam, classes = get_family(kernel), {}
    for r in best_rows(root, kernel):
        p, dtype = r["problem"], r["dtype"]
        if kernel == "matmul":  # TFLOPS
            work, floor, unit = fam.flops(p), min_gflop * 1e9, 1e12
            name = f"A rows {aligned(p['K'], dtype, line)}, B and C rows {aligned(p['N'], dtype, line)}"
        else:  # GB/s
            work, floor, unit = fam.min_bytes(p, dtype), min_mb * 1e6, 1e9
            name = f"rows {aligned(p['N'], dtype, line)}"
        if work >= floor:
            classes.setdefault(name, []).append({**r, "rate": work / (r["latency_ms"] * 1e-3) / unit})
    return classes


def summary(rows: list[dict]) -> dict:
    rate = np.array([r["rate"] for r in rows])
    out = {"groups": len(rows), "median": float(np.median(rate)), "p90": float(np.percentile(rate, 90)),
           "max": float(rate.max())}
    tma = [json.loads(r["config_json"]).get("TMA") for r in rows]
    return out if None in tma else {**out, "best_is_tma": sum(t == 1 for t in tma)}  # TMA=2: hinted pointers


@click.command()
@click.option("--data", default="data", show_default=True, type=click.Path(exists=True, file_okay=False))
@click.option("--min-gflop", default=10.0, show_default=True, help="matmul groups of at least this much work")
@click.option("--min-mb", default=64.0, show_default=True, help="row-wise groups moving at least this much")
@click.option("--line", default=None, type=click.IntRange(32), help="part aligned rows by this many bytes too")
@click.option("--out", default=None, help="write the JSON here as well")
def main(data: str, min_gflop: float, min_mb: float, line: int | None, out: str | None) -> None:
    result = {"data": data, "min_gflop": min_gflop, "min_mb": min_mb, **({"line": line} if line else {}),
              "families": {}}
    for kernel in ("matmul", *ROWWISE):
        classes = pooled(data, kernel, min_gflop, min_mb, line)
        result["families"][kernel] = {"rate": "TFLOPS" if kernel == "matmul" else "GB/s", "classes": {
            name: {"all": summary(rows), "whole_space": summary(w) if (w := [r for r in rows if r["exhaustive"]])
                   else None} for name, rows in sorted(classes.items())}}
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


if __name__ == "__main__":
    main()
