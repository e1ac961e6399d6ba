"""Runs a plan: compile ahead, measure group by group, write shards atomically, resume after a kill."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import costmodel
from costmodel import dataset
from costmodel.benchmark import Benchmarker
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family
from collect.plan import GroupPlan

READY_WINDOW = 16  # groups looked at when choosing the next one to measure


def software_versions() -> dict:
    import torch
    import triton

    driver = None
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=10).stdout.split("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"triton_version": triton.__version__, "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "driver_version": driver, "costmodel_version": costmodel.__version__}


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def run_plan(plan: list[GroupPlan], out: str | Path, bench: Benchmarker, hw: HardwareRecord, *, run_id: str,
             resume: bool = False, seed: int = 0, console: Console | None = None, flush_rows: int = 2000,
             time_budget_s: float | None = None) -> dict:
    """Measure every (group, config) of ``plan`` not already in ``out`` (with ``resume``); returns the run
    summary, also written as ``<out>/_manifests/<run_id>.json`` (pyarrow skips ``_`` folders). With
    ``time_budget_s`` no group starts after that many seconds (state "budget"; --resume carries on later)."""
    console = console or Console(stderr=True)
    software = software_versions()
    fams = {g.family: get_family(g.family) for g in plan}
    gids = [dataset.group_id(hw.gpu, g.family, fams[g.family].source_hash, g.problem, g.dtype) for g in plan]
    done = dataset.measured_pairs(out, gids) if resume else set()
    work = []
    for g, gid in zip(plan, gids):
        todo = [c for c in g.configs if (gid, dataset.canonical_json(c)) not in done]
        if todo:
            work.append((g, gid, todo))
    for g, _, todo in work:
        bench.prefetch(g.family, g.problem, g.dtype, todo)

    writer = dataset.ShardWriter(out, run_id, flush_rows)
    counts = {s: 0 for s in ("ok", "compile_error", "out_of_resources", "runtime_error", "timeout", "wrong_result")}
    base = {"run_id": run_id, "gpu": hw.gpu, **dataset.hw_columns(hw), **software}
    t0, state = time.perf_counter(), "complete"
    total = sum(len(t) for _, _, t in work)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("ok {task.fields[ok]} failed {task.fields[failed]} {task.fields[rate]:.1f} cfg/s"),
                        TextColumn("{task.fields[best]}"), TimeElapsedColumn(), console=console)
    try:
        with progress:
            task = progress.add_task("collect", total=total, ok=0, failed=0, rate=0.0, best="")
            while work:
                # measure the first group whose configs are all compiled, so the GPU never waits on the pool
                # while another group is ready (a whole-space group needs many compiles)
                ready = (i for i, w in enumerate(work[:READY_WINDOW]) if bench.ready(w[0].family, w[0].problem,
                                                                                   w[0].dtype, w[2]))
                g, gid, todo = work.pop(next(ready, 0))
                if time_budget_s is not None and time.perf_counter() - t0 > time_budget_s:
                    state = "budget"
                    break
                progress.update(task, description=f"{g.family} {g.dtype} {dataset.canonical_json(g.problem)}")
                ms = bench.measure(g.family, g.problem, g.dtype, todo)
                ts = datetime.now(timezone.utc)
                rows = []
                for m in ms:
                    counts[m.status] += 1
                    rows.append({**base, "ts": ts, "kernel": g.family, "source_hash": fams[g.family].source_hash,
                                 "group_id": gid, "exhaustive": g.exhaustive, "dtype": g.dtype,
                                 **dataset.row_columns(g.problem, m.config), "status": m.status,
                                 "latency_ms": m.latency_ms, "p20_ms": m.p20_ms, "p80_ms": m.p80_ms,
                                 "min_ms": m.min_ms, "reps": m.reps, "compile_s": m.compile_s, "rel_err": m.rel_err,
                                 "n_regs": m.n_regs, "n_spills": m.n_spills, "shared_bytes": m.shared_bytes,
                                 "error": m.error})
                writer.add(hw.gpu, g.family, [{k: v for k, v in r.items() if k not in dataset.PARTITIONS} for r in rows])
                oks = [m.latency_ms for m in ms if m.ok]
                n_ok = counts["ok"]
                progress.update(task, advance=len(ms), ok=n_ok, failed=sum(counts.values()) - n_ok,
                                rate=sum(counts.values()) / (time.perf_counter() - t0),
                                best=f"best {min(oks):.4f} ms" if oks else "no ok config")
    except KeyboardInterrupt:
        state = "interrupted"
        raise
    finally:
        writer.flush()
        wall = time.perf_counter() - t0
        summary = {"run_id": run_id, "state": state, "gpu": hw.gpu, "seed": seed, "groups": len(plan),
                   "groups_measured": len(work), "exhaustive_groups": sum(g.exhaustive for g in plan),
                   "skipped_already_measured": sum(len(g.configs) for g in plan) - total,
                   "measured": sum(counts.values()), "counts": counts, "wall_s": round(wall, 2),
                   "ok_per_s": round(counts["ok"] / wall, 2) if wall else None,
                   "shards": [str(p) for p in writer.shards], "software": software, "hardware": hw.as_dict(),
                   "host": platform.node(), "pid": os.getpid(),
                   "plan": [{"family": g.family, "problem": g.problem, "dtype": g.dtype, "configs": len(g.configs),
                             "exhaustive": g.exhaustive} for g in plan]}
        mdir = Path(out) / "_manifests"
        mdir.mkdir(parents=True, exist_ok=True)
        tmp = mdir / f".tmp-{run_id}.json"
        tmp.write_text(json.dumps(summary, indent=1))
        os.replace(tmp, mdir / f"{run_id}.json")
    return summary
