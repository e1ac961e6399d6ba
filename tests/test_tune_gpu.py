"""`costmodel tune` as a user runs it, on the GPU: a new process, a cold result cache, the shipped model. The GPU
suite otherwise never runs the command whole (the device job's smoke step did, outside the suite)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.gpu
@pytest.mark.usefixtures("shipped_gpu")
@pytest.mark.parametrize("kernel,shape,dtype", [("rmsnorm", "M=4096,N=4096", "float16"),
                                                ("matmul", "M=333,N=2049,K=1000", "bfloat16")])
def test_tune_command_on_the_gpu(kernel, shape, dtype, tmp_path):
    env = {**os.environ, "COSTMODEL_CACHE_DIR": str(tmp_path / "cache"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    # the command's own process asks the driver for the hardware and leaves torch (3.8 s to import on the H200 host)
    # to the benchmarker's processes. Whether it imported torch is read in that process at exit: `-X importtime` is
    # passed on to the forkserver, whose torch import shares the stderr (session 12)
    torch_seen = tmp_path / "torch_in_main_process"
    wrapper = ("import atexit, runpy, sys; "
               f"atexit.register(lambda: open({str(torch_seen)!r}, 'w').write(str('torch' in sys.modules))); "
               "sys.argv = ['costmodel', *sys.argv[1:]]; runpy.run_module('costmodel', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", wrapper, "tune", "--kernel", kernel, "--shape", shape, "--dtype", dtype,
                           "--no-cache", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert torch_seen.read_text() == "False"
    out = json.loads(proc.stdout)
    best = out["best"]
    assert best["config"] is not None and best["latency_ms"] > 0 and best["graph_ms"] > 0 and best["eager_ms"] > 0
    assert out["benchmarked"] >= 8 and out["candidates"] > out["benchmarked"]
    marks = list(out["since_start_s"].values())
    assert marks == sorted(marks) and marks[-1] < 120, out["since_start_s"]


@pytest.mark.gpu
def test_the_driver_reports_the_record_torch_does():
    """``hardware.current`` asks the CUDA driver (no torch, no context); every recorded row's hardware came from
    torch and Triton's driver: the two must agree field for field, or new rows would read as another GPU."""
    from costmodel import hardware

    assert hardware.from_driver() == hardware.from_torch()


@pytest.mark.parametrize("fixture", ["shipped_gpu", "shipped_helion_gpu"])
@pytest.mark.parametrize("card", ["nvidia-h200", "nvidia-h100-80gb-hbm3"])
def test_the_model_path_s_gpu_tests_run_on_a_card_with_a_shipped_model_and_skip_on_another(fixture, card, request,
                                                                                          monkeypatch):
    """An H100 has no shipped model: there the GPU tests of the model's path skip, naming the card, rather than fail
    (Triton's) or time Helion's whole search (Helion's); on the H200 they run."""
    from dataclasses import replace

    from costmodel import hardware

    monkeypatch.setattr(hardware, "current", lambda *a, **k: replace(hardware.KNOWN["nvidia-h200"], gpu=card))
    if card == "nvidia-h200":
        assert request.getfixturevalue(fixture) == card
    else:
        with pytest.raises(pytest.skip.Exception, match=f"model ships for {card} .only for nvidia-h200"):
            request.getfixturevalue(fixture)
