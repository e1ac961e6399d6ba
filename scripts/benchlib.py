"""Timing helpers shared by the GPU benchmark scripts (bench_tune.py, sweep_problem.py and the experiments under
scripts/experiments/): compile a config list ahead and time it with the collector's benchmarker, and time
callables against each other in alternating order (torch.matmul against a config, with do_bench).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable

from costmodel.benchmark import IsolatedBenchmarker, Measurement, compile_ahead
from costmodel.kernels import get_family


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def alternating(timed: dict[str, Callable[[], object]], rounds: int,
                time_one: Callable[[Callable[[], object]], float]) -> dict[str, list[float]]:
    """Each callable's time by ``time_one`` once a round for ``rounds``, the order reversed every other round (the
    GPU warms over a call, so a fixed order favours the first)."""
    out: dict[str, list[float]] = {name: [] for name in timed}
    names = list(timed)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            out[name].append(time_one(timed[name]))
    return out


def host_us_per_call(fn: Callable[[], object], calls: int = 100, rounds: int = 5) -> float:
    """The host's time to launch ``fn`` once, in us: ``calls`` launches queued behind a GPU sleep (so no launch
    waits on the GPU), median over ``rounds``."""
    import torch

    fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        torch.cuda._sleep(100_000_000)  # about 50 ms at the H200's clock: longer than the launches below
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per_call)


def graph_ms(fn: Callable[[], object], calls: int = 20, replays: int = 10) -> float:
    """GPU time per call with the host out of the way: ``calls`` calls captured in one CUDA graph, replayed
    ``replays`` times back to back (L2 warm, as in a captured model), median per call."""
    import torch

    fn()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # warm on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    return statistics.median(per_call)


def against_torch(problem: dict, dtype: str, config: dict, hw, rounds: int = 6) -> dict:
    """torch.matmul and ``config`` (its bound call, what a user calling it gets) timed three ways, each in
    ``rounds`` alternating rounds: do_bench (L2 flushed), eager per call back to back, CUDA-graph replay. Medians."""
    import torch
    from triton.testing import do_bench

    from costmodel.benchmark import time_eager

    fam = get_family("matmul")
    a, b = fam.make_inputs(problem, dtype, "cuda")
    c = fam.make_output(problem, dtype, "cuda")
    ours, mm = fam.bind(problem, (a, b), c, config, hw), lambda: torch.matmul(a, b)
    ms = alternating({"torch": mm, "ours": ours}, rounds, lambda fn: do_bench(fn, return_mode="median"))
    ways = {"torch_eager_ms": lambda: time_eager(mm, "cuda", 5.0), "tune_config_eager_ms": lambda: time_eager(ours, "cuda", 5.0),
            "torch_graph_ms": lambda: graph_ms(mm), "tune_config_graph_ms": lambda: graph_ms(ours)}
    other = {k: statistics.median(v) for k, v in alternating(ways, rounds, lambda f: f()).items()}
    torch_ms, ours_ms = statistics.median(ms["torch"]), statistics.median(ms["ours"])
    return {"torch_ms": torch_ms, "tune_config_do_bench_ms": ours_ms, "tune_vs_torch": torch_ms / ours_ms,
            "torch_ms_rounds": ms["torch"], "tune_config_ms_rounds": ms["ours"], **other,
            "tune_vs_torch_eager": other["torch_eager_ms"] / other["tune_config_eager_ms"],
            "tune_vs_torch_graph": other["torch_graph_ms"] / other["tune_config_graph_ms"]}


def time_all(family: str, problem: dict, dtype: str, configs: list[dict], bench: IsolatedBenchmarker,
             what: str, compile_first: bool = True) -> list[Measurement]:
    """The measurements of ``configs``, logged as ``what``. With ``compile_first`` all are compiled before the
    first is timed (no compile process competes with the timing for the CPU); without, timing starts with the
    first compiled chunk, compiles and timing overlapping (where the best is raced again anyway)."""
    t0 = time.perf_counter()
    compile_wait_s = compile_ahead(bench, family, problem, dtype, configs, poll_s=0.05) if compile_first else 0.0
    t_compiled = time.perf_counter()
    ms = bench.measure(family, problem, dtype, configs)
    oks = [m.latency_ms for m in ms if m.ok]
    log(f"swept {len(configs)} {what}, {len(oks)} ok, compiled in {compile_wait_s:.0f} s, timed in "
        f"{time.perf_counter() - t_compiled:.0f} s ({time.perf_counter() - t0:.0f} s in all): "
        f"best {min(oks, default=0):.4f} ms")
    return ms


def cold_triton_cache(base: str, scratch: str) -> str:
    """A fresh Triton cache holding only what ``base`` holds (Triton's kernel-independent driver module, which
    any machine that ever ran Triton has): no kernel binary and no launcher of these kernels."""
    path = tempfile.mkdtemp(dir=scratch)
    shutil.copytree(base, path, dirs_exist_ok=True)
    return path


def best_by_shape(path: str | None) -> dict[tuple[str, str], dict]:
    """The rows of a `bench_matmul_gap.py` output that found a best config, by (problem as sorted JSON, dtype)."""
    rows = {}
    for line in open(path) if path else ():
        if line.strip() and (r := json.loads(line)).get("best_config"):
            rows[shape_key(r["problem"], r["dtype"])] = r
    return rows


def shape_key(problem: dict, dtype: str) -> tuple[str, str]:
    return json.dumps(problem, sort_keys=True), dtype
