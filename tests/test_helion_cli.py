"""``costmodel tune --kernel helion:<name>``: a costmodel Helion kernel from the command line. On a CPU, with
--predict-only, the model's ranking of the kernel's candidates (the same as the autotuner_fn's); bad input as one
line and exit status 2; on the GPU, a tune through Helion's call path, answered by Helion's cache the second time.
Skipped where helion does not import."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("helion")

from costmodel.errors import CostModelError  # noqa: E402
from costmodel.helion import configs, families, helion_version  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402
from tuner import helion as htune  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GPU = "nvidia-h200"
PROBLEM, DTYPE = {"M": 4096, "N": 2048}, "bfloat16"  # the race's rms_norm whose batch timing misled (session 13)


def test_predict_only_ranks_a_helion_kernel_s_candidates_as_its_autotuner_fn_does(cli):
    code, stdout, stderr = cli("tune", "--kernel", "helion:rms_norm", "--shape", "M=4096,N=2048", "--dtype", DTYPE,
                               "--predict-only", "-k", "5", "--json")
    assert code == 0, stderr
    out = json.loads(stdout)
    fam = families.get("rms_norm")
    bound, args = fam.bind(PROBLEM, DTYPE)
    ranked, default = htune.CostModelAutotuner(gpu=GPU).ranked(helion_model.load(GPU), bound, args)
    key = configs.config_json
    assert (out["gpu"], out["kernel"], out["problem"], out["dtype"]) == (GPU, "helion:rms_norm", PROBLEM, DTYPE)
    assert out["candidates"] == len(ranked) > 1000 and out["benchmarked"] == 0
    assert [key(r["config"]) for r in out["top"]] == [key(c) for c in ranked[:5]]
    assert [r["rank"] for r in out["top"]] == [1, 2, 3, 4, 5]
    assert key(out["default_config"]) == key(default)
    for r in out["top"]:  # each a config this Helion's spec takes as it is (normalize raises, or changes it)
        c = families.helion_config(r["config"])
        bound.config_spec.normalize(c)
        assert key(configs.normalise(c, families.op_counts(bound.config_spec))) == key(r["config"])
    # trained under Helion 1.4.0: anywhere else it says the candidates are this Helion's
    trained_on = helion_model.load(GPU).meta["helion_versions"]
    assert (out["note"] is None) == (helion_version() in trained_on)
    assert (out["note"] is None) == ("note:" not in stderr)


def test_predict_only_shows_each_config_by_its_knobs_other_than_the_default(cli):
    code, stdout, stderr = cli("tune", "--kernel", "helion:rms_norm", "--shape", "M=4096,N=2048", "--dtype", DTYPE,
                               "--predict-only", "-k", "8")
    assert code == 0 and stdout == "", stderr
    table = stderr.replace("\n", " ")
    assert "predicted top 8 of" in table and '"num_warps"' in table and "default: {" in table


@pytest.mark.parametrize("args, message", [
    (["--kernel", "helion:conv9d", "--shape", "M=1"], "unknown Helion kernel 'helion:conv9d'; known: add_rms_norm"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64"], "helion:rms_norm needs dims M,N; missing N"),
    (["--kernel", "helion:swiglu", "--shape", "M=64,N=0"], "helion:swiglu: dim N='0' must be an integer >= 1"),
    (["--kernel", "helion:attention", "--shape", "B=1,H=2,S=64,D=96,CAUSAL=0"], "head dim D=96 not supported"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64", "--dtype", "float64"],
     "helion:rms_norm does not support dtype 'float64'"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64", "--steps", "2"], "--steps is an option of the Triton"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64", "--exhaustive"], "--exhaustive is an option of"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64", "--budget-s", "5"], "--budget-s is an option of"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64", "-k", "0"], "-k must be at least 1"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64", "--objective", "cold"], "--objective cold: eager or"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64"], "no CUDA GPU is visible"),
    (["--kernel", "helion:rms_norm", "--shape", "M=64,N=64", "--predict-only", "--gpu", "nvidia-b200"],
     "no model at"),
])
def test_bad_input_is_one_line(args, message, cli):
    code, stdout, stderr = cli("tune", *args)
    assert code == 2 and stdout == "", stderr
    assert stderr.startswith("error: ") and stderr.count("\n") == 1 and message in stderr, stderr


def test_what_a_tune_writes_to_stdout_goes_to_stderr_and_stdout_keeps_the_json():
    """Helion's progress bars are rich consoles on stdout, and its compile processes share the command's stdout: inside
    ``stdout_on_stderr`` all of it reaches stderr, and what the command prints after it is the only stdout."""
    code = """
