"""MLflow runs and the model registry. The only module that imports mlflow, and only inside its functions
(``import mlflow`` takes over a second; collection and tuning never need it).

Where runs go is MLflow's own choice: with no tracking URI set, its default store (a sqlite file in the working
directory); ``MLFLOW_TRACKING_URI`` points it at a server. One registered model per GPU, ``costmodel-<slug>``,
with aliases instead of stages: ``candidate`` is always the newest version, ``champion`` the one to serve.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from costmodel import evaluation, model
from costmodel.errors import CostModelError

EXPERIMENT = "costmodel"
CHAMPION, CANDIDATE = "champion", "candidate"


def registered_name(gpu: str) -> str:
    return f"costmodel-{gpu}"


def _pip_requirements() -> list[str]:
    """The XGBoost distribution actually installed (``xgboost-cpu`` or ``xgboost``) and numpy, pinned."""
    out = []
    for dist in ("xgboost-cpu", "xgboost"):
        try:
            out.append(f"{dist}=={metadata.version(dist)}")
            break
        except metadata.PackageNotFoundError:
            continue
    return out + [f"numpy=={np.__version__}"]


def _metrics(evals: dict[str, evaluation.Evaluation]) -> dict[str, float]:
    """Flat metric names without '@': every held-out figure as it is (``top8_score``); the headline figures of
    other splits and of each kernel prefixed (``dissimilar_top8_score``, ``heldout_matmul_top8_score``)."""
    out: dict[str, float] = {}
    for how, ev in evals.items():
        s = ev.summary()
        headline = evaluation.headline(s)
        kept = s if how == "heldout" else headline
        prefix = "" if how == "heldout" else f"{how}_"
        out.update({f"{prefix}{k}": v for k, v in kept.items() if isinstance(v, (int, float))})
        for kernel, ks in headline["per_kernel"].items():
            out.update({f"{how}_{kernel}_{k}": v for k, v in ks.items() if isinstance(v, (int, float))})
    return out


def _log_data_inputs(data_root: Path, meta: dict) -> None:
    """The collector's run manifests (data/_manifests/*.json) as one MLflow dataset input, digest = the
    training-data hash, and the manifest files themselves as artifacts."""
    import mlflow
    import pandas as pd

    manifests = sorted((data_root / "_manifests").glob("*.json"))
    rows = []
    for path in manifests:
        try:
            m = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        # one string column per top-level field: manifests differ in what they hold
        rows.append({k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in m.items()}
                    | {"manifest": path.name})
    df = pd.DataFrame(rows or [{"manifest": ""}])
    d = meta["data"]
    with warnings.catch_warnings():  # MLflow registers two sources for local paths and warns it picked one
        warnings.simplefilter("ignore", UserWarning)
        ds = mlflow.data.from_pandas(df, source=str(data_root.resolve()), name=f"{meta['gpu']}-measurements",
                                     digest=d["hash"])
    mlflow.log_input(ds, context="training", tags={"rows": str(d["rows"]), "groups": str(d["groups"])})
    for path in manifests:
        mlflow.log_artifact(str(path), artifact_path="manifests")


@contextlib.contextmanager
def training_run(gpu: str):
    """The MLflow run of one training, opened before fitting so that its duration is the training's; a training
    that raises ends it FAILED. MLflow's console messages (run links it writes to stdout) go to stderr, where
    the CLI's stdout stays one JSON object."""
    import mlflow

    with contextlib.redirect_stdout(sys.stderr):
        mlflow.set_experiment(EXPERIMENT)
        with mlflow.start_run(run_name=f"train-{gpu}") as run:
            yield run


def log_training(model_dir: Path, booster, meta: dict, evals: dict[str, evaluation.Evaluation], table: pa.Table,
                 data_root: Path, register: bool) -> dict:
    """Everything :func:`_log_training` does, inside :func:`training_run`, MLflow's stdout sent to stderr."""
    with contextlib.redirect_stdout(sys.stderr):
        return _log_training(model_dir, booster, meta, evals, table, data_root, register)


def _log_training(model_dir: Path, booster, meta: dict, evals: dict[str, evaluation.Evaluation], table: pa.Table,
                  data_root: Path, register: bool) -> dict:
    """Into the active run: params, held-out and split metrics, data manifests as inputs, meta.json and
    MODEL_CARD.md as artifacts, the booster logged. With ``register`` (deliberate: `train --register` or
    `--ship`; an ad-hoc training adds no version) it becomes a new version of ``costmodel-<gpu>`` with alias
    ``candidate``, and ``champion`` moves to it only when it wins (see :func:`_promote`)."""
    import mlflow
    import mlflow.xgboost
    from mlflow import MlflowClient

    gpu, name = meta["gpu"], registered_name(meta["gpu"])
    run = mlflow.active_run()
    mlflow.log_params({"gpu": gpu, "feature_schema_version": meta["feature_schema_version"],
                       "data_hash": meta["data"]["hash"], "data_rows": meta["data"]["rows"],
                       "data_groups": meta["data"]["groups"], "trees": meta["trees"],
                       "heldout_groups": len(meta["heldout"]["groups"]), "heldout_seed": meta["heldout"]["seed"],
                       **{f"xgb_{k}": v for k, v in meta["params"].items()}})
    _log_data_inputs(data_root, meta)
    for f in (model.META_FILE, model.CARD_FILE):
        if (model_dir / f).is_file():
            mlflow.log_artifact(str(model_dir / f))
    info = mlflow.xgboost.log_model(booster, name="model", pip_requirements=_pip_requirements(),
                                    registered_model_name=name if register else None)
    # after log_model, tied to it by id: logged before, log_model would fetch every metric's history
    mlflow.log_metrics(_metrics(evals), model_id=info.model_id)
    out = {"tracking_uri": mlflow.get_tracking_uri(), "experiment": EXPERIMENT, "run_id": run.info.run_id,
           "registered_model": None, "version": None, "champion": None}
    if not register:
        return out
    version = str(info.registered_model_version)
    client = MlflowClient()
    for k, v in {"gpu": gpu, "data_hash": meta["data"]["hash"], "top8_score": meta["metrics"].get("top8_score"),
                 "feature_schema_version": meta["feature_schema_version"]}.items():
        client.set_model_version_tag(name, version, k, str(v))
    client.set_registered_model_alias(name, CANDIDATE, version)
    decision = _promote(client, name, version, booster, meta, table)
    return out | {"registered_model": name, "version": version, "champion": decision}


