"""`costmodel collect --dask ADDRESS`: the plan as Dask tasks, one per group, on a Dask cluster.

Each task measures one group in a Dask worker with that worker's ``IsolatedBenchmarker`` (one per worker process,
kept between tasks: compile pool and timing worker start once) and publishes the group's rows as one shard under
the dataset root, a local path or any URI ``pyarrow.fs.FileSystem.from_uri`` opens (``s3://bucket/data``,
``gs://...``, ``hdfs://...``, ``file:///...``). On GPUs each task asks for ``resources={"GPU": 1}``: start every
worker with ``--resources GPU=1`` and one GPU visible (``CUDA_VISIBLE_DEVICES``, as ``dask cuda worker`` sets
it). A local path must be one shared filesystem, mounted at the same place on every worker. The client gathers
the tasks' summaries into the run's one manifest.

Each task also queues the compiles of the groups its worker is likely to take next (``lookahead``), and while its
own group still compiles it measures those of them already compiled, as a ``collect --gpus`` worker measures
whichever group it holds compiled first; each is published under its own shard name, and its own task later reads
it back. A cluster-wide claim per group (a ``distributed.Lock``, held while the group is measured and published)
keeps two workers from measuring one group when the look-ahead guessed wrong (Dask steals tasks, a worker dies).

A worker that dies mid-task loses nothing: the scheduler re-runs its task elsewhere. A group's shard has a
name fixed by (run, group): a task that finds its shard already published (its first attempt got that far before
the worker died, or another task measured it ahead) reads it back instead of measuring again, so nothing is
measured twice. The manifest counts each group once, with the summary of the task that measured it.

Dask is imported only here and only when called: ``pip install 'costmodel[dask]'``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import multiprocessing as mp
import os
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from rich.console import Console

from costmodel import dataset, hardware
from costmodel.benchmark import IsolatedBenchmarker, interpreting
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from collect import runner
from collect.plan import GroupPlan
from collect.runner import WorkItem


# --- where shards go ------------------------------------------------------------------------------------

class Store:
    """The dataset root: a local path (``costmodel.dataset``'s atomic shards) or a pyarrow filesystem URI."""

    def __init__(self, where: str | Path):
        self.where = str(where)
        if "://" in self.where:
            from pyarrow import fs

            try:
                self.fs, self.root = fs.FileSystem.from_uri(self.where)
            except (pa.ArrowInvalid, OSError) as e:
                raise CostModelError(f"cannot open dataset URI {self.where}: {e}") from None
            self.root = self.root.rstrip("/")
        else:  # workers see the path as the client does: a shared filesystem mounted alike
            self.fs, self.root = None, str(Path(self.where).resolve())
            self.where = self.root

    def _part(self, gpu: str, kernel: str) -> str:
        return f"{self.root}/gpu={gpu}/kernel={kernel}"

    def shards(self, gpu: str, kernel: str, shard_id: str) -> list[str]:
        """Published shards named for ``shard_id`` (``part-<shard_id>-<uuid>.parquet``)."""
        prefix = f"part-{shard_id}-"
        if self.fs is None:
            return sorted(str(p) for p in Path(self._part(gpu, kernel)).glob(f"{prefix}*.parquet"))
        from pyarrow import fs

        try:
            infos = self.fs.get_file_info(fs.FileSelector(self._part(gpu, kernel), allow_not_found=True))
        except OSError:
            return []
        return sorted(i.path for i in infos if i.base_name.startswith(prefix) and i.base_name.endswith(".parquet"))

    def write_shard(self, gpu: str, kernel: str, shard_id: str, rows: list[dict]) -> str:
        """Publish ``rows`` as one shard: a dot-prefixed temporary file (readers skip those) moved into place."""
        if self.fs is None:
            return str(dataset.write_shard(self.root, gpu, kernel, shard_id, rows))
        part = self._part(gpu, kernel)
        name = f"part-{shard_id}-{uuid.uuid4().hex[:12]}.parquet"
        self.fs.create_dir(part, recursive=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=dataset.FILE_SCHEMA), f"{part}/.tmp-{name}",
                       filesystem=self.fs, compression="zstd")
        self.fs.move(f"{part}/.tmp-{name}", f"{part}/{name}")
        return f"{part}/{name}"

    def statuses(self, path: str) -> list[str]:
        return pq.read_table(path, columns=["status"], filesystem=self.fs)["status"].to_pylist()

    def measured_pairs(self, group_ids: list[str]) -> set[tuple[str, str]]:
        if self.fs is None:
            return dataset.measured_pairs(self.root, group_ids)
        from pyarrow import fs

        if self.fs.get_file_info(self.root).type == fs.FileType.NotFound or not group_ids:
            return set()
        d = ds.dataset(self.root, filesystem=self.fs, schema=dataset.SCHEMA, format="parquet", partitioning="hive")
        t = d.to_table(columns=["group_id", "config_json"], filter=ds.field("group_id").isin(group_ids))
        return set(zip(t["group_id"].to_pylist(), t["config_json"].to_pylist()))

    def write_manifest(self, summary: dict) -> str:
        if self.fs is None:
            return str(runner.write_manifest(self.root, summary))
        mdir = f"{self.root}/_manifests"
        self.fs.create_dir(mdir, recursive=True)
        tmp, final = f"{mdir}/.tmp-{summary['run_id']}.json", f"{mdir}/{summary['run_id']}.json"
        with self.fs.open_output_stream(tmp) as f:
            f.write(json.dumps(summary, indent=1, default=str).encode())
        self.fs.move(tmp, final)
        return final


