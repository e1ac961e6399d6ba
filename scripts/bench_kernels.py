"""H200: each family's best config (from a broad sample) against torch and the hardware.

matmul vs torch.matmul (cuBLAS), attention vs scaled_dot_product_attention, memory-bound families as a share of
the measured device-to-device copy bandwidth (bytes read + written). Three ways, each the same for both sides:
GPU time with L2 flushed before each call (``best_ms`` / ``torch_ms``, the collector's timing), the per-call time of
back-to-back eager calls (``*_eager_ms``, launch cost included; ours the bound call a user gets from
``KernelFamily.bind``) and GPU time in a CUDA graph (``*_graph_ms``, L2 warm), the last two in alternating rounds.
Usage on a GPU host:

    PYTHONPATH=. python3 scripts/bench_kernels.py [--configs 160] [--out bench_kernels.json]
"""

from __future__ import annotations

import json
import time

import statistics
import sys
from pathlib import Path

import click
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import alternating, graph_ms  # noqa: E402

from costmodel import hardware, space  # noqa: E402
from costmodel.benchmark import IsolatedBenchmarker, time_callable, time_eager  # noqa: E402
from costmodel.kernels import get_family  # noqa: E402

SHAPES = {
    "matmul": [{"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192}, {"M": 64, "N": 8192, "K": 8192}],
    "attention": [{"B": 4, "H": 32, "S": 4096, "D": 128, "CAUSAL": 0}, {"B": 4, "H": 32, "S": 4096, "D": 128, "CAUSAL": 1},
                  {"B": 8, "H": 16, "S": 2048, "D": 64, "CAUSAL": 0}],
    "softmax": [{"M": 8192, "N": 8192}, {"M": 32768, "N": 4096}, {"M": 4096, "N": 32768}],
    "layernorm": [{"M": 8192, "N": 8192}, {"M": 32768, "N": 4096}, {"M": 4096, "N": 32768}],
    "rmsnorm": [{"M": 8192, "N": 8192}, {"M": 32768, "N": 4096}, {"M": 4096, "N": 32768}],
}
TIMING = dict(budget_ms=20.0, min_reps=10, max_reps=100)
ROUNDS = 4  # alternating rounds of the eager and graph timings


def torch_baseline(family: str, problem: dict, inputs: tuple):
    import torch
    import torch.nn.functional as F

    if family == "matmul":
        return lambda: torch.matmul(*inputs)
    if family == "attention":
        return lambda: F.scaled_dot_product_attention(*inputs, is_causal=bool(problem["CAUSAL"]))
    if family == "softmax":
        return lambda: torch.softmax(inputs[0], dim=-1)
    if family == "layernorm":
        return lambda: F.layer_norm(inputs[0], (problem["N"],), inputs[1], inputs[2], eps=1e-5)
    return lambda: F.rms_norm(inputs[0], (problem["N"],), inputs[1], eps=1e-6)


def median_ms(fn) -> float:
    return float(np.median(time_callable(fn, "cuda", **TIMING)[0]))


def both_ways(fam, problem: dict, dtype: str, config: dict, inputs: tuple, torch_fn, hw) -> dict:
    """Our bound call and torch's, eager per call and in a CUDA graph, in alternating rounds: medians and ratios."""
    out = fam.make_output(problem, dtype, "cuda")
    ours = fam.bind(problem, inputs, out, config, hw)
    ways = {"best_eager_ms": lambda: time_eager(ours, "cuda", 5.0), "torch_eager_ms": lambda: time_eager(torch_fn, "cuda", 5.0),
            "best_graph_ms": lambda: graph_ms(ours), "torch_graph_ms": lambda: graph_ms(torch_fn)}
    r = {k: statistics.median(v) for k, v in alternating(ways, ROUNDS, lambda f: f()).items()}
    return {**r, "eager_vs_torch": r["torch_eager_ms"] / r["best_eager_ms"],
            "graph_vs_torch": r["torch_graph_ms"] / r["best_graph_ms"]}


def copy_bandwidth_tbs() -> float:
    """Device-to-device copy of 1 GiB, counting bytes read + written."""
    import torch

    src = torch.empty(2**29, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(src)
    return 2 * src.numel() * src.element_size() / median_ms(lambda: dst.copy_(src)) / 1e9


@click.command()
@click.option("--configs", default=120, help="configs sampled per (shape, dtype), the default among them")
@click.option("--families", default="matmul,attention,softmax,layernorm,rmsnorm")
@click.option("--out", default="bench_kernels.json")
def main(configs: int, families: str, out: str) -> None:

    hw = hardware.current()
    copy_tbs = copy_bandwidth_tbs()
    print(f"{hw.name}: copy {copy_tbs:.2f} TB/s", flush=True)
    results = []
    rng = np.random.default_rng(0)
    plan = []
    with IsolatedBenchmarker(hw, **TIMING) as bench:
        for family in families.split(","):
            fam = get_family(family)
            for problem in SHAPES[family]:
                for dtype in fam.dtypes:
                    cfgs = space.sample(fam, problem, dtype, hw, configs, rng)
                    plan.append((family, problem, dtype, cfgs))
                    bench.prefetch(family, problem, dtype, cfgs)
        for family, problem, dtype, cfgs in plan:
            fam = get_family(family)
            t0 = time.perf_counter()
            ms = bench.measure(family, problem, dtype, cfgs)
            ok = [m for m in ms if m.ok]
            best = min(ok, key=lambda m: m.latency_ms) if ok else None
            default = ms[0]
            inputs = fam.make_inputs(problem, dtype, "cuda")
            torch_fn = torch_baseline(family, problem, inputs)
            ref_ms = median_ms(torch_fn)
            both = both_ways(fam, problem, dtype, best.config, inputs, torch_fn, hw) if best else {}
            del inputs, torch_fn
            row = {"family": family, "problem": problem, "dtype": dtype, "configs": len(cfgs), "ok": len(ok),
                   "failed": {s: sum(m.status == s for m in ms) for s in {m.status for m in ms} if s != "ok"},
                   "best_ms": best and best.latency_ms, "best_config": best and best.config,
                   "default_ms": default.latency_ms if default.ok else None, "torch_ms": ref_ms,
                   "flops": fam.flops(problem), "min_bytes": fam.min_bytes(problem, dtype), **both,
                   "wall_s": time.perf_counter() - t0}
            if best:
                row["best_vs_torch"] = ref_ms / best.latency_ms
                row["best_tflops"] = fam.flops(problem) / best.latency_ms / 1e9
                row["torch_tflops"] = fam.flops(problem) / ref_ms / 1e9
                row["best_share_of_copy_bw"] = fam.min_bytes(problem, dtype) / best.latency_ms / 1e9 / copy_tbs
                row["torch_share_of_copy_bw"] = fam.min_bytes(problem, dtype) / ref_ms / 1e9 / copy_tbs
            results.append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    report = {"gpu": hw.gpu, "date": time.strftime("%Y-%m-%d"), "copy_tbs": copy_tbs, "results": results}
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\n{'family':10} {'dtype':9} {'problem':44} {'best ms':>9} {'torch ms':>9} {'x torch':>8} {'TFLOP/s':>8} {'of copy':>8}"
          f" {'eager x':>8} {'graph x':>8}")
    for r in results:
        if r["best_ms"] is None:
            print(f"{r['family']:10} {r['dtype']:9} {json.dumps(r['problem']):44} no ok config {r['failed']}")
            continue
        print(f"{r['family']:10} {r['dtype']:9} {json.dumps(r['problem']):44} {r['best_ms']:9.4f} {r['torch_ms']:9.4f} "
              f"{r['best_vs_torch']:8.3f} {r['best_tflops']:8.1f} {r['best_share_of_copy_bw']:8.3f} "
              f"{r['eager_vs_torch']:8.3f} {r['graph_vs_torch']:8.3f}")


if __name__ == "__main__":
    main()
