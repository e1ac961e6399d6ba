"""Timing helpers shared by the GPU benchmark scripts (bench_tune.py, bench_matmul_gap.py, sweep_problem.py and the
experiments under scripts/experiments/): compile a config list ahead and time it with the collector's benchmarker,
time callables against each other in alternating order (torch.matmul against a config, with do_bench), run a cold
`costmodel tune` in a new process, and race its pick against a sweep's fastest configs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Iterator

from costmodel import dataset, hardware
from costmodel.benchmark import IsolatedBenchmarker, Measurement, compile_ahead, graph_timer  # noqa: F401 - the race's too
from costmodel.kernels import get_family

RACE_ROUNDS = 7  # rounds of a race of a tune's pick against a sweep's fastest configs


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
    return graph_timer([fn] * calls, replays)()


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


@contextlib.contextmanager
def triton_caches() -> Iterator[tuple[object, str, str]]:
    """(the GPU's hardware record, a base Triton cache, a scratch folder) for cold tunes: the base cache holds only
    Triton's kernel-independent driver module (``hardware.current()`` builds it there); this process then compiles
    into a cache of its own in the scratch folder, which its tunes never see (``cold_triton_cache``)."""
    with tempfile.TemporaryDirectory() as scratch:
        base = os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "base")
        os.makedirs(base)
        hw = hardware.current()
        os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "shared")
        yield hw, base, scratch


def tune_in_new_process(family: str, problem: dict, dtype: str, triton_cache: str,
                        k: int | None = None, steps: int = 0) -> tuple[dict, float]:
    """`costmodel tune` as a user runs it (``-k k`` when given, else its default; ``--steps``), with the Triton cache
    ``triton_cache`` (``cold_triton_cache``: empty of kernels): its JSON and the whole command's seconds. It picks by
    GPU time (``--objective graph``), the time a sweep's best is, so the two compare."""
    shape = ",".join(f"{dim}={v}" for dim, v in problem.items())
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "costmodel", "tune", "--kernel", family, "--shape", shape, "--dtype",
                           dtype, "--objective", "graph", "--no-cache", "--json", *(["-k", str(k)] if k else []),
                           *(["--steps", str(steps)] if steps else [])],
                          env={**os.environ, "TRITON_CACHE_DIR": triton_cache}, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"costmodel tune failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), time.perf_counter() - t0


def race(family: str, problem: dict, dtype: str, configs: list[dict], bench: IsolatedBenchmarker,
         rounds: int = RACE_ROUNDS) -> list[float]:
    """Each config's median latency over ``rounds`` rounds of the same benchmarker, the order reversed every other
    round; a failed measurement counts as infinitely slow."""
    per: list[list[float]] = [[] for _ in configs]
    for r in range(rounds):
        order = list(range(len(configs)))[:: 1 if r % 2 == 0 else -1]
        for i, m in zip(order, bench.measure(family, problem, dtype, [configs[i] for i in order])):
            per[i].append(m.latency_ms if m.ok else float("inf"))
    return [statistics.median(p) for p in per]


def raced_score(family: str, problem: dict, dtype: str, tune_config: dict, fastest: list[dict],
                bench: IsolatedBenchmarker) -> dict:
    """The tune's pick against the fastest configs a sweep found, raced in alternating rounds: a sweep's minimum
    over thousands of single timings is biased low by their noise, and the tune's own timing came from another
    process."""
    key = dataset.canonical_json
    configs = [tune_config] + [c for c in fastest if key(c) != key(tune_config)]
    ms = race(family, problem, dtype, configs, bench)
    log(f"raced the pick against the sweep's fastest {len(configs) - 1}: {[round(t, 4) for t in ms]}")
    return {"raced_configs": configs, "raced_ms": ms, "tune_score_raced": min(ms) / ms[0]}


def best_by_shape(path: str | None, whole_space: bool = False) -> dict[tuple[str, str], dict]:
    """The rows of a `bench_matmul_gap.py` output that found a best config, by (problem as sorted JSON, dtype), a
    later row winning; with ``whole_space`` only rows of a whole-space sweep (no ``knobs``: a knob value's part of
    the space has a best of its own)."""
    rows = {}
    for line in open(path) if path else ():
        if line.strip() and (r := json.loads(line)).get("best_config") and not (whole_space and r.get("knobs")):
            rows[shape_key(r["problem"], r["dtype"])] = r
    return rows


def shape_key(problem: dict, dtype: str) -> tuple[str, str]:
    return json.dumps(problem, sort_keys=True), dtype
