"""Mistakes on the command line give one line on stderr and exit status 2, before anything asks for a GPU and
with nothing written: shapes, model directories, collect's --where, and the hints each command gives."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import costmodel
from costmodel import hardware, model

REPO = Path(__file__).resolve().parents[1]


def _one_line_error(code: int, stderr: str, *needles: str) -> None:
    assert code == 2, stderr
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr
    for n in needles:
        assert n in stderr, stderr


# --- item 5 and 7: --shape ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,needle", [
    ("M=9223372036854775808,N=64,K=64", "over the largest dim, 2147483647"),  # past int64: OverflowError
    ("M=18014398509481984,N=64,K=64", "over the largest dim, 2147483647"),  # past 2**53: ArrowInvalid
    ("M=100000000000000000000000,N=64,K=64", "over the largest dim, 2147483647"),  # was "must be an integer >= 1"
    ("M=2147483648,N=64,K=64", "M=2147483648 is over the largest dim"),  # the first value past the bound
    ("M=1,,N=2,K=3", "expected NAME=VALUE"),
    ("M=1,N=2,K=3,", "expected NAME=VALUE"),
    ("M=1,M=2,N=2,K=3", "dim M given twice"),
    ("=4,N=2,K=3", "expected NAME=VALUE"),
])
def test_bad_shapes_are_one_line(shape, needle, cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "cache"))
    for extra in (["--predict-only"], ["--record", "--data", str(tmp_path / "data")]):
        code, stdout, stderr = cli("tune", "--kernel", "matmul", "--shape", shape, *extra)
        _one_line_error(code, stderr, needle)
        assert stdout == ""
    assert not (tmp_path / "data").exists() and not (tmp_path / "cache").exists()


def test_largest_dim_is_accepted(cli):
    code, stdout, stderr = cli("tune", "--kernel", "matmul", "--shape", "M=2147483647,N=64,K=64", "--predict-only",
                               "-k", "1", "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["problem"]["M"] == 2**31 - 1


def test_python_api_refuses_a_dim_past_the_bound():
    from costmodel.errors import CostModelError
    from costmodel.hardware import KNOWN
    from tuner.tune import predict

    with pytest.raises(CostModelError, match="over the largest dim"):
        predict("matmul", {"M": 2**63, "N": 64, "K": 64}, "float16", KNOWN["nvidia-h200"],
                model.load_shipped("nvidia-h200"))


# --- item 6: a model's meta.json ------------------------------------------------------------------------

def _model_copy(tmp_path: Path, edit) -> Path:
    d = tmp_path / "m"
    shutil.copytree(model.MODELS_DIR / "nvidia-h200", d)
    meta = json.loads((d / model.META_FILE).read_text())
    (d / model.META_FILE).write_text(json.dumps(edit(meta)))
    return d


@pytest.mark.parametrize("edit,needle", [
    (lambda m: {k: v for k, v in m.items() if k != "hardware"}, "has no hardware"),
    (lambda m: {k: v for k, v in m.items() if k != "gpu"}, "has no gpu"),
    (lambda m: {}, "has no gpu, hardware, feature_schema_version, feature_names"),
    (lambda m: m | {"hardware": {"gpu": "nvidia-h200"}}, "bad gpu or hardware record"),
    (lambda m: m | {"hardware": "H200"}, "bad gpu or hardware record"),
])
def test_meta_without_what_train_writes_is_one_line(edit, needle, tmp_path, cli):
    d = _model_copy(tmp_path, edit)
    code, _, stderr = cli("tune", "--kernel", "matmul", "--shape", "M=64,N=64,K=64", "--predict-only",
                          "--model", str(d))
    _one_line_error(code, stderr, needle, str(d))
    assert "vNone" not in stderr
    code, _, stderr = cli("evaluate", "--model", str(d))
    _one_line_error(code, stderr, needle)


def test_predict_only_takes_the_models_hardware_record(tmp_path, cli):
    """The check above does not refuse a good copy; its hardware record is what ranks."""
    d = _model_copy(tmp_path, lambda m: m)
    code, stdout, stderr = cli("tune", "--kernel", "matmul", "--shape", "M=64,N=64,K=64", "--predict-only",
                               "--model", str(d), "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["gpu"] == "nvidia-h200"


# --- item 7: collect's hints and --where -------------------------------------------------------------------

def test_collect_without_a_gpu_does_not_suggest_predict_only(tmp_path, monkeypatch, cli):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    code, _, stderr = cli("collect", "--kernel", "matmul", "--groups", "1", "--out", str(tmp_path / "d"))
    _one_line_error(code, stderr, "no CUDA GPU is visible", "GPU host")
    assert "--predict-only" not in stderr
    assert not (tmp_path / "d").exists()


def test_where_on_a_dim_the_family_lacks_is_checked_before_the_gpu(tmp_path, monkeypatch, cli):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # no GPU here: the GPU check would answer first
    code, _, stderr = cli("collect", "--kernel", "softmax", "--where", "K<=64", "--out", str(tmp_path / "d"))
    _one_line_error(code, stderr, "softmax has no dim K")
    assert not (tmp_path / "d").exists()


def test_where_that_leaves_no_problem_is_an_error(tmp_path, monkeypatch, cli):
    import costmodel.hardware

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(costmodel.hardware, "current", lambda device=None, hint="": costmodel.hardware.KNOWN["nvidia-h200"])
    code, _, stderr = cli("collect", "--kernel", "matmul,softmax", "--groups", "2", "--where", "N>=1000000000",
                          "--out", str(tmp_path / "d"))
    _one_line_error(code, stderr, "leaves no problem of matmul, softmax")
    assert not (tmp_path / "d").exists()


def test_tune_without_a_gpu_still_suggests_predict_only(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "cache"))
    code, _, stderr = cli("tune", "--kernel", "matmul", "--shape", "M=64,N=64,K=64")
    _one_line_error(code, stderr, "no CUDA GPU is visible", "--predict-only")


# --- item 12: --version and piped tables ----------------------------------------------------------------

def test_version(cli):
    import costmodel

    code, stdout, _ = cli("--version")
    assert code == 0 and stdout.strip() == f"costmodel, version {costmodel.__version__}"


def test_piped_tables_keep_knob_names_and_paths_whole(tmp_path):
    """A pipe used to get rich's 80 columns: knob names cut (EPILOGUE_SUBT…) and every row wrapped."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "COLUMNS"} | {"PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "costmodel", "kernels"], capture_output=True, text=True, cwd=REPO,
                         env=env, check=True)
    assert "EPILOGUE_SUBTILE" in out.stderr and "…" not in out.stderr
    rows = [line for line in out.stderr.splitlines() if line.startswith("│ matmul")]
    assert len(rows) == 1 and len(rows[0]) > 80, out.stderr
    out = subprocess.run([sys.executable, "-m", "costmodel", "models"], capture_output=True, text=True, cwd=REPO,
                         env=env, check=True)
    assert str(model.MODELS_DIR / "nvidia-h200") in out.stderr, out.stderr
    assert str(model.MODELS_DIR / "nvidia-h200" / "helion") in out.stderr, out.stderr  # the Helion model too


