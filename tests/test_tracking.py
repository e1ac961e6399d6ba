"""MLflow tracking against a real ``mlflow server`` (sqlite backend in a temporary directory, one worker)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from costmodel import model, tracking

pytest.importorskip("mlflow")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """URI of a fresh tracking server; stopped (its own process group only) at the end of the session."""
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = open(root / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{root}/mlflow.db", "--artifacts-destination", str(root / "artifacts"),
         "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root,
        # no background job runner (a dozen huey consumers): nothing here schedules server-side jobs
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("mlflow server did not answer /health within 90 s")
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_train_logs_run_registers_model_and_moves_aliases(slice_root, mlflow_server, cli, tmp_path, monkeypatch):
    import mlflow.xgboost
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    args = ["train", "--data", str(slice_root), "--out", str(tmp_path / "m"), "--track", "--register",
            "--no-extra-splits", "--trees", "30", "--json"]
    code, stdout, stderr = cli(*args)
    assert code == 0, stderr
    first = json.loads(stdout)["tracking"]
    name = tracking.registered_name(json.loads(stdout)["gpu"])
    assert first["registered_model"] == name and first["tracking_uri"] == mlflow_server
    assert first["champion"]["promoted"] and first["champion"]["reason"] == "no champion yet"

    client = MlflowClient(mlflow_server)
    run = client.get_run(first["run_id"])
    assert {"top8_score", "random8_score", "ndcg_at_8", "kendall_tau"} <= set(run.data.metrics)
    assert not any("@" in k for k in run.data.metrics)
    assert run.data.params["data_hash"] == json.loads(stdout)["data_hash"]
    assert [d.dataset.digest for d in run.inputs.dataset_inputs] == [json.loads(stdout)["data_hash"]]
    assert client.get_model_version_by_alias(name, "candidate").version == first["version"]
    assert client.get_model_version_by_alias(name, "champion").version == first["version"]

    # the registered model scores exactly like the saved one
    booster = mlflow.xgboost.load_model(f"models:/{name}@champion")
    cm = model.load(tmp_path / "m")
    x = np.random.default_rng(0).random((50, cm.booster.num_features()), dtype=np.float32)
    np.testing.assert_array_equal(booster.inplace_predict(x), cm.booster.inplace_predict(x))

    # the same data and settings again: a new candidate that ties the champion on their common held-out
    # groups, so the champion stays
    code, stdout, stderr = cli(*args)
    assert code == 0, stderr
    second = json.loads(stdout)["tracking"]
    decision = second["champion"]
    assert int(second["version"]) == int(first["version"]) + 1
    assert client.get_model_version_by_alias(name, "candidate").version == second["version"]
    assert decision["groups"] > 0 and decision["candidate_top8_score"] == decision["champion_top8_score"]
    assert not decision["promoted"] and decision["champion_version"] == first["version"]
    assert client.get_model_version_by_alias(name, "champion").version == first["version"]

    code, stdout, stderr = cli("models", "--json")
    assert code == 0, stderr
    listed = {r["name"]: r for r in json.loads(stdout)["registered"]}
    assert listed[name]["aliases"] == {"candidate": second["version"], "champion": first["version"]}