import json, os, subprocess, sys
from rich.progress import Progress
from costmodel.cli import stdout_on_stderr
with stdout_on_stderr():
    with Progress() as progress:  # as Helion's iter_with_progress draws its bars
        progress.update(progress.add_task("costmodel top-k precompiling", total=1), advance=1)
    print("from python")
    os.write(1, b"from the fd\\n")
    subprocess.run([sys.executable, "-c", "print('from a child')"], check=True)
print(json.dumps({"ok": 1}))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"ok": 1}
    for line in ("costmodel top-k precompiling", "from python", "from the fd", "from a child"):
        assert line in r.stderr


@pytest.mark.gpu
def test_a_helion_kernel_tuned_from_the_command_line_is_answered_by_helion_s_cache_next_time(tmp_path,
                                                                                             shipped_helion_gpu):
    """Two processes, one Helion cache: the first ranks, times the top k and the default and picks; the second
    answers from the cache with the same config, searching nothing, and times the pick and the default after the
    call."""
    env = {**os.environ, "HELION_CACHE_DIR": str(tmp_path / "helion"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def run():
        r = subprocess.run([sys.executable, "-m", "costmodel", "tune", "--kernel", "helion:rms_norm", "--shape",
                            "M=4096,N=2048", "--dtype", DTYPE, "--json"], env=env, capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout)

    first, second = run(), run()
    assert first["gpu"] == shipped_helion_gpu and first["path"] == "model" and first["fallback"] is None
    assert first["benchmarked"] >= htune.K and first["search"]["timed"]
    assert first["best"]["latency_ms"] > 0 and first["default_latency_ms"] > 0
    assert first["helion_config"].startswith("helion.Config(")
    assert second["path"] == "cache" and second["benchmarked"] == 0 and not second["search"]
    assert configs.config_json(second["best"]["config"]) == configs.config_json(first["best"]["config"])
    assert second["best"]["latency_ms"] > 0 and second["default_latency_ms"] > 0  # timed after the cache's answer
    assert second["wall_s"] < first["wall_s"]


def test_kernels_lists_the_helion_kernels_that_collect_and_tune_take(cli):
    code, stdout, stderr = cli("kernels", "--json")
    assert code == 0, stderr
    listed = {r["kernel"]: r for r in json.loads(stdout)["helion_kernels"]}
    assert set(listed) == {f.kernel for f in families.FAMILIES.values()}
    for name, r in listed.items():
        fam = families.get(name)
        assert r["dims"] == list(fam.dims) and r["twin"] == fam.twin
        assert fam.check_problem(r["sample_problem"]) == r["sample_problem"]  # a problem tune takes as it is


def test_models_lists_the_shipped_helion_model_beside_the_triton_one(cli):
    code, stdout, stderr = cli("models", "--json")
    assert code == 0, stderr
    out = json.loads(stdout)
    meta = json.loads((helion_model.model_dir(GPU) / "meta.json").read_text())
    assert [m["gpu"] for m in out["shipped"]] == [GPU] and "helion_versions" not in out["shipped"][0]
    [h] = out["shipped_helion"]
    assert h["gpu"] == GPU and h["path"] == str(helion_model.model_dir(GPU)) and h["compatible"]
    assert (h["data_hash"], h["helion_versions"], h["split"]) == (meta["data"]["hash"], meta["helion_versions"],
                                                                   meta["metrics"]["split"])


def test_predict_only_without_gpu_takes_the_one_gpu_with_a_shipped_helion_model(tmp_path, monkeypatch):
    """--predict-only without --gpu ranks with the one GPU's shipped Helion model (``model.shipped``'s Helion
    pattern, a corrupt meta.json counted under its GPU's folder); with none or several it asks for --gpu."""
    from costmodel import model
    from tuner.helion_problem import model_gpu

    monkeypatch.setattr(model, "MODELS_DIR", tmp_path)
    with pytest.raises(CostModelError, match="needs --gpu .*none"):
        model_gpu(None, None)
    (tmp_path / "gpu-a" / "helion").mkdir(parents=True)
    (tmp_path / "gpu-a" / "helion" / model.META_FILE).write_text("{not json")
    (tmp_path / "gpu-b").mkdir()
    (tmp_path / "gpu-b" / model.META_FILE).write_text(json.dumps({"gpu": "gpu-b"}))  # a Triton model only
    assert model_gpu(None, None) == "gpu-a"
    assert model_gpu("gpu-b", None) == "gpu-b"
    (tmp_path / "gpu-b" / "helion").mkdir()
    (tmp_path / "gpu-b" / "helion" / model.META_FILE).write_text(json.dumps({"gpu": "gpu-b"}))
    with pytest.raises(CostModelError, match="gpu-a, gpu-b"):
        model_gpu(None, None)
