"""Collection over several workers (`collect --gpus N`, `collect --dask`) and training on Dask (`train --dask`),
on the CPU: kernels run under TRITON_INTERPRET=1 in worker processes on device="cpu", Dask runs as a
LocalCluster of two worker processes. What is checked is what a multi-GPU run relies on: a worker killed mid-run
loses nothing and duplicates nothing (every planned (group, config) is in the dataset exactly once), and the Dask
model ranks as a model should."""

from __future__ import annotations

import glob
import json
import logging
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from collect import cluster, parallel, runner
from collect.plan import GroupPlan
from costmodel import dataset
from costmodel.benchmark import Measurement
from costmodel.hardware import INTERPRETER

HW = INTERPRETER  # the workers run kernels under the interpreter: their rows are recorded as its
FAULTY = "faulty_family:Faulty"
pytestmark = pytest.mark.timeout(180)


def slow_plan(n_groups: int) -> list[GroupPlan]:
    """Groups of two correct configs that take 0.1 s each (FAULT 5): long enough to kill a worker mid-run."""
    return [GroupPlan(FAULTY, {"N": n}, "float32", tuple({"BLOCK": b, "FAULT": 5} for b in (16, 32)), False)
            for n in range(10, 10 + n_groups)]


def assert_exactly_once(root, plan: list[GroupPlan]) -> None:
    t = dataset.read(root, every_measurement=True)  # a plain read keeps a pair's first measurement only
    got = Counter(zip(t["group_id"].to_pylist(), t["config_json"].to_pylist()))
    want = {(w.gid, dataset.canonical_json(c)) for w in runner.plan_work(plan, HW) for c in w.todo}
    assert set(got) == want, f"missing {len(want - set(got))}, unplanned {len(set(got) - want)}"
    assert max(got.values()) == 1, f"measured twice: {[k for k, v in got.items() if v > 1]}"


