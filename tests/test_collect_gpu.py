"""A real device fault in the collector: a config whose kernel stores to an address no process maps faults on the
GPU (illegal memory access, which poisons the CUDA context); the timing worker reports it and is restarted, and the
run goes on: the configs after it in its group (timed by the new worker) and the other group measure ok."""

import json

import pytest

from collect.plan import GroupPlan
from collect.runner import run_plan
from costmodel import dataset
from costmodel.benchmark import IsolatedBenchmarker, interpreting

FAULTY = "faulty_family:Faulty"
OK16, OK32, SLOW = {"BLOCK": 16, "FAULT": 0}, {"BLOCK": 32, "FAULT": 0}, {"BLOCK": 16, "FAULT": 5}
FAULT = {"BLOCK": 16, "FAULT": 7}  # the null-page store (tests/faulty_family.py)


def _collect(tmp_path, hw, device: str):
    """Two groups, the faulting config second in the first: (summary, restarts, {(N, config json): row})."""
    plan = [GroupPlan(FAULTY, {"N": 200}, "float32", (OK16, FAULT, OK32, SLOW), False),
            GroupPlan(FAULTY, {"N": 333}, "float32", (OK16, OK32), False)]
    with IsolatedBenchmarker(hw, device=device, compile_workers=2) as bench:
        summary = run_plan(plan, tmp_path, bench, hw, run_id="fault")
        restarts = bench.restarts
    rows = dataset.read(tmp_path).to_pylist()
    return summary, restarts, {(json.loads(r["problem_json"])["N"], r["config_json"]): r for r in rows}


@pytest.mark.gpu
def test_illegal_address_on_the_device_restarts_the_worker_and_the_run_goes_on(tmp_path):
    from costmodel import hardware

    summary, restarts, rows = _collect(tmp_path, hardware.current(), "cuda")
    fault = rows.pop((200, dataset.canonical_json(FAULT)))
    assert fault["status"] == "runtime_error", fault
    assert "CUDA error" in fault["error"] and "illegal memory access" in fault["error"], fault["error"]
    assert restarts == 1  # the poisoned context is dropped once; every later config ran on the new worker
    assert len(rows) == 5 and all(r["status"] == "ok" and r["latency_ms"] > 0 for r in rows.values()), rows
    assert summary["state"] == "complete" and summary["counts"]["ok"] == 5 and summary["counts"]["runtime_error"] == 1


@pytest.mark.skipif(not interpreting(), reason="the interpreter's form of the fault (a segfault on the CPU)")
def test_the_null_page_store_kills_an_interpreter_worker_too(tmp_path):
    """The same config under TRITON_INTERPRET=1: the store segfaults the timing worker, which is restarted."""
    from costmodel.hardware import INTERPRETER

    summary, restarts, rows = _collect(tmp_path, INTERPRETER, "cpu")
    fault = rows.pop((200, dataset.canonical_json(FAULT)))
    assert fault["status"] == "runtime_error" and fault["error"] == "worker died"
    assert restarts == 1
    assert len(rows) == 5 and all(r["status"] == "ok" for r in rows.values()), rows
    assert summary["counts"]["ok"] == 5


@pytest.mark.gpu
def test_a_kernel_that_never_ends_is_a_timeout_and_the_run_does_not_stall(tmp_path):
    """A config whose kernel spins for good (FAULT=8). Its worker is killed after the timeout; either the killed
    process goes and the run goes on (the spin a timeout, the rest ok), or it stays (its kernel still on the GPU) and
    the run stops at once as "gpu_stuck" with the configs measured before it and the timeout written. Which of the
    two the H200's driver does is what this test shows (session 9 saw a collect stall for good on such a kernel)."""
    import time

    from costmodel import hardware
    from costmodel.benchmark import GpuStuck

    hw, spin = hardware.current(), {"BLOCK": 16, "FAULT": 8}
    plan = [GroupPlan(FAULTY, {"N": 200}, "float32", (OK16, spin, OK32), False),
            GroupPlan(FAULTY, {"N": 333}, "float32", (OK16,), False)]
    t0 = time.perf_counter()
    with IsolatedBenchmarker(hw, compile_workers=2, timeout_s=5) as bench:
        try:
            summary = run_plan(plan, tmp_path, bench, hw, run_id="spin")
        except GpuStuck:
            summary = None
    assert time.perf_counter() - t0 < 120
    rows = {(json.loads(r["problem_json"])["N"], r["config_json"]): r["status"] for r in dataset.read(tmp_path).to_pylist()}
    assert rows[(200, dataset.canonical_json(OK16))] == "ok" and rows[(200, dataset.canonical_json(spin))] == "timeout"
    if summary is None:
        print("the killed worker stayed: run stopped as gpu_stuck")
        assert json.loads((tmp_path / "_manifests" / "spin.json").read_text())["state"] == "gpu_stuck"
    else:
        print("the killed worker went: run went on")
        assert summary["state"] == "complete" and summary["counts"] == {**summary["counts"], "ok": 3, "timeout": 1}


@pytest.mark.gpu
def test_collect_no_eager_records_gpu_time_only(cli, tmp_path):
    """`collect --no-eager` (faster whole-space sweeps): every row has its GPU time and no eager time; by default
    both."""
    for flag, has_eager in (("--eager", True), ("--no-eager", False)):
        out = tmp_path / flag
        code, _, err = cli("collect", "--kernel", "rmsnorm", "--groups", "1", "--configs-per-group", "3",
                           "--exhaustive-share", "0", "--seed", "3", flag, "--out", str(out), "--json")
        assert code == 0, err
        rows = [r for r in dataset.read(out).to_pylist() if r["status"] == "ok"]
        assert rows and all(r["latency_ms"] > 0 for r in rows)
        assert all((r["eager_ms"] is not None) == has_eager for r in rows), rows
