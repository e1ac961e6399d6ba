"""H200: tune (the command's defaults, cold cache, compile included) on problems absent from the data, against the
exhaustive best of the same space, random-8, the default config, triton.autotune over the full list and, with
--helion, Helion 1.4.0 at autotune_effort="quick" on two matmul shapes. Usage on a GPU host (wheels carried, see device_job.sh):

    PYTHONPATH=. python3 scripts/bench_tune.py [--only 0,3,7] [--helion] [--out bench_tune.jsonl] [--reuse old.jsonl]
    python3 scripts/bench_tune.py --summarise a.jsonl --summarise b.jsonl   # the figures over all their rows

Each tune is `costmodel tune --json --no-cache` in a new process (nothing this script has imported, started or
compiled helps it) with an empty Triton cache: cold. Its wall time is the tune call's, and the whole command's
beside it. The exhaustive sweeps share one cache, which triton.autotune then finds warm (its wall time says so); a
call whose --only lists problems of one compile class (dtype, and which dims are multiples of 16) compiles that
class's space once.
torch.matmul and the tuned config are timed alternately with do_bench, six rounds, which goes first alternating,
medians compared: the GPU's clocks drift between calls by more than the gap being measured.

Each problem's row is appended to --out as soon as it is measured, so a run cut short keeps what it did and
the problems can be split over several GPU calls. --reuse takes the sweep (exhaustive best, random-8), the
triton.autotune and the Helion figures of problems already in that file, measured on this GPU type, and re-measures
the rest; a reused sweep that predates a knob or a knob value gains the configs that set it (sweep_added_knobs):
rows record the knob values their sweep covered, and --reused-space declares them for rows written before that.
"""

from __future__ import annotations

import json
import statistics
import time

import click
import numpy as np

from costmodel import benchmarks, dataset, model, space
from costmodel.evaluation import expected_best_of_random_k, geomean
from benchlib import (against_torch, cold_triton_cache, log, raced_score, time_all, triton_caches,
                      tune_in_new_process)
from costmodel.benchmark import IsolatedBenchmarker, Measurement
from costmodel.kernels import get_family
from tuner.decorator import to_triton

# issue 16's race: new to the data in every dtype (collection plans skip them, training drops them; checked against
# data/ at start). The race of sessions 4-5 (5120^3, 3000x5000x1000, ...) joined sweeps of several device calls:
# its rows are in results/ and BENCHMARKS marks it so.
PROBLEMS = benchmarks.TUNE_RACE
# the two shapes triton.autotune and Helion quick also run on: one large square, one skinny (M <= 64)
AUTOTUNE_SHAPES = ({"M": 4100, "N": 4100, "K": 4100}, {"M": 40, "N": 11008, "K": 4096})
RACE_TOP = 4  # the sweep's fastest raced again with the tune's pick (benchlib.RACE_ROUNDS rounds)


def random8_ms(latencies: list[float]) -> float:
    """The expected fastest latency among 8 configs drawn at random from the sweep, exactly."""
    return float(expected_best_of_random_k(np.sort(latencies), np.array([8]))[0])


def triton_autotune_matmul(problem: dict, dtype: str, hw) -> dict:
    """triton.autotune over the family's valid pointer-based, one-tile-per-program configs (the launch below
    passes tensors, not descriptors): wall time and its pick. Run after the sweep, it finds Triton's cache warm, so
    its compiles are cache loads."""
    import torch
    import triton

    from costmodel.kernels.matmul import matmul_kernel

    fam = get_family("matmul")
    configs = [c for c in space.enumerate_valid(fam, problem, dtype, hw) if not c["TMA"] and not c["PERSISTENT"]]
    tuned = triton.autotune(configs=[to_triton(c) for c in configs], key=["M", "N", "K"])(matmul_kernel)
    a, b = fam.make_inputs(problem, dtype, "cuda")
    c = fam.make_output(problem, dtype, "cuda")
    M, N, K = problem["M"], problem["N"], problem["K"]
    t0 = time.perf_counter()
    tuned[lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), 0,
        partials=None, arrivals=None, split_tiles=0, splits=1)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    timings = [t[0] if isinstance(t, (list, tuple)) else t for t in tuned.configs_timings.values()]  # median first
    return {"configs": len(configs), "wall_s": wall, "best_ms": min(timings), "best_config": str(tuned.best_config)}


