"""The XGBoost ranker: training table, labels, fit, score, save and load (UBJ + meta JSON, never pickle).

The model ranks the configs of one group (gpu, kernel, source, problem, dtype) against each other: objective
``rank:ndcg`` with ``lambdarank_pair_method="topk"`` (pairs are drawn around the top of each group, where
tuning decisions are made) and a continuous gain per row, ``best latency in group / latency`` (1 for the best
config, 0 for one that failed), which needs ``ndcg_exp_gain=False``. Rows are sorted by group (qid), groups
are split into training and early-stopping validation, never rows.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from typing import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from costmodel import benchmarks, dataset, features, hardware
from costmodel.errors import CostModelError
from costmodel.kernels import family_names

MODELS_DIR = Path(__file__).parent / "models"
MODEL_FILE, META_FILE, CARD_FILE = "model.ubj", "meta.json", "MODEL_CARD.md"
META_VERSION = 1
# columns training and evaluation read: features' inputs, group identity and the measured result
TRAIN_COLUMNS = (*features.COLUMNS, "gpu", "hw_name", "group_id", "source_hash", "exhaustive", "problem_json",
                 "config_json", "status", "latency_ms", "helion_version")


@dataclass(frozen=True)
class FeatureSet:
    """How rows of one kind of kernel become features: the seam between this module's ranking machinery (labels,
    fit, save/load, the schema check) and a kind's features. ``triton`` (costmodel/features.py) is every model
    shipped before Helion; ``helion`` (costmodel/helion/model.py) reads Helion configs. A model's meta.json names
    its set (no name: triton, as every meta written before the seam)."""

    name: str
    names: tuple[str, ...]
    schema_version: int
    matrix: Callable[[pa.Table], np.ndarray]  # rows x len(names), float32, NaN where a feature does not apply
    kernels: Callable[[], list[str]]  # the dataset kernel names of this kind (what its model trains on)
    retrain: str = "costmodel train"  # the command that trains a model of this kind (said where one is refused)


TRITON = FeatureSet("triton", features.FEATURE_NAMES, features.FEATURE_SCHEMA_VERSION, features.feature_matrix,
                    family_names)


def feature_set(name: str | None) -> FeatureSet:
    """The feature set called ``name`` (None: triton). The Helion one is imported only when asked for."""
    if name in (None, TRITON.name):
        return TRITON
    if name == "helion":
        from costmodel.helion import model as helion_model

        return helion_model.FEATURES
    raise CostModelError(f"unknown feature set {name!r} (known: triton, helion)")


def model_features(meta: dict) -> FeatureSet:
    return feature_set(meta.get("feature_set"))


@dataclass(frozen=True)
class TrainParams:
    """Defaults sized for ~30-100k rows in ~300-600 groups; ``FAST`` is for the extra splits and tests."""

    n_estimators: int = 400  # at most; early stopping cuts (scoring 10k candidates costs ~0.1 ms a tree)
    # 8 with colsample_bytree 0.6 over 6 with 0.8 (session 11, issue 16's top-1; inner splits 1-3 x boosting seeds
    # 0-2 of 86,151 rows, scripts/compare_params.py --inner, scripts/results/compare_params-inner-2026-12-01-s11.jsonl):
    # over whole-space groups top-1 0.939 vs 0.929 (higher in 8 of the 9 runs), top-8 0.985 vs 0.983, p10 0.978 vs
    # 0.975, matmul top-8 0.917 vs 0.902; over all groups top-8 level (0.990 vs 0.991). Depth 8 alone: top-1 0.937
    # but p10 0.972
    max_depth: int = 8
    learning_rate: float = 0.1
    early_stopping_rounds: int = 30
    subsample: float = 0.8
    colsample_bytree: float = 0.6
    min_child_weight: float = 1.0
    # trees grown side by side each round on their own row and column samples, averaged (a bagged forest per round)
    num_parallel_tree: int = 1
    # pairs per document are taken among each group's top this many (lambdarank_num_pair_per_sample). 8 over 16
    # (session 10, inner splits 1-3 of 86,151 rows, scripts/compare_params.py --inner): whole-space groups' top-8
    # 0.987 vs 0.977, p10 0.984 vs 0.941, matmul 0.928 vs 0.887, top-1 level (0.929 both); 4: 0.984, 0.962
    topk: int = 8
    valid_fraction: float = 0.15
    # training labels are gains ** gain_power: a sharper gain makes the ranker care most about the fastest
    # configs, which is what top-k tuning needs (on inner validation splits of the training groups, power 3 raised
    # top-1 on each of 3 splits, +0.02 on average, and top-8 by +0.003 over power 1)
    gain_power: float = 3.0
    # XGBoost's ranking objective, pair method (lambdarank_pair_method) and early-stopping metric. The defaults
    # against the others on the same inner splits (session 11, whole-space groups, top-1 / top-8 / p10 / matmul
    # top-8; defaults 0.929 / 0.987 / 0.984 / 0.928): rank:pairwise 0.931 / 0.975 / 0.933 / 0.860; pair method
    # "mean" 0.927 / 0.972 / 0.932 / 0.846; stopping on ndcg@1 0.919 / 0.971 / 0.909 / 0.858 (it stops at 39-228
    # trees). ndcg_exp_gain stays off: XGBoost refuses it on continuous gains
    objective: str = "rank:ndcg"
    pair_method: str = "topk"
    eval_metric: str = "ndcg@8"
    seed: int = 0
    nthread: int = 0  # 0: every core; fixed seed + hist give the same model for any thread count
    # a Dask scheduler address: boost with xgboost.dask on that cluster (``pip install 'costmodel[dask]'``)
    dask: str | None = None

    def xgb_params(self) -> dict:
        return {
            "objective": self.objective, "lambdarank_pair_method": self.pair_method,
            "lambdarank_num_pair_per_sample": self.topk, "ndcg_exp_gain": False, "eval_metric": self.eval_metric,
            "tree_method": "hist", "max_depth": self.max_depth,
            "eta": self.learning_rate, "subsample": self.subsample, "colsample_bytree": self.colsample_bytree,
            "min_child_weight": self.min_child_weight, "num_parallel_tree": self.num_parallel_tree, "seed": self.seed,
            # on Dask each worker boosts with its own threads
            **({} if self.dask else {"nthread": self.nthread}),
        }


# the extra splits' figures stay comparable with earlier models' (session 11 changed the depth and column sample of
# the shipped model only)
FAST = TrainParams(n_estimators=150, max_depth=6, learning_rate=0.12, early_stopping_rounds=15, colsample_bytree=0.8)


@dataclass
class CostModel:
    booster: object  # xgboost.Booster (xgboost is imported lazily: the collect path never needs it)
    meta: dict
    path: Path | None = None

    @property
    def gpu(self) -> str:
        return self.meta["gpu"]

    @property
    def hardware(self) -> hardware.HardwareRecord:
        """The GPU the model was trained for (``load`` has checked the record)."""
        return hardware.HardwareRecord(**self.meta["hardware"])


# --- data ----------------------------------------------------------------------------------------------

def training_table(root: str | Path, gpu: str | None = None, fs: FeatureSet = TRITON) -> tuple[pa.Table, str]:
    """The measurements of one GPU under ``root`` (every GPU's when the data holds only one) of ``fs``'s kind of
    kernel (a Triton model never trains on Helion rows, nor the reverse), sorted by (group_id, config_json) so
    that row order, and so the model, never depend on shard order."""
    root = Path(root)
    if not root.is_dir():
        raise CostModelError(f"no dataset directory at {root}")
    interp = hardware.INTERPRETER
    gpus = sorted(p.name.removeprefix("gpu=") for p in root.glob("gpu=*") if p.is_dir())
    if gpu == interp.gpu or (gpu is None and gpus == [interp.gpu]):
        raise CostModelError(f"gpu={interp.gpu} holds TRITON_INTERPRET=1 timings of the CPU: no model trains on them")
    gpus = [g for g in gpus if g != interp.gpu]
    if gpu is None:
        if len(gpus) != 1:
            raise CostModelError(f"{root} holds data of {len(gpus)} GPUs ({', '.join(gpus) or 'none'}): pass --gpu")
        gpu = gpus[0]
    # interpreter rows never train a GPU's model, even where a caller wrote them into its partition
    measured_on_gpu = (ds.field("hw_name") != interp.name) | ds.field("hw_name").is_null()
    # a model trains on its own kind's kernels: the Triton families', or the Helion kernels' ("helion:<name>")
    kind = ds.field("kernel").isin(fs.kernels())
    table = dataset.read(root, list(TRAIN_COLUMNS), (ds.field("gpu") == gpu) & measured_on_gpu & kind)
    if table.num_rows == 0:
        raise CostModelError(f"no {'' if fs is TRITON else fs.name + ' '}measurements for GPU {gpu} under {root} "
                             f"(GPUs there: {', '.join(gpus) or 'none'})")
    table = table.filter(np.logical_not(_named_rows(table)))  # a benchmark's problems never train (benchmarks.py)
    return table.sort_by([("group_id", "ascending"), ("config_json", "ascending")]), gpu


def _named_rows(table: pa.Table) -> np.ndarray:
    """Rows of a problem a benchmark names, in any dtype."""
    named = pa.array(sorted(f"{k}|{p}" for k, p in benchmarks.named_keys()))
    key = pc.binary_join_element_wise(table["kernel"], table["problem_json"], "|")
    return np.asarray(pc.fill_null(pc.is_in(key, value_set=named), False))


def data_hash(table: pa.Table) -> str:
    """sha256 over what the model learns from: each row's group, config, status and latency (order-free:
    ``training_table`` sorts rows)."""
    h = hashlib.sha256()
    for name in ("group_id", "config_json", "status"):
        h.update("\x1f".join(pc.fill_null(table[name], "").to_pylist()).encode())
    h.update(features.numeric(table["latency_ms"]).tobytes())
    return h.hexdigest()[:16]


def group_codes(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(unique group ids, per-row index into them); rows must already be sorted by group."""
    ids, codes = np.unique(np.asarray(table["group_id"].to_numpy(zero_copy_only=False)), return_inverse=True)
    return ids, codes


