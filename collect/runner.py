"""Runs a plan: compile ahead, measure group by group, write shards atomically, resume after a kill.

``run_plan`` is the single-process path (one GPU). The pieces it is made of (``plan_work``, ``next_ready``,
``GroupRecorder``, ``CollectProgress``, ``run_summary``, ``write_manifest``) are shared with the multi-GPU
collector (``collect.parallel``) and the Dask one (``collect.cluster``).
"""

from __future__ import annotations

import collections
import functools
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow.parquet as pq
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from costmodel import dataset, hardware
from costmodel.benchmark import STATUSES, Benchmarker, GpuStuck, IsolatedBenchmarker, Measurement, interpreting
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family
from costmodel.kernels.base import Config
from collect.plan import GroupPlan

READY_WINDOW = 16  # groups looked at when choosing the next one to measure


@dataclass
class WorkItem:
    """One group of the plan with the configs still to measure: the unit of work every collector hands out."""

    index: int  # position in the plan
    group: GroupPlan
    gid: str
    todo: list[Config]
    # set when a worker died holding this group: pairs it may have published meanwhile are skipped
    recheck: bool = False
    # the kernel hash ``gid`` is made of (an older one of today's kernel when its group goes on); None: the family's
    kernel_hash: str | None = None

    def describe(self) -> str:
        g = self.group
        return f"{g.family} {g.dtype} {dataset.canonical_json(g.problem)}"


def check_hardware(hw: HardwareRecord, interpreter: bool) -> None:
    """Interpreter timings are recorded for ``hardware.INTERPRETER`` only: a GPU's partition never holds CPU
    timings (about 1 s a config, whatever the config)."""
    if interpreter and hw.gpu != hardware.INTERPRETER.gpu:
        raise CostModelError(f"kernels run under TRITON_INTERPRET=1 but the plan is for {hw.gpu}: interpreter "
                             f"timings are recorded only as gpu={hardware.INTERPRETER.gpu} (hardware.INTERPRETER)")


def times_interpreter(bench: Benchmarker) -> bool:
    """Whether ``bench`` times kernels run by Triton's interpreter (a recorded benchmarker replays GPU times)."""
    return isinstance(bench, IsolatedBenchmarker) and (bench.device == "cpu" or interpreting())


def plan_work(plan: list[GroupPlan], hw: HardwareRecord,
              measured_pairs: Callable[[list[str]], set] | None = None) -> list[WorkItem]:
    """The groups of ``plan`` with something left to measure; with ``measured_pairs`` (resume) the (group id,
    config json) pairs it returns are left out, and a group recorded under an older hash of today's kernel
    (``dataset.resolve_group``) goes on under its id."""
    cands = [dataset.group_candidates(hw.gpu, g.family, g.problem, g.dtype) for g in plan]
    done = measured_pairs([gid for c in cands for gid, _ in c]) if measured_pairs is not None else set()
    by_gid = collections.defaultdict(set)  # one pass over the measured pairs, not one per group
    for gid, cfg in done:
        by_gid[gid].add(cfg)
    items = []
    for i, (g, c) in enumerate(zip(plan, cands)):
        mine = {(gid, cfg) for gid, _ in c for cfg in by_gid.get(gid, ())}
        gid, kernel_hash, measured = dataset.resolve_group(c, mine)
        todo = [cfg for cfg in g.configs if dataset.canonical_json(cfg) not in measured]
        if todo:
            items.append(WorkItem(i, g, gid, todo, kernel_hash=kernel_hash))
    return items


