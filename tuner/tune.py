"""tune(): rank every valid candidate with the GPU's model, benchmark only the top-k, return the best.

When the top-k's measurements disagree with the model's ranking (see :func:`disagreement`), the remaining
candidates are re-ranked with a correction fitted on those measurements and a second batch is timed, if the
wall budget leaves room. The finalists are re-timed interleaved (a, b, c, a, b, c, ...) so that a burst of
noise cannot pick the winner; the family's default config is timed beside the top-k as the baseline every
report shows, and competes as a finalist, so tune never returns a config slower than the default."""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field

from costmodel import hardware, space
from costmodel.benchmark import Benchmarker, Measurement, compile_ahead
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family
from costmodel.kernels.base import Config, Problem
from tuner.cache import ResultCache

# configs timed in the first round. On inner folds of the shipped model's training side (scripts/replay_tune.py
# --inner 4: 95 whole-space groups, each ranked by a fresh model that never saw its shape; session 16), first round
# only, explore 4: 0.9888 of the best at k 8, 0.9906 at 12, 0.9911 at 16 (p10 0.959 / 0.972 / 0.972); k 8 with the
# second round 0.9913. Twelve then buy most of what a second round does without its second compile wait, which a cold
# command's budget seldom leaves room for. The 4 more cost their timing only (they compile beside the rest): in session
# 15's race a re-timed finalist took 6-40 ms and `collect` went through 80-90 configs a second, compiles included
K = 12
FINALISTS = 3
ROUNDS = 3
BUDGET_S = 10.0  # default wall budget of one tune call; a second round starts only if it fits
# of the first round's k configs, how many go to the best-ranked config of structures the model's top k - EXPLORE
# lack (space.first_batch): a model's top 8 is often one structure's warps and stages, and on shapes unlike its data
# the best config ranked 16th-137th (the 7 of session 15's 16 new whole-space groups where the top 8 fell under 0.95;
# scripts/probe_vs_sweep.py). Confirmed on inner folds of the shipped model's training side (scripts/replay_tune.py
# --inner 4: 66 whole-space groups, each ranked by a fresh model that never saw its shape), first round only: 0.9885
# of the best at 0, 0.9898 at 4, 0.9884 at 6 (p10 0.960 / 0.981 / 0.972). On the held-out groups, for the record:
# session 14's model on the 109 it never saw 0.9854 / 0.9871 / 0.9868; session 15's on its 76, 0.9966 / 0.9965
EXPLORE = 4
# the first round disagrees with the ranking when the measured order's Spearman correlation with the predicted
# order is below RHO_MIN (a ranking that holds puts its faster picks first: +1), or the slowest config of the
# top-k that ran is over SPREAD_MAX times the fastest (a model that knows the problem's region keeps its top-k
# close), or fewer than half ran. Measured on the 91 held-out H200 groups (scripts/replay_tune.py, k=8): with
# (0.5, 1.3) a second round runs on 64 and tune reaches 0.9927 of the recorded best (geomean), against 0.9929
# when it always runs, 0.9887 with (0.0, 1.5) (32 run) and 0.9878 with none
RHO_MIN = 0.5
SPREAD_MAX = 1.3
# a finalist's re-timing costs this share of a first-round config's (whose binary is loaded, checked and set up for
# the first time): 0.04-0.14 over the 12 problems of session 15's race (tune_phases_s, finalists over 12 re-timings
# against time per config)
FINALIST_SHARE = 0.15
RIDGE = 1.0  # the correction's ridge penalty, as a fraction of the mean squared norm of the timed rows
# steps (``steps`` > 0; off by default until the H200 measures them on issue 17's tune shapes): from the fastest config
# timed, the valid configs one step away (``space.neighbours``) not timed yet, the first STEP_LOCAL in the model's
# order, again from a faster one while a step finds it. Replayed on the shipped model's 150 held-out whole-space groups (tune k 8, objective
# graph, then up to 4 steps): geomean of best / tune's 0.9940 -> 0.9964, p10 0.980 -> 0.987, 5.6 configs more a group;
# 12 a step gave the same (scripts/experiments/triton_steps.py, scripts/results/triton_steps-cpu-2026-12-03-s25.json).
# A step also reshapes the tile (``space.neighbours``: two tile dims, one halved, one doubled): on the same groups
# 0.9964 -> 0.9966, p10 0.9871 -> 0.9877, 6.3 configs a group, two matmul groups to their best, none worse
# (triton_steps-reshape-cpu-2026-12-03-s30.json). On issue 17's 1x4096x11008 the H200's cold tune picked 64x256x64
# in sessions 29 and 30 (0.963 and 0.939 of the space's best, 64x128x128): one reshape away, which the step's first
# six now hold under the shipped model; one knob at a time, that tile is two steps away.
STEP_LOCAL = 6