@pytest.mark.parametrize("extra,needle", [
    (["--active", "2"], "not with --active"),
    (["--dask", "tcp://127.0.0.1:1"], "not with --active, --dask"),
    (["--where", "M<0"], "holds no whole-space group of matmul"),
])
def test_collect_complete_refuses_what_it_cannot_do(extra, needle, cli, tmp_path, data_root):
    code, stdout, stderr = cli("collect", "--kernel", "matmul", "--complete", "--out", str(data_root), *extra)
    _one_line_error(code, stderr, needle)
    assert stdout == ""


def test_collect_complete_remeasure_plans_each_whole_space_group_whole_again(cli, data_root, monkeypatch):
    """`collect --complete --remeasure`: each whole-space group's every valid config, measured again in this run
    (one call's times for a group whose rows mix calls), where --complete alone measures only what a group lacks."""
    import contextlib

    from collect import plan as planning, runner
    from costmodel import benchmark

    ran = []

    def run_plan(plan, out, bench, hw, run_id, resume, **kw):
        ran.append((plan, resume))
        return {"run_id": run_id, "groups": len(plan), "measured": 0, "counts": {"ok": 0}, "ok_per_s": 0, "wall_s": 0}

    monkeypatch.setattr(runner, "run_plan", run_plan)
    monkeypatch.setattr(benchmark, "interpreting", lambda: True)
    monkeypatch.setattr(benchmark, "IsolatedBenchmarker", lambda *a, **kw: contextlib.nullcontext())
    for extra, resume in (([], True), (["--remeasure"], False)):
        code, _, stderr = cli("collect", "--kernel", "rmsnorm", "--complete", "--where", "M<=16", "--out",
                              str(data_root), *extra)
        assert code == 0, stderr
        plan, resumed = ran[-1]
        want = planning.complete_plan(str(data_root), ["rmsnorm"], None, hardware.INTERPRETER,
                                      (planning.DimBound.parse("M<=16"),))
        assert resumed is resume and plan == want and all(g.exhaustive for g in plan) and plan


# --- the process's exit: no interpreter teardown, nothing lost -----------------------------------------------

_TEARDOWN = "class D:\n    def __del__(self):\n        print('torn down')\nd = D()\n"


def _run_entry(args: list[str], before: str = "") -> subprocess.CompletedProcess:
    code = (f"import atexit, sys\n{before}atexit.register(lambda: print('exit handler ran'))\n"
            f"sys.argv = ['costmodel', *{args!r}]\nfrom costmodel.cli import run\nrun()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})


def test_the_entry_keeps_status_output_and_exit_handlers_but_skips_the_teardown():
    """`costmodel` leaves through os._exit after its exit handlers: the teardown held a tune's captured output open
    0.95 s against 0.08 s (scripts/experiments/exit_probe.py)."""
    ok = _run_entry(["--version"], before=_TEARDOWN)
    assert ok.returncode == 0 and ok.stdout.splitlines() == [f"costmodel, version {costmodel.__version__}",
                                                             "exit handler ran"], ok
    bad = _run_entry(["tune", "--kernel", "matmul", "--shape", "M=1,,N=2,K=3"])
    _one_line_error(bad.returncode, bad.stderr, "expected NAME=VALUE")
    assert bad.stdout == "exit handler ran\n"


def test_the_process_server_leaves_without_a_teardown():
    """The benchmarker's process server imports costmodel.forkserver_exit last: what it wrote is flushed, and it
    leaves without tearing its modules down (with both teardowns a tune's captured output stayed open 1.7 s after its
    last line: scripts/experiments/exit_probe.py)."""
    from costmodel import benchmark

    assert benchmark._PRELOAD[-1] == "costmodel.forkserver_exit"
    code = f"import sys\n{_TEARDOWN}import costmodel.forkserver_exit\nsys.stdout.write('written, no newline')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0 and out.stdout == "written, no newline", out