def helion_quick_matmul(problem: dict, dtype: str) -> dict:
    """Helion's first call autotunes (quick effort) and then runs: its wall time; then its kernel's do_bench median."""
    import torch
    from helion_matmul import matmul

    a, b = get_family("matmul").make_inputs(problem, dtype, "cuda")
    t0 = time.perf_counter()
    matmul(a, b)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    from triton.testing import do_bench

    return {"wall_s": wall, "latency_ms": do_bench(lambda: matmul(a, b), return_mode="median")}


REUSED_FIELDS = ("exhaustive_ok", "exhaustive_best_ms", "random8_ms", "triton_autotune_warm_compile_cache", "helion_quick")


def ok_latencies(ms: list[Measurement]) -> list[float]:
    return [m.latency_ms for m in ms if m.ok]


def sweep(family: str, problem: dict, dtype: str, hw, bench: IsolatedBenchmarker, autotune: bool) -> dict:
    """The whole valid space timed once (compiles overlapping the timing: the fastest are raced again below)."""
    ms = time_all(family, problem, dtype, space.enumerate_valid(get_family(family), problem, dtype, hw), bench,
                  "configs", compile_first=False)
    oks = ok_latencies(ms)
    fastest = sorted((m for m in ms if m.ok), key=lambda m: m.latency_ms)[:RACE_TOP]
    out = {"exhaustive_ok": len(oks), "exhaustive_best_ms": min(oks), "random8_ms": random8_ms(oks),
           "sweep_fastest": [m.config for m in fastest]}
    if autotune and family == "matmul" and problem in AUTOTUNE_SHAPES:
        out["triton_autotune_warm_compile_cache"] = triton_autotune_matmul(problem, dtype, hw)
        log(f"triton.autotune: {out['triton_autotune_warm_compile_cache']}")
    return out


def swept_space(family: str) -> dict[str, list[int]]:
    """Every value of every knob of ``family``: what a sweep of its whole valid space covered."""
    return {k.name: list(k.values) for k in get_family(family).knobs}


def reused_coverage(family: str, reused: dict, declared: dict[str, list[int]]) -> dict[str, list[int]]:
    """The knob values a reused sweep timed: its recorded ``sweep_space``; for rows written before that field, a
    knob missing from its config only at its ``absent`` value, and ``declared`` values (--reused-space) for the
    knobs that gained values since."""
    if "sweep_space" in reused:
        return reused["sweep_space"]
    knobs = get_family(family).knobs
    cover = swept_space(family)
    cover.update({k.name: [k.absent] for k in knobs if k.absent is not None and k.name not in reused["tune_config"]})
    cover.update({name: values for name, values in declared.items() if name in cover})
    return cover


def sweep_added_knobs(family: str, problem: dict, dtype: str, hw, bench: IsolatedBenchmarker, reused: dict,
                      declared: dict[str, list[int]]) -> dict:
    """A reused sweep that predates knobs or knob values added to the family since (its configs ran with a knob's
    ``absent`` value): time the valid configs it did not cover and fold their best into the exhaustive best.
    Random-8 stays the older space's."""
    cover = reused_coverage(family, reused, declared)
    configs = [c for c in space.enumerate_valid(get_family(family), problem, dtype, hw)
               if any(c[name] not in values for name, values in cover.items())]
    if not configs:
        return {}
    added = {name: [v for v in values if v not in cover[name]] for name, values in swept_space(family).items()}
    added = {name: values for name, values in added.items() if values}
    oks = ok_latencies(time_all(family, problem, dtype, configs, bench, f"configs with {added}"))
    out = {"sweep_added": {"values": added, "configs": len(configs), "ok": len(oks), "best_ms": min(oks, default=None)}}
    if oks:
        out.update(exhaustive_ok=reused["exhaustive_ok"] + len(oks),
                   exhaustive_best_ms=min(reused["exhaustive_best_ms"], min(oks)))
    return out