@dataclass
class TuneResult:
    gpu: str
    kernel: str
    problem: Problem
    dtype: str
    candidates: int
    benchmarked: int
    # {"config", "latency_ms": its median under the objective, "graph_ms", "eager_ms": its medians both ways}
    best: dict
    default_latency_ms: float | None  # the default config's time under the objective
    wall_s: float
    compile_s: float  # summed over the configs compiled (in parallel)
    # seconds: rank, compile (wait for the top-k), time (of it time_setup: the worker setting the group up), second,
    # finalists
    phases_s: dict = field(default_factory=dict)
    predicted_rank: list[dict] = field(default_factory=list)  # the top-k: config, rank, measured ms, status
    exhaustive_best_ms: float | None = None
    # {"ran": bool, "configs": timed in it, "batch": configs picked for it (those not compiled by the budget's
    # deadline are not timed), "reason": why it ran or not, "disagreement": the criterion's figures, "best_ms": its
    # fastest config's first measurement}
    second_round: dict = field(default_factory=dict)
    steps: list[dict] = field(default_factory=list)  # per step: "from" config, "from_ms", "timed", "faster"
    cached: bool = False
    objective: str = "eager"  # what latency_ms figures are: eager per-call time, or GPU time (graph)
    measurements: list[Measurement] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("measurements")
        return d


