"""Issue 18: does a compile on the CPU (Triton for sm_90, no GPU) tell which recorded Helion configs failed on the
H200 in Triton's layout pass? If it does, a "does it run" classifier (experiments/helion_validity.py) can learn from
CPU compiles of any shape, not only from device rows.

From one collect run's rows of a kernel: every row whose error is the layout pass's (``PassManager::run failed``)
and as many rows that ran (``ok``), drawn with a seed, at most ``--per-status`` of each; each compiled here through
helion_twin_compiles's child (Helion's ``compile_config`` and a first call with ``warmup=True``, its own process,
under ``--limit`` seconds). One JSON line per config (H200 status, CPU outcome), then the agreement table.

    .venv/bin/python scripts/experiments/helion_cpu_labels.py --run 20261202T074103-2b7569 [--per-status 20]
        [--jobs 2] [--out FILE.jsonl]

``--race ROWS.jsonl`` (bench_helion.py's rows) instead: the configs costmodel's tunes timed that did not run on the
H200 (whatever the cause: the rows keep no error), each compiled here.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import sys
from pathlib import Path

import click
import numpy as np
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]
from costmodel import dataset  # noqa: E402
from helion_twin_compiles import _one  # noqa: E402

LAYOUT_PASS = "PassManager::run failed"


@click.command()
@click.option("--run", "run_id", default=None, help="the collect run whose rows are compiled again here")
@click.option("--race", "race_files", multiple=True, help="instead: race rows whose failed timed configs to compile")
@click.option("--kernel", default="helion:attention", show_default=True)
@click.option("--per-status", default=20, show_default=True, help="rows of each kind (layout-pass failure, ok)")
@click.option("--seed", default=0, show_default=True)
@click.option("--jobs", default=2, show_default=True, help="compiles at once")
@click.option("--limit", default=300, show_default=True, help="seconds a compile may take")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="also write the lines here")
def main(run_id, race_files, kernel, per_status, seed, jobs, limit, out) -> None:
    if race_files:
        return compile_all(race_failures(race_files, kernel), kernel, jobs, limit, out, {"race": list(race_files)})
    if not run_id:
        raise click.UsageError("--run or --race")
    t = dataset.read(str(ROOT / "data"), ["run_id", "kernel", "problem_json", "dtype", "config_json", "status",
                                          "error"],
                     filter=(pc.field("run_id") == run_id) & (pc.field("kernel") == kernel))
    rows = t.to_pylist()
    failed = [r for r in rows if r["status"] != "ok" and LAYOUT_PASS in (r["error"] or "")]
    ran = [r for r in rows if r["status"] == "ok"]
    if not failed or not ran:
        raise click.UsageError(f"run {run_id} has {len(failed)} layout-pass failures and {len(ran)} ok rows of "
                               f"{kernel}: nothing to compare")
    rng = np.random.default_rng(seed)
    chosen = [x[i] for x in (failed, ran) for i in sorted(rng.permutation(len(x))[:per_status])]
    compile_all(chosen, kernel, jobs, limit, out, {"run": run_id})


def race_failures(files: tuple[str, ...], kernel: str) -> list[dict]:
    """The configs costmodel's tunes in race rows timed that gave no time on the H200, as rows like the dataset's."""
    out = []
    for f in files:
        for r in map(json.loads, Path(f).read_text().splitlines()):
            if r["kernel"] == kernel:
                out += [{"problem_json": json.dumps(r["problem"]), "dtype": r["dtype"], "status": "no time",
                         "config_json": json.dumps(t["config"])}
                        for t in r.get("costmodel", {}).get("search", {}).get("timed", []) if t["ms"] is None]
    return out


def compile_all(rows: list[dict], kernel: str, jobs: int, limit: int, out: str | None, source: dict) -> None:
    lines, agree = [], collections.Counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        done = pool.map(lambda r: _one(kernel, json.loads(r["problem_json"]), r["dtype"],
                                       json.loads(r["config_json"]), limit), rows)
        for r, got in zip(rows, done):
            h200 = {"ok": "ok", "no time": "no time"}.get(r["status"], "layout pass")
            agree[(h200, got["outcome"])] += 1
            line = {"problem": json.loads(r["problem_json"]), "dtype": r["dtype"], "h200": h200,
                    "config": json.loads(r["config_json"]), **got}
            lines.append(line)
            print(json.dumps(line), flush=True)
    lines.append({**source, "kernel": kernel, "compared": len(rows), "target": "sm_90",
                  "h200_vs_cpu": {f"{h} / {c}": n for (h, c), n in sorted(agree.items())}})
    print(json.dumps(lines[-1]))
    if out:
        Path(out).write_text("".join(json.dumps(ln) + "\n" for ln in lines))


if __name__ == "__main__":
    main()
