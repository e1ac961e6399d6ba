"""Collector: reproducible plans, failures recorded without stopping the run, atomic shards, resume."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from collect.plan import DimBound, GroupPlan, make_plan
from costmodel.kernels.base import int_specialisation
from collect.runner import run_plan
from costmodel import dataset, space
from costmodel.benchmark import IsolatedBenchmarker
from costmodel.errors import CostModelError
from costmodel.hardware import INTERPRETER, KNOWN
from costmodel.kernels import get_family

ROOT = Path(__file__).resolve().parents[1]
HW = KNOWN["nvidia-h200"]
FAULTY = "faulty_family:Faulty"


def test_plan_is_reproducible_and_covers_the_space():
    a = make_plan(["matmul", "softmax", "attention"], 30, 25, None, seed=1, hw=HW, exhaustive_share=0.1)
    b = make_plan(["matmul", "softmax", "attention"], 30, 25, None, seed=1, hw=HW, exhaustive_share=0.1)
    c = make_plan(["matmul", "softmax", "attention"], 30, 25, None, seed=2, hw=HW, exhaustive_share=0.1)
    assert a == b and a != c
    assert len(a) == 30
    assert {g.family for g in a[:3]} == {"matmul", "softmax", "attention"}, "families not interleaved"
    assert sum(g.exhaustive for g in a) >= 3
    assert {g.dtype for g in a} == {"float16", "bfloat16"}
    for g in a:
        fam = get_family(g.family)
        valid = space.enumerate_valid(fam, g.problem, g.dtype, HW)
        if g.exhaustive:
            assert list(g.configs) == valid
        else:
            assert g.configs[0] == fam.default_config(g.problem, g.dtype, HW)
            assert len(g.configs) <= 25 and all(c in valid for c in g.configs)
            assert len({space.config_key(c) for c in g.configs}) == len(g.configs)


def test_where_bounds_the_planned_problems():
    unbounded = make_plan(["matmul"], 12, 20, None, seed=3, hw=HW)
    assert any(g.problem["M"] > 128 for g in unbounded)
    for text, ok in (("M<=128", lambda m: m <= 128), ("M > 2000", lambda m: m > 2000)):
        plan = make_plan(["matmul"], 12, 20, None, seed=3, hw=HW, where=(DimBound.parse(text),))
        assert len(plan) == 12 and all(ok(g.problem["M"]) for g in plan), text
    plan = make_plan(["matmul"], 12, 20, None, seed=3, hw=HW, where=(DimBound.parse("M==64"),))
    assert plan and all(g.problem["M"] == 64 for g in plan)  # fewer groups: few distinct problems qualify
    with pytest.raises(CostModelError, match="softmax has no dim K"):
        make_plan(["matmul", "softmax"], 4, 5, None, seed=0, hw=HW, where=(DimBound.parse("K<=64"),))
    with pytest.raises(CostModelError, match="bad bound"):
        DimBound.parse("M=<3")


def test_where_on_remainders_keeps_a_plan_in_one_compile_class():
    where = tuple(DimBound.parse(t) for t in ("M%16!=0", "N % 16 == 0", "K%16==0", "M>1"))  # and == 1: a class too
    plan = make_plan(["matmul"], 8, 5, ["float16"], seed=3, hw=HW, where=where)
    assert len(plan) == 8 and all(g.problem["M"] % 16 and not g.problem["N"] % 16 and not g.problem["K"] % 16
                                  for g in plan)
    # the dims' part of every compile key is one (the rest, e.g. the program count's, may still differ)
    assert len({tuple(int_specialisation(v) for v in g.problem.values()) for g in plan}) == 1
    assert str(where[1]) == "N%16==0"
    with pytest.raises(CostModelError, match="bad bound"):
        DimBound.parse("M%0==1")


def test_failures_are_recorded_and_the_run_goes_on():
    configs = [{"BLOCK": 16, "FAULT": f} for f in (0, 1, 2)] + [{"BLOCK": 32, "FAULT": 0}] + \
              [{"BLOCK": 16, "FAULT": f} for f in (3, 4)] + [{"BLOCK": 32, "FAULT": f} for f in (5, 6, 0)]
    with IsolatedBenchmarker(HW, device="cpu", timeout_s=3) as bench:
        ms = bench.measure(FAULTY, {"N": 50}, "float32", configs)
        assert bench.restarts == 3  # one death, one hang, one CUDA error
    assert [m.status for m in ms] == ["ok", "runtime_error", "runtime_error", "ok", "timeout", "wrong_result", "ok",
                                      "runtime_error", "ok"]
    assert "illegal memory access" in ms[7].error
    assert "injected" in ms[1].error
    assert ms[5].rel_err == pytest.approx(0.5, rel=1e-3)
    assert all(m.latency_ms is not None for m in ms if m.ok)


def test_the_worker_sets_a_group_up_once_and_ahead_when_asked():
    """A tune measures one group three times, and its first round waited for the group's set-up (inputs, the torch
    reference) after its compiles. The worker now keeps the set-up for the next call on the group, and sets a group
    up ahead when asked (``prepare``), while the configs compile."""
    fam, cfgs = "faulty_family:SlowSetup", [{"BLOCK": 16, "FAULT": 0}]  # its reference takes a second
    with IsolatedBenchmarker(HW, device="cpu") as bench:
        def setup_s(problem):
            before = bench.setup_s
            assert all(m.ok for m in bench.measure(fam, problem, "float32", cfgs))
            return bench.setup_s - before

        assert setup_s({"N": 100}) >= 1.0  # set up in the group's own call
        assert setup_s({"N": 100}) < 0.5  # kept for the next call on that group
        bench.prepare(fam, {"N": 101}, "float32")
        time.sleep(2.0)
        assert setup_s({"N": 101}) < 0.5  # set up ahead
        assert setup_s({"N": 100}) >= 1.0  # another group's: set up again


def test_interpreter_collect_end_to_end(tmp_path):
    hw, rng = INTERPRETER, np.random.default_rng(0)
    plan = []
    for family, problem, dtype in [("matmul", {"M": 40, "N": 48, "K": 72}, "float16"),
                                   ("softmax", {"M": 5, "N": 200}, "bfloat16")]:
        fam = get_family(family)
        plan.append(GroupPlan(family, problem, dtype, tuple(space.sample(fam, problem, dtype, hw, 3, rng)), False))
    with IsolatedBenchmarker(hw, device="cpu") as bench:
        summary = run_plan(plan, tmp_path, bench, hw, run_id="r1")
    assert summary["counts"]["ok"] == 6 and summary["measured"] == 6
    assert 0 < bench.setup_s < bench.timed_s, "the worker's set-up of the groups is part of their timing"
    manifest = json.loads((tmp_path / "_manifests" / "r1.json").read_text())
    assert manifest["counts"]["ok"] == 6 and len(manifest["plan"]) == 2
    t = dataset.read(tmp_path)
    assert t.schema.equals(dataset.SCHEMA, check_metadata=False)
    assert t.num_rows == 6 and set(t["kernel"].to_pylist()) == {"matmul", "softmax"}
    assert set(t["gpu"].to_pylist()) == {"interpreter"} and set(t["hw_name"].to_pylist()) == {INTERPRETER.name}
    sm = dataset.read(tmp_path, filter=pc.field("kernel") == "softmax")
    assert sm.num_rows == 3 and sm["dim_N"].to_pylist() == [200] * 3 and sm["dim_K"].null_count == 3
    assert json.loads(sm["config_json"][0].as_py()) == get_family("softmax").default_config({"M": 5, "N": 200}, "bfloat16", hw)


_KILLABLE = """
import sys
from collect.plan import GroupPlan
from collect.runner import run_plan
from costmodel.benchmark import IsolatedBenchmarker
from costmodel.hardware import INTERPRETER
if __name__ == "__main__":
    hw = INTERPRETER
    plan = [GroupPlan("faulty_family:Faulty", {"N": n}, "float32",
                      tuple({"BLOCK": b, "FAULT": 5} for b in (16, 32)), False) for n in range(10, 30)]
    with IsolatedBenchmarker(hw, device="cpu") as bench:
        run_plan(plan, sys.argv[1], bench, hw, run_id=sys.argv[2], resume=True, flush_rows=4)