def check_run(root):
    """scripts/check_collect_runs.py's verdict on the run under ``root`` (the check the H200 runs get)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "check_collect_runs.py"
    spec = importlib.util.spec_from_file_location("check_collect_runs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.check("run", Path(root))


def wait_for(pattern: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not glob.glob(pattern):
        assert time.monotonic() < deadline, f"nothing matched {pattern}"
        time.sleep(0.05)


def test_collect_path_imports_neither_dask_nor_xgboost_nor_mlflow():
    code = ("import sys, costmodel.cli, costmodel.model, collect.runner, collect.parallel, collect.cluster; "
            "print(sorted(m for m in ('dask', 'distributed', 'xgboost', 'mlflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert out.strip() == "[]"


# --- collect --gpus N ------------------------------------------------------------------------------------

def test_gpu_worker_killed_mid_run_is_restarted_and_its_groups_requeued(tmp_path):
    plan, out = slow_plan(24), tmp_path / "data"
    killed = []

    def kill_worker_0():  # as the OOM killer would: SIGKILL, once worker 0 has published its first shard
        wait_for(f"{out}/gpu=*/kernel=*/part-r1-w0-*.parquet")
        proc = next(p for p in mp.active_children() if p.name == "costmodel-gpu-worker-0")
        os.kill(proc.pid, signal.SIGKILL)
        killed.append(proc.pid)

    threading.Thread(target=kill_worker_0, daemon=True).start()
    summary = parallel.run_parallel(plan, out, HW, [None, None], run_id="r1", flush_rows=4)
    assert killed and summary["state"] == "complete"
    w0 = summary["workers"][0]
    assert w0["pids"][0] == killed[0] and w0["deaths"] == 1 and len(w0["pids"]) == 2, w0
    assert summary["requeued"] >= 1 and summary["failed_groups"] == [] and summary["not_measured"] == []
    assert_exactly_once(out, plan)
    manifest = json.loads((out / "_manifests" / "r1.json").read_text())
    assert manifest["groups_measured"] == 24 and manifest["counts"]["ok"] == 48 == manifest["measured"]
    assert sorted(manifest["shards"]) == sorted(glob.glob(f"{out}/gpu=*/kernel=*/part-*.parquet"))
    assert {Path(s).name.split("-")[2] for s in manifest["shards"]} == {"w0", "w1"}, "shards named per worker"
    runs = manifest["group_runs"]
    assert sorted(r["index"] for r in runs) == list(range(24)), "each group published once, by one worker"
    requeued = [r for r in runs if r["requeued"]]
    assert requeued and all(r["pid"] != killed[0] for r in requeued), "the killed worker's groups finished elsewhere"
    assert [w["groups"] for w in manifest["workers"]] == [sum(r["slot"] == i for r in runs) for i in (0, 1)]
    assert sum(w["ok"] for w in manifest["workers"]) == 48
    verdict = check_run(out)
    assert verdict["duplicates"] == 0 and verdict["partial_groups"] == [] and verdict["unreported"] == {}
    assert verdict["rows"] == 48 and verdict["deaths"] == 1


class _Stub:
    """A benchmarker answering ok at once; remembers what it was asked to measure."""

    def __init__(self):
        self.asked = []

    def measure(self, family, problem, dtype, configs):
        self.asked += configs
        return [Measurement(c, "ok", latency_ms=1.0) for c in configs]


def test_requeued_group_skips_pairs_a_dead_worker_published(tmp_path):
    """A worker can die after publishing a shard and before saying so: the group comes back flagged, and the
    worker that takes it measures only the pairs missing from the dataset."""
    g = GroupPlan(FAULTY, {"N": 40}, "float32", tuple({"BLOCK": 16, "FAULT": f} for f in (0, 4, 5)), False)
    item = runner.plan_work([g], HW)[0]
    stub = _Stub()
    first = runner.GroupRecorder(stub, HW, "r1")
    _, rows = first.measure(item, item.todo[:2])
    shard = dataset.write_shard(tmp_path, HW.gpu, FAULTY, "r1-w0", rows)  # published; the worker then died
    item.recheck, stub.asked = True, []
    writer = parallel.PublishingShardWriter(tmp_path, "r1-w1", 100)
    counts, best, recovered, shards = parallel.measure_item(item, runner.GroupRecorder(stub, HW, "r1"), writer,
                                                            tmp_path)
    assert stub.asked == [item.todo[2]] and recovered == 2 and best == 1.0
    assert counts == {"ok": 3} and shards == [str(shard)], "the dead worker's rows count with the group"
    assert writer.published == []
    writer.flush()
    assert writer.published == [item.index]
    assert_exactly_once(tmp_path, [g])


_HOLD_LOCK = """
import sys, time
from costmodel.benchmark import compile_lock
with compile_lock("matmul", ("float16", (("BLOCK_M", 64),), True)):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_compile_lock_makes_workers_sharing_a_cache_compile_a_binary_once(tmp_path, monkeypatch):
    """Two GPU workers' compile pools share Triton's cache: while one compiles a key, another waits for it (and
    then finds the binary), and other keys go on. Keyed by the cache folder, so separate caches never wait."""
    import filelock

    from costmodel.benchmark import compile_lock

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, "30"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    try:
        assert holder.stdout.readline().strip() == "held"
        same = compile_lock("matmul", ("float16", (("BLOCK_M", 64),), True))
        with pytest.raises(filelock.Timeout):
            same.acquire(timeout=0.3)
        with compile_lock("matmul", ("float16", (("BLOCK_M", 128),), True)).acquire(timeout=0.3):
            pass  # another binary
        with compile_lock("softmax", ("float16", (("BLOCK_M", 64),), True)).acquire(timeout=0.3):
            pass  # another family
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "other"))
        with compile_lock("matmul", ("float16", (("BLOCK_M", 64),), True)).acquire(timeout=0.3):
            pass  # another cache
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
        holder.kill()
        holder.wait()
        with same.acquire(timeout=5):  # the holder died mid-compile: the lock is free
            pass
    finally:
        holder.kill()


def test_gpus_option_is_checked(cli, tmp_path):
    for args, msg in ((["--gpus", "0"], "positive number"), (["--gpus", "two"], "positive number"),
                      (["--gpus", "all"], "needs GPUs"), (["--gpus", "2", "--dask", "tcp://x:1"], "alternatives"),
                      (["--out", "s3://bucket/data"], "needs --dask")):
        code, _, err = cli("collect", "--kernel", FAULTY, "--out", str(tmp_path), *args)
        assert code == 2 and msg in err, (args, err)


