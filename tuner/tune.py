"""tune(): rank every valid candidate with the GPU's model, benchmark only the top-k, return the best.

The finalists are re-timed interleaved (a, b, c, a, b, c, ...) so that a burst of noise cannot pick the
winner; the family's default config is timed beside them as the baseline every report shows."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

from costmodel import hardware, space
from costmodel.benchmark import Benchmarker, Measurement, compile_ahead
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family
from costmodel.kernels.base import Config, Problem
from tuner.cache import ResultCache

FINALISTS = 3
ROUNDS = 3


@dataclass
class TuneResult:
    gpu: str
    kernel: str
    problem: Problem
    dtype: str
    candidates: int
    benchmarked: int
    best: dict  # {"config": ..., "latency_ms": ...}
    default_latency_ms: float | None
    wall_s: float
    compile_s: float  # summed over the configs compiled (in parallel)
    phases_s: dict = field(default_factory=dict)  # seconds: rank, compile (wait for the top-k), time, finalists
    predicted_rank: list[dict] = field(default_factory=list)  # the top-k: config, rank, measured ms, status
    exhaustive_best_ms: float | None = None
    cached: bool = False
    measurements: list[Measurement] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("measurements")
        return d


def rank_candidates(family: str, problem: Problem, dtype: str, hw: HardwareRecord, cost_model,
                    configs: list[Config] | None = None) -> list[Config]:
    """``configs`` (default: every valid config of the problem), predicted fastest first."""
    from costmodel import features, model

    configs = space.enumerate_valid(get_family(family), problem, dtype, hw) if configs is None else configs
    order = model.rank(cost_model, features.candidates_table(family, problem, dtype, configs, hw))
    return [configs[i] for i in order]


def _median_by_config(ms: list[Measurement]) -> dict[str, float]:
    from costmodel.dataset import canonical_json

    times: dict[str, list[float]] = {}
    for m in ms:
        if m.ok:
            times.setdefault(canonical_json(m.config), []).append(m.latency_ms)
    return {k: statistics.median(v) for k, v in times.items()}


class UnguardedMainError(RuntimeError):
    """tune() called from a script's top level without ``if __name__ == "__main__":``."""


def _main_module_rerun_line() -> int | None:
    """The line of the main script whose top-level code is calling us, when that code is not under an
    ``if __name__ ...`` test; else None.

    The benchmarker's processes come from multiprocessing's forkserver, and every child re-runs the main script
    (as ``__mp_main__``) before its own work. Unguarded, the child calls tune() again, multiprocessing refuses to
    start processes while bootstrapping (a freeze_support traceback in the child), the timing worker dies before
    its first config and tune() would return ``best={'config': None}``. That is decided here, in the parent,
    from the call stack and the script's syntax tree, before any process starts."""
    import ast
    import sys

    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if path is None or (spec_name or "").split(".")[-1] == "__main__":
        return None  # interactive, `python -c`, or a package's __main__: multiprocessing re-runs none of these
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None  # not called from the script's top-level code (a thread, an atexit hook)
    try:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    for node in ast.walk(tree):  # the line inside the body of an `if` that tests __name__
        if (isinstance(node, ast.If) and node.body[0].lineno <= line <= (node.body[-1].end_lineno or line)
                and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(node.test))):
            return None
    return line


def _visible_gpu() -> HardwareRecord:
    from costmodel.errors import CostModelError

    try:
        return hardware.current()
    except CostModelError:
        raise CostModelError("no CUDA GPU is visible: tune() measures on a GPU; on a CPU pass hw= (e.g. "
                             "costmodel.hardware.KNOWN['nvidia-h200']) with a ReplayBenchmarker, or an "
                             "IsolatedBenchmarker(hw, device='cpu') under TRITON_INTERPRET=1") from None


def _check_main_guarded(bench: Benchmarker) -> None:
    from costmodel.benchmark import IsolatedBenchmarker

    if isinstance(bench, IsolatedBenchmarker) and (line := _main_module_rerun_line()) is not None:
        import sys

        raise UnguardedMainError(
            f"tune() called at the top level of {sys.modules['__main__'].__file__} (line {line}): the benchmarker's "
            'processes re-run that script, so put the call under `if __name__ == "__main__":`')


