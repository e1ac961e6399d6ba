"""Every file under scripts/ is listed in scripts/README.md and starts: an entry point answers --help as
`python scripts/X.py --help` would (its own folder first on sys.path, so imports between scripts resolve), a module
the scripts import imports, a shell script parses. All Python scripts in one interpreter (torch imported once),
each script's own modules forgotten before the next starts."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
PY = sorted(p.relative_to(SCRIPTS).as_posix() for p in SCRIPTS.rglob("*.py") if "results" not in p.parts)
SH = sorted(p.relative_to(SCRIPTS).as_posix() for p in SCRIPTS.rglob("*.sh"))
# imported only on the GPU host, where they are carried as wheels (scripts/device_job.sh)
GPU_HOST_ONLY = {"helion"}
# the Helion tuner's recipe in the races before session 57 (walk_graph off) and before session 44 (restarts off too)
BEFORE_S57 = {"walk_graph": 0}
BEFORE_S44 = {"restarts": 0, **BEFORE_S57}

_DRIVER = r"""
import contextlib, io, json, runpy, sys, traceback
from pathlib import Path

results, scripts = {}, sys.argv[1]
for path in sys.argv[2:]:
    entry = "__name__ == \"__main__\"" in Path(path).read_text()
    sys.argv = [path, "--help"] if entry else [path]
    sys.path.insert(0, str(Path(path).parent))  # what `python path` puts first
    out, code, error, missing = io.StringIO(), 0, None, None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(path, run_name="__main__" if entry else Path(path).stem)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except ModuleNotFoundError as e:
        missing, error = e.name, traceback.format_exc(limit=-3)
    except BaseException:  # noqa: BLE001 - reported per script
        error = traceback.format_exc(limit=-3)
    finally:
        sys.path.pop(0)
        for name, mod in list(sys.modules.items()):  # a later script must find its own imports, not these
            if str(getattr(mod, "__file__", None) or "").startswith(scripts):
                del sys.modules[name]
    results[path] = {"entry": entry, "code": code, "out": out.getvalue()[-4000:], "error": error, "missing": missing}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def started():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(SCRIPTS), *(str(SCRIPTS / p) for p in PY)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {Path(k).relative_to(SCRIPTS).as_posix(): v for k, v in json.loads(proc.stdout.splitlines()[-1]).items()}


@pytest.mark.parametrize("script", PY)
def test_python_script_starts(started, script):
    r = started[script]
    if r["missing"] in GPU_HOST_ONLY:
        pytest.skip(f"{script} needs {r['missing']} (carried to the GPU host)")
    assert r["error"] is None, r["error"]
    if r["entry"]:
        assert r["code"] == 0 and re.search(r"usage:", r["out"], re.I), r["out"]