def measure_problem(family: str, problem: dict, dtype: str, hw, helion: bool, autotune: bool,
                    bench: IsolatedBenchmarker, base_cache: str, scratch: str, reused: dict | None,
                    declared: dict[str, list[int]]) -> dict:
    res, command_s = tune_in_new_process(family, problem, dtype, cold_triton_cache(base_cache, scratch))
    log(f"tuned in {res['wall_s']:.1f} s ({command_s:.1f} s the command): {res['best']['latency_ms']:.4f} ms "
        f"phases {json.dumps({k: round(v, 2) for k, v in res['phases_s'].items()})}")
    row = {"family": family, "problem": problem, "dtype": dtype, "candidates": res["candidates"],
           "tune_wall_s": res["wall_s"], "tune_command_s": command_s, "tune_compile_s": res["compile_s"],
           "tune_phases_s": res["phases_s"], "tune_since_start_s": res.get("since_start_s"),
           "tune_ms": res["best"]["latency_ms"], "tune_config": res["best"]["config"], "default_ms": res["default_latency_ms"],
           "tune_first_round": res["predicted_rank"],
           "tune_second_round": {k: res["second_round"].get(k) for k in ("ran", "configs", "reason", "disagreement")}}
    if reused:
        row.update({k: reused[k] for k in REUSED_FIELDS if k in reused}, sweep_reused_from=reused["date"])
        row.update(sweep_added_knobs(family, problem, dtype, hw, bench, reused, declared))
    else:
        row.update(sweep(family, problem, dtype, hw, bench, autotune))
        row.update(raced_score(family, problem, dtype, row["tune_config"], row.pop("sweep_fastest"), bench))
    row["sweep_space"] = swept_space(family)
    row["tune_score"] = row["exhaustive_best_ms"] / row["tune_ms"]
    row["random8_score"] = row["exhaustive_best_ms"] / row["random8_ms"]
    if row["default_ms"]:
        row["default_score"] = row["exhaustive_best_ms"] / row["default_ms"]
    if family == "matmul":
        row.update(against_torch(problem, dtype, row["tune_config"], hw))
        log(f"vs torch.matmul: {row['tune_vs_torch']:.3f}")
        if helion and problem in AUTOTUNE_SHAPES:
            row["helion_quick"] = helion_quick_matmul(problem, dtype)
            log(f"helion quick: {row['helion_quick']}")
    return row


def summarise(rows: list[dict]) -> dict:
    def mean_of(key: str) -> float:
        return float(geomean(np.array([r[key] for r in rows if r.get(key)])))

    scores = np.array([r["tune_score"] for r in rows])
    raced = np.array([r["tune_score_raced"] for r in rows if "tune_score_raced" in r])
    commands = [r["tune_command_s"] for r in rows if "tune_command_s" in r]
    return {"problems": len(rows), "median_tune_wall_s": statistics.median(r["tune_wall_s"] for r in rows),
            "raced_problems": len(raced),  # the pick raced against the sweep's fastest (the headline when all are)
            "geomean_tune_score_raced": float(geomean(raced)) if len(raced) else None,
            "p10_tune_score_raced": float(np.quantile(raced, 0.1)) if len(raced) else None,
            "min_tune_score_raced": float(raced.min()) if len(raced) else None,
            "max_tune_wall_s": max(r["tune_wall_s"] for r in rows),
            "median_tune_command_s": statistics.median(commands) if commands else None,
            # where a cold command's seconds go, phase by phase (time_setup, part of time, from session 17 on)
            "median_tune_phases_s": {k: statistics.median(r["tune_phases_s"][k] for r in rows
                                                          if k in (r.get("tune_phases_s") or {}))
                                     for k in sorted({k for r in rows for k in r.get("tune_phases_s") or {}})},
            "geomean_tune_score": mean_of("tune_score"), "p10_tune_score": float(np.quantile(scores, 0.1)),
            "min_tune_score": float(scores.min()), "geomean_random8_score": mean_of("random8_score"),
            "geomean_default_score": mean_of("default_score"),
            "matmul_vs_torch": {f"{r['problem']['M']}x{r['problem']['N']}x{r['problem']['K']} {r['dtype']}":
                                round(r["tune_vs_torch"], 3) for r in rows if "tune_vs_torch" in r},
            "race": [{"problem": r["problem"], "dtype": r["dtype"],
                      "costmodel": {"wall_s": r["tune_wall_s"], "ms": r["tune_ms"],
                                    "do_bench_ms": r.get("tune_config_do_bench_ms")},
                      "triton_autotune": r.get("triton_autotune_warm_compile_cache"),
                      "helion_quick": r.get("helion_quick"), "torch_ms": r.get("torch_ms")}
                     for r in rows if "helion_quick" in r],
            "helion_full_4096_fp16_quoted": {"wall_s": 390, "configs": 839, "latency_ms": 0.2021, "vs_torch": 0.98}}