def _scored(family: str, problem: Problem, dtype: str, hw: HardwareRecord, cost_model,
            configs: list[Config] | None):
    """(candidates predicted fastest first, their table in that order, their model scores in that order)."""
    import numpy as np

    from costmodel import features, model

    configs = space.enumerate_valid(get_family(family), problem, dtype, hw) if configs is None else configs
    table = features.candidates_table(family, problem, dtype, configs, hw)
    scores = np.asarray(model.score(cost_model, table), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    return [configs[i] for i in order], table.take(order), scores[order]


def rank_candidates(family: str, problem: Problem, dtype: str, hw: HardwareRecord, cost_model,
                    configs: list[Config] | None = None) -> list[Config]:
    """``configs`` (default: every valid config of the problem), predicted fastest first."""
    return _scored(family, problem, dtype, hw, cost_model, configs)[0]


def disagreement(latencies_in_predicted_order: list[float | None]) -> dict:
    """Whether the top-k's measurements (in the model's order; None where a config failed) disagree with the
    ranking: the measured order's Spearman correlation with the predicted order is below ``RHO_MIN``, or the
    slowest that ran is over ``SPREAD_MAX`` times the fastest, or fewer than half ran."""
    import numpy as np
    from scipy.stats import spearmanr

    lat = np.array([np.nan if x is None else x for x in latencies_in_predicted_order], dtype=np.float64)
    ran = np.flatnonzero(np.isfinite(lat))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every latency equal: no correlation (NaN), not a disagreement
        rho = float(spearmanr(ran, lat[ran]).statistic) if len(ran) >= 3 else float("nan")
    spread = float(lat[ran].max() / lat[ran].min()) if len(ran) else float("nan")
    reasons = [r for r, hit in (("the measured order disagrees with the predicted order", rho < RHO_MIN),
                                ("the top-k's latencies are far apart", spread > SPREAD_MAX),
                                ("fewer than half of the top-k ran", 2 * len(ran) < len(lat))) if hit]
    # rho is the correlation of predicted rank with measured speed: +1 when the model's order holds
    return {"disagrees": bool(reasons), "rho": None if np.isnan(rho) else round(rho, 4),
            "spread": None if np.isnan(spread) else round(spread, 4), "reasons": reasons}


def corrected_order(timed_x, timed_ms, timed_scores, rest_x, rest_scores):
    """Indices of the untimed candidates, predicted fastest first by a per-problem correction of the model:
    log latency = slope * model score (the slope fitted on the timed configs, so a model whose order the
    measurements invert is turned around) + a ridge regression of what is left on the configs' features
    (columns standardised over every candidate, constant ones dropped, missing values at the mean; solved in its
    dual form: a handful of rows, tens of columns). Deterministic and vectorised.

    On the 91 held-out H200 groups with a second batch of 8 after every top 8 (scripts/replay_tune.py, setting
    "always"): 0.9929 of the recorded best (geomean), against 0.9878 with no second round."""
    import numpy as np

    n = len(timed_ms)
    s = np.concatenate([timed_scores, rest_scores]).astype(np.float64)
    s = (s - s[:n].mean()) / max(float(s.std()), 1e-12)
    y = np.log(np.asarray(timed_ms, dtype=np.float64))
    slope = float(np.polyfit(s[:n], y, 1)[0]) if np.ptp(s[:n]) > 1e-12 else 0.0  # tied scores: no slope
    x = np.vstack([timed_x, rest_x]).astype(np.float64)
    x[~np.isfinite(x)] = np.nan
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: dropped below
        mean, std = np.nanmean(x, axis=0), np.nanstd(x, axis=0)
    keep = np.isfinite(std) & (std > 1e-9)
    z = np.nan_to_num((x[:, keep] - mean[keep]) / std[keep])
    zt, zr = z[:n], z[n:]
    resid = y - slope * s[:n]
    gram = zt @ zt.T
    lam = RIDGE * max(float(np.trace(gram)) / n, 1e-9)
    alpha = np.linalg.solve(gram + lam * np.eye(n), resid - resid.mean())
    return np.argsort(slope * s[n:] + zr @ (zt.T @ alpha), kind="stable")


OBJECTIVES = ("eager", "graph")


def objective_ms(m: Measurement, objective: str) -> float | None:
    """The time a config is judged by: ``eager``, the per-call time of back-to-back eager calls (launch included;
    what a user calling the kernel from eager PyTorch waits), or ``graph``, GPU time with the launch hidden (what a
    CUDA graph or a compiled model replays). A measurement without an eager time (recorded before there was one,
    or under the interpreter) is judged by its GPU time."""
    if objective == "eager" and m.eager_ms is not None:
        return m.eager_ms
    return m.latency_ms


def _median_by_config(ms: list[Measurement], objective: str) -> dict[str, float]:
    from costmodel.dataset import canonical_json

    times: dict[str, list[float]] = {}
    for m in ms:
        if m.ok:
            times.setdefault(canonical_json(m.config), []).append(objective_ms(m, objective))
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


_NO_GPU_HINT = ("tune() measures on a GPU; on a CPU pass hw= (e.g. costmodel.hardware.KNOWN['nvidia-h200']) with a "
                "ReplayBenchmarker, or an IsolatedBenchmarker(hw, device='cpu') under TRITON_INTERPRET=1")


def _check_main_guarded(bench: Benchmarker) -> None:
    from costmodel.benchmark import IsolatedBenchmarker

    if isinstance(bench, IsolatedBenchmarker) and (line := _main_module_rerun_line()) is not None:
        import sys

        raise UnguardedMainError(
            f"tune() called at the top level of {sys.modules['__main__'].__file__} (line {line}): the benchmarker's "
            'processes re-run that script, so put the call under `if __name__ == "__main__":`')


def _second_batch(ranked, table, scores, first: list[Measurement], k: int, objective: str) -> list[Config]:
    """The next ``k`` untimed candidates by the correction fitted on the first round's measurements."""
    from costmodel import features
    from costmodel.dataset import canonical_json

    timed = {canonical_json(m.config): m for m in first}
    ok_idx = [i for i, c in enumerate(ranked) if (m := timed.get(canonical_json(c))) is not None and m.ok]
    rest_idx = [i for i, c in enumerate(ranked) if canonical_json(c) not in timed]
    if not rest_idx or len(ok_idx) < 2:
        return []
    x = features.feature_matrix(table)
    ms = [objective_ms(timed[canonical_json(ranked[i])], objective) for i in ok_idx]
    order = corrected_order(x[ok_idx], ms, scores[ok_idx], x[rest_idx], scores[rest_idx])
    return [ranked[rest_idx[j]] for j in order[:k]]


def _plan(disagree: dict, batch: list[Config], after_compile_s: float, fastest_compile_s: float, elapsed_s: float,
          budget_s: float | None) -> tuple[bool, str]:
    """Whether the second round starts, and why (not). It needs at least the fastest compile the first round saw
    (the pool is warm now and compiles the batch side by side) and ``after_compile_s``: the batch's timing and the
    finalists' re-timing, at the first round's rates. How long the batch's compiles really take is then measured,
    not estimated (``compile_ahead`` up to the budget's deadline). The first round's compile wait holds the pool's
    start-up: on 333^3 in session 15's race it was 4.7 s while its 9 compiles took 1.3 s each on average, and an
    estimate from it refused the second round that the measured order's disagreement asked for."""
    if not disagree["disagrees"]:
        return False, "the first round agrees with the ranking"
    if not batch:
        return False, "no untimed candidates left (or fewer than two configs ran)"
    need = fastest_compile_s + after_compile_s
    if budget_s is not None and elapsed_s + need > budget_s:
        return False, f"over budget: {elapsed_s:.2f} s spent, at least {need:.2f} s more needed, budget {budget_s:g} s"
    return True, "; ".join(disagree["reasons"])


def _steps(bench: Benchmarker, family: str, problem: Problem, dtype: str, ranked: list[Config],
           timed: list[Measurement], objective: str, rounds: int,
           local: int = STEP_LOCAL) -> tuple[list[Measurement], list[dict]]:
    """Up to ``rounds`` steps from the fastest of ``timed``, ``local`` configs each (see STEP_LOCAL): (their
    measurements, what each did)."""
    from costmodel.dataset import canonical_json

    fam = get_family(family)
    done = {canonical_json(m.config) for m in timed}
    ok = [(t, m.config) for m in timed if m.ok and (t := objective_ms(m, objective)) is not None]
    out: list[Measurement] = []
    log: list[dict] = []
    if not ok:
        return out, log
    t_from, base = min(ok, key=lambda tc: tc[0])
    for _ in range(rounds):
        near = space.neighbours(fam, base, [c for c in ranked if canonical_json(c) not in done])[:local]
        if not near:
            break
        compile_ahead(bench, family, problem, dtype, near)
        got = bench.measure(family, problem, dtype, near)
        out += got
        done |= {canonical_json(c) for c in near}
        faster = [(t, m.config) for m in got if m.ok and (t := objective_ms(m, objective)) is not None and t < t_from]
        log.append({"from": base, "from_ms": t_from, "timed": len(near), "faster": len(faster)})
        if not faster:
            break
        t_from, base = min(faster, key=lambda tc: tc[0])
    return out, log


def tune(family: str, problem: dict, dtype: str, bench: Benchmarker, *, k: int = K, cost_model=None,
         hw: HardwareRecord | None = None, cache: ResultCache | None = None, exhaustive: bool = False,
         configs: list[Config] | None = None, budget_s: float | None = BUDGET_S,
         objective: str = "eager", explore: int | None = None, steps: int = 0) -> TuneResult:
    """Tune one problem on the current GPU (or ``hw`` with a replay benchmarker). ``cost_model`` defaults to
    the shipped model for the GPU; ``configs`` restricts the candidates (default: the whole valid space; a
    replay can only answer for recorded ones); ``budget_s`` bounds the whole call's wall time for deciding on
    a second round (None: no bound); ``explore`` (default EXPLORE, at most k // 2) first-round slots go to the
    best-ranked config of structures the rest lack; ``steps``: at most this many steps to neighbours of the fastest
    config timed, after the rounds (``_steps``; 0: none); ``objective`` is the time configs are judged by
    (``objective_ms``); the result is cached unless ``exhaustive``. The model ranks by GPU time either way (its
    training data has no eager times yet); with launches of 5-11 us (BENCHMARKS, issue 15) the two orders part only
    for the smallest kernels, where the finalists' eager timing decides."""
    import triton

    from costmodel import model
    from costmodel.dataset import canonical_json

    t0 = time.perf_counter()
    _check_main_guarded(bench)
    fam = get_family(family)
    problem, dtype = fam.check_problem(problem), fam.check_dtype(dtype)
    hw = hw or hardware.current(hint=_NO_GPU_HINT)
    if objective not in OBJECTIVES:
        raise CostModelError(f"objective {objective!r}: one of {', '.join(OBJECTIVES)}")
    key = ResultCache.key(hw.gpu, fam.kernel_hash, family, problem, dtype, triton.__version__, objective)
    if cache is not None and not exhaustive and (hit := cache.get(key)) is not None:
        return TuneResult(**{**hit, "wall_s": time.perf_counter() - t0, "cached": True})
    cost_model = cost_model or model.load_shipped(hw.gpu)
    ranked, table, scores = _scored(family, problem, dtype, hw, cost_model, configs)
    t_ranked = time.perf_counter()
    default = fam.default_config(problem, dtype, hw)
    explore = min(EXPLORE, k // 2) if explore is None else explore  # a small k stays mostly the model's top
    top = space.first_batch(fam, ranked, k, explore)
    extra = [] if default in top or default not in ranked else [default]
    if hasattr(bench, "prepare"):  # the timing worker sets the group up while the configs compile
        bench.prepare(family, problem, dtype)
    compile_wait_s = compile_ahead(bench, family, problem, dtype, top + extra)
    t_compiled, setup0 = time.perf_counter(), getattr(bench, "setup_s", 0.0)
    first = bench.measure(family, problem, dtype, top + extra)
    t_measured = time.perf_counter()
    setup_s = getattr(bench, "setup_s", 0.0) - setup0  # of the first round's timing, the worker's group set-up

    disagree = disagreement([objective_ms(m, objective) if m.ok else None for m in first[: len(top)]])
    batch = _second_batch(ranked, table, scores, first, k, objective) if disagree["disagrees"] else []
    per_config_s = (t_measured - t_compiled) / max(len(first), 1)  # timing one config, at the first round's rate
    after_compile_s = per_config_s * (len(batch) + FINALIST_SHARE * (FINALISTS + 1) * ROUNDS)
    fastest_compile_s = min((m.compile_s for m in first if m.compile_s is not None), default=0.0)
    ran, why = _plan(disagree, batch, after_compile_s, fastest_compile_s, time.perf_counter() - t0, budget_s)
    second: list[Measurement] = []
    if ran:
        compile_ahead(bench, family, problem, dtype, batch,
                      deadline=None if budget_s is None else t0 + budget_s - after_compile_s)
        compiled = [c for c in batch if bench.ready(family, problem, dtype, [c])]  # the rest are left to the pool
        if compiled:
            second = bench.measure(family, problem, dtype, compiled)
        else:
            ran, why = False, f"over budget: none of the batch's {len(batch)} configs compiled in time"
    t_second = time.perf_counter()
    ok_second = [objective_ms(m, objective) for m in second if m.ok]
    stepped, step_log = _steps(bench, family, problem, dtype, ranked, first + second, objective, steps) if steps \
        else ([], [])
    t_steps = time.perf_counter()

    # finalists: the fastest of every config timed, and the default whenever it ran, so it is never beaten
    default_m = first[top.index(default)] if default in top else (first[-1] if extra else None)
    ok = sorted((m for m in first[: len(top)] + second + stepped if m.ok), key=lambda m: objective_ms(m, objective))
    finalists = [m.config for m in ok[:FINALISTS]]
    if default_m is not None and default_m.ok and default not in finalists:
        finalists.append(default)
    again = bench.measure(family, problem, dtype, finalists * ROUNDS) if len(finalists) > 1 else []
    t_finalists = time.perf_counter()
    timed_finalists = [m for m in first + second + stepped if m.config in finalists] + again
    medians = _median_by_config(timed_finalists, objective)
    best_cfg = min(finalists, key=lambda c: medians[canonical_json(c)]) if finalists else None
    exhaustive_best = None
    rank_of = {canonical_json(c): i + 1 for i, c in enumerate(ranked)}
    all_ms = first + second + stepped + again
    if exhaustive:
        everything = bench.measure(family, problem, dtype, ranked)
        all_ms += everything
        oks = [objective_ms(m, objective) for m in everything if m.ok]
        exhaustive_best = min(oks) if oks else None
    result = TuneResult(
        gpu=hw.gpu, kernel=family, problem=problem, dtype=dtype, candidates=len(ranked),
        benchmarked=len(top) + len(extra) + len(second) + len(stepped),
        objective=objective,
        best={"config": best_cfg, "latency_ms": medians[canonical_json(best_cfg)] if best_cfg else None,
              **{f"{o}_ms": _median_by_config(timed_finalists, o).get(canonical_json(best_cfg)) if best_cfg else None
                 for o in ("graph", "eager")}},
        default_latency_ms=objective_ms(default_m, objective) if default_m is not None and default_m.ok else None,
        wall_s=0.0, compile_s=float(sum(m.compile_s or 0.0 for m in first + second + stepped)),
        phases_s={"rank": t_ranked - t0, "compile": compile_wait_s, "time": t_measured - t_compiled,
                  "time_setup": setup_s, "second": t_second - t_measured, "steps": t_steps - t_second,
                  "finalists": t_finalists - t_steps},
        predicted_rank=[{"rank": rank_of[canonical_json(m.config)], "config": m.config, "status": m.status,
                         "latency_ms": objective_ms(m, objective), "graph_ms": m.latency_ms, "eager_ms": m.eager_ms}
                        for m in first[: len(top)]],
        exhaustive_best_ms=exhaustive_best,
        second_round={"ran": ran, "configs": len(second), "batch": len(batch) if ran else 0, "reason": why,
                      "disagreement": disagree,
                      "best_ms": min(ok_second) if ok_second else None,
                      "timed": [{"config": m.config, "status": m.status, "latency_ms": objective_ms(m, objective)}
                                for m in second]},
        steps=step_log, measurements=all_ms)
    result.wall_s = time.perf_counter() - t0
    if cache is not None and not exhaustive and best_cfg is not None:
        cache.put(key, result.as_dict())
    return result


def predict(family: str, problem: dict, dtype: str, hw: HardwareRecord, cost_model, k: int = K) -> dict:
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


__all__ = ["TuneResult", "UnguardedMainError", "corrected_order", "disagreement", "predict", "rank_candidates",
           "record", "tune"]
