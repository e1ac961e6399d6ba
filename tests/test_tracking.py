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
import warnings

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


@pytest.fixture
def fresh_registry(mlflow_server, monkeypatch):
    """A client of the session's server with no ``costmodel-nvidia-h200`` registered model, before and after."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    client, name = MlflowClient(mlflow_server), tracking.registered_name("nvidia-h200")

    def drop():
        try:
            client.delete_registered_model(name)
        except MlflowException:
            pass

    drop()
    yield client, name
    drop()


def test_a_champion_without_meta_is_replaced_but_a_read_error_keeps_it(slice_root, fresh_registry, cli, tmp_path,
                                                                       monkeypatch):
    """A champion whose run truly has no meta.json cannot be compared and is replaced; one whose meta.json the
    store fails to hand over (an artifact-store error, once) stays champion, with a warning and the reason
    recorded on the new version."""
    import mlflow
    import mlflow.xgboost
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import TEMPORARILY_UNAVAILABLE

    client, name = fresh_registry
    mlflow.set_experiment(tracking.EXPERIMENT)
    with mlflow.start_run(run_name="no-meta"):  # the shipped booster, logged without its meta.json
        info = mlflow.xgboost.log_model(model.load("nvidia-h200").booster, name="model", registered_model_name=name)
    bare = str(info.registered_model_version)
    client.set_registered_model_alias(name, "champion", bare)

    args = ["train", "--data", str(slice_root), "--out", str(tmp_path / "m"), "--track", "--register",
            "--no-extra-splits", "--trees", "30", "--json"]
    code, stdout, stderr = cli(*args)
    assert code == 0, stderr
    first = json.loads(stdout)["tracking"]["champion"]
    assert first["previous"] == bare and first["promoted"] and first["reason"] == "champion has no meta.json"
    champion = client.get_model_version_by_alias(name, "champion").version
    assert champion == first["champion_version"] != bare

    real, failed = mlflow.artifacts.download_artifacts, []

    def fails_once(*a, **kw):
        if kw.get("artifact_path") == model.META_FILE and not failed:
            failed.append(kw["run_id"])
            raise MlflowException("API request to /api/2.0/mlflow-artifacts/artifacts failed: 503 Service "
                                  "Unavailable", error_code=TEMPORARILY_UNAVAILABLE)
        return real(*a, **kw)

    monkeypatch.setattr(mlflow.artifacts, "download_artifacts", fails_once)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        code, stdout, stderr = cli(*args)
    assert code == 0, stderr
    second = json.loads(stdout)["tracking"]
    decision = second["champion"]
    assert failed == [client.get_model_version(name, champion).run_id]
    assert client.get_model_version_by_alias(name, "champion").version == champion
    assert not decision["promoted"] and decision["champion_version"] == decision["previous"] == champion
    assert any("could not read the champion" in str(w.message) for w in warned)
    assert "503" in decision["error"] and "could not read" in decision["reason"]
    assert client.get_model_version_by_alias(name, "champion").version == champion
    assert client.get_model_version_by_alias(name, "candidate").version == second["version"]
    assert client.get_model_version(name, second["version"]).tags["champion_decision"] == decision["reason"]
