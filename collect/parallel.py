"""`costmodel collect --gpus all|N`: one worker process per GPU, fed groups from one queue in the parent.

Each worker is a spawned process pinned to its GPU (``CUDA_VISIBLE_DEVICES`` set in its environment before it
starts, so before CUDA initialises) with its own ``IsolatedBenchmarker`` (compile pool + timing worker) and its
own shard writer (shard names carry the run id suffixed with the worker's slot, ``<run>-w<slot>``; rows carry the
run id). The parent keeps the queue: it hands each worker the next groups as it measures (``lookahead`` groups
ahead, so its compile pool works ahead), counts a group done only once its rows are published in a shard, and
writes the one manifest of the run from what the workers report.

A worker that dies (a crash, the OOM killer, a kill) is restarted on its GPU, and every group it held that was
not yet published goes back to the front of the queue, flagged to be re-checked: the worker that takes it first
drops the (group, config) pairs already in the dataset (``dataset.measured_pairs``; the dead worker may have
published a shard before it could say so), so nothing is measured twice. A group whose measuring kills its
worker ``MAX_ATTEMPTS`` times is given up and listed in the manifest. Rows are written a whole group at a time.

Under ``TRITON_INTERPRET=1`` the workers run on ``device="cpu"`` (N CPU workers, for tests).
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait
from pathlib import Path

import pyarrow.dataset as ds
from rich.console import Console

from costmodel import dataset, hardware
from costmodel.benchmark import GpuStuck, IsolatedBenchmarker
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from collect.plan import GroupPlan
from collect import runner
from collect.runner import WorkItem

LOOKAHEAD = 3  # groups a worker holds beyond the one it measures: its compile pool works on them meanwhile
MAX_ATTEMPTS = 3  # a group whose measuring killed its worker this many times is given up
MAX_RESTARTS = 8  # a slot whose worker died this many times is retired (a broken GPU): the others go on
STOP_GRACE_S = 30.0  # after a Ctrl-C or SIGTERM: how long workers get to publish what they measured


# --- which GPUs -------------------------------------------------------------------------------------------

def visible_gpus() -> list[str]:
    """The CUDA device ids this process may use: the entries of CUDA_VISIBLE_DEVICES when set, else 0..n-1."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def resolve_gpus(spec: str, interpret: bool) -> list[str | None]:
    """``--gpus all|N`` -> one entry per worker: the CUDA device it gets, or None on the CPU (interpreter)."""
    spec = spec.strip().lower()
    if spec != "all" and not (spec.isdigit() and int(spec) > 0):
        raise CostModelError(f"--gpus takes 'all' or a positive number, not {spec!r}")
    if interpret:
        if spec == "all":
            raise CostModelError("--gpus all needs GPUs; under TRITON_INTERPRET=1 pass a number of CPU workers")
        return [None] * int(spec)
    gpus = visible_gpus()
    if not gpus:
        raise CostModelError("--gpus: no CUDA GPU is visible")
    if spec == "all":
        return list(gpus)
    if int(spec) > len(gpus):
        raise CostModelError(f"--gpus {spec}: only {len(gpus)} GPUs are visible ({','.join(gpus)})")
    return list(gpus[: int(spec)])


# --- the worker process -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkerOptions:
    device: str  # "cuda" (the one GPU the worker sees) or "cpu" (interpreter)
    timeout_s: float = 30.0
    seed: int = 0
    compile_workers: int = 1
    flush_rows: int = 2000
    flush_s: float = 60.0
    deadline: float | None = None  # time.time() after which no group starts (--time-budget)
    eager: bool = True  # also time each config's eager per-call time (collect --eager)

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.time() > self.deadline