def group_bounds(table: pa.Table) -> np.ndarray:
    """Row offsets where each group starts, then the row count: group j is rows [b[j], b[j + 1])."""
    _, codes = group_codes(table)
    return np.flatnonzero(np.r_[True, codes[1:] != codes[:-1], True]) if len(codes) else np.array([0])


def latencies(table: pa.Table) -> np.ndarray:
    """Latency per row, +inf for a config that did not run correctly."""
    lat = features.numeric(table["latency_ms"])
    return np.where(features.equals(table["status"], "ok") & np.isfinite(lat) & (lat > 0), lat, np.inf)


def gains(table: pa.Table) -> np.ndarray:
    """Relevance per row: best latency in its group / its latency; 0 for failures."""
    lat = latencies(table)
    ids, codes = group_codes(table)
    best = np.full(len(ids), np.inf)
    np.minimum.at(best, codes, lat)
    out = np.zeros(len(lat))
    ran = np.isfinite(lat)
    out[ran] = best[codes[ran]] / lat[ran]
    return out


def select_groups(table: pa.Table, group_ids) -> pa.Table:
    return table.filter(pc.is_in(table["group_id"], pa.array(list(group_ids), pa.string())))


# --- fit -----------------------------------------------------------------------------------------------

def labels(table: pa.Table, params: TrainParams) -> np.ndarray:
    """Training labels: ``gains ** gain_power`` (0 for failures). Evaluation always uses the plain gains."""
    return (gains(table) ** params.gain_power).astype(np.float32)


