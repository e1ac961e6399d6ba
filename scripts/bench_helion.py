"""H200, issue 18's race: costmodel's Helion autotuner (tuner/helion.py) against Helion's own, on problems absent
from the data. Usage on a GPU host (Helion 1.4.0 carried, see device_job.sh's helion_race step):

    PYTHONPATH=. python3 scripts/bench_helion.py [--only 0,3] [--full 1] [--out bench_helion.jsonl]
    python3 scripts/bench_helion.py --summarise a.jsonl [--summarise b.jsonl]   # the acceptance figures, one JSON
    python3 scripts/bench_helion.py --list                                      # the problems, by index
    python3 scripts/bench_helion.py --still-valid a.jsonl [--recipe default_walk=1]  # rows the tuner shipped now
                                                              # (so changed) would tune the same way

Problems: costmodel/benchmarks.py's HELION_RACE, three of each Helion kernel with a Triton twin, named there under
the twin's name so that no collection draws them (they were the first three each family drew with seed 18 that
neither kernel had rows of, for attention of head dim 128: Helion 1.4.0 refuses head dim 64). The race refuses to
run where data/ holds a row of one under either name.

Per problem, in one call: each tune runs in a new process (``--tune``) whose first kernel call tunes, compiles and
runs, with an empty Triton cache (only Triton's driver module), Helion cache and inductor cache: its wall is that
first call's, cold. "costmodel": ``CostModelAutotuner(objective="graph")`` (``OBJECTIVE``) as the kernel's
``autotuner_fn``, the kernel at autotune_effort "quick" (what its fallback runs where the model does not fit: the
row's ``costmodel.path`` says which ran, ``fallback`` why); "quick" and, for the first ``--full`` problems, "full":
Helion's own search at that effort. Then this process runs each chosen config and Helion's default config once,
checks the output against the family's float32 reference (``HelionFamily.tolerance``), and times those that pass in
``--rounds`` alternating rounds (benchlib.alternating) two ways: do_bench's median (``latency_ms``) and a CUDA-graph
replay over input sets that fill twice the L2 (``graph_ms``: the GPU's time, no launch waiting on Helion's host
code). A config chosen by several is timed once. The figures (``--summarise``) read ``graph_ms`` where a row has it,
``latency_ms`` before. Each problem's row is appended to --out when done, so a call cut short keeps the problems it
finished. A full tune's result keeps ``progress`` from Helion's own log of its search (``search_progress``), also
where it ran past ``--timeout``.

    PYTHONPATH=. python3 scripts/bench_helion.py --retime rows.jsonl [--full 1] --out retimed.jsonl
        # no tunes (but --full's): the picks timed again
    PYTHONPATH=. python3 scripts/bench_helion.py --retime rows.jsonl --retune --out retuned.jsonl
        # costmodel tuned anew (cold), raced against the rows' Helion picks, every latency from this call
    PYTHONPATH=. python3 scripts/bench_helion.py --retime rows.jsonl --retune --only 1,8 --recipe local=12 ...
        # the same with a variant of the tuner's recipe, raced before it ships (rows record their recipe)
    PYTHONPATH=. python3 scripts/bench_helion.py --retime rows.jsonl --retune --model DIR ...
        # the same with another Helion model (scripts/helion_model.py --out DIR), raced before it ships; with
        # --model nvidia-h200 on a card with no model (an H100), a recipe raced there (its figures that card's)
"""

from __future__ import annotations

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import click
import numpy as np

from benchlib import alternating, cold_triton_cache, log
from costmodel import benchmarks, dataset
from costmodel.benchmark import graph_calls, graph_timer, input_sets, relative_error
from costmodel.dataset import canonical_json
from costmodel.errors import CostModelError
from costmodel.evaluation import geomean
from costmodel.helion import configs as hconfigs, families

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ("matmul", "softmax", "layer_norm", "rms_norm", "attention")  # the Helion kernels with a Triton twin
SEED = 18  # issue 18: Helion's own searches' random seed
CONTENDERS = ("costmodel", "quick", "full", "default")
TIMING_KEYS = ("latency_ms", "latency_rounds_ms", "graph_ms", "graph_rounds_ms", "input_sets", "same_config",
               "rel_err", "tolerance", "run_errors")
WALL_S, VS_FULL = 20.0, 0.97  # issue 18's acceptance: median cold wall, geomean latency against full effort
# what costmodel's tune is asked to minimise: the race's figures read the graph replay (session 23), GPU time with
# the host out of the way, so the tuner's verification re-times by graph replay too (CostModelAutotuner objective)
OBJECTIVE = "graph"