class PublishingShardWriter(dataset.ShardWriter):
    """A shard writer that also says which groups its published shards hold: ``published`` collects the tags
    given to ``add`` once their rows are in a published shard (a group with no rows is published with the next
    flush of its kernel)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._tags: dict[tuple[str, str], list] = {}
        self.published: list = []

    def add(self, gpu: str, kernel: str, rows: list[dict], tag=None) -> None:
        self._tags.setdefault((gpu, kernel), []).append(tag)
        super().add(gpu, kernel, rows)

    def _flush_one(self, gpu: str, kernel: str) -> None:
        super()._flush_one(gpu, kernel)
        self.published += self._tags.pop((gpu, kernel), [])


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _kill_group(pid: int) -> None:
    """Kill what is left of a worker's process group (its timing worker and compile pool once it is gone)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def measure_item(item: WorkItem, recorder: runner.GroupRecorder, writer: PublishingShardWriter,
                 out: str | Path) -> tuple[dict[str, int], float | None, int, list[str]]:
    """Measure one group into ``writer`` (tagged with its plan index). A re-queued group first drops the pairs
    this run already has under ``out``: a dead worker published them, so they are counted with the group (pairs
    of earlier runs are --resume's business: they left the plan's work at the start, or are measured again).
    Returns (counts by status, best ms, pairs found published, the shards that hold them)."""
    todo, found = item.todo, {}
    if item.recheck and Path(out).exists():
        wanted = [dataset.canonical_json(c) for c in todo]
        mine = ((ds.field("group_id") == item.gid) & (ds.field("run_id") == recorder.run_id)
                & ds.field("config_json").isin(wanted))
        t = dataset.read(out, ["config_json", "status", "__filename"], mine)
        found = {c: (st, f) for c, st, f in zip(*(t[k].to_pylist() for k in t.column_names))}
        todo = [c for c, key in zip(todo, wanted) if key not in found]
    try:
        ms, rows = recorder.measure(item, todo)
    except BaseException as e:  # keep what the group measured (a hang a timeout); the worker then stops the run
        writer.add(recorder.hw.gpu, item.group.family, runner.rows_before(recorder, item, todo, e), tag=item.index)
        raise
    writer.add(recorder.hw.gpu, item.group.family, rows, tag=item.index)
    counts = dict(collections.Counter(m.status for m in ms))
    runner.add_counts(counts, collections.Counter(st for st, _ in found.values()))
    return counts, runner.best_ms(ms), len(found), sorted({f for _, f in found.values()})


def _worker_main(conn, slot: int, out: str, run_id: str, hw_dict: dict, opts: WorkerOptions,
                 items: list[WorkItem]) -> None:
    """Measure the groups the parent names until told to stop; report each group measured and each published.

    From the parent: ("group", index, recheck) naming one of ``items`` (the plan's work, sent once at start so
    that messages stay small and the parent never waits on a busy worker's pipe), and ("stop",).
    To the parent: ("start", index), ("measured", index, counts, best_ms, recovered, [shard], stats), ("published",
    [index], [shard]), ("skipped", index) past the deadline, ("error", text) on a fatal set-up problem."""
    os.setpgid(0, 0)  # its own process group: the parent can reap its timing worker and compile pool with it
    signal.signal(signal.SIGTERM, _interrupt)  # a kill publishes what is measured, as Ctrl-C does
    hw = HardwareRecord(**hw_dict)
    if opts.device != "cpu":
        try:
            mine = hardware.current()
        except CostModelError as e:
            conn.send(("error", f"worker {slot}: {e}"))
            return
        if mine.gpu != hw.gpu:
            conn.send(("error", f"worker {slot} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}) "
                                f"has a {mine.gpu}, the plan is for {hw.gpu}: collect one GPU type per run"))
            return
        hw = mine
    writer = PublishingShardWriter(out, f"{run_id}-w{slot}", opts.flush_rows, opts.flush_s)
    reported = 0  # shards already reported

    def report() -> None:
        nonlocal reported
        if writer.published:
            conn.send(("published", writer.published, [str(p) for p in writer.shards[reported:]]))
            writer.published, reported = [], len(writer.shards)

    by_index = {w.index: w for w in items}
    held: list[WorkItem] = []
    stopping = False
    starved_s, measured_any = 0.0, False  # waiting for the parent with no group in hand, after the first group
    pace = runner.Pace()
    with IsolatedBenchmarker(hw, device=opts.device, timeout_s=opts.timeout_s, seed=opts.seed,
                             compile_workers=opts.compile_workers, eager=opts.eager) as bench:
        recorder = runner.GroupRecorder(bench, hw, run_id)

        def take(msg) -> None:
            nonlocal stopping
            if msg[0] == "stop":
                stopping = True
                return
            item = replace(by_index[msg[1]], recheck=msg[2])
            held.append(item)
            bench.prefetch(item.group.family, item.group.problem, item.group.dtype, item.todo)

        def stats() -> dict:
            return {"pid": os.getpid(), "waited_s": round(bench.waited_s, 2), "timed_s": round(bench.timed_s, 2),
                    "starved_s": round(starved_s, 2), **bench.compile_spent}

        try:
            while held or not stopping:
                if not held:
                    t0 = time.perf_counter()
                    take(conn.recv())
                    starved_s += time.perf_counter() - t0 if measured_any else 0.0
                    continue
                while conn.poll():
                    take(conn.recv())
                item = held.pop(runner.next_ready(bench, held))
                work = runner.group_work(item.group, hw)
                if not pace.ends_by(opts.deadline, len(item.todo), work):
                    conn.send(("skipped", item.index))
                    continue
                conn.send(("start", item.index))
                pace.begin()
                timed0 = bench.timed_s
                conn.send(("measured", item.index, *measure_item(item, recorder, writer, out), stats()))
                pace.measured(len(item.todo), work, bench.timed_s - timed0)
                measured_any = True
                report()
        except (KeyboardInterrupt, EOFError, BrokenPipeError):
            pass  # stopped, or the parent is gone: publish what is complete
        except GpuStuck as e:  # the run stops: publish what was measured, then tell the parent why
            writer.flush()
            report()
            conn.send(("error", f"worker {slot}: {e}"))
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the last shard short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            writer.flush()
            try:
                report()
            except (BrokenPipeError, OSError):
                pass