def test_collect_gpus_cli(cli, tmp_path):
    code, out, err = cli("collect", "--kernel", FAULTY, "--groups", "6", "--configs-per-group", "1",
                         "--exhaustive-share", "0", "--gpus", "2", "--out", str(tmp_path), "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["state"] == "complete" and s["counts"]["ok"] == 6 and len(s["workers"]) == 2
    assert dataset.read(tmp_path).num_rows == 6


# --- Dask --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dask_cluster():
    pytest.importorskip("distributed")
    import dask
    from distributed import LocalCluster

    # a killed worker's claim on its group goes when its lease times out (30 s by default, validated every 10 s):
    # shorter here, so that the kill test's re-run task does not wait that long for it
    with dask.config.set({"distributed.scheduler.locks.lease-timeout": "10s",
                          "distributed.scheduler.locks.lease-validation-interval": "2s"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                         silence_logs=logging.ERROR) as c:
        yield c


class CompiledAt:
    """A Dask worker's benchmarker (one per task here) that finds the group of problem N compiled ``seconds[N]``
    after the task first asked: under the interpreter no compile pool runs and every group is ready at once; this
    stands for a GPU worker's pool. Timed from the first question, not from the test: a fresh worker first spends
    seconds starting its forkserver (torch's import)."""

    def __init__(self, bench, seconds: dict[int, float]):
        self.bench, self.seconds, self.t0 = bench, seconds, None

    def __getattr__(self, name):
        return getattr(self.bench, name)

    def _left(self, problem) -> float:
        self.t0 = self.t0 or time.time()
        return self.t0 + self.seconds.get(problem["N"], 0.0) - time.time()

    def ready(self, family, problem, dtype, configs):
        return self._left(problem) <= 0

    def measure(self, family, problem, dtype, configs):
        wait = self._left(problem)
        if wait > 0:  # as IsolatedBenchmarker.measure waits on its pool, and counts it
            time.sleep(wait)
            self.bench.waited_s += wait
        return self.bench.measure(family, problem, dtype, configs)


_REAL_BENCHMARKER = cluster._benchmarker


def _compiles_take(seconds: dict[int, float] | None) -> None:
    """In a Dask worker: each task's benchmarker as ``CompiledAt(seconds)`` (None: the real one again)."""
    cluster._benchmarker = _REAL_BENCHMARKER if seconds is None else lambda *a: CompiledAt(_REAL_BENCHMARKER(*a),
                                                                                          seconds)


@pytest.fixture
def dask_client(dask_cluster):
    from distributed import Client

    with Client(dask_cluster) as client:
        yield client
        client.run(_compiles_take, None)


def test_requeued_group_measures_again_what_only_an_earlier_run_published(tmp_path):
    """Without --resume, pairs of an earlier run are this run's work: a re-queued group must not take them as
    published by its dead worker; and a worker may die before anything is published (no dataset yet)."""
    g = GroupPlan(FAULTY, {"N": 41}, "float32", tuple({"BLOCK": 16, "FAULT": f} for f in (0, 4)), False)
    item = runner.plan_work([g], HW)[0]
    item.recheck = True
    stub = _Stub()
    fresh = tmp_path / "fresh"
    counts, _, recovered, _ = parallel.measure_item(item, runner.GroupRecorder(stub, HW, "r2"),
                                                    parallel.PublishingShardWriter(fresh, "r2-w1", 100), fresh)
    assert recovered == 0 and stub.asked == item.todo and counts == {"ok": 2}
    _, rows = runner.GroupRecorder(_Stub(), HW, "r1").measure(item)
    dataset.write_shard(tmp_path, HW.gpu, FAULTY, "r1-w0", rows)  # an earlier run's
    stub.asked = []
    counts, _, recovered, shards = parallel.measure_item(item, runner.GroupRecorder(stub, HW, "r2"),
                                                         parallel.PublishingShardWriter(tmp_path, "r2-w1", 100),
                                                         tmp_path)
    assert recovered == 0 and shards == [] and stub.asked == item.todo and counts == {"ok": 2}


def test_dask_task_reads_back_the_shard_an_earlier_attempt_published(tmp_path):
    g = slow_plan(1)[0]
    item = runner.plan_work([g], HW)[0]
    _, rows = runner.GroupRecorder(_Stub(), HW, "r1").measure(item)
    dataset.write_shard(tmp_path, HW.gpu, FAULTY, f"r1-g{item.index:05d}", rows)
    r = cluster.measure_group(item, str(tmp_path), "r1", HW.as_dict(), True, {}, {})
    assert r["recovered"] and r["counts"] == {"ok": 2} and not cluster._BENCH, "measured again"
    assert_exactly_once(tmp_path, [g])


def test_dask_worker_killed_mid_run_loses_and_duplicates_nothing(dask_cluster, tmp_path):
    from distributed import Client

    plan, out = slow_plan(24), tmp_path / "data"
    killed = []
    with Client(dask_cluster) as client:
        def kill_a_busy_worker():  # SIGKILL a worker with a task in hand, once a group is published
            wait_for(f"{out}/gpu=*/kernel=*/part-r1-g*.parquet")
            busy = []
            while not busy:
                busy = [a for a, tasks in client.processing().items() if tasks]
            pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        threading.Thread(target=kill_a_busy_worker, daemon=True).start()
        summary = cluster.run_dask(plan, str(out), HW, client, run_id="r1")
        assert killed and killed[0] not in client.run(os.getpid).values()
    assert killed and summary["state"] == "complete" and summary["failed_groups"] == []
    assert summary["groups_measured"] == 24 and summary["counts"]["ok"] == 48
    assert_exactly_once(out, plan)
    assert json.loads((out / "_manifests" / "r1.json").read_text())["measured"] == 48
    retried = {r["index"] for r in summary["retried_groups"]}
    assert retried, "the group in the killed worker's hands is listed as run again"
    assert all(r["pid"] != killed[0] for r in summary["group_runs"] if r["index"] in retried)
    assert sum(w["groups"] for w in summary["workers"]) == 24
    verdict = check_run(out)
    assert verdict["duplicates"] == 0 and verdict["partial_groups"] == [] and verdict["unreported"] == {}
    assert verdict["rows"] == 48 and verdict["retried_groups"] == summary["retried_groups"]


def test_dask_run_cut_by_its_budget_reports_every_group_it_published(dask_cluster, tmp_path):
    """At the budget, groups already running finish and publish: the manifest counts them (the H200 run that
    cancelled at the budget left 60 of 2,227 ok rows out of its counts); the groups not started are listed."""
    from distributed import Client

    plan, out = slow_plan(40), tmp_path / "data"
    with Client(dask_cluster) as client:
        summary = cluster.run_dask(plan, str(out), HW, client, run_id="r1", time_budget_s=1.0)
    assert summary["state"] == "budget" and summary["not_measured"], summary["state"]
    assert len(summary["not_measured"]) + summary["groups_measured"] == 40
    verdict = check_run(out)
    assert verdict["unreported"] == {} and verdict["partial_groups"] == [] and verdict["duplicates"] == 0
    assert verdict["rows"] == summary["measured"] == 2 * summary["groups_measured"]


def test_dask_task_measures_a_compiled_lookahead_group_while_its_own_compiles(dask_client, tmp_path):
    """Group 0 compiles for 2.5 s: its task measures the groups ahead of it that are compiled (2 first) and then
    its own; group 2's own task reads its shard back. Each group in the Parquet once and whole, counted once in the
    manifest, with the worker that measured it."""
    plan, out = slow_plan(8), tmp_path / "data"
    dask_client.run(_compiles_take, {plan[0].problem["N"]: 2.5})
    summary = cluster.run_dask(plan, str(out), HW, dask_client, run_id="ahead")
    assert summary["state"] == "complete" and summary["groups_measured"] == 8 and summary["counts"]["ok"] == 16
    runs = {r["index"]: r for r in summary["group_runs"]}
    assert sorted(r["index"] for r in summary["group_runs"]) == list(range(8)), "each group reported once"
    assert runs[2]["task"] == 0 and runs[2]["pid"] == runs[0]["pid"] and not runs[2]["recovered"], runs[2]
    assert summary["measured_ahead"] >= 1 and summary["recovered_groups"] == 0
    assert runs[2]["timed_s"] > 0, "the measuring's seconds, not a read-back's"
    t = dataset.read(out, every_measurement=True)
    ts = {i: [s for g, s in zip(t["group_id"].to_pylist(), t["ts"].to_pylist()) if g == w.gid]
          for i, w in enumerate(runner.plan_work(plan, HW)) if i in (0, 2)}
    assert max(ts[2]) < min(ts[0]), "group 2 measured while group 0 compiled"
    assert sum(w["groups"] for w in summary["workers"]) == 8 and sum(w["ok"] for w in summary["workers"]) == 16
    assert_exactly_once(out, plan)
    verdict = check_run(out)
    assert verdict["duplicates"] == 0 and verdict["partial_groups"] == [] and verdict["unreported"] == {}
    assert verdict["rows"] == 16 and verdict["measured_ahead"] == summary["measured_ahead"]


def _task(client, run_id: str, out, item, worker: str, ahead=()):
    """``item``'s Dask task as run_dask submits it, on ``worker``."""
    return client.submit(cluster.measure_group, item, str(out), run_id, HW.as_dict(), True,
                         {"timeout_s": 30.0, "seed": 0}, {}, ahead=list(ahead), workers=[worker],
                         allow_other_workers=False, pure=False)


def test_two_tasks_racing_for_one_lookahead_group_measure_it_once(dask_client, tmp_path):
    """Two workers whose own groups still compile both see the same look-ahead group compiled (the look-ahead is a
    guess: Dask steals tasks, workers die): the claim lets one measure it, the other leaves it; and a task that
    takes the claim after it was measured finds the shard and leaves it too."""
    plan, out = slow_plan(4), tmp_path / "data"
    items = runner.plan_work(plan, HW)
    dask_client.run(_compiles_take, {plan[0].problem["N"]: 2.0, plan[1].problem["N"]: 2.0, plan[3].problem["N"]: 1.0})
    a, b = sorted(cluster.workers_info(dask_client))
    results = [f.result() for f in [_task(dask_client, "race", out, items[i], w, [items[2]])
                                    for i, w in ((0, a), (1, b))]]
    assert len({r["pid"] for r in results}) == 2, "the two tasks ran in two workers"
    assert [r["counts"] for r in results] == [{"ok": 2}, {"ok": 2}] and not any(r["recovered"] for r in results)
    measured = [g for r in results for g in r["ahead"]]
    assert [g["index"] for g in measured] == [2] and measured[0]["counts"] == {"ok": 2}, results
    late = _task(dask_client, "race", out, items[3], a, [items[2]]).result()
    assert late["ahead"] == [] and late["counts"] == {"ok": 2}, "measured again a group already published"
    assert_exactly_once(out, plan)


def test_own_task_of_a_group_measured_ahead_waits_for_it_and_reads_it_back(dask_client, tmp_path):
    """A group's own task that starts while another worker measures it ahead waits for that worker's claim, then
    finds the shard published and reads it back."""
    from distributed import Lock

    plan, out = slow_plan(2), tmp_path / "data"
    items = runner.plan_work(plan, HW)
    dask_client.run(_compiles_take, {plan[0].problem["N"]: 2.0})
    a, b = sorted(cluster.workers_info(dask_client))
    first = _task(dask_client, "own", out, items[0], a, [items[1]])
    claim, deadline = Lock(f"costmodel-{cluster.shard_id('own', items[1])}"), time.monotonic() + 60
    while not claim.locked():  # worker a is measuring group 1 ahead
        assert time.monotonic() < deadline and not first.done(), "group 1 never claimed"
        time.sleep(0.005)
    own = _task(dask_client, "own", out, items[1], b).result()
    ahead = first.result()["ahead"]
    assert [g["index"] for g in ahead] == [1] and ahead[0]["pid"] != own["pid"]
    assert own["recovered"] and own["counts"] == {"ok": 2}, own
    assert_exactly_once(out, plan)


def test_dask_manifest_keeps_the_measuring_of_a_group_also_read_back():
    """A group measured ahead is read back by its own task too, the two summaries in either order: counted once,
    as measured (its worker, its seconds); a read-back alone (the measuring worker died) counts as recovered."""
    measured = {"index": 2, "task": 0, "pid": 11, "recovered": False, "counts": {"ok": 2}, "timed_s": 0.4}
    read_back = {"index": 2, "task": 2, "pid": 12, "recovered": True, "counts": {"ok": 2}}
    for order, kept in (((measured, read_back), [True, False]), ((read_back, measured), [True, True])):
        runs, counts = {}, runner.new_counts()
        assert [cluster.keep_run(runs, counts, r) for r in order] == kept
        assert runs == {2: measured} and counts["ok"] == 2
    runs, counts = {}, runner.new_counts()
    assert cluster.keep_run(runs, counts, read_back) and runs == {2: read_back} and counts["ok"] == 2


def test_dask_lookahead_takes_every_workers_th_group_after():
    items = list(range(20))
    assert cluster.lookahead(items, 0, 1) == [1, 2, 3]
    assert cluster.lookahead(items, 4, 2) == [6, 8, 10]
    assert cluster.lookahead(items, 18, 2) == []


def test_dask_collect_cli_to_a_filesystem_uri_and_resume(dask_cluster, cli, tmp_path):
    uri = f"file://{tmp_path}/data"
    args = ["collect", "--kernel", FAULTY, "--groups", "4", "--configs-per-group", "1", "--exhaustive-share", "0",
            "--dask", dask_cluster.scheduler_address, "--out", uri, "--json"]
    code, out, err = cli(*args)
    assert code == 0, err
    s = json.loads(out)
    assert s["state"] == "complete" and s["counts"]["ok"] == 4 and s["dask"]["workers"] == 2
    assert dataset.read(tmp_path / "data").num_rows == 4
    assert (tmp_path / "data" / "_manifests" / f"{s['run_id']}.json").is_file()
    code, out, err = cli(*args, "--resume")
    assert code == 0, err
    again = json.loads(out)
    assert again["measured"] == 0 and again["skipped_already_measured"] == 4
    assert dataset.read(tmp_path / "data").num_rows == 4


def test_dask_partitions_keep_groups_whole(dask_cluster, slice_root):
    import numpy as np
    from distributed import Client

    from costmodel import model

    table, _ = model.training_table(slice_root)
    with Client(dask_cluster) as client:
        _, _, qid = model.dask_parts(client, table, model.TrainParams())
        blocks = [qid.blocks[i].compute() for i in range(qid.numblocks[0])]
    assert len(blocks) > 1
    assert all((np.diff(b) >= 0).all() for b in blocks), "rows not in qid order within a partition"
    assert all(a[-1] < b[0] for a, b in zip(blocks, blocks[1:])), "a group spans two partitions"
    assert sum(len(b) for b in blocks) == table.num_rows


def test_dask_trained_model_ranks_better_than_random(dask_cluster, slice_root, cli, tmp_path):
    out = tmp_path / "nvidia-h200"
    code, stdout, err = cli("train", "--data", str(slice_root), "--out", str(out), "--no-track", "--no-extra-splits",
                            "--trees", "60", "--dask", dask_cluster.scheduler_address, "--json")
    assert code == 0, err
    r = json.loads(stdout)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["params"]["dask"] == dask_cluster.scheduler_address
    code, stdout, err = cli("evaluate", "--data", str(slice_root), "--model", str(out), "--json")
    assert code == 0, err
    ev = json.loads(stdout)
    assert ev["groups"] == r["heldout"]["groups"] > 0
    assert ev["top8_score"] > ev["random8_score"] and ev["top1_score"] > ev["random1_score"]


def test_a_stuck_gpu_keeps_what_the_group_measured_and_stops_the_worker(tmp_path):
    """measure_item under `collect --gpus`: when the GPU gets stuck (a hang whose worker outlived its kill) the rows
    the group measured, the hang a timeout, go to the worker's writer tagged with the group, and the stop goes on up
    (the worker then publishes and reports the error to the parent)."""
    from costmodel.benchmark import GpuStuck

    g = GroupPlan(FAULTY, {"N": 40}, "float32", tuple({"BLOCK": 16, "FAULT": f} for f in (0, 3, 4)), False)
    item = runner.plan_work([g], HW)[0]

    class Stuck(_Stub):
        def measure(self, family, problem, dtype, configs):
            first, hung = configs[0], configs[1]
            raise GpuStuck("stuck", [Measurement(first, "ok", latency_ms=1.0), Measurement(hung, "timeout"), None])

    writer = parallel.PublishingShardWriter(tmp_path, "r1-w0", 100)
    with pytest.raises(GpuStuck):
        parallel.measure_item(item, runner.GroupRecorder(Stuck(), HW, "r1"), writer, tmp_path)
    writer.flush()
    assert writer.published == [item.index]
    rows = {r["config_json"]: r["status"] for r in dataset.read(tmp_path).to_pylist()}
    assert rows == {dataset.canonical_json(item.todo[0]): "ok", dataset.canonical_json(item.todo[1]): "timeout"}