def recorded(data_dir: Path) -> set[tuple[str, str]]:
    """(kernel, problem_json) of every row under ``data_dir``, any dtype."""
    t = dataset.read(str(data_dir), ["kernel", "problem_json"])
    return set(zip(t["kernel"].to_pylist(), t["problem_json"].to_pylist()))


def race_problems(seen: set[tuple[str, str]]) -> list[tuple]:
    """(Helion kernel name, problem, dtype) of each problem benchmarks.HELION_RACE names, in KERNELS' order; a
    CostModelError where ``seen`` (``recorded``) holds one under the Helion kernel's name or its twin's."""
    twins = {families.get(name).twin: name for name in KERNELS}
    out = sorted(((twins[f], p, d) for f, p, d in benchmarks.HELION_RACE), key=lambda r: KERNELS.index(r[0]))
    fams = [families.get(name) for name, _, _ in out]
    if clash := [f"{k} {canonical_json(p)}" for fam, (_, p, _) in zip(fams, out) for k in (fam.kernel, fam.twin)
                 if (k, canonical_json(p)) in seen]:
        raise CostModelError(f"the data holds rows of race problems, which no longer measure unseen shapes: "
                             f"{'; '.join(clash)}")
    return out


# --- one tune, in its own process ----------------------------------------------------------------------------

def tune_once(who: str, name: str, problem: dict, dtype: str, recipe: dict | None = None,
              model: str | None = None) -> dict:
    """The first call of the kernel tuned by ``who`` ("costmodel", "quick", "full"): its wall and chosen config;
    ``recipe``: costmodel's tuner's knobs other than the shipped ones (``parse_recipe``); ``model``: a Helion model
    directory or GPU slug for costmodel's tuner to rank with instead of the shipped one (``--model``)."""
    from tuner.helion_problem import first_call

    fam = families.get(name)
    args = fam.args(problem, fam.make_inputs(problem, dtype, "cuda"))
    tuner = costmodel_tuner(model, recipe) if who == "costmodel" else None
    kernel = (fam.with_settings(autotuner_fn=tuner, autotune_effort="quick") if tuner
              else fam.with_settings(autotune_effort=who))
    wall, bound, config = first_call(kernel, args)
    out = {"wall_s": wall, "config": config}
    if tuner:
        cm, why = tuner.fit(bound, args)  # the model it ranked with, or seeded Helion's search with, and why not
        out.update(path="model" if why is None else "fallback", fallback=why, search=tuner.last,
                   model_data_hash=cm.meta.get("data", {}).get("hash") if cm else None,
                   model_params=cm.meta.get("params") if cm else None, **({"model": model} if model else {}))
    return out


def costmodel_tuner(model: str | None, recipe: dict | None = None):
    """costmodel's tuner as the race runs it: the shipped recipe with ``recipe``'s knobs changed; with ``model`` (a
    directory or GPU slug), ranking with that model on whatever card runs it, as the model's GPU (``gpu=``): a recipe
    raced on a card with no shipped model (sessions 53-56 were offered H100s, which have none), its figures that
    card's."""
    from tuner.helion import CostModelAutotuner

    gpu = load_model(model).gpu if model else None
    return CostModelAutotuner(model, objective=OBJECTIVE, gpu=gpu, **(recipe or {}))


def cold_env(base_cache: str, scratch: str) -> dict:
    """The environment of a cold tune: a Triton cache holding only ``base_cache`` (Triton's driver module, which
    any machine that ever ran Triton has), empty Helion and inductor caches."""
    return {**os.environ, "TRITON_CACHE_DIR": cold_triton_cache(base_cache, scratch),
            "HELION_CACHE_DIR": tempfile.mkdtemp(dir=scratch), "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(dir=scratch),
            "HELION_AUTOTUNE_PROGRESS_BAR": "0", "HELION_AUTOTUNE_RANDOM_SEED": str(SEED)}


