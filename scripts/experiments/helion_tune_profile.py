"""H200, issue 18: where a cold costmodel Helion tune's wall goes. For each race problem (bench_helion.py --list
indices), ``bench_helion.py --tune costmodel`` runs cold in a new process (bench_helion.cold_env) under cProfile; the
top functions by cumulative time and the tune's own phase times are printed and written to --out (JSON lines).

    PYTHONPATH=.:scripts python3 scripts/experiments/helion_tune_profile.py --only 0,3 --out prof.jsonl
"""

from __future__ import annotations

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


@click.command()
@click.option("--only", required=True, help="comma-separated race problem indices (bench_helion.py --list)")
@click.option("--out", type=click.Path(), required=True)
def main(only: str, out: str) -> None:
    from costmodel import hardware

    problems = bench_helion.race_problems(bench_helion.recorded(bench_helion.ROOT / "data"))
    with tempfile.TemporaryDirectory() as scratch, open(out, "a") as sink:
        base = os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "base")
        os.makedirs(base)
        hardware.current()  # Triton's driver module into the base cache, as the race does
        for i in map(int, only.split(",")):
            name, prob, dtype = problems[i]
            prof = os.path.join(scratch, f"{i}.prof")
            cmd = [sys.executable, "-m", "cProfile", "-o", prof, bench_helion.__file__, "--tune", "costmodel",
                   "--kernel", name, "--problem", json.dumps(prob), "--dtype", dtype]
            run = subprocess.run(cmd, env=bench_helion.cold_env(base, scratch), capture_output=True, text=True,
                                 timeout=300)
            lines = [ln for ln in run.stdout.splitlines() if ln.startswith("{")]
            tune = json.loads(lines[-1]) if lines else {"error": run.stderr[-2000:]}
            text = io.StringIO()
            if os.path.exists(prof):
                pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(TOP)
            search = tune.get("search") or {}
            row = {"index": i, "kernel": name, "problem": prob, "dtype": dtype, "wall_s": tune.get("wall_s"),
                   "phases_s": {k: search.get(k) for k in ("rank_s", "measure_s", "verify_s", "wall_s")},
                   "timed": [t.get("ms") for t in search.get("timed", [])], "profile": text.getvalue()[-12000:],
                   "error": tune.get("error")}
            print(json.dumps({k: v for k, v in row.items() if k != "profile"}))
            print(row["profile"][-6000:])
            sink.write(json.dumps(row) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