class Pace:
    """Whether a group would end by a deadline (``time.time()``), from the groups this process measured so far. A
    group was published whole or not at all (a stopped one now keeps what it measured, as a sample: ``rows_before``),
    so one started near the deadline ran past --time-budget, and a caller's timeout then killed it with its work
    (session 8: a 1,832-config matmul sweep; session 17: a 16384x8192x8192 bf16 sweep, started after 8192^3 had
    taken 76 s, when the run's rate, 14 ms a config, said it would take 25 s).
    A config's timing is a fixed part (launch, the check) plus repeats of the kernel that grow with the problem's
    work: the estimate is the larger of the run's rate and a fit of the groups' timing seconds (the compile waits
    left out, which depend on what was compiled ahead, not on the group) on configs and configs x roofline seconds
    (``group_work``; non-negative coefficients). Before the first group ends there is no estimate, and a group
    starts while the deadline is not past."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or (lambda: time.time())  # a replay passes its own (scripts/experiments/pace_replay.py)
        self.started: float | None = None
        self.configs = 0
        self._begun = 0.0
        self._rows: list[tuple[float, float]] = []  # per measured group: configs, configs x work
        self._walls: list[float] = []

    def estimate(self, n: int, work: float = 0.0, now: float | None = None) -> float:
        """Seconds a group of ``n`` configs of a problem of ``work`` (``group_work``) would take."""
        if not self.configs:
            return 0.0
        now = self.clock() if now is None else now
        rate = n * (now - self.started) / self.configs
        return max(rate, float(np.dot(self._fit(), (n, n * work))))

    def ends_by(self, deadline: float | None, n: int, work: float = 0.0) -> bool:
        now = self.clock()
        return deadline is None or now + self.estimate(n, work, now) <= deadline

    def begin(self) -> None:
        self._begun = self.clock()
        self.started = self._begun if self.started is None else self.started

    def measured(self, n: int, work: float = 0.0, timed_s: float | None = None) -> None:
        """The group begun last ended: ``n`` configs, its problem's ``work``; ``timed_s``, the seconds it spent timing
        (``IsolatedBenchmarker.timed_s``), when known, else its wall."""
        self.configs += n
        self._rows.append((n, n * work))
        self._walls.append(self.clock() - self._begun if timed_s is None else timed_s)

    def _fit(self) -> np.ndarray:
        """Non-negative least squares over the two columns, by trying each subset of them."""
        x, y = np.array(self._rows, dtype=float), np.array(self._walls)
        scale = np.maximum(x.max(axis=0), 1e-30)
        best, best_err = np.zeros(2), float(np.sum(y * y))
        for cols in ([0], [1], [0, 1]):
            coef = np.linalg.lstsq(x[:, cols] / scale[cols], y, rcond=None)[0]
            err = float(np.sum((x[:, cols] / scale[cols] @ coef - y) ** 2))
            if (coef >= 0).all() and err < best_err:
                best, best_err = np.zeros(2), err
                best[cols] = coef / scale[cols]
        return best


BALANCE = 200.0  # flops a byte of memory traffic is worth (an H100 or H200: about 1e15 dense flop/s over 4.8e12 B/s)


def group_work(group: GroupPlan, hw: HardwareRecord) -> float:
    """Seconds one run of ``group``'s problem would take at the roofline (its flops at ``BALANCE`` flops a byte, or
    its bytes, over ``hw``'s bandwidth), for ``Pace``: what the repeats of a config scale with. Zero for a family
    that does not say (a Helion kernel's)."""
    try:
        fam = get_family(group.family)
        bytes_ = max(fam.flops(group.problem) / BALANCE, fam.min_bytes(group.problem, group.dtype))
    except (CostModelError, NotImplementedError, TypeError, KeyError):
        return 0.0
    return bytes_ / (hw.mem_bandwidth_gbs * 1e9)


def next_ready(bench: Benchmarker, items: list[WorkItem]) -> int:
    """Index into ``items`` of the first group whose configs are all compiled (so the GPU never waits on the
    compile pool while another group is ready; a whole-space group needs many compiles), else 0."""
    ready = (i for i, w in enumerate(items[:READY_WINDOW])
             if bench.ready(w.group.family, w.group.problem, w.group.dtype, w.todo))
    return next(ready, 0)


def new_counts() -> dict[str, int]:
    return {s: 0 for s in STATUSES}


def add_counts(total: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


@functools.cache
def _software() -> dict:  # one nvidia-smi call per process
    return hardware.software_versions()


@dataclass
class GroupRecorder:
    """Measures work items with one benchmarker and turns the measurements into dataset rows."""

    bench: Benchmarker
    hw: HardwareRecord
    run_id: str
    counts: dict[str, int] = field(default_factory=new_counts)

    def __post_init__(self):
        check_hardware(self.hw, times_interpreter(self.bench))

    @property
    def software(self) -> dict:
        return _software()

    def measure(self, item: WorkItem, todo: list[Config] | None = None, measured: list[Measurement] | None = None,
                exhaustive: bool | None = None) -> tuple[list[Measurement], list[dict]]:
        """Measure ``todo`` (default: the item's) and return (measurements, FILE_SCHEMA rows); ``measured``: rows
        of measurements already taken, of ``todo``, instead; ``exhaustive``: the rows' flag, when not the group's."""
        g = item.group
        todo = item.todo if todo is None else todo
        ms = measured
        if ms is None:
            ms = self.bench.measure(g.family, g.problem, g.dtype, todo) if todo else []
        for m in ms:
            self.counts[m.status] += 1
        rows = dataset.measurement_rows(self.hw, self.software, self.run_id, g.family,
                                        item.kernel_hash or get_family(g.family).kernel_hash, item.gid,
                                        g.exhaustive if exhaustive is None else exhaustive, g.problem, g.dtype, ms)
        return ms, rows


def rows_before(recorder: GroupRecorder, item: WorkItem, todo: list[Config], stopped: BaseException) -> list[dict]:
    """The rows of what measuring ``todo`` took before ``stopped`` ended it: the GPU got stuck (``GpuStuck``, the
    config that hung it a timeout), or the run was stopped (Ctrl-C, a kill: what the benchmarker had measured
    goes with the exception as ``measurements``). A group cut short is recorded as a sample (``exhaustive``
    false): it never reads as its whole space's truth, and a --resume run that measures the rest of a whole-space
    group makes it one (a group is whole-space when any of its rows is: ``evaluation.group_info``). Before, such
    a group kept nothing: a 1,000-config Helion population stopped after 407 s of measuring (session 19, call 3)."""
    ms = getattr(stopped, "measurements", None) or []
    done = [(c, m) for c, m in zip(todo, ms) if m is not None]
    return recorder.measure(item, [c for c, _ in done], [m for _, m in done], exhaustive=False)[1] if done else []


def best_ms(ms: list[Measurement]) -> float | None:
    oks = [m.latency_ms for m in ms if m.ok]
    return min(oks) if oks else None


class CollectProgress:
    """The progress bar every collector shows on stderr: configs done, ok/failed, rate, the last group's best."""

    def __init__(self, console: Console | None, total: int):
        self.total, self.t0 = total, time.perf_counter()
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("ok {task.fields[ok]} failed {task.fields[failed]} {task.fields[rate]:.1f} cfg/s"),
            TextColumn("{task.fields[best]}"), TimeElapsedColumn(), console=console or Console(stderr=True))
        self._task = None

    def __enter__(self):
        self._progress.__enter__()
        self._task = self._progress.add_task("collect", total=self.total, ok=0, failed=0, rate=0.0, best="")
        return self

    def __exit__(self, *exc):
        self._progress.__exit__(*exc)

    def describe(self, text: str) -> None:
        self._progress.update(self._task, description=text)

    def update(self, counts: dict[str, int], best: float | None | str = "") -> None:
        """``counts``: every measurement so far, by status; ``best``: the last group's best latency."""
        n, ok = sum(counts.values()), counts.get("ok", 0)
        self._progress.update(self._task, completed=n, ok=ok, failed=n - ok,
                              rate=n / max(time.perf_counter() - self.t0, 1e-9),
                              best=best if isinstance(best, str) else
                              f"best {best:.4f} ms" if best is not None else "no ok config")


def ended_by(exc: BaseException) -> str:
    """The state of a run that an exception ended: "interrupted" (Ctrl-C, a kill) or "failed"."""
    return "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"


def published(shards: list) -> tuple[int, dict[str, int]]:
    """(groups, measurements by status) in these local shards: what a run has published, read back."""
    gids, counts = set(), new_counts()
    for path in shards:
        t = pq.read_table(path, columns=["group_id", "status"])
        gids.update(t["group_id"].to_pylist())
        add_counts(counts, collections.Counter(t["status"].to_pylist()))
    return len(gids), counts


def run_summary(*, run_id: str, state: str, plan: list[GroupPlan], items: list[WorkItem], hw: HardwareRecord,
                seed: int, counts: dict[str, int], groups_measured: int, wall_s: float, shards: list,
                **extra) -> dict:
    """The manifest of one run (``extra`` adds collector-specific fields). ``groups_measured`` counts the groups
    with rows published by this run; ``groups_done_before`` those --resume found already measured whole."""
    return {"run_id": run_id, "state": state, "gpu": hw.gpu, "hw_name": hw.name, "seed": seed, "groups": len(plan),
            "groups_measured": groups_measured, "groups_done_before": len(plan) - len(items),
            "exhaustive_groups": sum(g.exhaustive for g in plan),
            "exhaustive_configs": sum(len(g.configs) for g in plan if g.exhaustive),
            "skipped_already_measured": sum(len(g.configs) for g in plan) - sum(len(w.todo) for w in items),
            "measured": sum(counts.values()), "counts": counts, "wall_s": round(wall_s, 2),
            "ok_per_s": round(counts["ok"] / wall_s, 2) if wall_s else None,
            "shards": [str(p) for p in shards], "software": _software(), "hardware": hw.as_dict(),
            "host": platform.node(), "pid": os.getpid(), **extra,
            "plan": [{"family": g.family, "problem": g.problem, "dtype": g.dtype, "configs": len(g.configs),
                      "exhaustive": g.exhaustive} for g in plan]}


def write_manifest(out: str | Path, summary: dict) -> Path:
    """``<out>/_manifests/<run_id>.json``, replaced atomically (pyarrow skips ``_`` folders)."""
    mdir = Path(out) / "_manifests"
    mdir.mkdir(parents=True, exist_ok=True)
    tmp = mdir / f".tmp-{summary['run_id']}.json"
    tmp.write_text(json.dumps(summary, indent=1, default=str))
    final = mdir / f"{summary['run_id']}.json"
    os.replace(tmp, final)
    return final


def run_plan(plan: list[GroupPlan], out: str | Path, bench: Benchmarker, hw: HardwareRecord, *, run_id: str,
             resume: bool = False, seed: int = 0, console: Console | None = None, flush_rows: int = 2000,
             time_budget_s: float | None = None) -> dict:
    """Measure every (group, config) of ``plan`` not already in ``out`` (with ``resume``); returns the run
    summary, also written as ``<out>/_manifests/<run_id>.json``. With ``time_budget_s`` no group starts that
    this run's pace says would end after that many seconds (``Pace``; state "budget"; --resume carries on later)."""
    recorder = GroupRecorder(bench, hw, run_id)
    items = plan_work(plan, hw, (lambda gids: dataset.measured_pairs(out, gids)) if resume else None)
    writer = dataset.ShardWriter(out, run_id, flush_rows)
    t0, state, pace = time.perf_counter(), "complete", Pace()
    deadline = None if time_budget_s is None else time.time() + time_budget_s
    pending = list(items)
    try:  # from here a stopped run writes its manifest (the timing worker's start, in prefetch, takes seconds)
        for w in items:
            bench.prefetch(w.group.family, w.group.problem, w.group.dtype, w.todo)
        with CollectProgress(console, sum(len(w.todo) for w in items)) as view:
            while pending:
                w = pending.pop(next_ready(bench, pending))
                work = group_work(w.group, hw)
                if not pace.ends_by(deadline, len(w.todo), work):
                    state = "budget"  # a smaller group further on may still fit
                    continue
                view.describe(w.describe())
                pace.begin()
                timed0 = getattr(bench, "timed_s", None)
                try:
                    ms, rows = recorder.measure(w)
                except BaseException as e:  # keep what the group measured (a hang a timeout), then stop
                    writer.add(hw.gpu, w.group.family, rows_before(recorder, w, w.todo, e))
                    state = "gpu_stuck" if isinstance(e, GpuStuck) else state
                    raise
                pace.measured(len(w.todo), work, None if timed0 is None else bench.timed_s - timed0)
                writer.add(hw.gpu, w.group.family, rows)
                view.update(recorder.counts, best_ms(ms))
        writer.flush()
    except BaseException as e:
        state = state if state == "gpu_stuck" else ended_by(e)
        raise
    finally:
        try:
            writer.flush()  # after an error too: the groups measured before it are published
        finally:
            # the manifest counts what the shards hold (the groups of a failed flush are not in them)
            groups, counts = published(writer.shards)
            summary = run_summary(run_id=run_id, state=state, plan=plan, items=items, hw=hw, seed=seed,
                                  counts=counts, groups_measured=groups, wall_s=time.perf_counter() - t0,
                                  shards=writer.shards)
            write_manifest(out, summary)
    return summary