# --- in the Dask worker -----------------------------------------------------------------------------------

_BENCH: dict[tuple, IsolatedBenchmarker] = {}
_LOCK = threading.Lock()


@functools.cache
def _worker_hardware(interpret: bool) -> dict:
    """The hardware record of this worker's GPU (under the interpreter: ``hardware.INTERPRETER``, as the CLI's)."""
    if interpreting() != interpret:
        raise CostModelError(f"the client {'runs' if interpret else 'does not run'} under TRITON_INTERPRET=1 but "
                             f"Dask worker pid {os.getpid()} {'does not' if interpret else 'does'}: set it alike")
    return (hardware.INTERPRETER if interpret else hardware.current()).as_dict()


def _benchmarker(hw: HardwareRecord, device: str, opts: dict) -> IsolatedBenchmarker:
    """This worker process's benchmarker, started by its first task and kept for the next ones."""
    key = (hw, device, tuple(sorted(opts.items())))
    bench = _BENCH.get(key)
    if bench is None:
        for old in _BENCH.values():
            old.close()
        _BENCH.clear()
        # a nanny-started worker is daemonic, and daemonic processes may not start children; the timing worker
        # and compile pool are the benchmarker's children, reaped with it (close) or when they see it gone
        if mp.current_process().daemon:
            mp.current_process().daemon = False
        bench = _BENCH[key] = IsolatedBenchmarker(hw, device=device, **opts)
        atexit.register(bench.close)
    return bench


def shard_id(run_id: str, item: WorkItem) -> str:
    """The name of a group's shard in a run (and of its claim): fixed by (run, group), whichever task measures it."""
    return f"{run_id}-g{item.index:05d}"


@contextlib.contextmanager
def _claim(name: str, blocking: bool = True):
    """Holds the cluster-wide claim on a group while it is measured and published (its own task waits for it, a
    task measuring it ahead tries once): yields whether it was taken. A ``distributed.Lock``, whose lease the
    scheduler drops when its holder stops refreshing it (a dead worker's claim goes within
    ``distributed.scheduler.locks.lease-timeout``, 30 s by default)."""
    from distributed import Lock

    lock = Lock(f"costmodel-{name}")
    taken = lock.acquire(blocking=blocking)
    try:
        yield taken
    finally:
        if taken:
            lock.release()
        # its lease-refresh callback (every lease-timeout / 5) holds the lock on the worker's event loop until
        # stopped: 200 locks taken and released in a task were all still alive after gc.collect(), none once stopped
        if getattr(lock, "refresh_callback", None) is not None:
            lock.refresh_callback.stop()


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.time() > deadline


_PACE = runner.Pace()  # this worker process's, over the groups its tasks measure


def _ready(bench, item: WorkItem) -> bool:
    return bench.ready(item.group.family, item.group.problem, item.group.dtype, item.todo)


def _summary(item: WorkItem, task: int) -> dict:
    """Who handles ``item``: ``task`` is the index of the group whose Dask task it is done in."""
    return {"index": item.index, "group_id": item.gid, "family": item.group.family, "host": os.uname().nodename,
            "pid": os.getpid(), "task": task}


def _read_back(store: Store, gpu: str, item: WorkItem, run_id: str, task: int, t0: float) -> dict | None:
    """The summary of ``item``'s shard if one is published already (by an earlier attempt of its task that died, or
    by another task that measured it ahead), else None."""
    done = store.shards(gpu, item.group.family, shard_id(run_id, item))
    if not done:
        return None
    counts = Counter(s for path in done for s in store.statuses(path))
    return {**_summary(item, task), "counts": dict(counts), "best_ms": None, "shard": done[0], "recovered": True,
            "wall_s": round(time.perf_counter() - t0, 3)}