def tune_in_new_process(who: str, name: str, problem: dict, dtype: str, env: dict, timeout_s: float,
                        recipe: dict | None = None, model: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--tune", who, "--kernel", name, "--problem", json.dumps(problem),
           "--dtype", dtype, *[a for k, v in (recipe or {}).items() for a in ("--recipe", f"{k}={v}")],
           *(["--model", model] if model else [])]
    with tempfile.TemporaryDirectory() as logs:
        if who == "full":  # Helion's own log of its search: how far a run stopped at its time got (session 28: two
            # full runs were still searching at 520 and 530 s)
            env = {**env, "HELION_AUTOTUNE_LOG": os.path.join(logs, "search")}
        out = run_tune(cmd, env, timeout_s)
        progress = search_progress(Path(logs, "search.csv"))
    return {**out, **({"progress": progress} if progress else {})}


def run_tune(cmd: list[str], env: dict, timeout_s: float) -> dict:
    t0 = time.perf_counter()
    # its own session, killed whole (Helion's compile processes with it) on a timeout or when this one is stopped
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except BaseException as e:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                return {"error": f"timed out after {timeout_s:g} s"}
            raise
    sys.stderr.write(stderr[-3000:])
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return {"error": f"exit {proc.returncode}: {stderr[-1500:]}"}
    return {**json.loads(lines[-1]), "command_s": time.perf_counter() - t0}


def search_progress(csv_path: Path) -> dict | None:
    """How far a Helion search got, from its own log (``HELION_AUTOTUNE_LOG``'s CSV, flushed a row at a time, so a
    search stopped part way keeps its rows; Helion writes a "started" row as a config's benchmark begins and a
    second row with its outcome): the configs with an outcome, by status, the last generation, the seconds into the
    search of the last row, the fastest time so far and the outcomes' compile seconds. None without a log."""
    if not csv_path.exists():
        return None
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    done = [r for r in rows if r["status"] != "started"]

    def numbers(key: str, among: list[dict]) -> list[float]:
        return [float(r[key]) for r in among if r[key]]

    perf, seconds, generations = numbers("perf_ms", done), numbers("timestamp_s", rows), numbers("generation", rows)
    return {"configs": len(done), "status": dict(Counter(r["status"] for r in done)),
            "generation": int(max(generations)) if generations else None,
            "last_s": max(seconds) if seconds else None, "fastest_ms": min(perf) if perf else None,
            "compile_s": sum(numbers("compile_time_s", done))}


# --- latencies, in this process ---------------------------------------------------------------------------

def latencies(name: str, problem: dict, dtype: str, chosen: dict[str, dict], rounds: int, l2_bytes: int) -> dict:
    """Each distinct chosen config (``same_configs``) run once and checked against the reference, then those within
    tolerance timed in ``rounds`` alternating rounds two ways: do_bench (median, L2 flushed; where the host's launch
    outlasts the flush, likely counted too) and a CUDA-graph replay over ``input_sets`` (``graph_timer``: the kernel's
    GPU time, the host out of the way). Per chooser: the medians of its config's rounds, the rounds, the
    relative error; a config two choosers share is one kernel, so both get the same figures."""
    import helion
    from triton.testing import do_bench

    fam = families.get(name)
    inputs = fam.make_inputs(problem, dtype, "cuda")
    args, ref = fam.args(problem, inputs), fam.reference(problem, inputs)
    sets = [args] + [fam.args(problem, fam.make_inputs(problem, dtype, "cuda", seed=i))
                     for i in range(1, input_sets(args, l2_bytes))]
    groups = same_configs(chosen)
    runs, rel_err, errors, graphs = {}, {}, {}, {}
    for key, whos in groups.items():
        kernel = fam.with_settings(configs=(helion.Config(**chosen[whos[0]]),))  # one config: a call runs it
        try:
            out = kernel(*args)
        except Exception as e:  # noqa: BLE001 - recorded; the other configs are still timed
            errors.update({who: f"{type(e).__name__}: {str(e)[:500]}" for who in whos})
            continue
        rel_err.update({who: relative_error(out, ref) for who in whos})
        if rel_err[whos[0]] > fam.tolerance[dtype]:
            continue
        runs[key] = lambda kernel=kernel: kernel(*args)
        try:  # enough calls that a replay lasts about GRAPH_MS
            calls = graph_calls(do_bench(runs[key], return_mode="median"), len(sets))
            graphs[key] = graph_timer([lambda kernel=kernel, a=sets[i % len(sets)]: kernel(*a) for i in range(calls)])
        except Exception as e:  # noqa: BLE001 - do_bench still times it
            errors.update({who: f"graph: {type(e).__name__}: {str(e)[:500]}" for who in whos})
    timed = {key: (fn, graphs.get(key)) for key, fn in runs.items()}
    rounds_ms = alternating(timed, rounds, lambda fg: (do_bench(fg[0], return_mode="median"),
                                                         fg[1]() if fg[1] else None))
    out = {"latency_ms": {}, "latency_rounds_ms": {}, "graph_ms": {}, "graph_rounds_ms": {}}
    for key, pairs in rounds_ms.items():
        bench, graph = [b for b, _ in pairs], [g for _, g in pairs]
        for who in groups[key]:
            out["latency_ms"][who], out["latency_rounds_ms"][who] = statistics.median(bench), bench
            if None not in graph:
                out["graph_ms"][who], out["graph_rounds_ms"][who] = statistics.median(graph), graph
    return {**out, "input_sets": len(sets), "same_config": [w for w in groups.values() if len(w) > 1],
            "rel_err": rel_err, "tolerance": fam.tolerance[dtype], **({"run_errors": errors} if errors else {})}