# --- the parent -----------------------------------------------------------------------------------------

@dataclass
class _Slot:
    """One GPU and the worker process serving it (restarted when it dies)."""

    index: int
    gpu: str | None
    proc: object = None  # multiprocessing Process
    conn: object = None
    held: dict[int, WorkItem] = field(default_factory=dict)  # handed out, not yet published (or skipped)
    unmeasured: set[int] = field(default_factory=set)  # handed out, not yet measured
    measuring: int | None = None
    stopping: bool = False
    done_at: float | None = None  # when it had been told to stop and had published all it held
    deaths: int = 0
    retired: bool = False
    pids: list[int] = field(default_factory=list)
    groups: int = 0
    ok: int = 0  # ok rows published
    stats: dict[int, dict] = field(default_factory=dict)  # per worker pid: its benchmarker's waiting and timing

    def summary(self) -> dict:
        """The slot's line in the manifest: its GPU, workers, groups and ok rows published, and where the time of
        its timing worker went (waited_s on compiles, timed_s checking and timing, starved_s with no group), and
        its compile processes' seconds (compile_s compiling, lock_wait_s waiting on another worker's compile)."""
        spent = {k: round(sum(st.get(k, 0.0) for st in self.stats.values()), 2)
                 for k in ("waited_s", "timed_s", "starved_s", "compile_s", "lock_wait_s")}
        return {"slot": self.index, "gpu": self.gpu, "pids": self.pids, "deaths": self.deaths, "retired": self.retired,
                "groups": self.groups, "ok": self.ok, **spent}

    @property
    def alive(self) -> bool:
        return self.proc is not None