def _measure(bench, hw: HardwareRecord, store: Store, item: WorkItem, run_id: str, task: int) -> dict:
    """Measure ``item``, publish its shard, and return its summary (with the timing worker's and compile pool's
    seconds while it was measured)."""
    t0 = time.perf_counter()
    before = {"waited_s": bench.waited_s, "timed_s": bench.timed_s, **bench.compile_spent}
    _PACE.begin()
    ms, rows = runner.GroupRecorder(bench, hw, run_id).measure(item)
    after = {"waited_s": bench.waited_s, "timed_s": bench.timed_s, **bench.compile_spent}
    _PACE.measured(len(item.todo), runner.group_work(item.group, hw), after["timed_s"] - before["timed_s"])
    path = store.write_shard(hw.gpu, item.group.family, shard_id(run_id, item), rows)
    return {**_summary(item, task), "counts": dict(Counter(m.status for m in ms)), "best_ms": runner.best_ms(ms),
            "shard": path, "recovered": False, "wall_s": round(time.perf_counter() - t0, 3),
            **{k: round(after[k] - before[k], 3) for k in before}}


def _measure_ready_ahead(bench, hw: HardwareRecord, store: Store, item: WorkItem, ahead: list[WorkItem],
                         run_id: str, deadline: float | None) -> list[dict]:
    """While ``item`` still compiles, measure the look-ahead groups already compiled, each published under its own
    shard id (its later task reads it back): a --gpus worker measures whichever of its groups compiled first, and
    a Dask worker that waited for its own group's compiles instead waited on them 47-54% of its time on two H200s
    (--gpus 42%). A look-ahead group is only a guess at what this worker takes next: the claim keeps a group from
    being measured twice when another worker has it."""
    done, tried = [], set()
    while not _past(deadline) and not _ready(bench, item):
        w = next((w for w in ahead if w.index not in tried and _ready(bench, w)), None)
        if w is None:
            break
        tried.add(w.index)
        with _claim(shard_id(run_id, w), blocking=False) as mine:
            fits = _PACE.ends_by(deadline, len(w.todo), runner.group_work(w.group, hw))
            if mine and fits and not store.shards(hw.gpu, w.group.family, shard_id(run_id, w)):
                done.append(_measure(bench, hw, store, w, run_id, task=item.index))
    return done


def measure_group(item: WorkItem, root: str, run_id: str, plan_hw: dict, interpret: bool, opts: dict,
                  compile_workers: dict[str, int], ahead: list[WorkItem] = (), deadline: float | None = None) -> dict:
    """The Dask task: measure one group and publish its shard, or read back its shard if published already.
    Returns the group's summary for the manifest, with ``ahead``: the summaries of the look-ahead groups it
    measured first (see ``_measure_ready_ahead``). ``ahead``: groups this worker is likely to measure next, whose
    compiles start meanwhile; past ``deadline`` (time.time(), --time-budget) no group starts (summary with
    ``skipped``), so that every group measured is also reported."""
    t0 = time.perf_counter()
    hw = HardwareRecord(**_worker_hardware(interpret))
    if hw.gpu != plan_hw["gpu"]:
        raise CostModelError(f"worker pid {os.getpid()} has a {hw.gpu}, the plan is for {plan_hw['gpu']}: collect "
                             f"one GPU type per run (tag workers with a resource per GPU type)")
    store = Store(root)
    if (back := _read_back(store, hw.gpu, item, run_id, item.index, t0)) is not None:
        return back
    with _LOCK:  # one group at a time per worker process, however many threads it runs
        if _past(deadline):
            return {**_summary(item, item.index), "skipped": True}
        bench = _benchmarker(hw, "cpu" if interpret else "cuda",
                             {**opts, "compile_workers": compile_workers.get(os.uname().nodename, 0)})
        for w in (item, *ahead):  # measured 17.7 ok rows/s on one H200 without the look-ahead, 25.6 for --gpus 1
            bench.prefetch(w.group.family, w.group.problem, w.group.dtype, w.todo)
        early = _measure_ready_ahead(bench, hw, store, item, ahead, run_id, deadline)
        with _claim(shard_id(run_id, item)):  # checked again under the claim: another task may have measured it
            own = _read_back(store, hw.gpu, item, run_id, item.index, t0)
            if own is None:
                fits = _PACE.ends_by(deadline, len(item.todo), runner.group_work(item.group, hw))
                own = ({**_summary(item, item.index), "skipped": True} if not fits
                       else _measure(bench, hw, store, item, run_id, item.index))
    return {**own, "ahead": early}