def tune(family: str, problem: dict, dtype: str, bench: Benchmarker, *, k: int = 8, cost_model=None,
         hw: HardwareRecord | None = None, cache: ResultCache | None = None, exhaustive: bool = False,
         configs: list[Config] | None = None) -> TuneResult:
    """Tune one problem on the current GPU (or ``hw`` with a replay benchmarker). ``cost_model`` defaults to
    the shipped model for the GPU; ``configs`` restricts the candidates (default: the whole valid space; a
    replay can only answer for recorded ones); the result is cached unless ``exhaustive``."""
    import triton

    from costmodel import model
    from costmodel.dataset import canonical_json

    t0 = time.perf_counter()
    _check_main_guarded(bench)
    fam = get_family(family)
    problem, dtype = fam.check_problem(problem), fam.check_dtype(dtype)
    hw = hw or _visible_gpu()
    key = ResultCache.key(hw.gpu, fam.kernel_hash, family, problem, dtype, triton.__version__)
    if cache is not None and not exhaustive and (hit := cache.get(key)) is not None:
        return TuneResult(**{**hit, "wall_s": time.perf_counter() - t0, "cached": True})
    cost_model = cost_model or model.load_shipped(hw.gpu)
    ranked = rank_candidates(family, problem, dtype, hw, cost_model, configs)
    t_ranked = time.perf_counter()
    default = fam.default_config(problem, dtype, hw)
    top = ranked[:k]
    extra = [] if default in top or default not in ranked else [default]
    compile_wait_s = compile_ahead(bench, family, problem, dtype, top + extra)
    t_compiled = time.perf_counter()
    first = bench.measure(family, problem, dtype, top + extra)
    t_measured = time.perf_counter()
    ok = sorted((m for m in first[: len(top)] if m.ok), key=lambda m: m.latency_ms)
    finalists = [m.config for m in ok[:FINALISTS]]
    again = bench.measure(family, problem, dtype, finalists * ROUNDS) if len(finalists) > 1 else []
    t_finalists = time.perf_counter()
    medians = _median_by_config([m for m in first if m.config in finalists] + again)
    best_cfg = min(finalists, key=lambda c: medians[canonical_json(c)]) if finalists else None
    default_m = first[top.index(default)] if default in top else (first[-1] if extra else None)
    exhaustive_best = None
    all_ms = first + again
    if exhaustive:
        everything = bench.measure(family, problem, dtype, ranked)
        all_ms += everything
        oks = [m.latency_ms for m in everything if m.ok]
        exhaustive_best = min(oks) if oks else None
    result = TuneResult(
        gpu=hw.gpu, kernel=family, problem=problem, dtype=dtype, candidates=len(ranked),
        benchmarked=len(top) + len(extra),
        best={"config": best_cfg, "latency_ms": medians[canonical_json(best_cfg)] if best_cfg else None},
        default_latency_ms=default_m.latency_ms if default_m is not None and default_m.ok else None,
        wall_s=0.0, compile_s=float(sum(m.compile_s or 0.0 for m in first)),
        phases_s={"rank": t_ranked - t0, "compile": compile_wait_s, "time": t_measured - t_compiled,
                  "finalists": t_finalists - t_measured},
        predicted_rank=[{"rank": i + 1, "config": m.config, "status": m.status, "latency_ms": m.latency_ms}
                        for i, m in enumerate(first[: len(top)])],
        exhaustive_best_ms=exhaustive_best, measurements=all_ms)
    result.wall_s = time.perf_counter() - t0
    if cache is not None and not exhaustive and best_cfg is not None:
        cache.put(key, result.as_dict())
    return result


def predict(family: str, problem: dict, dtype: str, hw: HardwareRecord, cost_model, k: int = 8) -> dict:
    """Rank without a GPU (what a CPU machine can do): the model's top-k, nothing measured."""
    t0 = time.perf_counter()
    fam = get_family(family)
    problem, dtype = fam.check_problem(problem), fam.check_dtype(dtype)
    ranked = rank_candidates(family, problem, dtype, hw, cost_model)
    return {"gpu": hw.gpu, "kernel": family, "problem": problem, "dtype": dtype, "candidates": len(ranked),
            "benchmarked": 0, "top": [{"rank": i + 1, "config": c} for i, c in enumerate(ranked[:k])],
            "default_config": fam.default_config(problem, dtype, hw), "wall_s": time.perf_counter() - t0}


def record(result: TuneResult, root, hw: HardwareRecord, run_id: str) -> int:
    """Append a tuning run's measurements to the dataset (one row per config: its first measurement), so each
    tuning run grows the data. Returns the rows written."""
    from costmodel import dataset
    from costmodel.hardware import software_versions

    first: dict[str, Measurement] = {}
    for m in result.measurements:
        first.setdefault(dataset.canonical_json(m.config), m)
    cands = dataset.group_candidates(hw.gpu, result.kernel, result.problem, result.dtype)
    gid, kernel_hash, done = dataset.resolve_group(cands, dataset.measured_pairs(root, [g for g, _ in cands]))
    fresh = [m for key, m in first.items() if key not in done]
    if fresh:
        rows = dataset.measurement_rows(hw, software_versions(), run_id, result.kernel, kernel_hash, gid,
                                        result.exhaustive_best_ms is not None, result.problem, result.dtype, fresh)
        dataset.write_shard(root, hw.gpu, result.kernel, run_id, rows)
    return len(fresh)


__all__ = ["TuneResult", "UnguardedMainError", "predict", "rank_candidates", "record", "tune"]