class _Collector:
    def __init__(self, items: list[WorkItem], out: Path, run_id: str, hw: HardwareRecord, gpus: list[str | None],
                 opts: WorkerOptions, lookahead: int, view: runner.CollectProgress):
        self.items = items
        self.queue = collections.deque(items)
        self.out, self.run_id, self.hw, self.opts, self.lookahead, self.view = out, run_id, hw, opts, lookahead, view
        self.slots = [_Slot(i, g) for i, g in enumerate(gpus)]
        self.ctx = mp.get_context("spawn")
        self.counts = runner.new_counts()  # published measurements
        self.pending: dict[int, dict] = {}  # measured, not yet published: index -> counts
        self.runs: dict[int, dict] = {}  # measured, not yet published: index -> who measured it
        self.group_runs: list[dict] = []  # published groups: index, slot, pid, whether it was re-queued
        self.shards: dict[str, None] = {}  # ordered, without repeats
        self.attempts: collections.Counter = collections.Counter()
        self.failed: list[dict] = []
        self.skipped: list[WorkItem] = []
        self.requeued = self.recovered = 0
        self.best: float | None | str = ""

    # -- workers
    def start(self, s: _Slot) -> None:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, name=f"costmodel-gpu-worker-{s.index}",
                                args=(child, s.index, str(self.out), self.run_id, self.hw.as_dict(), self.opts,
                                      self.items))
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:  # the child inherits the environment at start: it sees its one GPU from its first instruction
            if s.gpu is not None:
                os.environ["CUDA_VISIBLE_DEVICES"] = s.gpu
            proc.start()
        finally:
            if s.gpu is not None:
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved
        child.close()
        s.proc, s.conn, s.stopping, s.measuring, s.done_at = proc, parent, False, None, None
        s.pids.append(proc.pid)

    def feed(self, s: _Slot, budget_over: bool) -> None:
        while self.queue and not budget_over and not s.stopping and len(s.unmeasured) <= self.lookahead:
            item = self.queue.popleft()
            s.conn.send(("group", item.index, item.recheck))
            s.held[item.index], s.unmeasured = item, s.unmeasured | {item.index}
        if not s.unmeasured and not s.stopping and (budget_over or not self.queue):
            s.conn.send(("stop",))
            s.stopping = True

    def handle(self, s: _Slot, msg: tuple) -> None:
        kind = msg[0]
        if kind == "start":
            s.measuring = msg[1]
            self.view.describe(f"[w{s.index}] {s.held[msg[1]].describe()}")
        elif kind == "measured":
            _, idx, counts, best, recovered, shards, stats = msg
            s.unmeasured.discard(idx)
            s.measuring = None
            self.pending[idx] = counts
            s.stats[stats["pid"]] = stats
            self.runs[idx] = {"index": idx, "slot": s.index, "pid": stats["pid"], "requeued": s.held[idx].recheck,
                              "recovered_pairs": recovered}
            self.recovered += recovered
            self.shards.update(dict.fromkeys(shards))  # published by a worker that died before saying so
            self.best = best
            self.refresh()
        elif kind == "published":
            for idx in msg[1]:
                s.held.pop(idx, None)
                counts = self.pending.pop(idx, {})
                runner.add_counts(self.counts, counts)
                s.groups += 1
                s.ok += counts.get("ok", 0)
                if idx in self.runs:
                    self.group_runs.append(self.runs.pop(idx))
            self.shards.update(dict.fromkeys(msg[2]))
        elif kind == "skipped":
            s.unmeasured.discard(msg[1])
            self.skipped.append(s.held.pop(msg[1]))
        elif kind == "error":
            raise CostModelError(msg[1])

    def refresh(self) -> None:
        shown = dict(self.counts)
        for c in self.pending.values():
            runner.add_counts(shown, c)
        self.view.update(shown, self.best)

    def drain(self, s: _Slot) -> None:
        try:
            while s.conn.poll():
                self.handle(s, s.conn.recv())
        except (EOFError, OSError):
            pass

    def exited(self, s: _Slot) -> None:
        """The worker of ``s`` is gone: take its last words, then re-queue what it held unpublished."""
        self.drain(s)
        s.proc.join()
        _kill_group(s.proc.pid)
        code, finished = s.proc.exitcode, s.stopping and not s.held
        if finished and s.done_at is not None:  # killed after STOP_GRACE_S for not exiting: nothing was lost
            code = 0
        s.proc = s.conn = None
        if finished and code == 0:
            return
        s.deaths += 1
        lost = sorted(s.held.values(), key=lambda w: w.index)
        if s.measuring is not None:
            self.attempts[s.measuring] += 1
        keep = []
        for w in lost:
            self.pending.pop(w.index, None)
            self.runs.pop(w.index, None)
            if self.attempts[w.index] >= MAX_ATTEMPTS:
                g = w.group
                self.failed.append({"index": w.index, "family": g.family, "problem": g.problem, "dtype": g.dtype,
                                    "attempts": self.attempts[w.index]})
            else:
                w.recheck = True
                keep.append(w)
        self.queue.extendleft(reversed(keep))
        self.requeued += len(keep)
        s.held, s.unmeasured, s.measuring = {}, set(), None
        self.refresh()
        if s.deaths >= MAX_RESTARTS:
            s.retired = True
        elif self.queue and not self.opts.past_deadline():
            self.start(s)

    def run(self) -> str:
        for s in self.slots:
            self.start(s)
        while True:
            budget_over = self.opts.past_deadline()
            for s in self.slots:
                if s.alive:
                    self.feed(s, budget_over)
            live = [s for s in self.slots if s.alive]
            if not live:
                if self.queue and not budget_over and all(s.retired for s in self.slots):
                    return "failed"
                if self.queue and not budget_over:  # work came back after every worker stopped
                    for s in self.slots:
                        if not s.retired:
                            self.start(s)
                    continue
                return "budget" if (self.queue or self.skipped) else "complete"
            ready = wait([s.conn for s in live] + [s.proc.sentinel for s in live], timeout=1.0)
            for s in live:
                if s.conn in ready:
                    self.drain(s)
                if s.stopping and not s.held and s.done_at is None:
                    s.done_at = time.monotonic()
                if s.done_at is not None and time.monotonic() - s.done_at > STOP_GRACE_S and s.proc.is_alive():
                    _kill_group(s.proc.pid)  # it published and reported everything, then did not exit
                if s.proc.sentinel in ready or not s.proc.is_alive():
                    self.exited(s)

    def stop(self) -> None:
        """Ask live workers to publish and exit; kill those still there after STOP_GRACE_S."""
        live = [s for s in self.slots if s.alive]
        for s in live:
            if s.proc.is_alive():
                os.kill(s.proc.pid, signal.SIGTERM)
        end = time.monotonic() + STOP_GRACE_S
        while live and time.monotonic() < end:
            wait([s.proc.sentinel for s in live], timeout=0.5)
            for s in live:
                self.drain(s)
            live = [s for s in live if s.proc.is_alive()]
        for s in self.slots:
            if s.alive:
                if s.proc.is_alive():
                    s.proc.kill()
                s.proc.join()
                self.drain(s)
                s.proc = s.conn = None
        for s in self.slots:
            for pid in s.pids:
                _kill_group(pid)