def same_configs(chosen: dict[str, dict]) -> dict[str, list[str]]:
    """The choosers of each distinct config (canonical JSON), in first-chosen order: a config chosen twice is one
    kernel, timed once (session 23: quick, default and costmodel chose one softmax config at 64x3072, and its three
    timings, 15 rounds each, read 0.93-1.04 of each other)."""
    out: dict[str, list[str]] = {}
    for who, config in chosen.items():
        out.setdefault(canonical_json(config), []).append(who)
    return out


def race_one(name: str, problem: dict, dtype: str, full: bool, base_cache: str, scratch: str, timeout_s: float,
             rounds: int, l2_bytes: int, recipe: dict | None = None, model: str | None = None) -> dict:
    fam = families.get(name)
    row: dict = {}
    for who in ("costmodel", "quick", *(["full"] if full else [])):
        mine = who == "costmodel"
        row[who] = tune_in_new_process(who, name, problem, dtype, cold_env(base_cache, scratch), timeout_s,
                                       recipe if mine else None, model if mine else None)
        log(f"{who}: " + json.dumps({k: v for k, v in row[who].items() if k not in ("config", "search")})[:600])
    bound, _ = fam.bind(problem, dtype, "cuda")
    row["default"] = {"config": hconfigs.normalise(bound.config_spec.default_config(),
                                                   families.op_counts(bound.config_spec))}
    return {**row, **timed_row(name, problem, dtype, row, rounds, l2_bytes)}


def timed_row(name: str, problem: dict, dtype: str, row: dict, rounds: int, l2_bytes: int) -> dict:
    """``latencies`` of the configs a row's contenders chose (its "costmodel", "quick", "full", "default")."""
    chosen = {w: row[w]["config"] for w in CONTENDERS if "config" in row.get(w, {})}
    out = latencies(name, problem, dtype, chosen, rounds, l2_bytes)
    log(f"latency_ms {json.dumps(out['latency_ms'])} graph_ms {json.dumps(out['graph_ms'])}")
    return out


# --- the figures ----------------------------------------------------------------------------------------------

def summarise(rows: list[dict]) -> dict:
    """The acceptance figures, apart for the rows where costmodel's model ranked (path "model") and those where
    it fell back to Helion's search: a race without a model is not one with it; ``failed``: the problems whose race
    or costmodel tune failed. Ratios are the other's latency over costmodel's (>= 1: costmodel as fast or faster)."""
    def path(r: dict) -> str | None:
        return r.get("costmodel", {}).get("path")

    out = {p: _figures([r for r in rows if path(r) == p]) for p in ("model", "fallback") if p in map(path, rows)}
    return {**out, "failed": [f"{r['kernel']} {canonical_json(r['problem'])}" for r in rows if path(r) is None]}


def timing(r: dict) -> tuple[str, dict, dict]:
    """(how, medians, rounds) of the latencies a row's ratios read: the graph replay's where each timed config has
    one (rows from session 23 on), else do_bench's."""
    if r.get("graph_ms") and set(r["graph_ms"]) == set(r["latency_ms"]):
        return "graph", r["graph_ms"], r.get("graph_rounds_ms", {})
    return "do_bench", r.get("latency_ms", {}), r.get("latency_rounds_ms", {})