def _measure_looking_ahead(item: WorkItem, ahead: list[WorkItem], **kwargs) -> dict:
    return measure_group(item, ahead=ahead, **kwargs)


# --- the client ---------------------------------------------------------------------------------------------

def _worker_deaths(keys: list[str], dask_scheduler=None) -> dict[str, int]:
    """On the scheduler: how many times a worker died while running each of ``keys`` (its ``suspicious`` count)."""
    return {k: ts.suspicious for k in keys if (ts := dask_scheduler.tasks.get(k)) is not None and ts.suspicious}


def retried_groups(dask_client, by_key: dict) -> list[dict]:
    """The groups a worker died measuring, run again elsewhere: [{index, worker_deaths}] (empty if unknown)."""
    try:
        deaths = dask_client.run_on_scheduler(_worker_deaths, list(by_key))
    except Exception:  # noqa: BLE001 - the scheduler is gone: the manifest says what else it knows
        return []
    return sorted(({"index": by_key[k].index, "worker_deaths": n} for k, n in deaths.items()),
                  key=lambda r: r["index"])


def lookahead(items: list[WorkItem], i: int, workers: int, depth: int = 3) -> list[WorkItem]:
    """The groups the worker measuring ``items[i]`` is likely to take next, to compile meanwhile: workers take the
    plan's groups about in turn, so every ``workers``-th group after it, ``depth`` of them."""
    return items[i + workers: i + workers * (depth + 1): workers]


def keep_run(runs: dict[int, dict], counts: dict[str, int], r: dict) -> bool:
    """Count the summary ``r`` of a group once, in ``runs`` (by group index) and ``counts``. A group measured ahead
    by another task is read back by its own task too, and the two summaries arrive in either order: the one of the
    measuring (its worker, its seconds) is kept. Returns whether ``r`` was kept."""
    old = runs.get(r["index"])
    if old is not None and (r["recovered"] or not old["recovered"]):
        return False
    if old is not None:
        runner.add_counts(counts, {k: -v for k, v in old["counts"].items()})
    runs[r["index"]] = r
    runner.add_counts(counts, r["counts"])
    return True


def group_run(r: dict) -> dict:
    """A group's line in the manifest's ``group_runs``: ``task`` is the group whose task measured it (its own, or
    one that measured it ahead); ``recovered``: read back from its shard, the summary of its measuring lost with
    its worker."""
    return {**{k: r[k] for k in ("index", "task", "host", "pid", "wall_s", "recovered")},
            "ok": r["counts"].get("ok", 0),
            **{k: r.get(k, 0.0) for k in ("waited_s", "timed_s", "compile_s", "lock_wait_s")}}


def per_worker(group_runs: list[dict]) -> list[dict]:
    """Groups, ok rows and the timing worker's waiting (on compiles) and timing seconds of each worker process."""
    out: dict[tuple, dict] = {}
    for g in group_runs:
        w = out.setdefault((g["host"], g["pid"]), {"host": g["host"], "pid": g["pid"], "groups": 0, "ok": 0,
                                                    "waited_s": 0.0, "timed_s": 0.0, "compile_s": 0.0, "lock_wait_s": 0.0})
        w["groups"] += 1
        for k in ("ok", "waited_s", "timed_s", "compile_s", "lock_wait_s"):
            w[k] = round(w[k] + g.get(k, 0), 3)
    return list(out.values())


def workers_info(dask_client) -> dict[str, dict]:
    """Every worker the scheduler knows (newer clients list only a few unless asked for all)."""
    try:
        return dask_client.scheduler_info(n_workers=-1)["workers"]
    except TypeError:
        return dask_client.scheduler_info()["workers"]


def _gpu_workers(dask_client) -> dict[str, dict]:
    workers = workers_info(dask_client)
    return {a: w for a, w in workers.items() if w.get("resources", {}).get("GPU", 0) >= 1}