def _run_meta(client, run_id: str) -> dict | None:
    """The meta.json a training run logged, or None when the run has none (not listed among its artifacts, or
    not JSON: nothing later will make it readable). A store that does not answer raises MlflowException or
    OSError: a tracking error is not an absent file."""
    import mlflow

    if model.META_FILE not in {f.path for f in client.list_artifacts(run_id) if not f.is_dir}:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=model.META_FILE, dst_path=tmp)
        try:
            return json.loads(Path(path).read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None


def _champion(client, name: str):
    """The model version holding ``champion``, or None when none does; errors of the store propagate."""
    version = client.get_registered_model(name).aliases.get(CHAMPION)
    return None if version is None else client.get_model_version(name, str(version))


def _promote(client, name: str, version: str, booster, meta: dict, table: pa.Table) -> dict:
    """Move ``champion`` to the new version only when it beats the current champion on the same held-out
    groups: the groups held out by *both* models that are in the current data (the held-out rule hashes group
    ids, so with the same seed and shares a group keeps its side as data grows, and neither model has trained
    on these). Both models rank those groups and the higher top-8 score wins; a tie keeps the champion.

    With no champion yet, the new version becomes champion. A champion whose run has no meta.json, or one on
    another feature schema, cannot rank today's features, so it is replaced. Without common held-out groups
    nothing can be compared fairly and the champion stays (the new version is still ``candidate``). When the
    store cannot say which version is champion or what its meta.json holds (a server or artifact-store error),
    the champion stays too: a transient error must not move the alias. The reason is recorded as the new
    version's ``champion_decision`` tag."""
    from mlflow.exceptions import MlflowException

    decision: dict = {"previous": None}
    try:
        current = _champion(client, name)
        decision["previous"] = None if current is None else str(current.version)
        champ_meta = None if current is None else _run_meta(client, current.run_id)
    except (MlflowException, OSError) as e:
        decision["error"] = (str(e).strip().splitlines() or [type(e).__name__])[0]
        decision.update(promoted=False, reason="could not read the champion or its meta.json: champion kept")
        warnings.warn(f"{name}: {decision['reason']} ({decision['error']}); version {version} is candidate only",
                      stacklevel=2)
    else:
        if current is None:
            decision.update(promoted=True, reason="no champion yet")
        elif champ_meta is None:
            decision.update(promoted=True, reason="champion has no meta.json")
        elif not model.is_compatible(champ_meta):
            decision.update(promoted=True, reason="champion has other features")
        else:
            _compare(decision, name, booster, champ_meta, meta, table)
    client.set_model_version_tag(name, version, "champion_decision", decision["reason"])
    if decision["promoted"]:
        client.set_registered_model_alias(name, CHAMPION, version)
    decision["champion_version"] = version if decision["promoted"] else decision["previous"]
    return decision


def _compare(decision: dict, name: str, booster, champ_meta: dict, meta: dict, table: pa.Table) -> None:
    """Rank the held-out groups both models never saw with both; the new version wins on a higher top-8 score."""
    import mlflow.xgboost
    from mlflow.exceptions import MlflowException

    groups = set(champ_meta["heldout"]["groups"]) & set(meta["heldout"]["groups"])
    common = model.select_groups(table, sorted(groups))
    if common.num_rows == 0:
        decision.update(promoted=False, reason="no held-out groups in common with the champion")
        return
    rest = table.filter(pc.invert(pc.is_in(table["group_id"], common["group_id"].unique())))
    try:
        champ_booster = mlflow.xgboost.load_model(f"models:/{name}@{CHAMPION}")
    except MlflowException as e:
        raise CostModelError(f"cannot load the champion of {name}: {e}") from None
    gpu = meta["gpu"]
    new, old = (evaluation.evaluate(model.CostModel(b, {"gpu": gpu}), common, rest, "champion").summary()
                for b in (booster, champ_booster))
    decision.update(groups=new["groups"], candidate_top8_score=new["top8_score"],
                    champion_top8_score=old["top8_score"], promoted=new["top8_score"] > old["top8_score"],
                    reason="top8_score on the held-out groups both models never saw")


def registered_models() -> list[dict]:
    """Every ``costmodel-*`` registered model in the tracking store, with its aliases and versions. A listing
    answers quickly or fails: one retry and a 10 s timeout unless the environment says otherwise (MLflow's
    defaults retry an unreachable server for minutes)."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient()
    out = []
    try:
        for rm in client.search_registered_models(filter_string="name LIKE 'costmodel-%'"):
            versions = client.search_model_versions(f"name = '{rm.name}'")
            out.append({"name": rm.name, "aliases": {a: str(v) for a, v in rm.aliases.items()},
                        "versions": sorted(int(v.version) for v in versions), "tracking_uri": client.tracking_uri})
    except MlflowException as e:
        first_line = str(e).splitlines()[0]
        raise CostModelError(f"cannot list registered models at {client.tracking_uri}: {first_line}") from None
    return out
