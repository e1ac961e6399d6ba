"""H200, issue 18: where a cold costmodel Helion tune's wall goes. For each race problem (bench_helion.py --list
indices) and each --variant, ``bench_helion.tune_once("costmodel", ...)`` runs cold in a new process
(bench_helion.cold_env), under cProfile with --profile; the tune's wall and phase times (and the top functions by
cumulative time) are printed and written to --out (JSON lines). Variants:
  inproc   the tuner as it is: the batch timed in the tuning process (HelionBenchmark(in_process=True))
  worker   the batch timed in Helion 1.4.0's spawned benchmark worker, its default (the tuner until session 20)
(Session 20 also tried the worker started as the search starts: Helion deep-copies the settings, which hold the
tuner, and a started process cannot be copied; so its run failed.)

    PYTHONPATH=.:scripts python3 scripts/experiments/helion_tune_profile.py --only 0,3 --variant inproc,worker \
        --out p.jsonl
"""

from __future__ import annotations

import functools
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_helion  # noqa: E402

TOP = 45
VARIANTS = ("inproc", "worker")


def tune(variant: str, index: int) -> dict:
    """One cold tune in this process (the child of ``main``)."""
    from tuner import helion as htune

    if variant == "worker":  # the tuner's default timer, made with in_process=False
        htune.HelionBenchmark = functools.partial(htune.HelionBenchmark, in_process=False)
    problems = bench_helion.race_problems(bench_helion.recorded(bench_helion.ROOT / "data"))
    name, prob, dtype = problems[index]
    return bench_helion.tune_once("costmodel", name, prob, dtype)


@click.command()
@click.option("--only", required=True, help="comma-separated race problem indices (bench_helion.py --list)")
@click.option("--variant", "variants", default="inproc", help=f"comma-separated, of {', '.join(VARIANTS)}")
@click.option("--profile/--no-profile", default=False, help="run each tune under cProfile")
@click.option("--out", type=click.Path(), default=None)
@click.option("--child", type=(str, int), default=None, hidden=True)
def main(only: str, variants: str, profile: bool, out: str | None, child) -> None:
    if child:
        print(json.dumps(tune(*child), default=str))
        return
    from costmodel import hardware

    problems = bench_helion.race_problems(bench_helion.recorded(bench_helion.ROOT / "data"))
    with tempfile.TemporaryDirectory() as scratch, open(out or os.devnull, "a") as sink:
        base = os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "base")
        os.makedirs(base)
        hardware.current()  # Triton's driver module into the base cache, as the race does
        for i in map(int, only.split(",")):
            for variant in variants.split(","):
                name, prob, dtype = problems[i]
                prof = os.path.join(scratch, f"{i}-{variant}.prof")
                env = bench_helion.cold_env(base, scratch)
                cmd = [sys.executable, *(["-m", "cProfile", "-o", prof] if profile else []), __file__,
                       "--only", str(i), "--child", variant, str(i)]
                run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
                lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
                res = json.loads(lines[-1]) if lines else {"error": run.stderr[-2000:]}
                text = io.StringIO()
                if os.path.exists(prof):
                    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(TOP)
                search = res.get("search") or {}
                row = {"index": i, "variant": variant, "kernel": name, "problem": prob, "dtype": dtype,
                       "wall_s": res.get("wall_s"),
                       "phases_s": {k: search.get(k) for k in ("rank_s", "measure_s", "verify_s", "wall_s")},
                       "timed": [t.get("ms") for t in search.get("timed", [])],
                       "best_ms": (search.get("best") or {}).get("ms"), "profile": text.getvalue()[-12000:],
                       "error": res.get("error")}
                print(json.dumps({k: v for k, v in row.items() if k != "profile"}), flush=True)
                sink.write(json.dumps(row) + "\n")
                sink.flush()


if __name__ == "__main__":
    main()
