"""Helion rows in the dataset (issue 18): the helion_version column, a Helion group's identity, and
`collect --kernel helion:<name>` end to end under HELION_INTERPRET=1 (skipped where helion does not import)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from costmodel import dataset
from costmodel.benchmark import HELION_POOL
from costmodel.hardware import KNOWN
from costmodel.helion import available, families, helion_version

ROOT = Path(__file__).resolve().parents[1]


def test_shards_before_the_column_read_with_null_helion_version(data_root):
    shards = sorted(data_root.glob("gpu=*/kernel=*/part-*.parquet"))
    if not shards:
        pytest.skip(f"no shards under {data_root}")
    assert "helion_version" not in pq.read_schema(shards[0]).names  # written before the column existed
    t = dataset.read(data_root, ["kernel", "helion_version", "triton_version"],
                     filter=ds.field("kernel") == shards[0].parent.name.split("=", 1)[1])
    assert t.num_rows > 0 and t["helion_version"].null_count == t.num_rows
    assert t["triton_version"].null_count == 0


def test_triton_rows_written_now_carry_no_helion_version(data_root, tmp_path):
    """Real rows of a Triton group, written again (as the GPU's, to a scratch dataset) through measurement_rows:
    helion_version stays null."""
    from costmodel.benchmark import Measurement

    shards = sorted(data_root.glob("gpu=*/kernel=*/part-*.parquet"))
    if not shards:
        pytest.skip(f"no shards under {data_root}")
    r = pq.read_table(shards[0]).slice(0, 3).to_pylist()
    family, gpu = (d.name.split("=", 1)[1] for d in (shards[0].parent, shards[0].parent.parent))
    hw = dataset.hw_from_row({**r[0], "gpu": gpu})
    ms = [Measurement(json.loads(x["config_json"]), x["status"], latency_ms=x["latency_ms"]) for x in r]
    software = {k: r[0][k] for k in ("triton_version", "torch_version", "cuda_version", "driver_version")}
    rows = dataset.measurement_rows(hw, software, "run", family, r[0]["source_hash"],
                                    r[0]["group_id"], False, json.loads(r[0]["problem_json"]), r[0]["dtype"], ms)
    dataset.write_shard(tmp_path, gpu, family, "run", rows)
    t = dataset.read(tmp_path, ["helion_version", "triton_version"])
    assert t.num_rows == len(r) and t["helion_version"].null_count == t.num_rows
    assert set(t["triton_version"].to_pylist()) == {software["triton_version"]}


def test_helion_group_identity_covers_source_and_version():
    soft, rms = families.get("softmax"), families.get("helion:rms_norm")
    assert soft.kernel_hash("1.4.0") == soft.kernel_hash("1.4.0")
    assert soft.kernel_hash("1.4.0") != soft.kernel_hash("1.5.1")  # one config compiles differently under each
    assert soft.kernel_hash("1.5.1") != rms.kernel_hash("1.5.1")
    assert soft.kernel_hash() == soft.kernel_hash(helion_version() or "none")
    # the group id a collector gives a Helion group is made of it
    (gid, khash), = dataset.group_candidates("interpreter", soft.kernel, {"M": 3, "N": 8}, "float16")
    assert khash == soft.kernel_hash() and gid == dataset.group_id("interpreter", soft.kernel, khash,
                                                                    {"M": 3, "N": 8}, "float16")


def test_unknown_helion_kernel_is_bad_input(cli, tmp_path):
    code, out, err = cli("collect", "--kernel", "helion:nope", "--out", str(tmp_path / "d"))
    assert code == 2 and "unknown Helion kernel 'helion:nope'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()


SOFTMAX_PLAN = ("--kernel", "helion:softmax", "--groups", "2", "--configs-per-group", "3", "--where", "M<=64",
                "--where", "N<=4096")


def _collect(out: Path, *args: str, plan: tuple[str, ...] = SOFTMAX_PLAN) -> dict:
    # Helion refuses HELION_INTERPRET beside TRITON_INTERPRET (which the suite sets): a process of its own
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    site = str(Path(__import__("helion").__file__).resolve().parents[1])
    env.update(HELION_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), site]))
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "collect", *plan, "--out", str(out), "--json", *args],
                       env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.skipif(not available(), reason="helion is not installed")
def test_collect_helion_kernel_under_interpreter(tmp_path):
    out = tmp_path / "data"
    summary = _collect(out)
    assert summary["gpu"] == "interpreter" and summary["counts"]["ok"] == 6
    t = dataset.read(out)
    assert t.num_rows == 6
    assert set(t["gpu"].to_pylist()) == {"interpreter"} and set(t["kernel"].to_pylist()) == {"helion:softmax"}
    assert set(t["helion_version"].to_pylist()) == {helion_version()}
    assert set(t["source_hash"].to_pylist()) == {families.get("softmax").kernel_hash()}
    assert t["latency_ms"].null_count == 0 and set(t["status"].to_pylist()) == {"ok"}
    by_group: dict[str, list] = {}
    for r in t.to_pylist():
        by_group.setdefault(r["group_id"], []).append(r)
        assert 0 <= r["rel_err"] <= families.get("softmax").tolerance[r["dtype"]]  # checked before it was timed
        assert r["group_id"] == dataset.group_id("interpreter", "helion:softmax", r["source_hash"],
                                                 json.loads(r["problem_json"]), r["dtype"])
    assert len(by_group) == 2 and all(len(rows) == 3 for rows in by_group.values())
    for rows in by_group.values():  # three distinct configs of the kernel's spec per group, block sizes among them
        assert len({r["config_json"] for r in rows}) == 3
        assert all("block_sizes" in json.loads(r["config_json"]) for r in rows)
    # the same plan again measures nothing: every (group, config) is already there
    again = _collect(out)
    assert again["measured"] == 0 and again["skipped_already_measured"] == 6


NEW = ("geglu", "cross_entropy", "add_rms_norm")  # the fused kernels added after swiglu, none with a Triton twin


@pytest.mark.skipif(not available(), reason="helion is not installed")
def test_collect_plans_and_measures_the_fused_kernels_under_interpreter(tmp_path):
    """`collect --kernel helion:<name>` for each kernel without a Triton twin: a group planned from its own problems
    (cross_entropy's int64 targets among its inputs), each config checked against its own reference (both outputs
    of add_rms_norm) and recorded."""
    out = tmp_path / "data"
    summary = _collect(out, plan=("--kernel", ",".join(f"helion:{n}" for n in NEW), "--groups", "3",
                                  "--configs-per-group", "2", "--where", "M<=16"))
    assert summary["counts"]["ok"] == 6 and summary["groups"] == 3
    t = dataset.read(out)
    assert sorted(set(t["kernel"].to_pylist())) == sorted(f"helion:{n}" for n in NEW) and t.num_rows == 6
    for r in t.to_pylist():
        fam = families.get(r["kernel"])
        problem = json.loads(r["problem_json"])
        assert r["source_hash"] == fam.kernel_hash() and set(problem) == set(fam.dims) and problem["M"] <= 16
        assert r["status"] == "ok" and 0 <= r["rel_err"] <= fam.tolerance[r["dtype"]]


@pytest.mark.parametrize("name", NEW)
def test_a_kernel_without_a_twin_states_its_problems_inputs_and_reference(name):
    """Its own problems (seeded, realistic: LLM widths, decode and odd sizes, within the element caps), inputs of
    its dtypes and a float32 reference, against the formula written out here."""
    import numpy as np
    import torch

    from costmodel.benchmarks import is_named

    fam = families.get(name)
    assert fam.twin is None and fam.dims == ("M", "N") and fam.dtypes == ("float16", "bfloat16")
    problems = fam.problems(np.random.default_rng(0), 300)
    assert problems == fam.problems(np.random.default_rng(0), 300)
    m, n = (np.array([p[d] for p in problems]) for d in ("M", "N"))
    assert (m >= 1).all() and (m % 16 != 0).any() and (n % 16 != 0).any() and (m <= 16).any()
    assert not any(is_named(fam.kernel, p) for p in problems)
    if name == "cross_entropy":  # LLM vocabularies, within int32 indexing
        assert set(n) == {32000, 50257, 128256, 151936} and (m * n < 2**31).all() and m.max() == 16384
    else:
        assert (m * n <= 2**28).all() and len(set(n)) > 8
    problem = {"M": 5, "N": 300}
    inputs = fam.make_inputs(problem, "bfloat16", "cpu", seed=1)
    ref = fam.reference(problem, inputs)
    if name == "cross_entropy":
        logits, target = inputs
        assert logits.dtype == torch.bfloat16 and target.dtype == torch.int64 and target.shape == (5,)
        assert 0 <= target.min() and target.max() < 300 and len(set(target.tolist())) > 1
        x = logits.float()
        want = torch.logsumexp(x, 1) - x[torch.arange(5), target]
        torch.testing.assert_close(ref, want)
    elif name == "geglu":
        g, u = (t.float() for t in inputs)
        want = 0.5 * g * (1 + torch.tanh((2 / np.pi) ** 0.5 * (g + 0.044715 * g**3))) * u
        torch.testing.assert_close(ref, want)
    else:
        x, res, w = (t.float() for t in inputs)
        assert [t.shape for t in inputs] == [(5, 300), (5, 300), (300,)]
        h = x + res
        normed, residual = ref
        torch.testing.assert_close(residual, h)
        torch.testing.assert_close(normed, h / (h.pow(2).mean(1, keepdim=True) + 1e-6).sqrt() * w)
    assert fam.make_inputs(problem, "bfloat16", "cpu", seed=1)[0].equal(inputs[0])  # seeded


def test_relative_error_of_several_outputs_is_the_largest():
    import math

    import torch

    from costmodel.benchmark import relative_error

    ref = (torch.ones(4), torch.full((3,), 2.0))
    assert relative_error(torch.full((4,), 1.5), ref[0]) == pytest.approx(0.5)
    assert relative_error((torch.ones(4), torch.full((3,), 2.2)), ref) == pytest.approx(0.1)
    assert relative_error((torch.full((4,), 1.3), torch.full((3,), 2.2)), ref) == pytest.approx(0.3)
    assert math.isnan(relative_error((torch.full((4,), float("nan")), torch.full((3,), 2.0)), ref))
    with pytest.raises(ValueError):  # an output short: not a match
        relative_error((torch.ones(4),), ref)


@pytest.mark.skipif(not available(), reason="helion is not installed")
def test_helion_configs_compile_by_helion_under_triton_interpreter():
    """The GPU's path on a CPU: each config compiled by Helion's compile_config (the suite runs under
    TRITON_INTERPRET=1, so Triton's interpreter runs the generated code), checked, timed, in the isolated worker."""
    from costmodel.benchmark import IsolatedBenchmarker
    from costmodel.hardware import INTERPRETER

    assert os.environ.get("TRITON_INTERPRET") == "1" and "HELION_INTERPRET" not in os.environ
    fam, problem = families.get("swiglu"), {"M": 37, "N": 96}
    configs = families.candidates(fam.bind(problem, "float16")[0], 3, seed=0)
    with IsolatedBenchmarker(INTERPRETER, device="cpu", timeout_s=120) as bench:
        ms = bench.measure(fam.kernel, problem, "float16", configs)
    assert [m.status for m in ms] == ["ok"] * 3, [m.error for m in ms]
    assert [m.config for m in ms] == configs
    assert all(0 <= m.rel_err <= fam.tolerance["float16"] and m.latency_ms > 0 and m.compile_s > 0 for m in ms)


# --- Helion configs compiled in the benchmarker's compile pool ---------------------------------------------------

def _pool_check(mode: str, cache: Path, family: str, n: int, *more: str) -> list[dict]:
    """tests/helion_scripts/pool_check.py in a process of its own (outside TRITON_INTERPRET, which the suite sets:
    the sm_90 compile needs Triton's CUDA backend)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(Path(__import__("helion").__file__).resolve().parents[1])])
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "helion_scripts" / "pool_check.py"), mode, str(cache),
                        family, str(n), *more], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])["results"]


@pytest.mark.skipif(not available(), reason="helion is not installed")
@pytest.mark.parametrize("family", ["matmul", "softmax", "cross_entropy"])  # the last with int64 targets
def test_helion_configs_compile_in_the_pool_and_the_worker_loads_them(tmp_path, family):
    """Each config's launch captured by the benchmarker (its Helion thread) and compiled for sm_90 in another
    process; then a fresh process on the timing worker's path (Helion's compile_config and first call) adds
    nothing to Triton's cache for those configs: it found each binary there. A config no pool compiled adds one,
    so a missed key would show. (Two configs may make one binary: softmax's do.) The limit is raised past the
    pool's 30 s: on CI's two cores softmax's first compile took 41.6 s (stop 39); the limit has its own test."""
    cache, n = tmp_path / "triton", 4
    pooled = _pool_check("pool", cache, family, n, "300")
    assert [r["status"] for r in pooled] == ["ok"] * n, pooled
    assert all(r["compile_s"] > 0 and r["codegen_s"] > 0 for r in pooled)
    worker = _pool_check("worker", cache, family, n)
    assert [r["new_entries"] for r in worker] == [0] * n + [1], worker


@pytest.mark.skipif(not available(), reason="helion is not installed")
def test_a_helion_compile_past_its_limit_is_a_timeout_and_the_pool_goes_on(tmp_path):
    """Helion's random population holds configs whose Triton compile takes minutes (session 11: 82 s for sm_90 on
    this machine, one of five that hung the H200's timing worker): in the pool each compile runs in a child that is
    killed at the limit, so the config's outcome is a timeout and the compile process takes the next config. With
    a limit below any compile, every config is such a timeout, none is lost, nothing reaches Triton's cache."""
    results = _pool_check("pool", tmp_path / "triton", "softmax", 3, "0.05")
    assert [r["status"] for r in results] == ["timeout"] * 3, results
    assert all("did not finish in 0.05 s" in r["error"] and 0.05 <= r["compile_s"] < 5 for r in results), results
    assert not any((tmp_path / "triton").rglob("*.cubin"))


def test_within_gives_the_outcome_a_timeout_or_the_death_of_its_child():
    from costmodel.benchmark import _within

    assert _within(30, lambda: {"status": "ok", "compile_s": 0.1}) == {"status": "ok", "compile_s": 0.1}
    t0 = time.perf_counter()
    out = _within(0.3, lambda: time.sleep(60))
    assert out["status"] == "timeout" and time.perf_counter() - t0 < 10 and out["compile_s"] >= 0.3
    out = _within(30, lambda: os._exit(7))
    assert out["status"] == "compile_error" and "exit code 7" in out["error"]


def test_a_launch_description_rebuilds_a_tensor_descriptor_over_a_meta_tensor():
    """Helion passes Triton TensorDescriptors to the kernel under host tensor-descriptor indexing: described by
    their fields, they pickle, and come back over a meta base of the same shape, stride and dtype."""
    import pickle

    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    from costmodel.helion import launch

    base = torch.empty(64, 48, dtype=torch.float16)[:, :32]
    args = (TensorDescriptor.from_tensor(base, [16, 16]), base, 7, None)
    desc = pickle.loads(pickle.dumps(launch.describe(args)))
    td, t, seven, none = launch.rebuild(desc)
    assert isinstance(td, TensorDescriptor) and td.base.device.type == "meta"
    assert (td.base.shape, td.base.stride(), td.base.dtype) == (base.shape, (48, 1), torch.float16)
    assert list(td.shape) == [64, 32] and list(td.strides) == [48, 1] and td.block_shape == [16, 16]
    assert t.device.type == "meta" and t.stride() == (48, 1) and (seven, none) == (7, None)
    with pytest.raises(ValueError, match="aligned"):  # a meta tensor would claim an alignment the real one lacks
        launch.describe(torch.empty(9, dtype=torch.float16)[1:])


@pytest.mark.gpu
@pytest.mark.skipif(not available(), reason="helion is not installed")
@pytest.mark.skipif(os.environ.get(HELION_POOL) == "0", reason=f"{HELION_POOL}=0 leaves Helion compiles to the worker")
def test_helion_group_compiles_in_the_pool_on_the_gpu(tmp_path, monkeypatch):
    """A helion:softmax group through the IsolatedBenchmarker: every config ok or a compile past the pool's limit,
    each compiled by the pool (its compile_s the pool's plus Helion's code generation in the parent), so the timing
    worker's first call of each loaded a binary (Triton's compile of one took about 2 s in the worker on the H200,
    the worker's whole hand-over of a config here well under a second). A fresh Triton home and no
    TRITON_CACHE_DIR: Helion would point the worker's Triton cache at its own folder, away from the pool's, but
    for the benchmarker's pin."""
    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker

    monkeypatch.setenv("TRITON_CACHE_DIR", "")  # recorded, so that the benchmarker's pin is undone after the test
    monkeypatch.delenv("TRITON_CACHE_DIR")
    monkeypatch.setenv("TRITON_HOME", str(tmp_path))
    fam, problem = families.get("softmax"), {"M": 1000, "N": 3000}
    configs = families.candidates(fam.bind(problem, "float16", "cuda")[0], 17, seed=0)
    with IsolatedBenchmarker(hardware.current(), device="cuda") as bench:
        ms = bench.measure(fam.kernel, problem, "float16", configs[:1])  # the worker's set-up: helion's import
        timed_s = bench.timed_s
        ms += bench.measure(fam.kernel, problem, "float16", configs[1:])
        per_config_s = (bench.timed_s - timed_s) / len(configs[1:])
        pooled = [bench.pool.result(bench.pool.submit_helion(fam.kernel, problem, "float16", c)) for c in configs]
    # a config whose compile outlasts the pool's limit is a timeout from the pool, never tried by the worker
    assert all(r is not None and r["status"] in ("ok", "timeout") for r in pooled), pooled
    assert [m.status for m in ms] == [r["status"] for r in pooled], [m.error for m in ms]
    assert all("did not finish" in m.error for m in ms if m.status == "timeout")
    assert sum(m.status == "ok" for m in ms) >= len(configs) // 2, [m.error for m in ms]
    assert [m.compile_s for m in ms] == [r["compile_s"] + r["codegen_s"] for r in pooled]
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / ".triton" / "cache")
    timed = sum(m.status == "ok" for m in ms[1:])
    assert per_config_s * len(configs[1:]) / timed < 0.5, per_config_s


@pytest.mark.gpu
@pytest.mark.skipif(not available(), reason="helion is not installed")
@pytest.mark.parametrize("name", NEW)
def test_fused_kernel_group_on_the_gpu(name):
    """A group of each kernel without a Triton twin through the IsolatedBenchmarker on the GPU, a realistic problem
    from its own generator: Helion's generated code (libdevice's tanh, exp, rsqrt, which Triton's CPU interpreter
    cannot run) checked against the family's reference; most configs ok, the rest a compile past its limit."""
    import numpy as np

    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker

    fam = families.get(name)
    problem = fam.problems(np.random.default_rng(18), 1)[0]
    configs = families.candidates(fam.bind(problem, "bfloat16", "cuda")[0], 12, seed=0)
    with IsolatedBenchmarker(hardware.current(), device="cuda") as bench:
        ms = bench.measure(fam.kernel, problem, "bfloat16", configs)
    assert all(m.status in ("ok", "timeout") for m in ms), [(m.status, m.error) for m in ms]
    assert sum(m.status == "ok" for m in ms) >= len(ms) // 2 and ms[0].status == "ok"  # the default among them
    assert all(m.rel_err <= fam.tolerance["bfloat16"] and m.latency_ms > 0 for m in ms if m.status == "ok")


def test_a_helion_launch_that_cannot_be_captured_is_left_to_the_timing_worker(monkeypatch):
    """Where Helion cannot generate a config's code or its host function fails before launching, the pool's
    answer is None (no status): the timing worker compiles the config itself and records what happens there."""
    from costmodel import benchmark
    from costmodel.hardware import KNOWN

    def fails(*args):
        raise RuntimeError("no code for this config")

    launches = benchmark._HelionLaunches("cpu", 0)
    monkeypatch.setattr(launches, "capture", fails)
    started = []
    fut = launches.submit("helion:softmax", {"M": 3, "N": 8}, "float16", {}, lambda: started.append(1),
                          KNOWN["nvidia-h200"])
    try:
        assert fut.result(timeout=30) is None and not started
    finally:
        launches.close()


def test_a_problem_helion_cannot_compile_skips_its_group_and_the_plan_goes_on(monkeypatch, capsys):
    """Helion's compiler may refuse a kernel for a problem (1.4.0 on the H200: ShapeMismatch tracing attention):
    that group is left out with one line on stderr and the others are planned; a kernel refused for every one of
    its first draws (``HELION_REFUSALS``) is bad input when it is the plan's only kernel, one clear error rather
    than a plan that silently measures nothing, and is left out, with one line, beside other kernels."""
    import numpy as np

    from collect import plan as planning
    from costmodel.errors import CostModelError

    fam = families.get("softmax")
    refused = {"n": 0}

    def bind(self, problem, dtype, device="cpu", seed=0):
        refused["n"] += 1
        if refused["n"] % 2:
            raise RuntimeError("Shape mismatch between [u1, 64] and [u1, 64].\nWhile processing: ...")
        return object(), ()

    monkeypatch.setattr(type(fam), "bind", bind)
    monkeypatch.setattr(families, "candidates", lambda bound, n, seed, seed_configs=(): [{"seed": seed}])
    plan = planning.helion_plan("helion:softmax", 3, 0, 4, None, np.random.default_rng(0), 0, (), "cpu")
    assert len(plan) == 3 and refused["n"] == 6
    err = capsys.readouterr().err
    assert err.count("group skipped") == 3 and "ShapeMismatch" not in err and "RuntimeError: Shape mismatch" in err

    monkeypatch.setattr(type(fam), "bind", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no")))
    with pytest.raises(CostModelError, match=f"could not compile the kernel for the first {planning.HELION_REFUSALS} "):
        planning.helion_plan("helion:softmax", 3, 0, 4, None, np.random.default_rng(0), 0, (), "cpu")
    with pytest.raises(CostModelError, match="could not compile"):  # the plan's only kernel
        planning.make_plan(["helion:softmax"], 2, 4, None, 0, KNOWN["nvidia-h200"], 0, device="cpu")
    capsys.readouterr()
    plan = planning.make_plan(["helion:softmax", "rmsnorm"], 4, 4, None, 0, KNOWN["nvidia-h200"], 0, device="cpu")
    assert {g.family for g in plan} == {"rmsnorm"} and len(plan) == 2
    assert "its groups are left out" in capsys.readouterr().err


def test_a_sampled_group_of_a_kernel_with_a_twin_holds_a_share_of_the_twins_space(monkeypatch):
    """The tuner times half its top k from the twin's space read as the kernel's configs, so a sampled group of a
    kernel with a twin holds ``HELION_TWIN_SHARE`` of its configs from that space (beside the default and the
    random population); an exhaustive group stays the random population alone, and without a hardware record
    (nothing to enumerate the twin's space for) nothing changes."""
    import numpy as np

    from collect import plan as planning
    from costmodel.helion import configs

    hw = KNOWN["nvidia-h200"]
    monkeypatch.setattr(planning, "HELION_SWEEP", 40)

    def groups(**kw):
        return planning.helion_plan("helion:softmax", 2, 1, 40, ["float16"], np.random.default_rng(3), 5, (), "cpu",
                                    **kw)

    sweep, sampled = groups(hw=hw)
    assert sweep.exhaustive and not sampled.exhaustive
    bound, _ = families.get("softmax").bind(sampled.problem, "float16")
    twins = {configs.config_json(c) for c in families.twin_candidates(bound, "helion:softmax", sampled.problem,
                                                                         "float16", hw)}
    held = [configs.config_json(c) for c in sampled.configs]
    assert len(held) == 40 and len(set(held)) == 40
    share = min(len(twins), int(40 * planning.HELION_TWIN_SHARE))
    assert share > 0 and len(set(held) & twins) >= share
    plain_sweep, plain = groups()
    assert [configs.config_json(c) for c in plain_sweep.configs] == [configs.config_json(c) for c in sweep.configs]
    assert plain.problem == sampled.problem
    assert len(set(configs.config_json(c) for c in plain.configs) & twins) < share
