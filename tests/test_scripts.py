"""Every file under scripts/ is listed in scripts/README.md and starts: an entry point answers --help as
`python scripts/X.py --help` would (its own folder first on sys.path, so imports between scripts resolve), a module
the scripts import imports, a shell script parses. All Python scripts in one interpreter (torch imported once),
each script's own modules forgotten before the next starts."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
PY = sorted(p.relative_to(SCRIPTS).as_posix() for p in SCRIPTS.rglob("*.py") if "results" not in p.parts)
SH = sorted(p.relative_to(SCRIPTS).as_posix() for p in SCRIPTS.rglob("*.sh"))
# imported only on the GPU host, where they are carried as wheels (scripts/device_job.sh)
GPU_HOST_ONLY = {"helion"}

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
    results[path] = {"entry": entry, "code": code, "out": out.getvalue()[-2000:], "error": error, "missing": missing}
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
case "$*" in
  *"-m pytest"*) echo "1 failed, 9 passed"; exit 1 ;;
  *) echo '{"row": 1}' ;;
esac
"""


def test_device_job_fails_when_a_step_fails_and_runs_the_whole_gpu_suite(tmp_path):
    """On stand-ins for the GPU host's python3 and nvidia-smi: pytest failing makes the job fail, the later
    steps still run, and the tests step runs every gpu-marked test under tests/, unfiltered."""
    bin_, out = tmp_path / "bin", tmp_path / "out"
    for d in (bin_, out, tmp_path / ".whl"):
        d.mkdir()
    (tmp_path / ".whl" / "stub.whl").touch()
    (bin_ / "python3").write_text(_STUB_PYTHON)
    (bin_ / "nvidia-smi").write_text("#!/bin/bash\necho 'name'\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "OUT": str(out)}
    env.pop("TEST_ARGS", None)
    proc = subprocess.run(["bash", str(SCRIPTS / "device_job.sh"), "tests tune"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "tests FAILED (exit 1)" in proc.stdout and "failed: tests" in proc.stdout
    calls = (out / "calls").read_text().splitlines()
    pytest_call = next(c for c in calls if "-m pytest" in c)
    assert pytest_call.endswith(" tests/") and " -m gpu " in pytest_call and " -k" not in pytest_call
    assert any("scripts/bench_tune.py" in c for c in calls)  # the step after the failed one ran