def ratio(r: dict, who: str) -> float | None:
    """``who``'s latency over costmodel's in row ``r`` (>= 1: costmodel as fast or faster); exactly 1 where both
    chose one config (one kernel: rows before session 23 timed it once per chooser, and read noise); None where
    either latency is missing. Helion full effort's: where ``latest`` carried it from an earlier row, that row's."""
    _, ms, _ = timing(r)
    if who == "full" and who not in ms and "full_carried" in r:
        return r["full_carried"]["ratio"]
    if who not in ms or "costmodel" not in ms:
        return None
    configs = [r.get(w, {}).get("config") for w in (who, "costmodel")]
    return 1.0 if None not in configs and canonical_json(configs[0]) == canonical_json(configs[1]) else \
        ms[who] / ms["costmodel"]


def _figures(rows: list[dict]) -> dict:
    def name(r: dict) -> str:
        return f"{r['kernel']} {canonical_json(r['problem'])} {r['dtype']}"

    def ratios(who: str) -> dict[str, float]:
        return {name(r): x for r in rows if (x := ratio(r, who)) is not None}

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    walls = [r["costmodel"]["wall_s"] for r in rows]
    out: dict = {"problems": len(rows), "median_cold_wall_s": median(walls), "max_cold_wall_s": max(walls),
                 "median_quick_wall_s": median([r["quick"]["wall_s"] for r in rows if "wall_s" in r["quick"]])}
    # how steady the timing was: per problem and config, the median of |round / median of rounds - 1|
    out["timing"] = {name(r): timing(r)[0] for r in rows}
    out["round_spread"] = {name(r): {who: median([abs(x / median(v) - 1) for x in v])
                                     for who, v in timing(r)[2].items() if v} for r in rows}
    for who in ("quick", "full", "default"):
        per = list(ratios(who).values())
        out[f"vs_{who}"] = {"per_problem": ratios(who), "min": min(per, default=None),
                            "geomean": float(geomean(np.array(per))) if per else None}
    out["vs_full"]["carried"] = [name(r) for r in rows if "full_carried" in r]
    def every(v: dict) -> bool:  # on every problem (one without both latencies fails it)
        return len(v["per_problem"]) == len(rows) and v["min"] >= 1

    out["accept"] = {"median_cold_wall_le_20s": out["median_cold_wall_s"] <= WALL_S,
                     "every_vs_quick_ge_1": every(out["vs_quick"]),
                     "never_slower_than_default": every(out["vs_default"]),
                     "geomean_vs_full_ge_0.97": None if out["vs_full"]["geomean"] is None
                     else out["vs_full"]["geomean"] >= VS_FULL}
    return out


def still_valid(rows: list[dict], cm, recipe: dict | None = None) -> list[dict]:
    """Per race row, whether the tuner shipped now (with ``recipe``'s knobs changed: ``--recipe``) would have timed
    the same configs, so that the row still measures it: the same ranker (its data hash and training parameters,
    where the row has them), the same recipe
    (``CostModelAutotuner.recipe``: top k, second batch, steps to neighbours; rows from before session 24 have
    none) or one that differs only in ``default_walk``, where the row's tune made no walk from the default and would
    have made none (``tuner.helion.default_walk_alike``), in ``climb_rounds``, where its climb stopped, the beam
    standing still, within the rounds asked (``tuner.helion.climb_rounds_alike``), and in ``ties``, where on its
    timings every step would have gone on from the same config (``tuner.helion.ties_alike``), in ``verify_ties``,
    where as many configs would have been re-timed (``tuner.helion.verify_ties_alike``), in ``restarts``, where its
    walk would have started again as often (``tuner.helion.restarts_alike``), in ``walk_graph``, where its first
    batch ran too slow for graph-timed batches (``tuner.helion.walk_graph_alike``), in ``tolerance``, where its
    verification would have picked the same (``tuner.helion.tolerance_alike``); and none of the
    configs the row's tune timed below the runs classifier's floor. Dropping only removes candidates, in the
    ranker's order, so a tune none of whose timed configs is dropped ranks, times and re-times the same ones
    (tuner.helion.runnable, alternate)."""
    from costmodel.helion import model as helion_model
    from tuner.helion import (CLIMB_ROUNDS, RECIPE_BEFORE, CostModelAutotuner, climb_rounds_alike, default_walk_alike,
                              restarts_alike, ties_alike, tolerance_alike, verify_ties_alike, walk_graph_alike)

    now = CostModelAutotuner(objective=OBJECTIVE, **(recipe or {})).recipe()

    def alike(search: dict, default: dict) -> bool:
        ran = search.get("recipe")
        if ran is None or ran == now:
            return ran is not None
        differ = {k for k in {*ran, *now} if ran.get(k) != now.get(k)}
        checks = {"default_walk": lambda: default_walk_alike(search, default),
                  "climb_rounds": lambda: climb_rounds_alike(search, now.get("climb_rounds", CLIMB_ROUNDS)),
                  "ties": lambda: ties_alike(search, now.get("ties", 0)),
                  "verify_ties": lambda: verify_ties_alike(search, now.get("verify_ties", 0)),
                  "restarts": lambda: restarts_alike(search, now.get("restarts", 0)),
                  "walk_graph": lambda: walk_graph_alike(search, now.get("walk_graph", 0)),
                  "tolerance": lambda: tolerance_alike(search, default,
                                                       now.get("tolerance", RECIPE_BEFORE["tolerance"]))}
        return differ <= set(checks) and all(checks[k]() for k in differ)

    # rows before session 29 record no training parameters: they ranked with the shipped model's
    shipped = helion_model.load("nvidia-h200").meta.get("params")
    out = []
    for r in rows:
        c = r.get("costmodel", {})
        timed = [t["config"] for t in c.get("search", {}).get("timed", [])]
        p = helion_model.p_run(cm, r["kernel"], r["problem"], r["dtype"], [hconfigs.config_json(t) for t in timed])
        dropped = 0 if p is None else int((p < helion_model.RUN_FLOOR).sum())
        same_ranker = c.get("model_data_hash") == cm.meta.get("data", {}).get("hash") and \
            c.get("model_params", shipped) == cm.meta.get("params")
        same_recipe = alike(c.get("search", {}), r.get("default", {}).get("config", {}))
        ran = [t["ms"] is not None for t in c.get("search", {}).get("timed", [])]
        out.append({"kernel": r["kernel"], "problem": r["problem"], "dtype": r["dtype"], "same_ranker": same_ranker,
                    "same_recipe": same_recipe, "timed": len(timed), "timed_now_dropped": dropped,
                    "valid": bool(timed) and same_ranker and same_recipe and dropped == 0,
                    "p_run_of_timed": None if p is None else [[round(float(q), 3), ok] for q, ok in zip(p, ran)]})
    return out


