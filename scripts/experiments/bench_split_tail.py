"""H200: what the matmul's SPLIT_TAIL=1 buys (session 4, before the second reduction kernel, SPLIT_TAIL=2, existed;
scripts/sweep_problem.py compares every value of every knob). For each problem, every valid SPLIT_TAIL=1 config and
its twin without the split (same tiles, TMA, warps and stages) timed by the collector's benchmarker; the twin /
split latency ratios, the best of each set, and each best against torch.matmul with benchlib's alternating
do_bench.

    PYTHONPATH=. python3 scripts/experiments/bench_split_tail.py --out split_tail.json [--problem M=5120,N=5120,K=5120:float16 ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np

from costmodel import hardware, space
from costmodel.benchmark import IsolatedBenchmarker
from costmodel.kernels import get_family

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib
from benchlib import against_torch, time_all  # noqa: E402

DEFAULT_PROBLEMS = ("M=5120,N=5120,K=5120:float16", "M=5120,N=5120,K=5120:bfloat16")


def parse(spec: str) -> tuple[dict, str]:
    shape, dtype = spec.split(":")
    return {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}, dtype


def twins(problem: dict, dtype: str, hw, bench: IsolatedBenchmarker) -> dict:
    fam = get_family("matmul")
    split = [c for c in space.enumerate_valid(fam, problem, dtype, hw) if c["SPLIT_TAIL"] == 1
             and not c["EPILOGUE_SUBTILE"]]  # session 4's space
    plain = [dict(c, SPLIT_TAIL=0) for c in split]
    ms = time_all("matmul", problem, dtype, split + plain, bench, "split-tail configs and their twins")
    s, p = ms[: len(split)], ms[len(split):]
    pairs = [(a.latency_ms, b.latency_ms) for a, b in zip(s, p) if a.ok and b.ok]
    ratio = np.array([b / a for a, b in pairs])  # > 1: the split is faster
    best_split = min((m for m in s if m.ok), key=lambda m: m.latency_ms)
    best_plain = min((m for m in p if m.ok), key=lambda m: m.latency_ms)
    return {"problem": problem, "dtype": dtype, "pairs": len(split), "both_ok": len(pairs),
            "not_ok": sorted({m.status for m in ms if not m.ok}),
            "twin_over_split": {"median": float(np.median(ratio)), "p10": float(np.quantile(ratio, 0.1)),
                                "p90": float(np.quantile(ratio, 0.9)), "split_faster_share": float((ratio > 1).mean())},
            "best_split": {"config": best_split.config, "ms": best_split.latency_ms,
                           **against_torch(problem, dtype, best_split.config, hw)},
            "best_twin": {"config": best_plain.config, "ms": best_plain.latency_ms,
                          **against_torch(problem, dtype, best_plain.config, hw)}}


@click.command()
@click.option("--problem", "problems", multiple=True, default=DEFAULT_PROBLEMS, help="M=..,N=..,K=..:dtype")
@click.option("--out", default="split_tail.json")
def main(problems: tuple[str, ...], out: str) -> None:
    hw = hardware.current()
    with IsolatedBenchmarker(hw) as bench:
        rows = []
        for spec in problems:
            rows.append(twins(*parse(spec), hw, bench))
            print(json.dumps(rows[-1]), flush=True)
    json.dump({"gpu": hw.gpu, "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
