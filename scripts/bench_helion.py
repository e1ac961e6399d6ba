"""H200, issue 18's race: costmodel's Helion autotuner (tuner/helion.py) against Helion's own, on problems absent
from the data. Usage on a GPU host (Helion 1.4.0 carried, see device_job.sh's helion_race step):

    PYTHONPATH=. python3 scripts/bench_helion.py [--only 0,3] [--full 1] [--out bench_helion.jsonl]
    python3 scripts/bench_helion.py --summarise a.jsonl [--summarise b.jsonl]   # the acceptance figures, one JSON
    python3 scripts/bench_helion.py --list                                      # the problems, by index

Problems: costmodel/benchmarks.py's HELION_RACE, three of each Helion kernel with a Triton twin, named there under
the twin's name so that no collection draws them (they were the first three each family drew with seed 18 that
neither kernel had rows of, for attention of head dim 128: Helion 1.4.0 refuses head dim 64). The race refuses to
run where data/ holds a row of one under either name.

Per problem, in one call: each tune runs in a new process (``--tune``) whose first kernel call tunes, compiles and
runs, with an empty Triton cache (only Triton's driver module), Helion cache and inductor cache: its wall is that
first call's, cold. "costmodel": ``CostModelAutotuner()`` as the kernel's ``autotuner_fn``, the kernel at
autotune_effort "quick" (what its fallback runs where the model does not fit: the row's ``costmodel.path`` says
which ran, ``fallback`` why); "quick" and, for the first ``--full`` problems, "full": Helion's own search at that
effort. Then this process runs each chosen config and Helion's default config once, checks the output against the
family's float32 reference (``HelionFamily.tolerance``), and times those that pass with do_bench (median) in
``--rounds`` alternating rounds (benchlib.alternating); ``latency_ms`` holds the medians of the rounds' medians.
Each problem's row is appended to --out when done, so a call cut short keeps the problems it finished.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np

from benchlib import alternating, cold_triton_cache, log
from costmodel import benchmarks, dataset
from costmodel.benchmark import relative_error
from costmodel.dataset import canonical_json
from costmodel.errors import CostModelError
from costmodel.evaluation import geomean
from costmodel.helion import configs as hconfigs, families

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ("matmul", "softmax", "layer_norm", "rms_norm", "attention")  # the Helion kernels with a Triton twin
SEED = 18  # issue 18: Helion's own searches' random seed
WALL_S, VS_FULL = 20.0, 0.97  # issue 18's acceptance: median cold wall, geomean latency against full effort


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

def tune_once(who: str, name: str, problem: dict, dtype: str) -> dict:
    """The first call of the kernel tuned by ``who`` ("costmodel", "quick", "full"): its wall and chosen config."""
    import torch

    from tuner.helion import CostModelAutotuner

    fam = families.get(name)
    args = fam.args(problem, fam.make_inputs(problem, dtype, "cuda"))
    tuner = CostModelAutotuner() if who == "costmodel" else None
    kernel = (fam.with_settings(autotuner_fn=tuner, autotune_effort="quick") if tuner
              else fam.with_settings(autotune_effort=who))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kernel(*args)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    bound = kernel.bind(args)
    out = {"wall_s": wall, "config": hconfigs.normalise(bound._config, families.op_counts(bound.config_spec))}
    if tuner:
        cm, why = tuner.fit(bound, args)  # the model it ranked with, or seeded Helion's search with, and why not
        out.update(path="model" if why is None else "fallback", fallback=why, search=tuner.last,
                   model_data_hash=cm.meta.get("data", {}).get("hash") if cm else None)
    return out


def cold_env(base_cache: str, scratch: str) -> dict:
    """The environment of a cold tune: a Triton cache holding only ``base_cache`` (Triton's driver module, which
    any machine that ever ran Triton has), empty Helion and inductor caches."""
    return {**os.environ, "TRITON_CACHE_DIR": cold_triton_cache(base_cache, scratch),
            "HELION_CACHE_DIR": tempfile.mkdtemp(dir=scratch), "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(dir=scratch),
            "HELION_AUTOTUNE_PROGRESS_BAR": "0", "HELION_AUTOTUNE_RANDOM_SEED": str(SEED)}


def tune_in_new_process(who: str, name: str, problem: dict, dtype: str, env: dict, timeout_s: float) -> dict:
    cmd = [sys.executable, __file__, "--tune", who, "--kernel", name, "--problem", json.dumps(problem),
           "--dtype", dtype]
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


# --- latencies, in this process ---------------------------------------------------------------------------

def latencies(name: str, problem: dict, dtype: str, chosen: dict[str, dict], rounds: int) -> dict:
    """Each chosen config run once and checked against the reference, then those within tolerance timed by
    do_bench in alternating rounds: medians, the rounds, and each config's relative error."""
    import helion
    from triton.testing import do_bench

    fam = families.get(name)
    inputs = fam.make_inputs(problem, dtype, "cuda")
    args, ref = fam.args(problem, inputs), fam.reference(problem, inputs)
    runs, rel_err, errors = {}, {}, {}
    for who, config in chosen.items():
        kernel = fam.with_settings(configs=(helion.Config(**config),))  # one config: a call runs it
        try:
            out = kernel(*args)
        except Exception as e:  # noqa: BLE001 - recorded; the other configs are still timed
            errors[who] = f"{type(e).__name__}: {str(e)[:500]}"
            continue
        rel_err[who] = relative_error(out, ref)
        if rel_err[who] <= fam.tolerance[dtype]:
            runs[who] = lambda kernel=kernel: kernel(*args)
    rounds_ms = alternating(runs, rounds, lambda fn: do_bench(fn, return_mode="median"))
    return {"latency_ms": {w: statistics.median(v) for w, v in rounds_ms.items()}, "latency_rounds_ms": rounds_ms,
            "rel_err": rel_err, "tolerance": fam.tolerance[dtype], **({"run_errors": errors} if errors else {})}