def _dmatrix(table: pa.Table, params: TrainParams, fs: FeatureSet = TRITON):
    import xgboost as xgb

    _, qid = group_codes(table)
    return xgb.DMatrix(fs.matrix(table), label=labels(table, params), qid=qid, feature_names=list(fs.names))


# --- fit on a Dask cluster -----------------------------------------------------------------------------

def dask_client(address: str):
    """A Dask client connected to the scheduler at ``address`` (collection and training on a cluster)."""
    try:
        from distributed import Client
    except ImportError:
        raise CostModelError("--dask needs Dask: pip install 'costmodel[dask]'") from None
    try:
        return Client(address, timeout=30)
    except (OSError, TimeoutError) as e:
        raise CostModelError(f"cannot reach the Dask scheduler at {address}: {e}") from None


def partition_bounds(group_starts: np.ndarray, n_parts: int) -> list[int]:
    """Row bounds of at most ``n_parts`` partitions of about even rows that never cut a group: each cut is the
    first group start at or after an even share of rows. ``group_starts`` ends with the row count."""
    starts, n_rows = group_starts[:-1], int(group_starts[-1])
    n_parts = max(1, min(len(starts), n_parts))
    at = np.searchsorted(starts, np.linspace(0, n_rows, n_parts + 1)[1:-1])
    cuts = np.unique(starts[at[at < len(starts)]])  # a share past the last group start falls in the last group
    return [0, *[int(c) for c in cuts if 0 < c < n_rows], n_rows]