def parse_recipe(pairs: tuple[str, ...]) -> dict[str, int | float]:
    """``--recipe NAME=N`` pairs: costmodel's tuner's knobs (``tuner.helion.RECIPE_KNOBS``: the integers k, refill,
    climb, climb_rounds, local, local_rounds, default_walk, radius, twin_unaligned, ties, verify_ties, restarts,
    walk_graph, and the fraction tolerance) set to other values than the shipped ones, to race a variant before it
    ships; the rows record the recipe their tunes ran (``search.recipe``), so ``--still-valid`` tells them from the
    shipped tuner's."""
    if not pairs:
        return {}
    from tuner.helion import RECIPE_KNOBS as names
    from tuner.helion import CostModelAutotuner
    out = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        try:
            value = (float if name == "tolerance" else int)(text)
        except ValueError:
            value = -1
        if name not in names or value < 0:
            raise click.BadParameter(f"{pair!r}: NAME=N with NAME one of {', '.join(names)}", param_hint="--recipe")
        out[name] = value
    try:  # the tuner's own checks (radius 0 reaches nothing), here before any tune or row is read
        CostModelAutotuner(objective=OBJECTIVE, **out)
    except CostModelError as e:
        raise click.BadParameter(str(e), param_hint="--recipe") from None
    return out


def read_rows(files: tuple[str, ...]) -> list[dict]:
    try:
        return [json.loads(line) for f in files for line in open(f) if line.strip()]
    except (OSError, ValueError) as e:
        raise click.UsageError(f"cannot read race rows: {e}") from None


def latest(rows: list[dict]) -> list[dict]:
    """Each problem's last row (a problem timed again, e.g. with Helion's full effort, counts once, as then). Where
    that row has no Helion full-effort pick and an earlier row of the problem timed one beside the same costmodel
    config, the earlier row's ratio of the two stands for it (``full_carried``: both latencies from that row's call),
    so that a tuner changed since, which picks as before, keeps the comparison its pick had."""
    def problem(r: dict) -> tuple:
        return r["kernel"], canonical_json(r["problem"]), r["dtype"]

    last = {problem(r): r for r in rows}
    out = []
    for k, r in last.items():
        pick = canonical_json(r.get("costmodel", {}).get("config"))
        earlier = [e for e in rows if problem(e) == k and e is not r and ratio(e, "full") is not None
                   and canonical_json(e.get("costmodel", {}).get("config")) == pick]
        if ratio(r, "full") is None and earlier:
            e = earlier[-1]
            r = {**r, "full_carried": {"ratio": ratio(e, "full"), "date": e.get("date"), "index": e.get("index")}}
        out.append(r)
    return out