@click.command()
@click.option("--only", default="", help="comma-separated indices into PROBLEMS (default: all)")
@click.option("--helion", is_flag=True, help="also run Helion quick autotuning on two matmul shapes")
@click.option("--autotune/--no-autotune", default=True, help="triton.autotune on the two shapes it runs on (after "
              "their sweep, warm cache); the race's acceptance does not use it")
@click.option("--out", default="bench_tune.jsonl", help="rows are appended here, one JSON line per problem")
@click.option("--reuse", "reuse_file", default=None, help="rows whose sweeps (and triton.autotune) to reuse")
@click.option("--reused-space", multiple=True, help="for reused rows without sweep_space, the values their sweep "
              "covered of a knob that gained values since: SPLIT_TAIL=0,1 (repeat per knob)")
@click.option("--summarise", "summarise_files", multiple=True, help="summarise these row files and exit")
def main(only: str, helion: bool, autotune: bool, out: str, reuse_file: str | None, reused_space: tuple[str, ...],
         summarise_files: tuple[str, ...]) -> None:
    if summarise_files:
        rows = [json.loads(line) for f in summarise_files for line in open(f) if line.strip()]
        print(json.dumps(summarise(rows), indent=1))
        return
    chosen = [PROBLEMS[int(i)] for i in only.split(",")] if only else PROBLEMS
    declared = {name: [int(v) for v in values.split(",")]
                for name, values in (item.split("=") for item in reused_space)}
    with triton_caches() as (hw, base_cache, scratch), open(out, "a") as sink:
        cm = model.load_shipped(hw.gpu)
        reusable = {}
        for line in open(reuse_file) if reuse_file else []:
            r = json.loads(line)
            if r["gpu"] == hw.gpu:
                reusable[(r["family"], dataset.canonical_json(r["problem"]), r["dtype"])] = r
        data = dataset.read("data", ["kernel", "problem_json"])
        seen = set(zip(data["kernel"].to_pylist(), data["problem_json"].to_pylist()))  # in any dtype
        with IsolatedBenchmarker(hw, eager=False) as bench:  # the sweep and the race compare GPU times only
            for family, problem, dtype in chosen:
                key = (family, dataset.canonical_json(problem), dtype)
                assert key[:2] not in seen, f"{family} {problem} is in the data"
                log(f"{family} {problem} {dtype}")
                row = {"gpu": hw.gpu, "date": time.strftime("%Y-%m-%d"), "model_data_hash": cm.meta["data"]["hash"],
                       **measure_problem(family, problem, dtype, hw, helion, autotune, bench, base_cache, scratch,
                                         reusable.get(key), declared)}
                sink.write(json.dumps(row, default=str) + "\n")
                sink.flush()
                print(json.dumps(row, default=str), flush=True)


if __name__ == "__main__":
    main()