def race_one(name: str, problem: dict, dtype: str, full: bool, base_cache: str, scratch: str, timeout_s: float,
             rounds: int) -> dict:
    fam = families.get(name)
    row: dict = {}
    for who in ("costmodel", "quick", *(["full"] if full else [])):
        row[who] = tune_in_new_process(who, name, problem, dtype, cold_env(base_cache, scratch), timeout_s)
        log(f"{who}: " + json.dumps({k: v for k, v in row[who].items() if k not in ("config", "search")})[:600])
    bound, _ = fam.bind(problem, dtype, "cuda")
    chosen = {w: row[w]["config"] for w in row if "config" in row[w]}
    chosen["default"] = hconfigs.normalise(bound.config_spec.default_config(), families.op_counts(bound.config_spec))
    row["default"] = {"config": chosen["default"]}
    row.update(latencies(name, problem, dtype, chosen, rounds))
    log(f"latency_ms {json.dumps(row['latency_ms'])}")
    return row


# --- the figures ----------------------------------------------------------------------------------------------

def summarise(rows: list[dict]) -> dict:
    """The acceptance figures, apart for the rows where costmodel's model ranked (path "model") and those where
    it fell back to Helion's search: a race without a model is not one with it; ``failed``: the problems whose race
    or costmodel tune failed. Ratios are the other's latency over costmodel's (>= 1: costmodel as fast or faster)."""
    def path(r: dict) -> str | None:
        return r.get("costmodel", {}).get("path")

    out = {p: _figures([r for r in rows if path(r) == p]) for p in ("model", "fallback") if p in map(path, rows)}
    return {**out, "failed": [f"{r['kernel']} {canonical_json(r['problem'])}" for r in rows if path(r) is None]}