def dask_parts(client, table: pa.Table, params: TrainParams) -> tuple:
    """(X, gains, qid) of ``table`` (sorted by group) as Dask arrays cut into partitions of whole groups: rows in
    qid order within each partition, partitions in qid order, so no query group spans two partitions and none
    is split across workers (XGBoost ranks within a worker's rows). About two partitions per worker, even in
    rows; each partition is scattered to the cluster once."""
    import dask
    import dask.array as da

    x, y = features.feature_matrix(table), labels(table, params)
    _, qid = group_codes(table)
    bounds = partition_bounds(group_bounds(table), 2 * len(client.scheduler_info()["workers"]))
    cols: tuple[list, list, list] = ([], [], [])
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        for col, arr, fut in zip(cols, (x, y, qid), client.scatter([x[lo:hi], y[lo:hi], qid[lo:hi]])):
            col.append(da.from_delayed(dask.delayed(fut), (hi - lo, *arr.shape[1:]), arr.dtype))
    return tuple(da.concatenate(c) for c in cols)


def _dask_dmatrix(client, table: pa.Table, params: TrainParams):
    import xgboost.dask as dxgb

    x, y, qid = dask_parts(client, table, params)
    return dxgb.DaskDMatrix(client, x, y, qid=qid, feature_names=list(features.FEATURE_NAMES))


def _train_dask(params: TrainParams, train: pa.Table, valid: pa.Table | None):
    """xgboost.dask.train on the cluster at ``params.dask``; the booster comes back to this process."""
    import xgboost.dask as dxgb

    with dask_client(params.dask) as client:
        evals = [(_dask_dmatrix(client, valid, params), "valid")] if valid is not None else []
        out = dxgb.train(client, params.xgb_params(), _dask_dmatrix(client, train, params),
                         num_boost_round=params.n_estimators, evals=evals,
                         early_stopping_rounds=params.early_stopping_rounds if evals else None, verbose_eval=False)
    return out["booster"]


def fit(table: pa.Table, params: TrainParams = TrainParams(), fs: FeatureSet = TRITON) -> tuple[object, dict]:
    """Train on every group of ``table`` (sorted by group) that has a config that ran, on ``fs``'s features;
    ``valid_fraction`` of them (seeded) drive early stopping. Returns the booster cut at its best iteration and
    training facts."""
    import xgboost as xgb

    g = gains(table)
    ids, codes = group_codes(table)
    usable = np.zeros(len(ids), bool)
    usable[codes[g > 0]] = True
    ids = ids[usable]
    if len(ids) == 0:
        raise CostModelError("no group has a config that ran: nothing to learn from")
    n_valid = int(round(params.valid_fraction * len(ids))) if len(ids) >= 10 else 0
    valid_ids = set(ids[np.random.default_rng(params.seed).permutation(len(ids))[:n_valid]])
    train = select_groups(table, [i for i in ids if i not in valid_ids])
    valid = select_groups(table, valid_ids) if valid_ids else None
    if params.dask:
        if fs is not TRITON:
            raise CostModelError(f"--dask trains {TRITON.name} models only, not {fs.name}")
        booster = _train_dask(params, train, valid)
    else:
        booster = xgb.train(params.xgb_params(), _dmatrix(train, params, fs), num_boost_round=params.n_estimators,
                            evals=[(_dmatrix(valid, params, fs), "valid")] if valid is not None else [],
                            early_stopping_rounds=params.early_stopping_rounds if valid is not None else None,
                            verbose_eval=False)
    best = booster.best_iteration if valid is not None else params.n_estimators - 1
    booster = booster[: best + 1]
    return booster, {"trees": best + 1, "train_groups": len(ids) - len(valid_ids), "valid_groups": len(valid_ids),
                     "train_rows": train.num_rows, "params": asdict(params), "xgboost_version": xgb.__version__}