def run_parallel(plan: list[GroupPlan], out: str | Path, hw: HardwareRecord, gpus: list[str | None], *,
                 run_id: str, resume: bool = False, seed: int = 0, console: Console | None = None,
                 timeout_s: float = 30.0, compile_workers: int = 0, flush_rows: int = 2000, flush_s: float = 60.0,
                 time_budget_s: float | None = None, lookahead: int = LOOKAHEAD, eager: bool = True) -> dict:
    """Measure ``plan`` with one worker process per entry of ``gpus`` (a CUDA device id, or None for a CPU
    worker under the interpreter); returns the run's summary, also written as its manifest. ``compile_workers``
    is per worker (0: the cores but two, shared among the workers)."""
    out = Path(out)
    items = runner.plan_work(plan, hw, (lambda gids: dataset.measured_pairs(out, gids)) if resume else None)
    device = "cpu" if all(g is None for g in gpus) else "cuda"
    runner.check_hardware(hw, device == "cpu")
    t0 = time.time()
    deadline = t0 + time_budget_s if time_budget_s is not None else None
    opts = WorkerOptions(device, timeout_s, seed, compile_workers or hardware.compile_workers(hardware.usable_cores(), len(gpus)), flush_rows,
                         flush_s, deadline, eager)
    state = "complete"
    with runner.CollectProgress(console, sum(len(w.todo) for w in items)) as view:
        c = _Collector(items, out, run_id, hw, gpus, opts, lookahead, view)
        try:
            state = c.run()
            if c.failed and state == "complete":  # groups given up: the run did not measure the whole plan
                state = "incomplete"
        except BaseException as e:
            state = runner.ended_by(e)
            raise
        finally:
            c.stop()
            summary = runner.run_summary(
                run_id=run_id, state=state, plan=plan, items=items, hw=hw, seed=seed, counts=c.counts,
                groups_measured=sum(s.groups for s in c.slots), wall_s=time.time() - t0, shards=list(c.shards),
                workers=[s.summary() for s in c.slots], group_runs=c.group_runs,
                requeued=c.requeued, recovered=c.recovered, failed_groups=c.failed,
                not_measured=sorted(w.index for w in [*c.queue, *c.skipped, *(w for s in c.slots
                                                                                 for w in s.held.values())]))
            runner.write_manifest(out, summary)
    return summary
