"""H200: a problem's whole valid space, timed by the collector's benchmarker, and what each knob value buys: the best
latency at each value, and for each pair of values the twin ratios (configs equal but for that knob). For matmul,
the fastest few then against torch.matmul with benchlib's alternating do_bench.

    PYTHONPATH=. python3 scripts/sweep_problem.py --out sweep.json [--problem matmul:M=5120,N=5120,K=5120:float16 ...]
"""

from __future__ import annotations

import itertools
import json
import time

import click
import numpy as np

from benchlib import against_torch, time_all
from costmodel import dataset, hardware, space
from costmodel.benchmark import IsolatedBenchmarker
from costmodel.kernels import get_family

DEFAULT_PROBLEMS = ("matmul:M=5120,N=5120,K=5120:float16", "matmul:M=5120,N=5120,K=5120:bfloat16")


def parse(spec: str) -> tuple[str, dict, str]:
    family, shape, dtype = spec.split(":")
    return family, {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}, dtype


def knob_effects(family: str, timed: dict[str, float]) -> dict:
    """Per knob: the best latency at each value, and per pair of values (a, b) over twin configs the median of
    ms(b) / ms(a) and the share where a is faster."""
    configs = [(json.loads(c), ms) for c, ms in timed.items()]
    out = {}
    for knob in get_family(family).knobs:
        best = {v: min((ms for cfg, ms in configs if cfg[knob.name] == v), default=None) for v in knob.values}
        twins = {}
        for a, b in itertools.combinations(knob.values, 2):
            ratios = []
            for cfg, ms in configs:
                if cfg[knob.name] == a:
                    twin = timed.get(dataset.canonical_json({**cfg, knob.name: b}))
                    if twin is not None:
                        ratios.append(twin / ms)
            if ratios:
                twins[f"{b}/{a}"] = {"pairs": len(ratios), "median": float(np.median(ratios)),
                                     "a_faster_share": float(np.mean(np.array(ratios) > 1))}
        out[knob.name] = {"best_ms": best, "twins": twins}
    return out


def sweep_problem(family: str, problem: dict, dtype: str, hw, bench: IsolatedBenchmarker, vs_torch: int) -> dict:
    configs = space.enumerate_valid(get_family(family), problem, dtype, hw)
    ms = time_all(family, problem, dtype, configs, bench, f"configs of {family} {problem} {dtype}")
    timed = {dataset.canonical_json(m.config): m.latency_ms for m in ms if m.ok}
    fastest = sorted(timed, key=timed.get)[:vs_torch]
    row = {"family": family, "problem": problem, "dtype": dtype, "configs": len(configs), "ok": len(timed),
           "not_ok": sorted({m.status for m in ms if not m.ok}), "knobs": knob_effects(family, timed),
           "fastest": [{"config": json.loads(c), "ms": timed[c]} for c in fastest]}
    if family == "matmul":
        for entry in row["fastest"]:
            entry.update(against_torch(problem, dtype, entry["config"], hw))
    return row


@click.command()
@click.option("--problem", "problems", multiple=True, default=DEFAULT_PROBLEMS, help="family:M=..,N=..:dtype")
@click.option("--vs-torch", default=3, help="how many of the fastest configs to time against torch.matmul")
@click.option("--out", default="sweep.json")
def main(problems: tuple[str, ...], vs_torch: int, out: str) -> None:
    hw = hardware.current()
    rows = []
    with IsolatedBenchmarker(hw) as bench:
        for spec in problems:
            rows.append(sweep_problem(*parse(spec), hw, bench, vs_torch))
            print(json.dumps(rows[-1]), flush=True)
            json.dump({"gpu": hw.gpu, "date": time.strftime("%Y-%m-%d"), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