# --- score ---------------------------------------------------------------------------------------------

def score(model: CostModel, table: pa.Table | dict) -> np.ndarray:
    """Higher is predicted faster; only the order within a group means anything. Rows carrying a ``gpu``
    column must be for the model's GPU."""
    table = table if isinstance(table, pa.Table) else pa.table(table)
    if "gpu" in table.column_names and table.num_rows:
        other = set(pc.unique(table["gpu"]).to_pylist()) - {model.gpu}
        if other:
            raise CostModelError(f"model is for GPU {model.gpu}, rows are for {', '.join(sorted(map(str, other)))}")
    return predict(model, model_features(model.meta).matrix(table))


def predict(model: CostModel, x: np.ndarray) -> np.ndarray:
    """Scores of a feature matrix of the model's feature set."""
    # a thread per ~500 rows, up to the cores this process may use: on two idle cores two threads halve the time
    # of 500 rows and up, but a pool bigger than the work waits on itself (~15 ms a call on busy cores)
    model.booster.set_param({"nthread": max(1, min(hardware.usable_cores(), len(x) // 500))})
    return model.booster.inplace_predict(x)


def rank(model: CostModel, table: pa.Table | dict) -> np.ndarray:
    """Row indices, predicted fastest first (ties keep row order)."""
    return np.argsort(-score(model, table), kind="stable")


# --- save / load ---------------------------------------------------------------------------------------

def new_meta(gpu: str, hw: dict, table: pa.Table, fit_info: dict, heldout: dict, metrics: dict,
             fs: FeatureSet = TRITON) -> dict:
    """What meta.json records: enough to refuse a mismatched model and to re-check its claims. A Triton model's
    meta names no feature set (it reads as triton), so its meta.json is what it was before the seam."""
    kernels = pc.value_counts(table["kernel"]).to_pylist()
    sources = table.group_by(["kernel", "source_hash"]).aggregate([]).to_pylist()
    return {
        "meta_version": META_VERSION,
        "gpu": gpu,
        "hardware": hw,
        **({} if fs is TRITON else {"feature_set": fs.name}),
        "feature_schema_version": fs.schema_version,
        "feature_names": list(fs.names),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "data": {
            "hash": data_hash(table), "rows": table.num_rows, "groups": len(pc.unique(table["group_id"])),
            "rows_per_kernel": {k["values"]: k["counts"] for k in kernels},
            "source_hashes": sorted((r["kernel"], r["source_hash"]) for r in sources),
        },
        **fit_info,
        "heldout": heldout,
        "metrics": metrics,
    }


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save(out: str | Path, booster, meta: dict, card: str | None = None) -> Path:
    """Write model.ubj, meta.json (and MODEL_CARD.md) into ``out``; each file replaced atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(out / MODEL_FILE, bytes(booster.save_raw("ubj")))
    _write_atomic(out / META_FILE, (json.dumps(meta, indent=1, default=str) + "\n").encode())
    if card is not None:
        _write_atomic(out / CARD_FILE, card.encode())
    return out


def resolve(model: str | Path) -> Path:
    """A model directory: ``model`` itself when it is a directory, else the shipped one for that GPU slug."""
    p = Path(model)
    return p if p.is_dir() else MODELS_DIR / str(model)


# what check_meta requires of a meta.json before anything reads it
_META_REQUIRED = ("gpu", "hardware", "feature_schema_version", "feature_names")


def _is_hardware_record(record) -> bool:
    try:
        hardware.HardwareRecord(**record)
    except TypeError:  # not a dict, or other fields than a HardwareRecord's
        return False
    return True


def check_meta(meta: dict, where: str, gpu: str | None = None) -> None:
    """Refuse a model whose meta.json lacks what `costmodel train` writes, or whose features or GPU differ from
    what this code computes or was asked for."""
    missing = [k for k in _META_REQUIRED if k not in meta]
    if missing:
        raise CostModelError(f"model at {where}: its {META_FILE} has no {', '.join(missing)} (not one `costmodel "
                             f"train` wrote): retrain it")
    if not isinstance(meta["gpu"], str) or not _is_hardware_record(meta["hardware"]):
        raise CostModelError(f"model at {where}: its {META_FILE} has a bad gpu or hardware record: retrain it")
    fs = model_features(meta)
    if meta.get("feature_schema_version") != fs.schema_version:
        raise CostModelError(
            f"model at {where} uses {fs.name} feature schema v{meta.get('feature_schema_version')}, this costmodel "
            f"computes v{fs.schema_version}: retrain it with `{fs.retrain}`")
    if meta.get("feature_names") != list(fs.names):
        raise CostModelError(f"model at {where} was trained on other feature names: retrain it with `{fs.retrain}`")
    if gpu is not None and meta.get("gpu") != gpu:
        raise CostModelError(f"model at {where} is for GPU {meta.get('gpu')!r}, not {gpu!r}")


def is_compatible(meta: dict) -> bool:
    """Whether this code can rank with a model of this meta (its features are the ones computed here)."""
    try:
        check_meta(meta, "")
    except CostModelError:
        return False
    return True


def load(model: str | Path, gpu: str | None = None) -> CostModel:
    """Load a model directory (or the shipped model of a GPU slug), refusing a missing, corrupt or mismatched
    one with a clear message. ``gpu`` is the GPU it must be for."""
    import xgboost as xgb

    path = resolve(model)
    meta_path, model_path = path / META_FILE, path / MODEL_FILE
    if not meta_path.is_file() or not model_path.is_file():
        raise CostModelError(f"no model at {path} (needs {MODEL_FILE} and {META_FILE}; `costmodel train` writes them)")
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CostModelError(f"corrupt {meta_path}: {e}") from None
    if not isinstance(meta, dict):
        raise CostModelError(f"corrupt {meta_path}: not a JSON object")
    check_meta(meta, str(path), gpu)
    try:
        booster = xgb.Booster(model_file=str(model_path))
    except xgb.core.XGBoostError as e:
        raise CostModelError(f"corrupt model file {model_path}: {str(e).splitlines()[0]}") from None
    if booster.num_features() != len(model_features(meta).names):
        raise CostModelError(f"model file {model_path} has {booster.num_features()} features, meta.json names "
                             f"{len(model_features(meta).names)}")
    return CostModel(booster, meta, path)


def load_shipped(gpu: str) -> CostModel:
    """The pretrained model shipped for ``gpu`` (what the tuner ranks with)."""
    return load(MODELS_DIR / gpu, gpu=gpu)


def shipped(pattern: str = f"*/{META_FILE}") -> list[dict]:
    """Summaries of the models under costmodel/models/ whose meta.json matches ``pattern``: by default each GPU's
    Triton model (the Helion ones: ``f"*/helion/{META_FILE}"``)."""
    out = []
    for meta_path in sorted(MODELS_DIR.glob(pattern)):
        try:
            meta = json.loads(meta_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            meta = None
        if not isinstance(meta, dict):
            gpu = meta_path.relative_to(MODELS_DIR).parts[0]  # the GPU's folder (a Helion model's is its parent)
            out.append({"gpu": gpu, "path": str(meta_path.parent), "error": "corrupt meta.json"})
            continue
        metrics = meta.get("metrics", {})
        out.append({"gpu": meta.get("gpu"), "path": str(meta_path.parent), "created": meta.get("created"),
                    "data_hash": meta.get("data", {}).get("hash"), "rows": meta.get("data", {}).get("rows"),
                    "feature_schema_version": meta.get("feature_schema_version"),
                    "compatible": is_compatible(meta),
                    "top8_score": metrics.get("top8_score"), "random8_score": metrics.get("random8_score"),
                    "split": metrics.get("split"),
                    **({"helion_versions": meta["helion_versions"]} if "helion_versions" in meta else {})})
    return out