@pytest.mark.parametrize("script", SH)
def test_shell_script_parses(script):
    proc = subprocess.run(["bash", "-n", str(SCRIPTS / script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_readme_lists_every_script():
    listed = set(re.findall(r"^- `([^`]+)`", (SCRIPTS / "README.md").read_text(), re.M))
    assert listed == set(PY) | set(SH)


_STUB_PYTHON = """#!/bin/bash
echo "python3 $*" >> "$OUT/calls"
printf '%s\\n' "$@" >> "$OUT/args"
case "$*" in
  *"-m pytest"*) echo "1 failed, 9 passed"; exit 1 ;;
  *"--out .bg/rows.jsonl"*) echo '{"row": 1}' > .bg/rows.jsonl ;;
  *) echo '{"row": 1}' ;;
esac
"""


def _device_job(tmp_path, steps: str, out: str = "out", **env_vars: str) -> tuple[subprocess.CompletedProcess, Path]:
    """device_job.sh run with ``steps`` on stand-ins for the GPU host's python3 and nvidia-smi (``_STUB_PYTHON``),
    ``env_vars`` set and TEST_ARGS unset, in ``tmp_path`` (a later call in the same one is a later call on the same
    machine): (the process, its $OUT: ``tmp_path / out``)."""
    bin_, out = tmp_path / "bin", tmp_path / out
    for d in (bin_, out, tmp_path / ".whl"):
        d.mkdir(exist_ok=True)
    (tmp_path / ".whl" / "stub.whl").touch()
    (bin_ / "python3").write_text(_STUB_PYTHON)
    (bin_ / "nvidia-smi").write_text("#!/bin/bash\necho 'name'\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "OUT": str(out), **env_vars}
    env.pop("TEST_ARGS", None)
    proc = subprocess.run(["bash", str(SCRIPTS / "device_job.sh"), steps], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    return proc, out


def test_device_job_fails_when_a_step_fails_and_runs_the_whole_gpu_suite(tmp_path):
    """Pytest failing makes the job fail, the later steps still run, and the tests step runs every gpu-marked test
    under tests/, unfiltered."""
    proc, out = _device_job(tmp_path, "tests tune")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "tests FAILED (exit 1)" in proc.stdout and "failed: tests" in proc.stdout
    calls = (out / "calls").read_text().splitlines()
    pytest_call = next(c for c in calls if "-m pytest" in c)
    assert pytest_call.endswith(" tests/") and " -m gpu " in pytest_call and " -k" not in pytest_call
    assert any("scripts/bench_tune.py" in c for c in calls)  # the step after the failed one ran


def test_device_job_passes_a_test_k_expression_as_one_argument(tmp_path):
    """TEST_K="a or b" reaches pytest as one -k argument (TEST_ARGS is split on spaces)."""
    _, out = _device_job(tmp_path, "tests", TEST_K="autotuner_fn or latencies")
    args = (out / "args").read_text().splitlines()
    at = args.index("-k")
    assert args[at + 1] == "autotuner_fn or latencies" and args[at + 2] == "tests/"


def test_device_job_retimes_raced_rows_then_summarises_them(tmp_path):
    """The helion_retime step: bench_helion.py --retime with HRETIME_ARGS into its own rows file, then their figures."""
    proc, out = _device_job(tmp_path, "helion_retime", HRETIME_ARGS="--retime rows.jsonl --full 2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [c for c in (out / "calls").read_text().splitlines() if "bench_helion.py" in c]
    rows = f"{out}/bench_helion_retimed.jsonl"
    assert calls == [f"python3 scripts/bench_helion.py --out {rows} --retime rows.jsonl --full 2",
                     f"python3 scripts/bench_helion.py --summarise {rows}"]


def test_device_job_retimes_each_line_of_a_plan_into_its_own_rows(tmp_path):
    """HRETIME_PLAN: one bench_helion.py run a line (SECONDS ARGS...; blank and # lines skipped), each into
    bench_helion_retimed.<line>.jsonl and summarised, in the plan's order."""
    (tmp_path / "plan.txt").write_text("# recipes on the losing problems\n120 --retime r.jsonl --retune --only 8\n\n"
                                       "90 --retime r.jsonl --retune --only 8 --recipe radius=2\n")
    proc, out = _device_job(tmp_path, "helion_retime", HRETIME_PLAN="plan.txt", DEADLINE="400")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [c for c in (out / "calls").read_text().splitlines() if "bench_helion.py" in c]
    one, two = f"{out}/bench_helion_retimed.1.jsonl", f"{out}/bench_helion_retimed.2.jsonl"
    assert calls == [f"python3 scripts/bench_helion.py --out {one} --retime r.jsonl --retune --only 8",
                     f"python3 scripts/bench_helion.py --summarise {one}",
                     f"python3 scripts/bench_helion.py --out {two} --retime r.jsonl --retune --only 8 --recipe radius=2",
                     f"python3 scripts/bench_helion.py --summarise {two}"]


def test_device_job_leaves_a_long_race_running_once_and_a_later_call_waits_for_it(tmp_path):
    """helion_bg starts bench_helion.py with HBG_ARGS once, its rows under .bg/, and brings them to $OUT with their
    figures; a later call on the same machine finds it (here ended) and starts no second one, unless its arguments
    differ."""
    args = "--retime rows.jsonl --only 3 --full 1 --timeout 1500"
    proc, out = _device_job(tmp_path, "helion_bg", HBG_ARGS=args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [c for c in (out / "calls").read_text().splitlines() if "bench_helion.py" in c]
    assert calls == [f"python3 scripts/bench_helion.py --out .bg/rows.jsonl {args}",
                     "python3 scripts/bench_helion.py --summarise .bg/rows.jsonl"]
    assert (out / "bench_helion_bg.jsonl").read_text() == '{"row": 1}\n'
    proc, out = _device_job(tmp_path, "helion_bg", out="out2", HBG_ARGS=args)
    assert proc.returncode == 0 and "found from an earlier call" in proc.stdout, proc.stdout + proc.stderr
    assert [c for c in (out / "calls").read_text().splitlines() if "bench_helion.py" in c] == [
        "python3 scripts/bench_helion.py --summarise .bg/rows.jsonl"]
    assert (out / "bench_helion_bg.jsonl").read_text() == '{"row": 1}\n'
    proc, out = _device_job(tmp_path, "helion_bg", out="out3", HBG_ARGS="--retime rows.jsonl --only 5 --full 1")
    assert proc.returncode == 0 and "started:" in proc.stdout, proc.stdout + proc.stderr  # other arguments: anew
    assert [c for c in (out / "calls").read_text().splitlines() if "bench_helion.py" in c][0] == (
        "python3 scripts/bench_helion.py --out .bg/rows.jsonl --retime rows.jsonl --only 5 --full 1")


def test_device_job_probes_whether_a_process_outlives_its_call(tmp_path):
    """bg_probe: the first call leaves a process running in its own session; a later call finds it running, and
    once it is gone says so and fails."""
    proc, out = _device_job(tmp_path, "bg_probe", BG_PROBE_S="60")
    assert proc.returncode == 0 and "started pid" in proc.stdout, proc.stdout + proc.stderr
    pid = int((tmp_path / ".bg-probe").read_text())
    try:
        proc, out = _device_job(tmp_path, "bg_probe", out="out2")
        assert proc.returncode == 0 and "still runs" in proc.stdout, proc.stdout + proc.stderr
    finally:
        os.kill(pid, 9)
    for _ in range(100):  # until the killed sleeper is reaped (it is no child of this process)
        if subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode:
            break
        time.sleep(0.1)
    proc, out = _device_job(tmp_path, "bg_probe", out="out3")
    assert proc.returncode == 1 and "is gone" in proc.stdout, proc.stdout + proc.stderr


# --- bench_helion.py (issue 18's race): its problem choice and figures, on the CPU ---------------------------

def _script_module(name: str):
    """scripts/<name>.py imported as a module, scripts/ first on sys.path while it loads (its `import benchlib`)."""
    import importlib.util

    sys.path.insert(0, str(SCRIPTS))
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(SCRIPTS))


@pytest.fixture(scope="module")
def bench_helion():
    return _script_module("bench_helion")


def _recorded_rows(columns):
    from costmodel import dataset

    return dataset.read(ROOT / "data", columns).to_pylist()


def test_helion_race_with_a_model_ranks_with_it_on_a_card_that_has_none(bench_helion, monkeypatch):
    """``--model nvidia-h200``: the race's tuner ranks with the H200's model on a card that has none (an H100: sessions
    53-56 were offered H100s), so that a recipe can be raced there; the shipped tuner falls back on that card."""
    from costmodel.helion import families
    from tuner import helion as htune

    monkeypatch.setattr(htune, "_gpu_of", lambda args: "nvidia-h100-80gb-hbm3")
    fam = families.get("softmax")
    problem = {"M": 64, "N": 2560}
    args = fam.args(problem, fam.make_inputs(problem, "float16", "cpu"))
    bound = fam.with_settings().bind(args)
    tuner = bench_helion.costmodel_tuner("nvidia-h200", {"walk_graph": 1})
    tuner.helion_version = "1.4.0"  # the model's; the CPU's Helion is newer
    cm, why = tuner.fit(bound, args)
    assert why is None and cm.gpu == "nvidia-h200" and tuner.walk_graph == 1
    shipped = bench_helion.costmodel_tuner(None)
    shipped.helion_version = "1.4.0"
    assert "no usable Helion cost model for GPU nvidia-h100-80gb-hbm3" in shipped.fit(bound, args)[1]


def test_helion_race_problems_are_the_named_three_per_kernel_absent_from_the_data(bench_helion):
    """The race's problems are costmodel/benchmarks.py's HELION_RACE, three a kernel in KERNELS' order, named under
    the twin's name (so that neither kernel's plans draw them) and absent from the data under either name; a row of
    one under either name stops the race with a clear error."""
    import numpy as np

    from costmodel import benchmarks
    from costmodel.dataset import canonical_json
    from costmodel.errors import CostModelError
    from costmodel.helion import families

    seen = {(r["kernel"], r["problem_json"]) for r in _recorded_rows(["kernel", "problem_json"])}
    chosen = bench_helion.race_problems(bench_helion.recorded(ROOT / "data"))
    assert [name for name, _, _ in chosen] == [k for k in bench_helion.KERNELS for _ in range(3)]
    assert len(chosen) == len(benchmarks.HELION_RACE)
    for name, problem, dtype in chosen:
        fam = families.get(name)
        assert dtype in fam.dtypes and set(problem) == set(fam.dims) and benchmarks.is_named(fam.twin, problem)
        for kernel in (fam.kernel, fam.twin):
            assert (kernel, canonical_json(problem)) not in seen
        assert name != "attention" or problem["D"] == 128  # Helion 1.4.0 refuses head dim 64
        drawn = fam.problems(np.random.default_rng(bench_helion.SEED), 400)  # the draw they came from skips them now
        assert problem not in drawn
    for i, kernel in ((0, "helion:matmul"), (13, "attention")):
        with pytest.raises(CostModelError, match="rows of race problems"):
            bench_helion.race_problems(seen | {(kernel, canonical_json(chosen[i][1]))})


def test_helion_race_summary_arithmetic_on_recorded_latencies(bench_helion):
    """The figures of rows whose latencies and walls are the recorded H200 Helion rows' (the first four configs of
    each recorded group as costmodel's, quick's, full's and the default's: roles given only to check the
    arithmetic, no figure of a race); rows are apart by the path costmodel took, and a failed tune is listed."""
    import numpy as np

    groups: dict[str, list[dict]] = {}
    for r in _recorded_rows(["kernel", "problem_json", "dtype", "config_json", "status", "latency_ms", "compile_s"]):
        if r["kernel"].startswith("helion:") and r["status"] == "ok":
            groups.setdefault(r["kernel"], []).append(r)
    assert len(groups) >= 2

    def row(g, path):
        ms = {who: g[i]["latency_ms"] for i, who in enumerate(("costmodel", "quick", "full", "default"))}
        return {"kernel": g[0]["kernel"], "problem": json.loads(g[0]["problem_json"]), "dtype": g[0]["dtype"],
                "costmodel": {"wall_s": g[0]["compile_s"], "path": path}, "quick": {"wall_s": g[1]["compile_s"]},
                "latency_ms": ms}

    model_rows = [row(g, "model") for g in groups.values()]
    fallback = row(next(iter(groups.values())), "fallback")
    failed = [{**model_rows[0], "costmodel": {"error": "timed out"}, "latency_ms": {}},
              {k: model_rows[1][k] for k in ("kernel", "problem", "dtype")} | {"error": "RuntimeError: CUDA"}]
    out = json.loads(json.dumps(bench_helion.summarise([*model_rows, fallback, *failed])))
    assert set(out) == {"model", "fallback", "failed"}
    assert out["fallback"]["problems"] == 1 and len(out["failed"]) == 2
    m = out["model"]
    walls = [r["costmodel"]["wall_s"] for r in model_rows]
    assert m["problems"] == len(model_rows) and m["median_cold_wall_s"] == pytest.approx(np.median(walls))
    assert m["accept"]["median_cold_wall_le_20s"] == (np.median(walls) <= 20)
    for who in ("quick", "full", "default"):
        ratios = [r["latency_ms"][who] / r["latency_ms"]["costmodel"] for r in model_rows]
        assert sorted(m[f"vs_{who}"]["per_problem"].values()) == pytest.approx(sorted(ratios))
        assert m[f"vs_{who}"]["geomean"] == pytest.approx(float(np.exp(np.mean(np.log(ratios)))))
        assert m[f"vs_{who}"]["min"] == pytest.approx(min(ratios))
    assert m["accept"]["every_vs_quick_ge_1"] == (min(m["vs_quick"]["per_problem"].values()) >= 1)
    assert m["accept"]["never_slower_than_default"] == (min(m["vs_default"]["per_problem"].values()) >= 1)
    assert m["accept"]["geomean_vs_full_ge_0.97"] == (m["vs_full"]["geomean"] >= 0.97)
    # a problem without one of the latencies cannot pass "every problem"
    short = [model_rows[0], {**model_rows[1], "latency_ms": {"costmodel": model_rows[1]["latency_ms"]["costmodel"]}}]
    s = bench_helion.summarise(short)["model"]
    assert len(s["vs_quick"]["per_problem"]) == 1 and not s["accept"]["every_vs_quick_ge_1"]
    assert s["vs_full"]["geomean"] == pytest.approx(model_rows[0]["latency_ms"]["full"]
                                                    / model_rows[0]["latency_ms"]["costmodel"])


def test_helion_race_summary_counts_each_problem_once_its_last_row(bench_helion):
    """--summarise over session 26's race files: rms_norm 4096x2048 was timed again with Helion's full effort in
    a later call (s26c); the summary reads that row alone, so 15 problems, the walls' median over them."""
    import numpy as np
    from click.testing import CliRunner

    files = [str(ROOT / f"scripts/results/bench_helion-retimed-h200-2026-12-03-s26{s}.jsonl") for s in "abc"]
    rows = [json.loads(line) for f in files for line in open(f)]
    assert len(rows) == 16
    r = CliRunner().invoke(bench_helion.main, [a for f in files for a in ("--summarise", f)])
    assert r.exit_code == 0, r.output
    m = json.loads(r.output)["model"]
    last = {r["index"]: r for r in rows}
    assert m["problems"] == len(last) == 15 and "full" in last[10]
    assert m["median_cold_wall_s"] == pytest.approx(np.median([r["costmodel"]["wall_s"] for r in last.values()]))
    norm = next(k for k in m["vs_default"]["per_problem"] if k.startswith('helion:rms_norm {"M":4096,'))
    assert m["vs_default"]["per_problem"][norm] == pytest.approx(
        last[10]["graph_ms"]["default"] / last[10]["graph_ms"]["costmodel"])
    assert list(m["vs_full"]["per_problem"]) == [norm]


def _raced(bench_helion, *names: str) -> list[dict]:
    """The H200 race rows of these ``scripts/results/bench_helion-retimed-h200-<name>.jsonl`` files, in order."""
    return bench_helion.read_rows(tuple(str(ROOT / f"scripts/results/bench_helion-retimed-h200-{n}.jsonl")
                                        for n in names))


def test_helion_race_summary_carries_full_effort_only_to_the_same_pick(bench_helion):
    """Helion full effort ran on rms_norm 4096x2048 (s26c) and softmax 64x2560 (s29d); the recipe shipped in session
    33 was raced after (s32a, s33b.1) without it and picks the same configs there, so each of those rows carries the
    earlier row's ratio of the two (from one call), and says so; a pick changed carries nothing, and a last row that
    timed full effort itself keeps its own."""
    full = _raced(bench_helion, "2026-12-03-s26c", "2026-12-03-s29d-full3")
    now = _raced(bench_helion, "2026-12-04-s32a", "2026-12-04-s33b.1")
    m = bench_helion.summarise(bench_helion.latest(full + now))["model"]
    own = {f"{r['kernel']} {bench_helion.canonical_json(r['problem'])} {r['dtype']}": bench_helion.ratio(r, "full")
           for r in full}
    assert m["vs_full"]["per_problem"] == pytest.approx(own) and sorted(m["vs_full"]["carried"]) == sorted(own)
    assert m["problems"] == len(now) and m["accept"]["geomean_vs_full_ge_0.97"] == (m["vs_full"]["geomean"] >= 0.97)
    changed = json.loads(json.dumps(now))
    norm = next(r for r in changed if r["kernel"] == "helion:rms_norm" and r["problem"] == {"M": 4096, "N": 2048})
    norm["costmodel"]["config"] = norm["quick"]["config"]
    assert norm["costmodel"]["config"] != now[changed.index(norm)]["costmodel"]["config"]
    m = bench_helion.summarise(bench_helion.latest(full + changed))["model"]
    assert list(m["vs_full"]["per_problem"]) == m["vs_full"]["carried"] == [k for k in own if "softmax" in k]
    assert bench_helion.summarise(bench_helion.latest(now + full))["model"]["vs_full"]["carried"] == []


def test_helion_race_records_a_failed_tune_and_goes_on(bench_helion, tmp_path):
    """A tune whose process fails (here: no CUDA) or outlasts its time is a row's error, not the race's end."""
    problem = {"M": 64, "N": 256}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    failed = bench_helion.tune_in_new_process("quick", "softmax", problem, "float16", env, 120)
    assert set(failed) == {"error"} and failed["error"].startswith("exit 1")
    assert bench_helion.tune_in_new_process("quick", "softmax", problem, "float16", env, 0.2) == {
        "error": "timed out after 0.2 s"}


def test_a_helion_search_cut_short_keeps_how_far_it_got_from_helions_own_log(bench_helion, tmp_path):
    """The full tune's progress reads the log Helion's own sink writes (what HELION_AUTOTUNE_LOG turns on), here fed
    the configs and H200 times of a recorded tune, the last config started but never finished: the configs with an
    outcome, their statuses, the last generation and the fastest time."""
    import helion
    from helion.autotuner.logger import AutotuneLogEntry, AutotuneLogSink

    row = json.loads((ROOT / "scripts/results/bench_helion-retimed-h200-2026-12-03-s26a.jsonl").read_text()
                     .splitlines()[0])
    timed = row["costmodel"]["search"]["timed"]
    with AutotuneLogSink(str(tmp_path / "search")) as sink:
        sink.start_run()
        for i, t in enumerate(timed):
            config = helion.Config(**t["config"])
            entry = AutotuneLogEntry(generation=i // 8, status="started", perf_ms=None, compile_time=None,
                                     config_id=sink.register_config(config), config=config)
            sink.record(entry)
            if i < len(timed) - 1:  # the last one was still running when the search was stopped
                sink.record(entry._replace(status="ok" if t["ms"] else "error", perf_ms=t["ms"]))
    progress = bench_helion.search_progress(tmp_path / "search.csv")
    done = timed[:-1]
    assert progress["configs"] == len(done) and sum(progress["status"].values()) == len(done)
    assert progress["status"]["ok"] == sum(1 for t in done if t["ms"])
    assert progress["generation"] == (len(timed) - 1) // 8
    assert progress["fastest_ms"] == pytest.approx(min(t["ms"] for t in done if t["ms"]), abs=1e-6)
    assert progress["last_s"] is not None and progress["compile_s"] == 0
    assert bench_helion.search_progress(tmp_path / "none.csv") is None


def test_helion_race_round_spread_from_the_recorded_race(bench_helion):
    """The summary's round spread: per problem and config, the median of |round / median - 1| over the rounds the
    session-13 race recorded on the H200."""
    import numpy as np

    path = Path(__file__).resolve().parents[1] / "scripts/results/bench_helion-h200-2026-12-01-s13.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    spread = bench_helion.summarise(rows)["model"]["round_spread"]
    assert len(spread) == len(rows)
    for r in rows:
        got = next(v for k, v in spread.items() if k.startswith(r["kernel"] + " "))
        for who, v in r["latency_rounds_ms"].items():
            v = np.array(v)
            assert got[who] == pytest.approx(float(np.median(np.abs(v / np.median(v) - 1))))


def test_helion_race_one_config_chosen_twice_is_one_kernel(bench_helion):
    """Session 23's race at softmax 64x3072: costmodel, quick and the default chose one config, timed apart (rounds
    of 5.8-28 us) and read 0.93 of each other; the figures give a shared config a ratio of 1, and a race times it
    once (``same_configs``)."""
    path = ROOT / "scripts/results/bench_helion-h200-2026-12-02-s23c.jsonl"
    row = next(r for r in map(json.loads, path.read_text().splitlines()) if r["problem"] == {"M": 64, "N": 3072})
    assert row["latency_ms"]["quick"] / row["latency_ms"]["costmodel"] < 0.95  # what the separate timings read
    m = bench_helion.summarise([row])["model"]
    assert list(m["vs_quick"]["per_problem"].values()) == [1.0] == list(m["vs_default"]["per_problem"].values())
    other = {**row, "quick": {**row["quick"], "config": {**row["quick"]["config"], "num_warps": 4}}}
    assert bench_helion.summarise([other])["model"]["vs_quick"]["min"] == pytest.approx(
        row["latency_ms"]["quick"] / row["latency_ms"]["costmodel"])
    chosen = {w: row[w]["config"] for w in ("costmodel", "quick", "default")} | {"full": other["quick"]["config"]}
    assert bench_helion.same_configs(chosen) == {
        canonical(row["costmodel"]["config"]): ["costmodel", "quick", "default"],
        canonical(other["quick"]["config"]): ["full"]}


def canonical(config: dict) -> str:
    from costmodel.dataset import canonical_json

    return canonical_json(config)


def test_helion_race_figures_read_the_graph_replay_where_a_row_has_one(bench_helion):
    """A row timed both ways is summarised from its graph replays (rounds and spread too); an older row, or one
    where a config has no graph timing, from do_bench."""
    path = ROOT / "scripts/results/bench_helion-h200-2026-12-02-s23b.jsonl"
    row = next(r for r in map(json.loads, path.read_text().splitlines()) if r["kernel"] == "helion:attention")
    graph = {w: v * (1.5 if w == "quick" else 1.0) for w, v in row["latency_ms"].items()}
    rounds = {w: [v, v * 1.1, v * 0.9] for w, v in graph.items()}
    both = {**row, "graph_ms": graph, "graph_rounds_ms": rounds}
    m = bench_helion.summarise([both])["model"]
    key = next(iter(m["timing"]))
    assert m["timing"][key] == "graph"
    assert m["vs_quick"]["min"] == pytest.approx(graph["quick"] / graph["costmodel"])
    assert m["vs_quick"]["min"] == pytest.approx(1.5 * row["latency_ms"]["quick"] / row["latency_ms"]["costmodel"])
    assert m["round_spread"][key]["quick"] == pytest.approx(0.1)
    partial = {**both, "graph_ms": {w: v for w, v in graph.items() if w != "default"}}
    m = bench_helion.summarise([partial])["model"]
    assert m["timing"][key] == "do_bench" and m["vs_quick"]["min"] == pytest.approx(
        row["latency_ms"]["quick"] / row["latency_ms"]["costmodel"])


def test_graph_replays_input_sets_fill_twice_the_l2_and_calls_last_graph_ms():
    """The input sets and calls of a graph replay (the race's timing, the Helion tuner's graph objective)."""
    import torch

    from costmodel.benchmark import GRAPH_MS, MAX_CALLS, MAX_SETS, graph_calls, input_sets

    l2 = 62914560  # the H200's (hardware.py)
    small = (torch.empty(64, 3072, dtype=torch.float16),)  # 384 KiB: 320 sets are 2 x 60 MiB
    assert input_sets(small, l2) == 320
    big = (torch.empty(8192, 8192, dtype=torch.float16), 7, torch.empty(8192, dtype=torch.float16))
    assert input_sets(big, l2) == 1
    tiny = (torch.empty(4, dtype=torch.float16),)
    assert input_sets(tiny, l2) == MAX_SETS
    assert graph_calls(GRAPH_MS / 7.5, 1) == 8 and graph_calls(GRAPH_MS / 7.5, 320) == 320  # every set once
    assert graph_calls(GRAPH_MS * 2, 1) == 1 and graph_calls(1e-9, 1) == MAX_CALLS


def test_helion_race_retime_keeps_the_picks_and_the_first_timing(bench_helion, monkeypatch):
    """--retime: each raced row's configs timed again (no tune), its walls and picks kept, the first timing under
    ``first_timing``; a row without a costmodel pick is skipped, one whose timing fails says so."""
    import io

    path = ROOT / "scripts/results/bench_helion-h200-2026-12-02-s23b.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    seen = []

    def timed_row(name, problem, dtype, row, rounds, l2_bytes):
        seen.append((name, problem, {w: row[w]["config"] for w in ("costmodel", "quick", "default")}))
        if "full" in row:
            assert row["full"]["config"]["num_warps"] == 2  # the full tune's pick is among those timed
        if name == "softmax" and problem["M"] == 64:
            raise RuntimeError("capture failed")
        return {"latency_ms": {"costmodel": 1.0}, "graph_ms": {"costmodel": 0.5}}

    monkeypatch.setattr(bench_helion, "timed_row", timed_row)
    sink = io.StringIO()
    bench_helion.retime([*json.loads(json.dumps(rows)), {**rows[0], "costmodel": {"error": "timed out"}}], sink, 3,
                        1 << 20, gpu="nvidia-h100-80gb-hbm3")
    out = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert len(out) == len(rows) and [s[0] for s in seen] == [r["kernel"].removeprefix("helion:") for r in rows]
    assert all(r["retimed_gpu"] == "nvidia-h100-80gb-hbm3" and r["gpu"] == "nvidia-h200" for r in out)  # the race's
    for old, new, s in zip(rows, out, seen):
        assert s[2] == {w: old[w]["config"] for w in ("costmodel", "quick", "default")}
        assert new["costmodel"] == old["costmodel"] and new["quick"] == old["quick"]
        assert new["first_timing"]["latency_ms"] == old["latency_ms"] and new["retimed"]
        if "error" in new:
            assert new["error"] == "RuntimeError: capture failed" and "latency_ms" not in new
        else:
            assert new["latency_ms"] == {"costmodel": 1.0} and new["graph_ms"] == {"costmodel": 0.5}
    assert sum("error" in r for r in out) == 1
    assert all("full" not in r for r in out)  # no full tune asked for
    # --full 2: the first two rows get Helion's full-effort tune first, and its pick is timed with the others
    fulls, seen[:] = [], []

    def tune(who, r):
        assert who == "full"
        fulls.append(r["problem"])
        return {"wall_s": 400.0, "config": {**r["quick"]["config"], "num_warps": 2}}

    sink = io.StringIO()
    bench_helion.retime(json.loads(json.dumps(rows)), sink, 3, 1 << 20, full=2, tune=tune)
    out = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert fulls == [r["problem"] for r in rows[:2]]
    assert [r.get("full", {}).get("wall_s") for r in out] == [400.0, 400.0, *[None] * (len(rows) - 2)]


def test_helion_race_retune_tunes_costmodel_anew_beside_the_rows_helion_picks(bench_helion, monkeypatch):
    """--retime --retune: costmodel's tune runs again (its earlier one kept as ``first_costmodel``) and its new pick
    is timed beside the row's quick and default picks, which are kept; a new tune that fails leaves the row
    untimed."""
    import io

    path = ROOT / "scripts/results/bench_helion-h200-2026-12-02-s24b.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    timed, tuned = [], []

    def timed_row(name, problem, dtype, row, rounds, l2_bytes):
        timed.append({w: row[w]["config"] for w in ("costmodel", "quick", "default")})
        return {"latency_ms": {"costmodel": 1.0}}

    def tune(who, r):
        tuned.append((who, r["problem"]))
        if r["index"] == rows[1]["index"]:
            return {"error": "timed out after 900 s"}
        return {"wall_s": 9.0, "path": "model", "config": {**r["quick"]["config"], "num_warps": 32}}

    monkeypatch.setattr(bench_helion, "timed_row", timed_row)
    sink = io.StringIO()
    bench_helion.retime(json.loads(json.dumps(rows)), sink, 3, 1 << 20, tune=tune, retune=True)
    out = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert tuned == [("costmodel", r["problem"]) for r in rows]
    assert len(out) == len(rows) - 1 and len(timed) == len(rows) - 1  # the failed re-tune: skipped
    kept = [r for r in rows if r["index"] != rows[1]["index"]]
    for old, new, t in zip(kept, out, timed):
        assert new["first_costmodel"] == old["costmodel"] and new["retuned"]
        assert new["costmodel"]["wall_s"] == 9.0 and t["costmodel"]["num_warps"] == 32
        assert new["quick"] == old["quick"] and t["quick"] == old["quick"]["config"]
        assert t["default"] == old["default"]["config"] and new["first_timing"]["latency_ms"] == old["latency_ms"]
    tuned.clear()
    bench_helion.retime(json.loads(json.dumps(rows)), io.StringIO(), 3, 1 << 20, tune=tune)  # no --retune
    assert tuned == []


def test_helion_race_retime_takes_the_rows_of_the_problems_asked_for(bench_helion, monkeypatch, tmp_path):
    """--retime FILE --only I,J re-times only those problems' rows (by their race index), in that order, each
    problem's last row of the files once; none of them: exit 2."""
    import types

    from click.testing import CliRunner

    from costmodel import hardware

    files = [str(ROOT / f"scripts/results/bench_helion-h200-2026-12-02-s23{s}.jsonl") for s in "bc"]
    got = []
    monkeypatch.setattr(hardware, "current", lambda: types.SimpleNamespace(gpu="nvidia-h200", l2_bytes=1 << 20))
    monkeypatch.setattr(bench_helion, "retime", lambda rows, *a: got.append(([r["index"] for r in rows], a[3])))
    args = ["--retime", files[0], "--retime", files[1], "--out", str(tmp_path / "r.jsonl")]
    r = CliRunner().invoke(bench_helion.main, [*args, "--only", "14,3", "--full", "1"])
    assert r.exit_code == 0, r.output
    assert got == [([14, 3], 1)]
    r = CliRunner().invoke(bench_helion.main, args)
    assert r.exit_code == 0 and got[-1] == ([3, 4, 5, 12, 14], 0)
    monkeypatch.setattr(bench_helion, "retime", lambda rows, *a: got.append([(r["index"], "retimed" in r)
                                                                             for r in rows]))
    retimed = str(ROOT / "scripts/results/bench_helion-retimed-h200-2026-12-02-s24a.jsonl")  # 3, 4, 5 timed again
    r = CliRunner().invoke(bench_helion.main, [*args, "--retime", retimed, "--only", "5,12,3"])
    assert r.exit_code == 0 and got[-1] == [(5, True), (12, False), (3, True)]  # the later file's rows
    r = CliRunner().invoke(bench_helion.main, [*args, "--only", "0"])
    assert r.exit_code == 2 and "no raced row of problems [0]" in r.output


def test_helion_race_tunes_a_recipe_variant_for_costmodel_alone(bench_helion, monkeypatch, tmp_path):
    """--recipe NAME=N reaches costmodel's tunes alone, through the tune's own process (whose parser refuses a knob
    the tuner has not: exit 2); a value that is not a whole number, an unknown knob, or a value the tuner refuses
    (radius 0), is exit 2 with one line, with --still-valid too."""
    import types

    from click.testing import CliRunner

    from costmodel import hardware

    rows = str(ROOT / "scripts/results/bench_helion-retimed-h200-2026-12-03-s26a.jsonl")
    asked = []
    monkeypatch.setattr(hardware, "current", lambda: types.SimpleNamespace(gpu="nvidia-h200", l2_bytes=1 << 20))
    monkeypatch.setattr(bench_helion, "tune_in_new_process", lambda who, *a: asked.append((who, a[-2])) or {})
    monkeypatch.setattr(bench_helion, "retime", lambda rows, sink, r, l2, full, tune, retune, gpu: [
        tune(w, rows[0]) for w in ("costmodel", "quick", "full")])
    args = ["--retime", rows, "--retune", "--only", "8", "--out", str(tmp_path / "r.jsonl")]
    r = CliRunner().invoke(bench_helion.main, [*args, "--recipe", "local=12", "--recipe", "local_rounds=8"])
    assert r.exit_code == 0, r.output
    assert asked == [("costmodel", {"local": 12, "local_rounds": 8}), ("quick", None), ("full", None)]
    for bad in ("local=x", "objective=1", "steps=2"):
        r = CliRunner().invoke(bench_helion.main, [*args, "--recipe", bad])
        names = "k, refill, climb, climb_rounds, local, local_rounds, default_walk, radius"
        assert r.exit_code == 2 and f"'{bad}': NAME=N with NAME one of {names}" in r.output
    for more in ([], ["--still-valid", rows]):  # a value the tuner refuses: one line, before any tune or check
        r = CliRunner().invoke(bench_helion.main, [*args, *more, "--recipe", "radius=0"])
        assert r.exit_code == 2 and "radius 0: a step reaches at least 1" in r.output and "Traceback" not in r.output
    assert len(asked) == 3
    monkeypatch.undo()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    problem = {"M": 64, "N": 256}
    ok = bench_helion.tune_in_new_process("costmodel", "softmax", problem, "float16", env, 120, {"local": 12})
    assert ok["error"].startswith("exit 1")  # parsed, then no CUDA
    bad = bench_helion.tune_in_new_process("costmodel", "softmax", problem, "float16", env, 120, {"steps": 2})
    assert bad["error"].startswith("exit 2") and "--recipe" in bad["error"]


def test_helion_race_tunes_with_another_model_for_costmodel_alone(bench_helion, monkeypatch, tmp_path):
    """--model DIR reaches costmodel's tunes alone, through the tune's own process; a directory that holds no Helion
    model is exit 2 with one line, before any tune. --still-valid with --model judges rows by that model: a row
    ranked by a model of the same data but other training parameters is not valid (rows record both)."""
    import shutil
    import types

    from click.testing import CliRunner

    from costmodel import hardware
    from costmodel.helion import model as helion_model

    rows = str(ROOT / "scripts/results/bench_helion-retimed-h200-2026-12-03-s26a.jsonl")
    cm = helion_model.load("nvidia-h200")
    other = tmp_path / "helion"
    shutil.copytree(cm.path, other)
    meta = json.loads((other / "meta.json").read_text())
    meta["params"]["num_parallel_tree"] = 25
    (other / "meta.json").write_text(json.dumps(meta))
    asked = []
    monkeypatch.setattr(hardware, "current", lambda: types.SimpleNamespace(gpu="nvidia-h200", l2_bytes=1 << 20))
    monkeypatch.setattr(bench_helion, "tune_in_new_process", lambda who, *a: asked.append((who, a[-1])) or {})
    monkeypatch.setattr(bench_helion, "retime", lambda rows, sink, r, l2, full, tune, retune, gpu: [
        tune(w, rows[0]) for w in ("costmodel", "quick")])
    args = ["--retime", rows, "--retune", "--only", "8", "--out", str(tmp_path / "r.jsonl")]
    r = CliRunner().invoke(bench_helion.main, [*args, "--model", str(other)])
    assert r.exit_code == 0, r.output
    assert asked == [("costmodel", str(other)), ("quick", None)]
    r = CliRunner().invoke(bench_helion.main, [*args, "--model", str(tmp_path)])
    assert r.exit_code == 2 and "--model" in r.output and "Traceback" not in r.output and len(asked) == 2
    monkeypatch.undo()
    shipped = ROOT / "scripts/results/bench_helion-retimed-h200-2026-12-04-s34a.1.jsonl"  # the shipped recipe's race
    raced = [json.loads(line) for line in shipped.read_text().splitlines()]
    assert all(o["valid"] for o in bench_helion.still_valid(raced, cm, BEFORE_S44))
    assert not any(o["valid"] or o["same_ranker"] for o in bench_helion.still_valid(raced, helion_model.load(other)))
    r = CliRunner().invoke(bench_helion.main, ["--still-valid", rows, "--model", str(other)])
    assert r.exit_code == 0 and not any(json.loads(line)["valid"] for line in r.output.splitlines())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    got = bench_helion.tune_in_new_process("costmodel", "softmax", {"M": 64, "N": 256}, "float16", env, 120, None,
                                           str(other))
    assert got["error"].startswith("exit 1") and "--model" not in got["error"]  # parsed, then no CUDA
    got = bench_helion.tune_in_new_process("costmodel", "softmax", {"M": 64, "N": 256}, "float16", env, 120, None,
                                           str(tmp_path))
    assert got["error"].startswith("exit 2") and "--model" in got["error"]  # the directory reached that process


def test_helion_race_rows_still_valid_under_the_shipped_runs_filter(bench_helion, tmp_path):
    """--still-valid on session 23's race rows with the shipped Helion model: the softmax rows (every timed config
    likely to run) would be tuned alike; attention 3x16x3681 would not, and each timed config the filter would now
    drop is one that gave no time on the H200. A row of another ranker is never valid; without a runs classifier
    every row of the same ranker is. Those rows were tuned without steps to neighbours by an earlier model, so as
    they are none is valid: the filter's verdicts are read with the recipe and model hash of today's set in them."""
    import shutil

    from costmodel.helion import model as helion_model
    from tuner.helion import CostModelAutotuner

    raced = [json.loads(line) for s in "abc"
             for line in (ROOT / f"scripts/results/bench_helion-h200-2026-12-02-s23{s}.jsonl").read_text().splitlines()]
    cm = helion_model.load("nvidia-h200")
    assert not any(o["valid"] or o["same_recipe"] for o in bench_helion.still_valid(raced, cm))
    rows = json.loads(json.dumps(raced))
    for r in rows:  # as if ranked by the shipped model (retrained since) with today's recipe
        r["costmodel"]["search"]["recipe"] = CostModelAutotuner(objective=bench_helion.OBJECTIVE).recipe()
        r["costmodel"]["model_data_hash"] = cm.meta["data"]["hash"]
    out = bench_helion.still_valid(rows, cm)
    for r, o in zip(rows, out):
        if r["kernel"] == "helion:softmax":
            assert o["valid"] and o["timed_now_dropped"] == 0 and o["timed"] == 8
        for (q, ran), t in zip(o["p_run_of_timed"], r["costmodel"]["search"]["timed"]):
            assert ran == (t["ms"] is not None)
            assert not (q < helion_model.RUN_FLOOR and ran), (r["problem"], q)  # nothing that ran is dropped
    wide = next(o for o in out if o["problem"] == {"B": 3, "H": 16, "S": 3681, "D": 128, "CAUSAL": 0})
    assert not wide["valid"] and wide["timed_now_dropped"] >= 1
    other = {**rows[2], "costmodel": {**rows[2]["costmodel"], "model_data_hash": "0" * 16}}
    assert bench_helion.still_valid([other], cm)[0]["valid"] is False
    bare = tmp_path / "helion"
    shutil.copytree(cm.path, bare, ignore=shutil.ignore_patterns(helion_model.RUNS_FILE))
    assert all(o["valid"] for o in bench_helion.still_valid(rows, helion_model.load(bare, "nvidia-h200")))


def _s26_as_shipped(bench_helion) -> list[dict]:
    """Session 26's race rows (all 15 problems, the walk from the default and the climb as the H200 recorded them),
    their recipe read as the shipped one's: it has changed since (radius 2, 12 configs a step, the twin's unaligned
    configs, a step's lead by moves: session 32), and neither knob these tests turn depends on those."""
    from tuner.helion import CostModelAutotuner

    rows = [json.loads(line) for s in "ab" for line in
            (ROOT / f"scripts/results/bench_helion-retimed-h200-2026-12-03-s26{s}.jsonl").read_text().splitlines()]
    for r in rows:
        r["costmodel"]["search"]["recipe"] = CostModelAutotuner(objective=bench_helion.OBJECTIVE).recipe()
    return rows


def test_rows_stay_valid_under_a_walk_from_the_default_where_their_tune_would_make_none(bench_helion):
    """--still-valid --recipe default_walk=1 on session 26's race rows (the shipped model's, without the walk): the
    matmuls and attention, whose first batch timed the default at 3.9-23.7x its fastest, would be tuned alike and
    stay valid; every softmax and norm row, whose default ran within 1.5x of the fastest (and was not the fastest),
    would walk from it, so it is stale. A row tuned with the walk on is stale under a recipe without it where it
    walked, and valid where it did not; any other knob changed makes every row stale."""
    from costmodel.helion import model as helion_model

    rows, cm = _s26_as_shipped(bench_helion), helion_model.load("nvidia-h200")
    assert all(o["valid"] for o in bench_helion.still_valid(rows, cm))
    walk = bench_helion.still_valid(rows, cm, {"default_walk": 1})
    assert [o["valid"] for o in walk] == [r["kernel"] in ("helion:matmul", "helion:attention") for r in rows]
    assert sum(o["valid"] for o in walk) == 6
    assert not any(o["valid"] for o in bench_helion.still_valid(rows, cm, {"default_walk": 1, "local": 7}))
    walked = json.loads(json.dumps(rows))
    for r in walked:
        r["costmodel"]["search"]["recipe"]["default_walk"] = 1
    first, second = [r for r in walked if r["kernel"] == "helion:matmul"][:2]
    first["costmodel"]["search"]["steps"][-1]["walk"] = "default"  # as if its last step had been the walk's
    assert [o["valid"] for o in bench_helion.still_valid([first, second], cm)] == [False, True]


def test_rows_stay_valid_under_ties_only_where_no_step_went_on_from_a_tie(bench_helion):
    """--still-valid --recipe ties=2 on the shipped recipe's race of all 15 problems (s32a, s33b): six tunes had a
    step whose fastest config was not the first within TIE (matmul 3468x4713x749, both large layer_norms, the three
    attention problems), so they are stale; the other nine would have walked alike and stay valid. Rows raced with
    ties 1 (s33e.2) are valid under their own recipe, and under ties 2 only where the batch's fastest was also its
    first tied config (layer_norm, not rms_norm, whose 7th and 9th configs ran 0.016% apart)."""
    from costmodel.helion import model as helion_model

    rows = _raced(bench_helion, "2026-12-04-s32a", "2026-12-04-s33b.1", "2026-12-04-s33b.2")
    cm = helion_model.load("nvidia-h200")
    assert all(o["valid"] for o in bench_helion.still_valid(rows, cm, {"ties": 0, **BEFORE_S44}))
    stale = {(o["kernel"], o["problem"]["M"] if "M" in o["problem"] else o["problem"]["S"])
             for o in bench_helion.still_valid(rows, cm, BEFORE_S44) if not o["valid"]}  # ties 2 shipped in session 34
    assert stale == {("helion:matmul", 3468), ("helion:layer_norm", 11306), ("helion:layer_norm", 13911),
                     ("helion:attention", 2049), ("helion:attention", 8192), ("helion:attention", 3681)}
    assert not any(o["valid"] for o in bench_helion.still_valid(rows, cm, {"ties": 2, "local": 7, **BEFORE_S44}))
    ties1 = _raced(bench_helion, "2026-12-04-s33e.2")
    assert [o["valid"] for o in bench_helion.still_valid(ties1, cm, {"ties": 1, **BEFORE_S44})] == [True, True]
    assert [o["valid"] for o in bench_helion.still_valid(ties1, cm, {"ties": 2, **BEFORE_S44})] == [True, False]


def _shipped_race(bench_helion) -> list[dict]:
    """The shipped recipe's race of all 15 problems (ties 2): session 34's rows for the six problems it walked
    otherwise, the nine others from s32a and s33b."""
    rows = [r for r in _raced(bench_helion, "2026-12-04-s32a", "2026-12-04-s33b.1", "2026-12-04-s33b.2")
            if r["index"] not in (0, 6, 8, 12, 13, 14)]
    return rows + _raced(bench_helion, "2026-12-04-s34a.1", "2026-12-04-s34a.2")


def test_rows_stay_valid_under_ties_3_only_where_no_walk_stopped_on_a_level_step(bench_helion):
    """--still-valid --recipe ties=3 on the shipped recipe's race (``_shipped_race``): a row is stale where its walk
    stopped, before its rounds ran out, at a step that timed a config within TIE of the walk's fastest
    (``tuner.helion.levels``), which ties 3 walks on from; session 34's rms_norm 13911x12466 tunes: the one at 0.953 of
    quick stopped so, one at 0.984 ran its four steps."""
    from costmodel.helion import model as helion_model

    cm, rows = helion_model.load("nvidia-h200"), _shipped_race(bench_helion)
    assert sorted(r["index"] for r in rows) == list(range(15))
    assert all(o["valid"] for o in bench_helion.still_valid(rows, cm, BEFORE_S44))
    stale = {r["index"] for r, o in zip(rows, bench_helion.still_valid(rows, cm, {"ties": 3, **BEFORE_S44}))
             if not o["valid"]}
    assert stale == {0, 4, 8, 9, 11, 12, 13}
    rms = [r for r in _raced(bench_helion, "2026-12-04-s34c.1", "2026-12-04-s34c.2") if r["index"] == 11]
    assert [o["valid"] for o in bench_helion.still_valid(rms, cm, {"ties": 3, **BEFORE_S44})] == [True, False]


def test_rows_stay_valid_under_verify_ties_only_where_as_many_configs_would_be_re_timed(bench_helion):
    """--still-valid --recipe verify_ties=1 on the shipped recipe's race (``_shipped_race``): stale where more than
    VERIFY configs ran within TIE of the fastest; the softmaxes, two of the matmuls, the small norms and layer_norm
    11306x10912 would re-time as they did (``tuner.helion.verify_ties_alike``)."""
    from costmodel.helion import model as helion_model

    cm, rows = helion_model.load("nvidia-h200"), _shipped_race(bench_helion)
    valid = bench_helion.still_valid(rows, cm, {"verify_ties": 1, **BEFORE_S44})
    assert {r["index"] for r, o in zip(rows, valid) if not o["valid"]} == {0, 8, 9, 11, 12, 13, 14}


def test_rows_stay_valid_under_restarts_only_where_no_walk_ended_early(bench_helion):
    """--still-valid --recipe restarts=1 on the shipped recipe's race (``_shipped_race``): stale where a step found
    nothing faster before the walk's rounds ran out, which restarts 1 walks on from (``tuner.helion.restarts_alike``);
    all but layer_norm 11306x10912 and attention 3x16x3681, whose walks ran their four steps. Session 35's rows of
    restarts 1 stand for it, and for the shipped recipe those whose walk made no restart."""
    from costmodel.helion import model as helion_model

    cm, rows = helion_model.load("nvidia-h200"), _shipped_race(bench_helion)
    now = {"restarts": 1, **BEFORE_S57}
    valid = bench_helion.still_valid(rows, cm, now)
    assert {r["index"] for r, o in zip(rows, valid) if not o["valid"]} == set(range(15)) - {6, 14}
    raced = _raced(bench_helion, "2026-12-04-s35c.1", "2026-12-04-s35c.2")
    assert len(raced) == 10 and all(o["valid"] for o in bench_helion.still_valid(raced, cm, now))
    made = {r["index"] for r in raced if any(s.get("restart") for s in r["costmodel"]["search"]["steps"])}
    assert made == {0, 1, 2, 3, 7, 9, 10}
    before = bench_helion.still_valid(raced, cm, BEFORE_S44)
    assert {r["index"] for r, o in zip(raced, before) if not o["valid"]} == made
    assert all(o["valid"] for o in bench_helion.still_valid(raced, cm, BEFORE_S57))  # shipped in sessions 44-56
    # walk_graph 1 (shipped in session 57) times the four problems under 10 us otherwise: their rows are stale
    stale = {r["index"] for r, o in zip(raced, bench_helion.still_valid(raced, cm)) if not o["valid"]}
    assert stale and stale == {3, 5, 7, 10} & {r["index"] for r in raced}


def test_rows_stay_valid_under_more_climb_rounds_only_where_their_climb_stopped_short(bench_helion):
    """--still-valid --recipe climb_rounds=N on session 26's race rows: each climbed all 3 rounds of the shipped
    recipe, so it may have climbed on and is stale under 4 or 8 rounds, and under 2; a row whose climb had stopped
    after 2 of its 3 rounds (its beam standing still) stays valid under 8, and not under 1 or another knob beside."""
    from costmodel.helion import model as helion_model

    rows, cm = _s26_as_shipped(bench_helion), helion_model.load("nvidia-h200")
    assert {r["costmodel"]["search"]["climb"]["rounds"] for r in rows} == {3}
    for n in (2, 4, 8):
        assert not any(o["valid"] for o in bench_helion.still_valid(rows, cm, {"climb_rounds": n}))
    assert all(o["valid"] for o in bench_helion.still_valid(rows, cm, {"climb_rounds": 3}))
    short = json.loads(json.dumps(rows[:2]))
    for r in short:
        r["costmodel"]["search"]["climb"]["rounds"] = 2  # as if its beam had stood still after round 2
    valid = [[o["valid"] for o in bench_helion.still_valid(short, cm, recipe)]
             for recipe in ({"climb_rounds": 8}, {"climb_rounds": 2}, {"climb_rounds": 1}, {"climb_rounds": 8, "k": 9})]
    assert valid == [[True, True], [True, True], [False, False], [False, False]]


@pytest.mark.gpu
def test_helion_race_latencies_on_the_gpu(bench_helion):
    """The race's timing of a small softmax on the GPU: the config three choosers share timed once (one figure for
    all three), another config apart; both timed by do_bench and by a graph replay over enough input sets to fill
    twice the L2, which reads no more than do_bench (do_bench's call waits on the host where Helion's host code
    outlasts the L2 flush)."""
    pytest.importorskip("helion")
    from costmodel import hardware
    from costmodel.helion import configs as hconfigs, families

    fam, problem = families.get("softmax"), {"M": 64, "N": 3072}
    bound, _ = fam.bind(problem, "float16", "cuda")
    default = hconfigs.normalise(bound.config_spec.default_config(), families.op_counts(bound.config_spec))
    other = {**default, "num_warps": 4 if default["num_warps"] != 4 else 8}
    chosen = {"costmodel": default, "quick": default, "default": default, "full": other}
    out = bench_helion.latencies("softmax", problem, "float16", chosen, 3, hardware.current().l2_bytes)
    assert "run_errors" not in out, out.get("run_errors")
    assert out["same_config"] == [["costmodel", "quick", "default"]] and out["input_sets"] > 100
    for how in ("latency", "graph"):
        ms, rounds = out[f"{how}_ms"], out[f"{how}_rounds_ms"]
        assert set(ms) == set(chosen) and all(len(v) == 3 and min(v) > 0 for v in rounds.values())
        assert ms["costmodel"] == ms["quick"] == ms["default"] and rounds["costmodel"] is rounds["quick"]
    assert out["graph_ms"]["costmodel"] <= out["latency_ms"]["costmodel"] * 1.1, out


# --- bench_tune.py (issue 16's race): the tune's pick raced against the sweep's fastest ---------------------------

@pytest.fixture(scope="module")
def bench_tune():
    return _script_module("bench_tune")


class _Rounds:
    """A replay of one recorded group whose answers carry which round and place they came from: the race must give
    each config its own times, whatever order a round measured them in."""

    def __init__(self, replay):
        self.replay, self.orders = replay, []

    def measure(self, family, problem, dtype, configs):
        self.orders.append([json.dumps(c, sort_keys=True) for c in configs])
        return self.replay.measure(family, problem, dtype, configs)


def test_bench_tune_race_keeps_each_configs_time_and_scores_the_pick():
    import pyarrow.compute as pc

    from costmodel import dataset
    from costmodel.benchmark import ReplayBenchmarker

    table = dataset.read(ROOT / "data", ["kernel", "problem_json", "dtype", "config_json", "status", "latency_ms",
                                         "eager_ms", "exhaustive", "group_id"])
    rows = [r for r in table.to_pylist() if r["kernel"] == "rmsnorm" and r["exhaustive"] and r["status"] == "ok"]
    group = sorted((r for r in rows if r["group_id"] == rows[0]["group_id"]), key=lambda r: r["latency_ms"])
    table = table.filter(pc.equal(table["group_id"], rows[0]["group_id"]))  # one kernel hash: one row per config
    problem, dtype = json.loads(group[0]["problem_json"]), group[0]["dtype"]
    bench = _Rounds(ReplayBenchmarker(table))
    benchlib = _script_module("benchlib")
    configs = [json.loads(r["config_json"]) for r in group[:5]]
    ms = benchlib.race("rmsnorm", problem, dtype, configs, bench, rounds=4)  # an even count: a mix-up shows
    assert ms == [r["latency_ms"] for r in group[:5]]
    assert bench.orders[1] == bench.orders[0][::-1] and bench.orders[2] == bench.orders[0]
    slow = json.loads(group[-1]["config_json"])
    out = benchlib.raced_score("rmsnorm", problem, dtype, slow, configs[:3] + [slow], bench)
    assert out["raced_configs"][0] == slow and len(out["raced_configs"]) == 4  # the pick once, first
    assert out["tune_score_raced"] == pytest.approx(group[0]["latency_ms"] / group[-1]["latency_ms"])
    assert benchlib.raced_score("rmsnorm", problem, dtype, configs[0], configs[:3], bench)["tune_score_raced"] == 1


def test_matmul_gap_without_a_sweep_takes_the_former_whole_space_best_and_races_the_tune_against_it(monkeypatch, tmp_path):
    """bench_matmul_gap.py --no-sweep --tune-k: the shape's best is the latest former whole-space row's (a knob's part
    of the space never), set against torch.matmul without timing the space; the cold tune's pick is raced against it
    and the previous best in the benchmarker's alternating rounds (replayed from a recorded whole-space group)."""
    import pyarrow.compute as pc

    from costmodel import dataset
    from costmodel.benchmark import ReplayBenchmarker

    gap = _script_module("bench_matmul_gap")
    hw_cols = ["gpu", *(c for c in dataset.FILE_SCHEMA.names if c.startswith("hw_"))]
    table = dataset.read(ROOT / "data", ["kernel", "problem_json", "dtype", "config_json", "status", "latency_ms",
                                         "exhaustive", "group_id", *hw_cols])
    first = next(r for r in table.to_pylist() if r["kernel"] == "matmul" and r["exhaustive"] and r["status"] == "ok")
    hw = dataset.hw_from_row(first)
    table = table.filter(pc.equal(table["group_id"], first["group_id"]))
    group = sorted((r for r in table.to_pylist() if r["status"] == "ok"), key=lambda r: r["latency_ms"])
    problem, dtype = json.loads(first["problem_json"]), first["dtype"]
    best, second, slow = (json.loads(group[i]["config_json"]) for i in (0, 1, -1))
    rows = tmp_path / "gap.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in [
        {"problem": problem, "dtype": dtype, "knobs": {}, "date": "s9", "best_config": slow},
        {"problem": problem, "dtype": dtype, "knobs": {}, "date": "s13", "best_config": best},
        {"problem": problem, "dtype": dtype, "knobs": {"TMA": 1}, "date": "s14", "best_config": second}]) + "\n")
    former = gap.best_by_shape(str(rows), whole_space=True)[gap.shape_key(problem, dtype)]
    assert former["date"] == "s13"  # the later whole-space row; the knob's row is no whole space's best
    assert gap.best_by_shape(str(rows))[gap.shape_key(problem, dtype)]["date"] == "s14"

    class NoSweep:
        def measure(self, *a):
            raise AssertionError("--no-sweep timed configs")

    monkeypatch.setattr(gap, "against_torch", lambda p, d, c, h: {"tune_vs_torch": 0.9, "torch_raced": c})
    row = gap.measure_shape(problem, dtype, hw, NoSweep(), {}, former, sweep=False)
    assert row["best_config"] == best and row["torch_raced"] == best and row["best_from"] == "s13"
    assert row["valid"] == len(gap.space.enumerate_valid(gap.get_family("matmul"), problem, dtype, hw))
    tuned = {"wall_s": 7.0, "best": {"config": second, "latency_ms": 1.0}}
    monkeypatch.setattr(gap, "tune_in_new_process", lambda f, p, d, cache, k, steps: (tuned, 9.0) if k == 8 else None)
    out = gap.tune_against_best(problem, dtype, {**row, "previous_config": slow}, hw, ReplayBenchmarker(table),
                                "cache", 8)
    assert out["raced_configs"] == [second, best, slow] and out["tune_k"] == 8 and out["tune_command_s"] == 9.0
    assert out["tune_score_raced"] == pytest.approx(group[0]["latency_ms"] / group[1]["latency_ms"])
    assert not any(k.startswith("pick_") for k in out)  # the pick lost: the best known stays the space's best
    # a pick faster than the best known is set against torch.matmul too
    tuned = {"wall_s": 7.0, "best": {"config": best, "latency_ms": 1.0}}
    out = gap.tune_against_best(problem, dtype, {**row, "best_config": second}, hw, ReplayBenchmarker(table),
                                "cache", 8)
    assert out["tune_score_raced"] == 1.0 and out["pick_torch_raced"] == best and out["pick_tune_vs_torch"] == 0.9
    # --tune-steps reaches the tune's command, and its steps the row
    tuned = {**tuned, "steps": [{"from": second, "timed": 6, "faster": 1}]}
    monkeypatch.setattr(gap, "tune_in_new_process",
                        lambda f, p, d, cache, k, steps=0: (tuned, 9.0) if (k, steps) == (8, 4) else None)
    out = gap.tune_against_best(problem, dtype, row, hw, ReplayBenchmarker(table), "cache", 8, 4)
    assert out["tune_steps"] == tuned["steps"]
    import types

    import benchlib

    calls = []
    monkeypatch.setattr(benchlib.subprocess, "run", lambda c, **kw: calls.append(c) or types.SimpleNamespace(
        returncode=0, stdout='{"wall_s": 1}', stderr=""))
    benchlib.tune_in_new_process("matmul", problem, dtype, "cache", 8, 4)
    benchlib.tune_in_new_process("matmul", problem, dtype, "cache", 8)
    assert calls[0][-4:] == ["-k", "8", "--steps", "4"] and "--steps" not in calls[1]


def test_bench_tune_summary_gives_each_phases_median_over_the_rows_that_have_it(bench_tune):
    """The race's committed rows (session 15, H200) have no time_setup; a row that has it adds that phase alone.
    The median command wall is the figure BENCHMARKS quotes (9.3 s)."""
    rows = [json.loads(line) for f in ("s15", "s15b")
            for line in (ROOT / f"scripts/results/bench_tune-h200-2026-12-01-{f}.jsonl").read_text().splitlines()]
    phases = bench_tune.summarise(rows)["median_tune_phases_s"]
    assert set(phases) == {"rank", "compile", "time", "second", "finalists"}
    times = sorted(r["tune_phases_s"]["time"] for r in rows)  # 12 rows: the mean of the middle two
    assert len(times) == 12 and phases["time"] == pytest.approx((times[5] + times[6]) / 2)
    with_setup = {**rows[0], "tune_phases_s": {**rows[0]["tune_phases_s"], "time_setup": 0.5}}
    assert bench_tune.summarise(rows + [with_setup])["median_tune_phases_s"]["time_setup"] == 0.5
    assert round(bench_tune.summarise(rows)["median_tune_command_s"], 1) == 9.3


def test_replay_tune_newer_groups_are_those_first_recorded_after_the_model():
    """replay_tune.py --newer: a group counts as unseen by a model only when its first row came after the model."""
    import pyarrow.compute as pc

    from costmodel import dataset

    replay_tune = _script_module("replay_tune")
    table = dataset.read(ROOT / "data", ["group_id", "ts"])
    first = {}
    for g, ts in zip(table["group_id"].to_pylist(), table["ts"].to_pylist()):
        first[g] = min(first.get(g, ts), ts)
    times = sorted(set(first.values()))
    cut = times[len(times) // 2]  # a real row's time: the group first recorded then is not newer
    newer = replay_tune.newer_groups(table, cut.isoformat())
    assert newer == {g for g, ts in first.items() if ts > cut}
    assert 0 < len(newer) < len(first)
    assert replay_tune.newer_groups(table, (times[-1]).isoformat()) == set()
    assert pc.count_distinct(table["group_id"]).as_py() == len(replay_tune.newer_groups(table, "2000-01-01T00:00:00+00:00"))


def test_probe_vs_sweep_reads_every_collect_object_and_the_whole_space_figures():
    """probe_vs_sweep.py: device_job.sh's collect.json (objects one after another) read whole, and the model's top-1,
    top-8 and best rank over a recorded whole-space group agree with its own order."""
    import numpy as np

    from costmodel import dataset, features, model

    mod = _script_module("probe_vs_sweep")
    objs = mod.collect_outputs(str(SCRIPTS / "results" / "collect-h200-2026-12-01-s15a.json"))
    assert len(objs) == 2 and all(o["active"]["regrets"] for o in objs)  # the plan's two collects
    table = dataset.read(ROOT / "data", ["kernel", "problem_json", "dtype", "config_json", "status", "latency_ms",
                                         "exhaustive", "group_id"])
    rows = [r for r in table.to_pylist() if r["kernel"] == "rmsnorm" and r["exhaustive"] and r["status"] == "ok"]
    group = [r for r in rows if r["group_id"] == rows[0]["group_id"]]
    problem, dtype = json.loads(group[0]["problem_json"]), group[0]["dtype"]
    cm = model.load_shipped("nvidia-h200")
    out = mod.whole_space_figures(cm, "rmsnorm", group, problem, dtype)
    lat = np.array([r["latency_ms"] for r in group])
    order = model.rank(cm, features.candidates_table("rmsnorm", problem, dtype,
                                                     [json.loads(r["config_json"]) for r in group], cm.hardware))
    assert out["configs"] == len(group)
    assert out["top1"] == pytest.approx(lat.min() / lat[order[0]])
    assert out["top8"] == pytest.approx(lat.min() / lat[np.asarray(order[:8])].min()) and out["top8"] >= out["top1"]
    assert lat[order[out["best_rank"] - 1]] == lat.min()


def test_replay_tune_inner_folds_keep_the_held_out_groups_out_and_shapes_apart():
    """replay_tune.py --inner: every whole-space group outside the model's held-out set is replayed in exactly one
    fold; no fold trains on a held-out group or on any group of a shape it replays (every dtype, kernel hash)."""
    import numpy as np

    from costmodel import evaluation, model

    replay_tune = _script_module("replay_tune")
    table, _ = model.training_table(ROOT / "data")
    info = evaluation.group_info(table)
    shape_of = dict(zip(info["group_id"].to_pylist(), evaluation.shape_codes(info)[1]))
    swept = {g for g, e in zip(info["group_id"].to_pylist(), info["exhaustive"].to_pylist()) if e}
    outside = set(model.load_shipped("nvidia-h200").meta["heldout"]["groups"])
    folds = replay_tune.inner_folds(table, outside, 3)
    tests = [set(test) for _, test in folds]
    assert sum(len(t) for t in tests) == len(set().union(*tests)) == len(swept - outside) > 0
    for train, test in folds:
        assert not (set(train) | set(test)) & outside
        assert not {shape_of[g] for g in train} & {shape_of[g] for g in test}
        assert set(test) <= swept
    assert np.all([len(t) > 0 for t in tests])


def test_rows_stay_valid_under_a_tolerance_only_where_the_verification_picks_alike(bench_helion):
    """--still-valid under the shipped 1% tolerance on session 38's race of restarts 1 (its tunes at the 3% of before
    session 39): rms_norm 4096x2048 bf16 kept the default over a finalist re-timed 2.8% faster, which 1% picks, so it
    is stale; softmax 64x3072 and rms_norm 13911x12466's three tunes would pick alike (``tuner.helion.tolerance_alike``)
    and stay valid. At the 3% they ran every row is valid. Session 39's rows, raced at 1%, are valid as they are."""
    from costmodel.helion import model as helion_model
    from tuner import helion as htune

    cm, rows = helion_model.load("nvidia-h200"), _raced(bench_helion, "2026-12-05-s38a.2")
    assert [r["index"] for r in rows] == [5, 10, 11, 11, 11] and htune.TOLERANCE == 0.01
    now = {"restarts": 1, **BEFORE_S57}
    assert [o["valid"] for o in bench_helion.still_valid(rows, cm, now)] == [True, False, True, True, True]
    assert all(o["valid"] for o in bench_helion.still_valid(rows, cm, {**now, "tolerance": 0.03}))
    search, default = rows[1]["costmodel"]["search"], rows[1]["default"]["config"]
    assert search["best"]["config"] == default and search["tolerance"] == 0.03
    assert htune.tolerance_alike(search, default, 0.03) and not htune.tolerance_alike(search, default, 0.01)
    ran = _raced(bench_helion, "2026-12-05-s39a")
    assert all(r["costmodel"]["search"]["tolerance"] == 0.01 for r in ran)
    assert all(o["valid"] for o in bench_helion.still_valid(ran, cm, BEFORE_S44))
    assert bench_helion.parse_recipe(("tolerance=0.03", "ties=1")) == {"tolerance": 0.03, "ties": 1}
    for bad in ("tolerance=x", "tolerance=-0.01", "tolerance=1.5", "ties=0.5"):  # a fraction of the default's time
        with pytest.raises(click.BadParameter):
            bench_helion.parse_recipe((bad,))


def test_whole_space_groups_counts_the_configs_a_group_lacks(tmp_path, data_root):
    """scripts/whole_space_groups.py: a whole-space matmul group of today's kernel copied without three of its valid
    configs is incomplete and lacks exactly three; the group as recorded is complete and lacks none."""
    import pyarrow.dataset as pads

    from costmodel import dataset, space
    from costmodel.hardware import KNOWN
    from costmodel.kernels import get_family

    wsg, fam, hw = _script_module("whole_space_groups"), get_family("matmul"), KNOWN["nvidia-h200"]
    swept = dataset.read(data_root, ["group_id"], (pads.field("kernel") == "matmul") & pads.field("exhaustive")
                         & pads.field("source_hash").isin(list(fam.group_hashes)))
    rows = dataset.read(data_root, None, pads.field("group_id") == swept["group_id"][0].as_py()).to_pylist()
    problem, dtype = json.loads(rows[0]["problem_json"]), rows[0]["dtype"]
    valid = {dataset.canonical_json(c) for c in space.enumerate_valid(fam, problem, dtype, hw)}
    dropped = sorted(valid)[:3]
    less = [r for r in rows if r["config_json"] not in dropped]
    for root, keep in ((tmp_path / "whole", rows), (tmp_path / "less", less)):
        dataset.write_shard(root, hw.gpu, "matmul", "old", [{k: v for k, v in r.items() if k not in dataset.PARTITIONS}
                                                             for r in keep])
        (g,) = wsg.groups(str(root), None)
        assert (g["complete"], g["lacking"]) == ((True, 0) if keep is rows else (False, 3))
        assert wsg.summary([g])["matmul"]["lacking"] == g["lacking"]


def test_alignment_gap_parts_aligned_rows_by_the_line_and_keeps_every_group(data_root):
    """scripts/alignment_gap.py --line 128: each aligned class of the default parts into rows a whole line apart and
    rows 16 bytes apart only, the groups the same; a 5000-element bf16 row (10,000 bytes) is aligned to 16 only."""
    ag = _script_module("alignment_gap")
    assert [ag.aligned(n, "bfloat16", 128) for n in (5000, 5120, 4095)] == [
        "aligned to 16 only", "aligned to 128", "unaligned"]
    plain, lined = ag.pooled(data_root, "matmul", 10, 64), ag.pooled(data_root, "matmul", 10, 64, 128)
    by_group = {r["group_id"]: name for name, rows in lined.items() for r in rows}
    assert sorted(by_group) == sorted(r["group_id"] for rows in plain.values() for r in rows)
    for name, rows in plain.items():  # a group's class with the line is its class without, one aligned part picked
        for r in rows:
            assert by_group[r["group_id"]].replace("aligned to 128", "aligned").replace("aligned to 16 only",
                                                                                          "aligned") == name
    assert any("16 only" in name for name in lined)


def test_stride_probe_takes_the_large_gap_shapes_and_data_groups_whose_rows_miss_the_line(data_root, tmp_path):
    """scripts/experiments/stride_probe.py --dry-run's choice: issue 17's large shapes that have a best config in the
    former rows, then the data's largest whole-space matmul groups whose rows TMA takes but are not 128-byte apart."""
    sp = _script_module("experiments/stride_probe")
    rows = tmp_path / "gap.jsonl"
    rows.write_text("".join((SCRIPTS / f"results/bench_matmul_gap-h200-2026-12-01-{s}.jsonl").read_text()
                            for s in ("s9", "s10", "s11", "s13")))
    todo = sp.shapes(str(rows), data_root, 3)
    previous = [(p, d) for p, d, _, src in todo if src == "previous"]
    from costmodel import benchmarks

    assert previous == [(p, d) for _, p, d in benchmarks.KERNEL_GAP if p["M"] > 64]
    data = [(p, d) for p, d, _, src in todo if src == "data"]
    assert 0 < len(data) <= 3
    for p, d in data:
        assert p["M"] >= 1024 and (sp.misaligned(p["N"], 2) or sp.misaligned(p["K"], 2))
        assert p["N"] * 2 % 16 == 0 == p["K"] * 2 % 16
    assert not sp.misaligned(5120, 2) and sp.misaligned(5000, 2) and not sp.misaligned(4095, 2)
    import torch

    for t in (torch.randn(30, 5000).to(torch.bfloat16), torch.randn(7, 500)):  # the values, rows a line apart
        p = sp.padded(t)
        assert torch.equal(p, t) and p.stride(0) * p.element_size() % sp.LINE == 0 and p.stride(0) > t.shape[1]
        p.fill_(float("nan"))  # the probe's Triton row copy (the interpreter's here) writes every element, both ways
        sp.row_copy(t, p)()
        back = torch.full_like(t, float("nan"))
        sp.row_copy(p, back)()
        assert torch.equal(p, t) and torch.equal(back, t)
    # the gate before any timing: only a callable that writes every element within tolerance is timed
    t = torch.randn(30, 50)
    row, timed, out, right = {"rel_err": {}}, {}, torch.empty(30, 50), lambda: (lambda: out.copy_(t))
    sp.checked("right", right, out, t, 1e-3, row, timed)
    sp.checked("half", lambda: (lambda: out[:15].copy_(t[:15])), out, t, 1e-3, row, timed)
    sp.checked("off", lambda: (lambda: out.copy_(t * 1.01)), out, t, 1e-3, row, timed)
    sp.checked("refused", lambda: 1 / 0, out, t, 1e-3, row, timed)
    assert list(timed) == ["right"] and row["rel_err"]["right"] == 0.0 and row["rel_err"]["off"] > 1e-3
    assert row["rel_err"]["refused"].startswith("ZeroDivisionError")
    assert row["rel_err"]["half"] != row["rel_err"]["half"]  # NaN: unwritten elements


def test_load_probe_mixes_match_torch_and_hint_the_vector_the_rows_allow(data_root, tmp_path):
    """scripts/experiments/load_probe.py: it races TMA configs without a split tail (and, with --unaligned, the
    largest groups whose rows TMA refuses, in the pointer modes); every mix of TMA, pointer and hinted pointer operands
    computes A @ B (the interpreter here) on rows 16-byte but not 128-byte aligned, both schedules, and on rows 8
    bytes apart; the hint is the largest vector every stride, K and N are whole multiples of."""
    lp = _script_module("experiments/load_probe")
    rows = tmp_path / "gap.jsonl"
    rows.write_text("".join((SCRIPTS / f"results/bench_matmul_gap-h200-2026-12-01-{s}.jsonl").read_text()
                            for s in ("s9", "s10", "s11", "s13")))
    todo = lp.todo(str(rows), data_root, 1)
    assert todo and all(c["TMA"] and not c["SPLIT_TAIL"] for _, _, c, _ in todo)
    assert len(todo) < len(lp.shapes(str(rows), data_root, 1))  # 4095^3's best is a pointer config
    assert lp.vec(2, 1000, 5000, 5000, 1000, 5000) == 8 and lp.vec(2, 1000, 4095) == 1 and lp.vec(4, 12, 20) == 4
    assert lp.vec(2, 1004, 5000) == 4 and lp.vec(2, 5418, 5474) == 2 and lp.vec(4, 6, 10) == 2
    pointer = lp.unaligned(data_root, 2)  # the data's largest groups whose rows TMA refuses but a hint may vectorise
    assert len(pointer) == 2 and all(c["TMA"] != 1 and lp.mixes_of(c) == ("ppp", "vvv") for _, _, c, _ in pointer)
    assert all(not c["SPLIT_TAIL"] for _, _, c, _ in lp.unaligned(data_root, 10))  # the probe's kernel has none
    for p, d, _, _ in pointer:
        e = 2 if d != "float32" else 4
        assert (p["K"] * e % 16 or p["N"] * e % 16) and lp.vec(e, p["K"], p["N"]) > 1
    flops = [p["M"] * p["N"] * p["K"] for p, _, _, _ in pointer]
    assert flops == sorted(flops, reverse=True)
    from costmodel import hardware
    from costmodel.kernels import get_family

    fam, hw = get_family("matmul"), hardware.KNOWN["nvidia-h200"]
    # rows 80 and 144 bytes apart (16-byte aligned, TMA and 8-element hints), then 72 and 136 (8 bytes: pointers only)
    aligned, eight = {"M": 40, "N": 72, "K": 40}, {"M": 40, "N": 68, "K": 36}
    for problem, persistent, tma, hint in ((aligned, 0, 1, 8), (aligned, 1, 1, 8), (eight, 0, 0, 4)):
        a, b = fam.make_inputs(problem, "float16", "cpu")
        ref = fam.reference(problem, (a, b))
        assert lp.vec(2, a.stride(0), b.stride(0), problem["K"], problem["N"]) == hint
        config = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 8, "TMA": tma, "PERSISTENT": persistent,
                  "SPLIT_TAIL": 0, "EPILOGUE_SUBTILE": persistent, "num_warps": 4, "num_stages": 2}
        for mix in lp.mixes_of(config):
            c = fam.make_output(problem, "float16", "cpu").fill_(float("nan"))
            lp.bound_mix(fam, problem, a, b, c, config, hw, mix)()
            assert float((c.float() - ref).norm() / ref.norm()) < 1e-3, (problem, persistent, mix)


def test_knob_value_sets_each_config_of_the_value_against_its_twin_in_every_whole_space_group(data_root):
    """scripts/knob_value.py on the data's TMA=2 rows: every whole-space matmul group that holds TMA=2 beside other
    values is read; each TMA=2 config finds its TMA=0 twin (the whole space holds both); the best without over the
    best with is the groups' own minimum times."""
    import pyarrow.dataset as pads

    from costmodel import dataset

    kv = _script_module("knob_value")
    out = kv.run(str(data_root), "nvidia-h200", "matmul", "TMA", 2, 0)
    t = dataset.read(str(data_root), kv.COLS, (pads.field("gpu") == "nvidia-h200")
                     & (pads.field("kernel") == "matmul")).to_pandas()
    t = t[(t["status"] == "ok") & t.groupby("group_id")["exhaustive"].transform("any")]
    tma = t["config_json"].map(lambda c: json.loads(c)["TMA"])
    held = t[tma == 2]["group_id"].unique()
    assert out["groups"] == len(held) > 0
    for r in out["rows"]:
        assert r["twins"] == r["value_configs"] and 0 <= r["value_faster_share"] <= 1
    g = t[t["group_id"] == held[0]]
    row = next(r for r in out["rows"] if r["problem"] == json.loads(g["problem_json"].iloc[0])
               and r["dtype"] == g["dtype"].iloc[0])
    with_value = tma[g.index] == 2
    assert row["best_without_over_best_with"] == pytest.approx(g["latency_ms"][~with_value].min()
                                                              / g["latency_ms"][with_value].min())
    assert out["value_best_in"] == sum(r["best_without_over_best_with"] > 1 for r in out["rows"])