def retime(rows: list[dict], sink, rounds: int, l2_bytes: int, full: int = 0,
           tune: Callable[[str, dict], dict] | None = None, retune: bool = False, gpu: str | None = None) -> None:
    """Each raced row again, its tunes' walls and picks kept, its configs timed anew (``timed_row``); the first
    timing kept as ``first_timing``. The first ``full`` rows without one first get Helion's full-effort tune
    (``tune("full", row)``: a cold process, as in the race), so its pick is timed with the others in one call. With
    ``retune``, costmodel's tune runs anew the same way first (the earlier one kept as ``first_costmodel``): a
    changed tuner raced against the picks Helion's searches made in the earlier call, every latency of the row from
    this one. Rows without a costmodel pick (a failed race) are skipped. ``gpu``: the card timing them
    (``retimed_gpu``; the row's ``gpu`` is the race's, the card whose Helion searches made its picks)."""
    for r in rows:
        if retune and tune is not None:
            r["first_costmodel"] = r.pop("costmodel", {})
            r["costmodel"] = tune("costmodel", r)
            r["retuned"] = time.strftime("%Y-%m-%d")
            log("costmodel: " + json.dumps({k: v for k, v in r["costmodel"].items()
                                            if k not in ("config", "search")})[:600])
        if "config" not in r.get("costmodel", {}):
            log(f"skipped, no costmodel pick: {r['kernel']} {r['problem']}")
            continue
        if full > 0 and "full" not in r and tune is not None:
            full -= 1
            r["full"] = tune("full", r)
            log("full: " + json.dumps({k: v for k, v in r["full"].items() if k != "config"})[:600])
        log(f"{r['kernel']} {r['problem']} {r['dtype']}: timed again")
        first = {k: r.pop(k) for k in TIMING_KEYS if k in r}
        try:
            r.update(timed_row(r["kernel"].removeprefix("helion:"), r["problem"], r["dtype"], r, rounds, l2_bytes))
        except Exception as e:  # noqa: BLE001 - this row says so; the next row runs
            r["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
            log(f"failed: {r['error']}")
        sink.write(json.dumps({**r, "retimed": time.strftime("%Y-%m-%d"), "first_timing": first,
                               **({"retimed_gpu": gpu} if gpu else {})}, default=str) + "\n")
        sink.flush()


def load_model(where: str):
    """The Helion model at ``where`` (a directory or GPU slug); one line and exit status 2 where it is unusable."""
    from costmodel.helion import model as helion_model

    try:
        return helion_model.load(where)
    except CostModelError as e:
        raise click.BadParameter(str(e), param_hint="--model") from None


@click.command()
@click.option("--only", default="", help="comma-separated indices into the problems (--list; default: all); with "
              "--retime, the rows of those problems, in this order (each problem's last row in the files)")
@click.option("--full", default=0, help="also run Helion's full effort on the first N problems run (minutes each; "
              "with --retime, on the first N rows without it)")
@click.option("--out", default="bench_helion.jsonl", help="rows are appended here, one JSON line per problem")
# 15, not 6: in session 13's race one config of a ~14 us kernel read 13.3-17.9 us across 6 rounds, and a few whole
# rounds read ~26 us (bench_helion-h200-2026-12-01-s13.jsonl); a round is 3 do_bench calls of ~0.1 s
@click.option("--rounds", default=15, help="alternating timing rounds per problem")
@click.option("--timeout", "timeout_s", default=900.0, help="seconds a tune may take before it is recorded as failed")
@click.option("--list", "list_only", is_flag=True, help="print the problems by index and exit")
@click.option("--summarise", "summarise_files", multiple=True,
              help="summarise these row files (each problem's last row in them) and exit")
@click.option("--still-valid", "valid_files", multiple=True,
              help="which race rows of these files the tuner shipped now (with --recipe's changes) would tune the "
              "same way, and exit")
@click.option("--retime", "retime_files", multiple=True,
              help="no tunes: time again the configs each race row of these files chose, rows to --out")
@click.option("--retune", is_flag=True, help="with --retime: costmodel's tune runs anew (cold) before the timing; "
              "Helion's picks are the rows'")
@click.option("--recipe", "recipe_pairs", multiple=True, metavar="NAME=N",
              help="costmodel's tunes with this knob of the tuner's recipe changed (k, refill, climb, climb_rounds, "
              "local, local_rounds, default_walk, radius, twin_unaligned, ties, verify_ties, restarts, walk_graph), "
              "e.g. --recipe ties=3; repeatable")
@click.option("--model", "model", default=None, metavar="DIR",
              help="costmodel's tunes rank with this Helion model directory (scripts/helion_model.py --out DIR) or "
              "GPU slug, not the shipped one, on whatever card runs them: a model raced before it ships, or a recipe "
              "on a card with no model (rows record its data hash and training parameters)")
@click.option("--tune", type=click.Choice(["costmodel", "quick", "full"]), hidden=True)
@click.option("--kernel", hidden=True)
@click.option("--problem", hidden=True)
@click.option("--dtype", hidden=True)
def main(only, full, out, rounds, timeout_s, list_only, summarise_files, valid_files, retime_files, retune,
         recipe_pairs, model, tune, kernel, problem, dtype) -> None:
    if summarise_files:
        print(json.dumps(summarise(latest(read_rows(summarise_files)))))
        return
    if valid_files:
        cm = load_model(model or "nvidia-h200")
        for line in still_valid(read_rows(valid_files), cm, parse_recipe(recipe_pairs)):
            print(json.dumps(line))
        return
    recipe = parse_recipe(recipe_pairs)
    if model:
        load_model(model)  # a bad directory: one line, exit 2, before any tune (in the tune's own process too)
    if tune:
        print(json.dumps(tune_once(tune, kernel, json.loads(problem), dtype, recipe, model), default=str))
        return
    try:
        problems = race_problems(recorded(ROOT / "data"))
        chosen = [problems[int(i)] for i in only.split(",")] if only else problems
    except (CostModelError, ValueError, IndexError) as e:
        raise click.UsageError(str(e) if isinstance(e, CostModelError) else f"--only {only}: indices 0-"
                               f"{len(benchmarks.HELION_RACE) - 1}, comma-separated (--list)") from None
    if list_only:
        for i, p in enumerate(problems):
            print(i, *p)
        return
    wanted = [problems.index(c) for c in chosen]
    last = {r.get("index"): r for r in read_rows(retime_files)}  # a problem raced again: its later row
    to_retime = [last[i] for i in wanted if i in last]  # in --only's order
    if retune and not retime_files:
        raise click.UsageError("--retune re-tunes raced rows: give them with --retime")
    if retime_files and not to_retime:
        raise click.UsageError(f"no raced row of problems {sorted(wanted)} in {', '.join(retime_files)}")
    from costmodel import hardware
    from costmodel.helion import helion_version, model as helion_model

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` stops us: end the tune running too
    with tempfile.TemporaryDirectory() as scratch, open(out, "a") as sink:
        base_cache = os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "base")
        os.makedirs(base_cache)
        hw = hardware.current()  # builds Triton's driver module into the base cache
        os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "timing")
        try:
            if not model:  # --model's was loaded above, and ranks on any card
                helion_model.load(hw.gpu, hw.gpu)
        except CostModelError as e:  # the rows say so too (costmodel.path, .fallback)
            log(f"no Helion cost model for {hw.gpu} ({e}): costmodel's tunes are its fallback, Helion's quick search")
        if retime_files:
            def tune_row(who: str, r: dict) -> dict:
                name = r["kernel"].removeprefix("helion:")
                mine = who == "costmodel"
                return tune_in_new_process(who, name, r["problem"], r["dtype"], cold_env(base_cache, scratch),
                                           timeout_s, recipe if mine else None, model if mine else None)

            return retime(to_retime, sink, rounds, hw.l2_bytes, full, tune_row, retune, hw.gpu)
        for i, (name, prob, dt) in enumerate(chosen):
            log(f"helion:{name} {prob} {dt}")
            row = {"gpu": hw.gpu, "date": time.strftime("%Y-%m-%d"), "helion_version": helion_version(),
                   "kernel": f"helion:{name}", "problem": prob, "dtype": dt, "index": problems.index((name, prob, dt))}
            try:
                row.update(race_one(name, prob, dt, i < full, base_cache, scratch, timeout_s, rounds, hw.l2_bytes,
                                    recipe, model))
            except Exception as e:  # noqa: BLE001 - this problem's row says so; the next problem runs
                row["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
                log(f"failed: {row['error']}")
            sink.write(json.dumps(row, default=str) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