"""


def test_kill_between_flushes_loses_only_the_shard_in_flight_and_resume_fills_the_rest(tmp_path):
    script = tmp_path / "killable.py"
    script.write_text(_KILLABLE)
    env = {**os.environ, "PYTHONPATH": f"{Path(__file__).parent}:{Path(__file__).parent.parent}"}
    out = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, str(script), str(out), "first"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(out.glob("gpu=*/kernel=*/part-*.parquet"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = dataset.read(out)
    assert 0 < first.num_rows < 40 and first.num_rows % 4 == 0, "only whole flushed shards survive"
    subprocess.run([sys.executable, str(script), str(out), "second"], env=env, check=True, capture_output=True)
    t = dataset.read(out)
    pairs = list(zip(t["group_id"].to_pylist(), t["config_json"].to_pylist()))
    assert len(pairs) == 40 and len(set(pairs)) == 40, "resume must measure nothing twice and leave nothing out"
    assert set(t["run_id"].to_pylist()) == {"first", "second"}


def test_a_killed_collect_still_prints_what_it_published(tmp_path):
    """`timeout` stops a collect with SIGTERM: the run writes its manifest and --json prints it on stdout, with exit
    status 143 (session 17: a device call's timeout left the collect's stdout empty; its manifest said what the
    14 groups it published were)."""
    out, err = tmp_path / "data", tmp_path / "stderr.txt"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": f"{Path(__file__).parent}:{ROOT}"}
    with open(err, "w") as stderr:  # 40 groups of at least a second each (session 18: 33 softmax groups ended in 11 s)
        proc = subprocess.Popen([sys.executable, "-m", "costmodel", "collect", "--kernel", "faulty_family:SlowGroups",
                                 "--groups", "40", "--configs-per-group", "2", "--exhaustive-share", "0",
                                 "--out", str(out), "--json"],
                                env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=stderr, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and "plan:" not in err.read_text():
            time.sleep(0.1)
        time.sleep(15)  # into the run: the timing worker starts (3-4 s), then each group takes a second or more
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err.read_text()[-2000:]
    summary = json.loads(stdout)
    manifest = json.loads((out / "_manifests" / f"{summary['run_id']}.json").read_text())
    assert summary["state"] == "interrupted"
    assert summary == {k: v for k, v in manifest.items() if k != "plan"}
    published = dataset.read(out).num_rows if summary["groups_measured"] else 0
    assert published == summary["measured"] and 0 < summary["groups_measured"] < summary["groups"]


class _StoppedAfter:
    """A benchmarker that measures ``n`` configs of a group (``None``: all) and is then stopped, as Ctrl-C or a kill
    stops IsolatedBenchmarker: the exception carries what was measured (``measurements``, None past it)."""

    def __init__(self, n):
        self.n, self.asked = n, []

    def prefetch(self, *a):
        pass

    def ready(self, *a):
        return True

    def measure(self, family, problem, dtype, configs):
        from costmodel.benchmark import Measurement

        self.asked.append(list(configs))
        ms = [Measurement(c, "ok", latency_ms=1.0 + c["BLOCK"] / 64) for c in configs]
        if self.n is not None and len(configs) > self.n:
            stop = KeyboardInterrupt()
            stop.measurements = ms[: self.n] + [None] * (len(configs) - self.n)
            raise stop
        return ms


def test_a_stopped_whole_space_group_keeps_what_it_measured_as_a_sample_and_resume_makes_it_whole(tmp_path):
    """A run stopped inside a group publishes the configs that group measured, as a sample (``exhaustive`` false:
    it must not read as its space's truth), with the run's state "interrupted"; a --resume run measures only the
    rest, over the whole space, and the group is then whole-space with every config once."""
    from costmodel import evaluation, model

    configs = tuple({"BLOCK": b, "FAULT": 0} for b in (16, 32, 64, 128, 256))
    plan = [GroupPlan(FAULTY, {"N": 50}, "float32", configs, True)]
    with pytest.raises(KeyboardInterrupt):
        run_plan(plan, tmp_path, _StoppedAfter(2), INTERPRETER, run_id="cut")
    manifest = json.loads((tmp_path / "_manifests" / "cut.json").read_text())
    assert manifest["state"] == "interrupted" and manifest["measured"] == 2 and manifest["groups_measured"] == 1
    rows = dataset.read(tmp_path).to_pylist()
    assert sorted(r["config_json"] for r in rows) == sorted(dataset.canonical_json(c) for c in configs[:2])
    assert not any(r["exhaustive"] for r in rows)
    table = dataset.read(tmp_path).sort_by("group_id")
    assert not evaluation.group_info(table)["exhaustive"].to_pylist()[0]

    again = _StoppedAfter(None)
    run_plan(plan, tmp_path, again, INTERPRETER, run_id="rest", resume=True)
    assert again.asked == [list(configs[2:])]
    table = dataset.read(tmp_path).sort_by("group_id")
    assert sorted(table["config_json"].to_pylist()) == sorted(dataset.canonical_json(c) for c in configs)
    assert evaluation.group_info(table)["exhaustive"].to_pylist() == [True]
    assert model.gains(table).max() == 1.0


def test_a_stopped_measure_hands_the_stop_what_it_measured(monkeypatch):
    """IsolatedBenchmarker.measure stopped between its chunks (Ctrl-C, a kill) re-raises the stop with the
    measurements taken so far, as it does a hung GPU's."""
    from costmodel import benchmark

    monkeypatch.setattr(benchmark, "STREAM_CHUNK", 1)

    def chunk(self, submit, family, problem, dtype, configs, idx, results):
        if idx.start == 2:
            raise KeyboardInterrupt
        results[idx.start] = benchmark.Measurement(configs[idx.start], "ok", latency_ms=1.0)

    monkeypatch.setattr(IsolatedBenchmarker, "_measure_chunk", chunk)
    monkeypatch.setattr(IsolatedBenchmarker, "prefetch", lambda *a: None)
    bench = IsolatedBenchmarker(INTERPRETER, device="cpu")
    configs = [{"BLOCK": b, "FAULT": 0} for b in (16, 32, 64, 128)]
    with pytest.raises(KeyboardInterrupt) as stop:
        bench.measure(FAULTY, {"N": 8}, "float32", configs)
    assert [m is not None for m in stop.value.measurements] == [True, True, False, False]


def test_corrupt_or_foreign_parquet_is_a_clear_error(tmp_path):
    part = tmp_path / "gpu=nvidia-h200" / "kernel=matmul"
    part.mkdir(parents=True)
    pq.write_table(pa.table({"a": [1, 2]}), part / "part-foreign.parquet")
    with pytest.raises(CostModelError, match="not a costmodel shard"):
        dataset.read(tmp_path)
    (part / "part-foreign.parquet").unlink()
    (part / "part-bad.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(CostModelError, match="corrupt Parquet shard"):
        dataset.read(tmp_path)
    with pytest.raises(CostModelError, match="no dataset"):
        dataset.read(tmp_path / "missing")


def test_configs_recorded_before_a_knob_existed_read_with_its_absent_value(tmp_path, data_root):
    """Matmul shards written before SPLIT_TAIL and EPILOGUE_SUBTILE read with both at 0 (columns and config_json,
    its keys still in canonical order); other families' rows and the rest of each config are untouched, whichever
    columns are asked for."""
    old = next(p for p in sorted((data_root / "gpu=nvidia-h200" / "kernel=matmul").glob("part-*.parquet"))
               if "cfg_SPLIT_TAIL" not in pq.read_schema(p).names)  # written before the knob
    other = next((data_root / "gpu=nvidia-h200" / "kernel=softmax").glob("part-*.parquet"))
    raw_old, raw_other = pq.read_table(old), pq.read_table(other)
    for src, kernel in ((old, "matmul"), (other, "softmax")):
        (tmp_path / "gpu=nvidia-h200" / f"kernel={kernel}").mkdir(parents=True)
        shutil.copy(src, tmp_path / "gpu=nvidia-h200" / f"kernel={kernel}" / src.name)
    mm = dataset.read(tmp_path, filter=pc.field("kernel") == "matmul")
    added = {"SPLIT_TAIL": 0, "EPILOGUE_SUBTILE": 0}
    assert mm.num_rows == raw_old.num_rows and all(set(mm[f"cfg_{k}"].to_pylist()) == {0} for k in added)
    configs = [json.loads(c) for c in mm["config_json"].to_pylist()]
    assert configs == [{**json.loads(c), **added} for c in raw_old["config_json"].to_pylist()]
    assert mm["config_json"].to_pylist() == [dataset.canonical_json(c) for c in configs]
    only = dataset.read(tmp_path, ["config_json"], filter=pc.field("kernel") == "matmul")
    assert only.column_names == ["config_json"] and only["config_json"].to_pylist() == mm["config_json"].to_pylist()
    sm = dataset.read(tmp_path, filter=pc.field("kernel") == "softmax")
    assert sm["config_json"].to_pylist() == raw_other["config_json"].to_pylist()
    assert all(sm[f"cfg_{k}"].null_count == sm.num_rows for k in added)


def _parent_pid() -> int:
    return os.getppid()


def test_a_process_server_started_ahead_is_the_one_the_benchmarker_forks_from():
    """What `costmodel tune` relies on to overlap the server's imports with its own start-up."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import forkserver

    from costmodel.benchmark import process_context, start_process_server

    start_process_server()
    server = forkserver._forkserver._forkserver_pid
    assert server is not None and server != os.getpid()
    with ProcessPoolExecutor(1, mp_context=process_context()) as pool:
        assert pool.submit(_parent_pid).result() == server


def test_what_a_benchmarker_process_prints_stays_off_the_commands_stdout(tmp_path):
    """`collect --json` owns its stdout (one JSON object), which every process forked from the server shares: a
    benchmarker process's prints, Python's and a library's straight to the file descriptor (Triton's failed ptxas
    run printed its PTX there on the H200), go to stderr."""
    (tmp_path / "child.py").write_text(
        "import os\nfrom costmodel.benchmark import _adopt_environment\n"
        "def run(env):\n    _adopt_environment(env)\n    print('printed')\n    os.write(1, b'written')\n")
    code = ("import os\nfrom costmodel.benchmark import process_context\nimport child\n"
            "p = process_context().Process(target=child.run, args=(dict(os.environ),))\np.start(); p.join()\n"
            "print('{}')\nraise SystemExit(p.exitcode)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "{}\n" and "printed" in proc.stderr and "written" in proc.stderr


def test_complete_plans_only_what_a_whole_space_group_lacks(tmp_path, data_root):
    """`collect --complete`: a whole-space matmul group of today's kernel, copied without three of its configs (as
    if they had been added to the space since), is planned over today's whole space and, resumed, measures exactly
    those; a sampled group is not planned; bounds that leave nothing plan nothing."""
    import pyarrow.dataset as pads

    from collect.plan import complete_plan
    from collect.runner import plan_work

    hw, fam = KNOWN["nvidia-h200"], get_family("matmul")
    swept = dataset.read(data_root, ["group_id"], (pads.field("kernel") == "matmul") & pads.field("exhaustive")
                         & pads.field("source_hash").isin(list(fam.group_hashes)))
    gid = swept["group_id"][0].as_py()
    # the group's every row: an actively picked group holds its probe's configs too, measured before the sweep
    rows = dataset.read(data_root, None, pads.field("group_id") == gid).sort_by("config_json").to_pylist()
    problem, dtype = json.loads(rows[0]["problem_json"]), rows[0]["dtype"]
    today = [r for r in rows if fam.is_valid(problem, dtype, json.loads(r["config_json"]), hw)]  # the space's now
    dropped = {r["config_json"] for r in today[::max(1, len(today) // 3)][:3]}
    kept = [{k: v for k, v in r.items() if k not in dataset.PARTITIONS} for r in rows if r["config_json"] not in dropped]
    sampled = dataset.read(data_root, None, (pads.field("kernel") == "matmul") & ~pads.field("exhaustive")).slice(0, 1)
    dataset.write_shard(tmp_path, hw.gpu, "matmul", "old",
                        kept + [{k: v for k, v in r.items() if k not in dataset.PARTITIONS} for r in sampled.to_pylist()])
    (group,) = complete_plan(str(tmp_path), ["matmul"], None, hw)
    assert (group.problem, group.dtype, group.exhaustive) == (problem, dtype, True)
    assert list(group.configs) == space.enumerate_valid(fam, problem, dtype, hw)
    (item,) = plan_work([group], hw, lambda gids: dataset.measured_pairs(tmp_path, gids))
    assert item.gid == gid and {dataset.canonical_json(c) for c in item.todo} == dropped
    assert complete_plan(str(tmp_path), ["matmul"], None, hw, (DimBound.parse("M<0"),)) == []


class _Unkillable:
    """A timing worker process as one whose kernel never ends on the GPU looks to its parent: SIGKILL is sent, but the
    process stays until the driver lets it go (here: until the test's cleanup kills it for real)."""

    def __init__(self, proc):
        self.proc, self.killed = proc, False

    def kill(self):
        self.killed = True

    def join(self, timeout=None):
        time.sleep(timeout or 0)

    def is_alive(self):
        return True

    def __getattr__(self, name):
        return getattr(self.proc, name)


def test_a_hang_whose_worker_outlives_its_kill_stops_the_run_and_keeps_what_was_measured(tmp_path, monkeypatch):
    """A config hangs (FAULT=3) and its killed worker does not go: the run stops at once ("gpu_stuck", one line),
    the group's configs measured before it and the hang itself (a timeout) are written, nothing after it is timed,
    and a resumed run would measure only the rest."""
    from costmodel import benchmark

    monkeypatch.setattr(benchmark, "KILL_WAIT_S", 0.2)
    started = []
    real_start = IsolatedBenchmarker._start

    def start(self):
        real_start(self)
        started.append(self._proc)
        self._proc = _Unkillable(self._proc)

    monkeypatch.setattr(IsolatedBenchmarker, "_start", start)
    ok, hang = {"BLOCK": 16, "FAULT": 0}, {"BLOCK": 16, "FAULT": 3}
    plan = [GroupPlan(FAULTY, {"N": 50}, "float32", (ok, {"BLOCK": 32, "FAULT": 0}, hang, {"BLOCK": 32, "FAULT": 4}),
                      False), GroupPlan(FAULTY, {"N": 60}, "float32", (ok,), False)]
    t0 = time.perf_counter()
    try:
        with IsolatedBenchmarker(INTERPRETER, device="cpu", timeout_s=2) as bench:
            with pytest.raises(benchmark.GpuStuck, match="hung the GPU"):
                run_plan(plan, tmp_path, bench, INTERPRETER, run_id="stuck")
    finally:
        for p in started:
            p.kill()
    assert time.perf_counter() - t0 < 60
    rows = {(json.loads(r["problem_json"])["N"], r["config_json"]): r["status"] for r in dataset.read(tmp_path).to_pylist()}
    assert rows == {(50, dataset.canonical_json(ok)): "ok", (50, dataset.canonical_json({"BLOCK": 32, "FAULT": 0})): "ok",
                    (50, dataset.canonical_json(hang)): "timeout"}
    manifest = json.loads((tmp_path / "_manifests" / "stuck.json").read_text())
    assert manifest["state"] == "gpu_stuck" and manifest["counts"]["timeout"] == 1


def test_a_compile_the_pool_does_not_finish_in_time_goes_to_the_timing_worker():
    """A compile still running after the wait's bound (on the H200 the Helion pool never answered) is answered
    None, as a broken pool is: the timing worker then compiles that config under its own timeout. Without the
    bound the collection waited on it for as long as it took."""
    from concurrent.futures import Future

    from costmodel.benchmark import CompilePool

    pool = CompilePool(KNOWN["nvidia-h200"], workers=1)
    never = Future()
    never.set_running_or_notify_cancel()
    t0 = time.perf_counter()
    assert pool.result(never, timeout=0.2) is None
    assert 0.2 <= time.perf_counter() - t0 < 5
    done = Future()
    done.set_result({"status": "ok", "compile_s": 1.0})
    assert pool.result(done, timeout=0.2) == {"status": "ok", "compile_s": 1.0}