def _figures(rows: list[dict]) -> dict:
    def ratios(who: str) -> dict[str, float]:
        return {f"{r['kernel']} {canonical_json(r['problem'])} {r['dtype']}":
                r["latency_ms"][who] / r["latency_ms"]["costmodel"]
                for r in rows if who in r["latency_ms"] and "costmodel" in r["latency_ms"]}

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    walls = [r["costmodel"]["wall_s"] for r in rows]
    out: dict = {"problems": len(rows), "median_cold_wall_s": median(walls), "max_cold_wall_s": max(walls),
                 "median_quick_wall_s": median([r["quick"]["wall_s"] for r in rows if "wall_s" in r["quick"]])}
    # how steady the timing was: per problem and config, the median of |round / median of rounds - 1|
    out["round_spread"] = {f"{r['kernel']} {canonical_json(r['problem'])} {r['dtype']}": {
        who: median([abs(x / median(v) - 1) for x in v]) for who, v in r.get("latency_rounds_ms", {}).items() if v}
        for r in rows}
    for who in ("quick", "full", "default"):
        per = list(ratios(who).values())
        out[f"vs_{who}"] = {"per_problem": ratios(who), "min": min(per, default=None),
                            "geomean": float(geomean(np.array(per))) if per else None}
    def every(v: dict) -> bool:  # on every problem (one without both latencies fails it)
        return len(v["per_problem"]) == len(rows) and v["min"] >= 1

    out["accept"] = {"median_cold_wall_le_20s": out["median_cold_wall_s"] <= WALL_S,
                     "every_vs_quick_ge_1": every(out["vs_quick"]),
                     "never_slower_than_default": every(out["vs_default"]),
                     "geomean_vs_full_ge_0.97": None if out["vs_full"]["geomean"] is None
                     else out["vs_full"]["geomean"] >= VS_FULL}
    return out


@click.command()
@click.option("--only", default="", help="comma-separated indices into the problems (--list; default: all)")
@click.option("--full", default=0, help="also run Helion's full effort on the first N problems run (minutes each)")
@click.option("--out", default="bench_helion.jsonl", help="rows are appended here, one JSON line per problem")
# 15, not 6: in session 13's race one config of a ~14 us kernel read 13.3-17.9 us across 6 rounds, and a few whole
# rounds read ~26 us (bench_helion-h200-2026-12-01-s13.jsonl); a round is 3 do_bench calls of ~0.1 s
@click.option("--rounds", default=15, help="alternating do_bench rounds per problem")
@click.option("--timeout", "timeout_s", default=900.0, help="seconds a tune may take before it is recorded as failed")
@click.option("--list", "list_only", is_flag=True, help="print the problems by index and exit")
@click.option("--summarise", "summarise_files", multiple=True, help="summarise these row files and exit")
@click.option("--tune", type=click.Choice(["costmodel", "quick", "full"]), hidden=True)
@click.option("--kernel", hidden=True)
@click.option("--problem", hidden=True)
@click.option("--dtype", hidden=True)
def main(only, full, out, rounds, timeout_s, list_only, summarise_files, tune, kernel, problem, dtype) -> None:
    if summarise_files:
        rows = [json.loads(line) for f in summarise_files for line in open(f) if line.strip()]
        print(json.dumps(summarise(rows)))
        return
    if tune:
        print(json.dumps(tune_once(tune, kernel, json.loads(problem), dtype), default=str))
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
    from costmodel import hardware
    from costmodel.helion import helion_version, model as helion_model

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` stops us: end the tune running too
    with tempfile.TemporaryDirectory() as scratch, open(out, "a") as sink:
        base_cache = os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "base")
        os.makedirs(base_cache)
        hw = hardware.current()  # builds Triton's driver module into the base cache
        os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "timing")
        try:
            helion_model.load(hw.gpu, hw.gpu)
        except CostModelError as e:  # the rows say so too (costmodel.path, .fallback)
            log(f"no Helion cost model for {hw.gpu} ({e}): costmodel's tunes are its fallback, Helion's quick search")
        for i, (name, prob, dt) in enumerate(chosen):
            log(f"helion:{name} {prob} {dt}")
            row = {"gpu": hw.gpu, "date": time.strftime("%Y-%m-%d"), "helion_version": helion_version(),
                   "kernel": f"helion:{name}", "problem": prob, "dtype": dt, "index": problems.index((name, prob, dt))}
            try:
                row.update(race_one(name, prob, dt, i < full, base_cache, scratch, timeout_s, rounds))
            except Exception as e:  # noqa: BLE001 - this problem's row says so; the next problem runs
                row["error"] = f"{type(e).__name__}: {str(e)[:1000]}"
                log(f"failed: {row['error']}")
            sink.write(json.dumps(row, default=str) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