def cluster_hardware(dask_client, interpret: bool) -> HardwareRecord:
    """The hardware the plan is for: a GPU worker's (the interpreter's stand-in on the CPU)."""
    if not workers_info(dask_client):
        raise CostModelError(f"the Dask scheduler at {dask_client.scheduler.address} has no workers")
    if interpret:
        return HardwareRecord(**dask_client.submit(_worker_hardware, True, pure=False).result())
    if not _gpu_workers(dask_client):
        raise CostModelError("no Dask worker offers a GPU resource: start workers with `--resources GPU=1` "
                             "and one visible GPU each (e.g. `dask cuda worker ADDRESS --resources GPU=1`)")
    return HardwareRecord(**dask_client.submit(_worker_hardware, False, pure=False, resources={"GPU": 1}).result())


def _compile_workers(dask_client, interpret: bool) -> dict[str, int]:
    """Compile processes per worker on each host: the host's cores but two, shared among its GPU workers
    (0: the benchmarker's own default, where the cores are unknown)."""
    if interpret:
        return {}
    workers = _gpu_workers(dask_client)
    hosts = Counter(w["host"] for w in workers.values())
    cores = dask_client.run(lambda: (os.uname().nodename, hardware.usable_cores()), workers=list(workers))
    return {name: hardware.compile_workers(n, hosts[workers[addr]["host"]]) for addr, (name, n) in cores.items()}


def run_dask(plan: list[GroupPlan], out: str, hw: HardwareRecord, dask_client, *, run_id: str,
             resume: bool = False, seed: int = 0, console: Console | None = None, timeout_s: float = 30.0,
             time_budget_s: float | None = None, eager: bool = True) -> dict:
    """Measure ``plan`` as one Dask task per group on the cluster of ``dask_client``; returns the run's summary,
    also written as its manifest under ``out``."""
    from distributed import as_completed

    interpret = interpreting()
    runner.check_hardware(hw, interpret)
    store = Store(out)
    items = runner.plan_work(plan, hw, store.measured_pairs if resume else None)
    opts = {"timeout_s": timeout_s, "seed": seed, "eager": eager}
    resources = None if interpret else {"GPU": 1}
    t0, state = time.perf_counter(), "complete"
    deadline = time.time() + time_budget_s if time_budget_s is not None else None
    counts, failed, skipped, runs = runner.new_counts(), [], [], {}
    gpus = max(1, len(_gpu_workers(dask_client))) if not interpret else max(1, len(workers_info(dask_client)))
    futures = dask_client.map(_measure_looking_ahead, items, [lookahead(items, i, gpus) for i in range(len(items))],
                              root=store.where, run_id=run_id, plan_hw=hw.as_dict(), interpret=interpret, opts=opts,
                              compile_workers=_compile_workers(dask_client, interpret), deadline=deadline,
                              key=[f"costmodel-{shard_id(run_id, w)}" for w in items], resources=resources,
                              pure=False)
    by_key, by_index = {f.key: w for f, w in zip(futures, items)}, {w.index: w for w in items}
    try:
        with runner.CollectProgress(console, sum(len(w.todo) for w in items)) as view:
            for fut in as_completed(futures):
                w = by_key[fut.key]
                if fut.status != "finished":
                    exc = fut.exception()
                    failed.append({"index": w.index, "family": w.group.family, "problem": w.group.problem,
                                   "dtype": w.group.dtype, "error": f"{type(exc).__name__}: {exc}"[:500]})
                    continue
                r = fut.result()
                for g in (*r.get("ahead", ()), r):
                    if not g.get("skipped") and keep_run(runs, counts, g):
                        view.describe(by_index[g["index"]].describe())
                        view.update(counts, "" if g["recovered"] else g["best_ms"])
                if r.get("skipped"):
                    skipped.append(w.index)
        if skipped:
            state = "budget"
        if failed and state == "complete":
            state = "incomplete"
    except BaseException as e:
        state = runner.ended_by(e)
        dask_client.cancel(futures)
        raise
    finally:
        groups = [group_run(r) for r in runs.values()]
        done = set(runs) | {f["index"] for f in failed}
        summary = runner.run_summary(
            run_id=run_id, state=state, plan=plan, items=items, hw=hw, seed=seed, counts=counts,
            groups_measured=len(groups), wall_s=time.perf_counter() - t0, shards=[r["shard"] for r in runs.values()],
            dask={"scheduler": dask_client.scheduler.address, "workers": len(workers_info(dask_client))},
            recovered_groups=sum(r["recovered"] for r in runs.values()),
            measured_ahead=sum(r["task"] != r["index"] for r in runs.values()),
            failed_groups=failed, group_runs=groups, workers=per_worker(groups),
            retried_groups=retried_groups(dask_client, by_key),
            not_measured=[w.index for w in items if w.index not in done])
        store.write_manifest(summary)
    return summary
