"""The Helion cost model: costmodel/model.py's ranker (labels by group, fit, save/load, the schema check) on
Helion features, through its ``FeatureSet`` seam; and leave-one-kernel-out evaluation.

Features: ``features.matrix`` of each config (generic: they travel between kernels; no kernel one-hot, so a kernel
the model never saw is ranked from what its configs and problem are) and the problem: log2 of each dim, the causal
flag, the dtype. No hardware record: a model is trained for one GPU and refuses another (meta ``gpu``).

Where a model lives: ``costmodel/models/<gpu>/helion/`` beside that GPU's Triton model (``costmodel/models/<gpu>/``):
one folder per GPU holds all it ships, the Triton model's files and loaders keep their paths, and
``model.shipped()`` lists Triton models unless given the Helion pattern (``costmodel models`` lists both). Its
meta.json adds what the Helion tuner checks before it trusts the model: ``feature_set: helion``, the Helion versions
of its rows (``helion_versions``) and the kernel structures it saw (``structures``: [tiles, reductions] pairs).

Nothing here imports helion (features read canonical config JSON)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from costmodel import model
from costmodel.errors import CostModelError
from costmodel.helion import configs as hconfigs, features

SCHEMA_VERSION = 3  # 3: a flattened tile loop's tiles read as its one block (features._flattened)
DIMS = ("M", "N", "K", "B", "H", "S", "D")
DTYPES = {"float16": 2, "bfloat16": 2, "float32": 4}
NAMES = (*features.NAMES, *(f"log2_{d}" for d in DIMS), "causal", *(f"dtype_{d}" for d in DTYPES), "dtype_bytes")
KS = (1, 8)


def matrix(kernels: Sequence[str], problems: Sequence[dict], dtypes: Sequence[str], config_jsons: Sequence[str],
           shape: dict | None = None) -> np.ndarray:
    """(rows x len(NAMES)) float32: the config features, then the problem's. ``shape`` as in ``features.matrix``."""
    _, x = features.matrix(kernels, problems, config_jsons, shape)
    dims = np.array([[p.get(d, np.nan) for d in DIMS] for p in problems], dtype=float).reshape(len(problems), len(DIMS))
    causal = np.array([p.get("CAUSAL", np.nan) for p in problems], dtype=float)
    dt = np.asarray(dtypes)
    with np.errstate(divide="ignore", invalid="ignore"):
        cols = [x, np.log2(dims), causal[:, None], *((dt == d).astype(float)[:, None] for d in DTYPES),
                np.array([DTYPES.get(d, np.nan) for d in dt], dtype=float)[:, None]]
    return np.column_stack(cols).astype(np.float32) if len(problems) else np.empty((0, len(NAMES)), np.float32)


def table_matrix(table: pa.Table) -> np.ndarray:
    """``matrix`` of dataset rows (columns kernel, problem_json, dtype, config_json)."""
    problems = [json.loads(p) for p in table["problem_json"].to_pylist()]
    return matrix(table["kernel"].to_pylist(), problems, table["dtype"].to_pylist(), table["config_json"].to_pylist())


def _kernels() -> list[str]:
    from costmodel.helion import families

    return [f.kernel for f in families.FAMILIES.values()]


FEATURES = model.FeatureSet("helion", NAMES, SCHEMA_VERSION, table_matrix, _kernels,
                            retrain="python scripts/helion_model.py --ship")


# --- the Triton twins' rows ------------------------------------------------------------------------------------
# A twin family's rows train the Helion model too, each config read as the Helion kernel's (``from_twin`` of its
# family; matmul's only: costmodel/helion/families.py), in a group of its own ("twin:<group>"); evaluations score
# Helion groups only. The Helion data holds 6 matmul groups, the twin 618. Session 19, boosting seeds 0-2, without
# twin rows -> TWIN_PER_GROUP of them (scripts/helion_model.py --twin-per-group 0 / 50,
# scripts/results/helion_model-cpu-2026-12-02-s19.jsonl): helion:matmul over held-out shapes top-8 0.862 / 0.960 /
# 0.706 -> 0.968 at each seed, held out whole (no Helion matmul row in training) 0.30-0.31 -> 0.92-0.97; every
# kernel over held-out shapes 0.940-0.983 -> 0.962-0.970. The cost: the one attention group (8 heads of 2,112 rows,
# whose fastest configs take 16-32 query rows, where matmul tiles are larger) falls from 0.847 to 0.37-0.44. At most
# TWIN_PER_GROUP configs a group, drawn with a fixed seed: a whole-space twin group holds up to 2,200, and 618 of
# them would outweigh the Helion groups' 40 configs (25 and 100 a group ranked alike).
TWIN_PREFIX = "twin:"
TWIN_PER_GROUP = 50
# The Helion kernels whose twins' rows train. The row-wise twins (softmax, layer_norm, rms_norm) read as Helion configs
# too (their space is the tuner's candidates), but their rows, 16,665 more at 50 a group, cost the fused kernels
# without helping their own: session 20, seeds 0-2, `scripts/helion_model.py --seed S --twin-kernels
# helion:matmul,helion:softmax,helion:layer_norm,helion:rms_norm`, output
# scripts/results/helion_model-rowtwins-cpu-2026-12-02-s20.jsonl) against session 19's matmul twins alone
# (helion_model-cpu-2026-12-02-s19.jsonl, 50 a group): over held-out shapes swiglu 0.956-0.984 -> 0.947-0.952, geglu
# 0.978 -> 0.909 at two seeds of three, softmax and the norms within 0.006; swiglu held out whole 0.955-0.967 -> 0.947.
TWIN_KERNELS = ("helion:matmul",)


def op_counts_of(table: pa.Table) -> dict[str, dict[str, int]]:
    """Per Helion kernel of ``table`` (Helion rows): its per-op lists' lengths, read off its first row's config (a
    kernel's are the same in every config: its ConfigSpec's)."""
    out: dict[str, dict[str, int]] = {}
    for k, c in zip(table["kernel"].to_pylist(), table["config_json"].to_pylist()):
        if k not in out:
            out[k] = {key: len(v) for key, v in json.loads(c).items()
                      if key in hconfigs.PER_OP and isinstance(v, list)}
    return out


def twin_rows(root: str | Path, gpu: str, per_group: int = TWIN_PER_GROUP, seed: int = 0,
              counts: dict[str, dict[str, int]] | None = None,
              kernels: Sequence[str] = TWIN_KERNELS) -> pa.Table | None:
    """The rows of the twins of Helion ``kernels`` of ``gpu`` under ``root`` as Helion rows (columns as
    ``model.training_table``'s): kernel the Helion kernel's, config_json the Helion config, group_id prefixed; None
    where there are none. ``counts``: each Helion kernel's per-op counts (``op_counts_of`` its rows); a twin whose
    kernel has none given gives no rows."""
    from costmodel.dataset import canonical_json
    from costmodel.helion import families

    counts = counts or {}
    fams = {f.twin: f for f in families.FAMILIES.values()
            if f.from_twin is not None and f.kernel in counts and f.kernel in kernels}
    try:
        table, _ = model.training_table(root, gpu, model.TRITON)
    except CostModelError:
        return None
    table = table.filter(pc.is_in(table["kernel"], pa.array(sorted(fams))))
    rng, keep, configs = np.random.default_rng(seed), [], []
    bounds = model.group_bounds(table)
    kernels, cjs = table["kernel"].to_pylist(), table["config_json"].to_pylist()
    problems = table["problem_json"].to_pylist()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        fam = fams[kernels[lo]]
        problem, n = json.loads(problems[lo]), counts[fam.kernel]
        mapped = {i: fam.from_twin(json.loads(cjs[i]), problem, n) for i in range(lo, hi)}
        ok = [i for i, c in mapped.items() if c is not None]
        for i in sorted(rng.permutation(ok)[:per_group].tolist()) if len(ok) > per_group else ok:
            keep.append(i)
            configs.append(canonical_json(mapped[i]))
    if not keep:
        return None
    table = table.take(pa.array(keep, pa.int64()))
    new = {"kernel": pa.array([fams[k].kernel for k in table["kernel"].to_pylist()]),
           "config_json": pa.array(configs),
           "group_id": pc.binary_join_element_wise(TWIN_PREFIX, table["group_id"], "")}
    for name, col in new.items():
        table = table.set_column(table.schema.get_field_index(name), name, col)
    return table


def training_table(root: str | Path, gpu: str | None = None, twin_per_group: int = TWIN_PER_GROUP,
                   twin_kernels: Sequence[str] = TWIN_KERNELS) -> tuple[pa.Table, str]:
    """``model.training_table``'s Helion rows of one GPU with the rows of ``twin_kernels``' twins (``twin_rows``,
    at most ``twin_per_group`` configs a group; 0: none), sorted by (group_id, config_json)."""
    if twin_per_group < 0:
        raise CostModelError(f"twin configs a group must be 0 or more, not {twin_per_group}")
    from costmodel.helion import families

    with_twin = sorted(f.kernel for f in families.FAMILIES.values() if f.from_twin is not None)
    if unknown := sorted(set(twin_kernels) - set(with_twin)):
        raise CostModelError(f"no twin rows for {', '.join(unknown)}; kernels with a twin: {', '.join(with_twin)}")
    table, gpu = model.training_table(root, gpu, FEATURES)
    more = (twin_rows(root, gpu, twin_per_group, counts=op_counts_of(table), kernels=twin_kernels)
            if twin_per_group > 0 else None)
    if more is not None:
        table = pa.concat_tables([table, more.select(table.column_names).cast(table.schema)])
        table = table.sort_by([("group_id", "ascending"), ("config_json", "ascending")])
    return table, gpu


def is_twin(table: pa.Table) -> np.ndarray:
    """Per row: whether it is a twin family's (``twin_rows``): it trains, it is never scored."""
    return np.asarray(pc.starts_with(table["group_id"], TWIN_PREFIX))


def model_dir(gpu: str) -> Path:
    return model.MODELS_DIR / gpu / "helion"


def structures(x: np.ndarray) -> list[list[int]]:
    """The distinct (tiles, reductions) counts of feature rows ``x``: the kernel structures they cover."""
    cols = x[:, [NAMES.index("n_tiles"), NAMES.index("n_reductions")]].astype(int)
    return sorted(map(list, {tuple(r) for r in cols.tolist()}))


# The Helion model's training: FAST's trees, 50 of them, no early stopping. On 34 groups early stopping had 5
# validation groups and stopped at 1 tree; the tuner ranks new shapes of kernels it has seen, and over held-out
# shapes (3 folds, boosting seeds 0-2; session 12) top-8 was 0.953 with FAST's early stopping, 0.968 / 0.983 / 0.978 /
# 0.951 with 25 / 50 / 100 / 150 trees. More trees rank a kernel never seen worse: leave-one-kernel-out top-8 0.804
# with early stopping, 0.738 with 50 trees (BENCHMARKS.md, issue 18).
# Each of its 50 rounds grows 5 trees side by side, each on its own row and column sample, averaged (a bagged forest a
# round): one tree a round ranked held-out shapes by seed as unevenly as 0.806-0.967 top-8 (seeds 0-4), five at
# 0.953-0.985 (seeds 0-3), swiglu's 1,000-config group held out at 0.969-1.000 and 0.992-1.000 (session 22, 48 groups;
# scripts/helion_model.py --parallel-trees 1 / 5: scripts/results/helion_model-flat-cpu-2026-12-02-s22.jsonl,
# helion_model-bagged-cpu-2026-12-02-s22.jsonl).
PARAMS = dataclasses.replace(model.FAST, n_estimators=50, valid_fraction=0.0, num_parallel_tree=5)


# --- does a config run? ----------------------------------------------------------------------------------------
# Beside the ranker, a classifier of whether a config runs at all (compiles, launches, passes the check): its label
# 0 ranks a failure like a slow config, so a top k can hold several that fail, each a wasted compile (the race's
# attention tunes: 3-8 of their 11-15 timed configs gave no time; bench_helion-h200-2026-12-02-s23*). It learns from
# the twins' rows too (their configs as the Triton kernel ran them): on Helion rows alone it took attention's failing
# large tiles for a risk in matmul too, whose fastest configs they are. The tuner drops candidates below RUN_FLOOR.
# Over held-out shapes (scripts/experiments/helion_validity.py, seeds 0-2): with the twins' rows, at 0.2 no kernel's
# top-k score moved and attention's configs timed that did not run fell from 84-88 to 20-24 (at 0.5 attention's
# score fell to 0.934; helion_validity-twins-cpu-2026-12-02-s23.jsonl); on Helion rows alone, at 0.2 matmul's fell
# to 0.854 and 0.736 at two seeds (helion_validity-cpu-2026-12-02-s23.jsonl).
RUNS_FILE = "runs.ubj"
RUN_FLOOR = 0.2
RUN_ROUNDS = 100
RUN_PARAMS = {"objective": "binary:logistic", "max_depth": 6, "learning_rate": PARAMS.learning_rate,
              "subsample": PARAMS.subsample, "colsample_bytree": PARAMS.colsample_bytree}


def fit_runs(table: pa.Table, seed: int = 0):
    """The classifier of whether a config ran, on ``table``'s rows (the twins' with the Helion kernels')."""
    import xgboost as xgb

    ran = np.asarray(pc.fill_null(pc.equal(table["status"], "ok"), False), dtype=np.float32)
    return xgb.train({**RUN_PARAMS, "seed": seed, "nthread": 2}, xgb.DMatrix(table_matrix(table), label=ran),
                     num_boost_round=RUN_ROUNDS)


def save_runs(where: str | Path, booster) -> Path:
    path = Path(where) / RUNS_FILE
    model._write_atomic(path, bytes(booster.save_raw("ubj")))
    return path


_RUNS: dict[str, object] = {}


def p_run(cm: model.CostModel, kernel: str, problem: dict, dtype: str, config_jsons: Sequence[str],
          shape: dict | None = None) -> np.ndarray | None:
    """Per config, the probability that it runs, from the classifier shipped beside ``cm``; None where it has
    none (a model trained before it)."""
    import xgboost as xgb

    path = None if cm.path is None else Path(cm.path) / RUNS_FILE
    if path is None or not path.is_file():
        return None
    if str(path) not in _RUNS:
        try:
            _RUNS[str(path)] = xgb.Booster(model_file=str(path))
        except xgb.core.XGBoostError as e:
            raise CostModelError(f"corrupt {path}: {str(e).splitlines()[0]} (python scripts/helion_model.py --ship "
                                 f"writes it)") from None
    n = len(config_jsons)
    return _RUNS[str(path)].inplace_predict(matrix([kernel] * n, [problem] * n, [dtype] * n, config_jsons, shape))


def train(table: pa.Table, gpu: str, hw: dict, params: model.TrainParams = PARAMS,
          evaluate: bool = True) -> tuple[object, dict]:
    """(booster, meta) of a model fitted on every group of ``table`` (Helion rows of one GPU, sorted by group,
    as ``training_table(root, gpu)`` gives them, the twins' rows with them or not); ``evaluate`` adds
    leave-one-kernel-out metrics (a fit per kernel) to the meta."""
    booster, info = model.fit(table, params, FEATURES)
    loko = leave_one_kernel_out(table, params) if evaluate else {}
    meta = model.new_meta(gpu, hw, table, info, {"rule": "leave one Helion kernel out"}, loko, FEATURES)
    versions = pc.unique(table["helion_version"]).to_pylist() if "helion_version" in table.column_names else []
    meta.update(helion_versions=sorted(v for v in versions if v), structures=structures(table_matrix(table)),
                twin_groups=len(pc.unique(table.filter(pa.array(is_twin(table)))["group_id"])))
    return booster, meta


def load(where: str | Path, gpu: str | None = None) -> model.CostModel:
    """A Helion model: a directory, or the one shipped for GPU slug ``where``; refused (CostModelError) if it is
    missing, corrupt, for another GPU, or not a Helion model of this feature schema."""
    path = Path(where) if Path(where).is_dir() else model_dir(str(where))
    cm = model.load(path, gpu)
    if cm.meta.get("feature_set") != FEATURES.name:
        raise CostModelError(f"model at {path} is not a Helion model (feature set {cm.meta.get('feature_set')!r})")
    return cm


def score(cm: model.CostModel, kernel: str, problem: dict, dtype: str, config_jsons: Sequence[str],
          shape: dict | None = None) -> np.ndarray:
    """Scores of configs of one problem (higher: predicted faster)."""
    n = len(config_jsons)
    return model.predict(cm, matrix([kernel] * n, [problem] * n, [dtype] * n, config_jsons, shape))


# --- leave one kernel out ------------------------------------------------------------------------------

def _group_scores(table: pa.Table, scores: np.ndarray) -> list[dict]:
    """Per group with a config that ran: top-k score (best gain among the model's top k; gain = group best /
    latency) for k in KS, and the expected best of k random configs."""
    from costmodel.evaluation import expected_best_of_random_k

    gains, bounds = model.gains(table), model.group_bounds(table)
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        g, s = gains[lo:hi], scores[lo:hi]
        if not (g > 0).any():
            continue
        order = np.argsort(-s, kind="stable")
        rand = expected_best_of_random_k(np.sort(g)[::-1], np.array(KS))
        out.append({"group_id": table["group_id"][int(lo)].as_py(), "configs": int(hi - lo),
                    **{f"top{k}_score": float(g[order[:k]].max()) for k in KS},
                    **{f"random{k}_score": float(r) for k, r in zip(KS, rand)}})
    return out


def _summary(groups: list[dict]) -> dict:
    from costmodel.evaluation import geomean

    keys = [f"{m}{k}_score" for m in ("top", "random") for k in KS]
    return {"groups": len(groups), **{k: float(geomean(np.array([g[k] for g in groups]))) if groups else None
                                      for k in keys},
            "min_top8_score": min((g["top8_score"] for g in groups), default=None)}


def _rank_held_out(table: pa.Table, held: np.ndarray, params: model.TrainParams, fs: model.FeatureSet) -> list[dict]:
    """Fit on the rows not ``held``, rank the held rows' groups: ``_group_scores`` of them."""
    train, test = table.filter(pa.array(~held)), table.filter(pa.array(held))
    booster, _ = model.fit(train, params, fs)
    return _group_scores(test, booster.inplace_predict(fs.matrix(test)))


def leave_one_kernel_out(table: pa.Table, params: model.TrainParams = PARAMS,
                         fs: model.FeatureSet = FEATURES) -> dict:
    """For each Helion kernel of ``table`` (sorted by group): fit on every other kernel's groups, rank the
    held-out kernel's groups (twin rows, ``twin_rows``, always train: a kernel with a twin is then one whose Triton
    twin the model saw). Per kernel and over all: geomean top-1 / top-8 score against each group's best
    (and the random-k baseline); needs two kernels or more. ``fs``: the features (another set for experiments)."""
    kernels = sorted(set(table.filter(pa.array(~is_twin(table)))["kernel"].to_pylist()))
    if len(kernels) < 2:
        raise CostModelError(f"leave-one-kernel-out needs two Helion kernels or more, the data has {kernels}")
    per_kernel, every = {}, []
    for k in kernels:
        res = leave_kernels_out(table, [k], params, fs)
        per_kernel[k] = {**res["per_kernel"][k], "train_groups": res["train_groups"]}
        every += res["per_group"]
    return {"split": "kernel", **_summary(every), "per_kernel": per_kernel, "per_group": every}


def leave_kernels_out(table: pa.Table, kernels: list[str], params: model.TrainParams = PARAMS,
                      fs: model.FeatureSet = FEATURES) -> dict:
    """Fit on every other kernel's groups, rank the groups of ``kernels`` held out together: so that one of two
    alike kernels (swiglu and geglu, two gated activations) cannot teach the model the other. Per kernel and over
    all, as ``leave_one_kernel_out``."""
    present = set(pc.unique(table["kernel"]).to_pylist())
    if missing := sorted(set(kernels) - present):
        raise CostModelError(f"no rows of {', '.join(missing)} to hold out; the data has {', '.join(sorted(present))}")
    if not present - set(kernels):
        raise CostModelError(f"holding out {', '.join(kernels)} leaves no kernel to train on")
    held = np.asarray(pc.is_in(table["kernel"], pa.array(list(kernels)))) & ~is_twin(table)
    kernel_of = dict(zip(table["group_id"].to_pylist(), table["kernel"].to_pylist()))
    every = [{**g, "kernel": kernel_of[g["group_id"]]} for g in _rank_held_out(table, held, params, fs)]
    per_kernel = {k: _summary([g for g in every if g["kernel"] == k]) for k in sorted(kernels)}
    return {"split": "kernels " + "+".join(sorted(kernels)), **_summary(every), "per_kernel": per_kernel,
            "train_groups": len(pc.unique(table.filter(pa.array(~held))["group_id"])), "per_group": every}


def shape_folds(table: pa.Table, folds: int) -> np.ndarray:
    """Per row, its fold in [0, folds): a hash of (kernel, problem), so every dtype of a shape (and every group
    of it) falls in one fold, and a shape keeps its fold whatever else the data holds."""
    import hashlib

    keys = pc.binary_join_element_wise(table["kernel"], table["problem_json"], "|").to_pylist()
    fold = {k: int(hashlib.sha256(k.encode()).hexdigest()[:8], 16) % folds for k in set(keys)}
    return np.array([fold[k] for k in keys], dtype=int)


def held_out_shapes(table: pa.Table, params: model.TrainParams = PARAMS, folds: int = 3,
                    fs: model.FeatureSet = FEATURES) -> dict:
    """What the tuner meets: kernels it saw, shapes it did not. Each shape (all its dtypes) falls in one of
    ``folds`` folds by its hash (``shape_folds``); per fold, a model fitted on the other folds' groups, every
    kernel's, ranks the fold's groups. Per kernel and over all, as ``leave_one_kernel_out``."""
    fold = shape_folds(table, folds)
    kernels = np.asarray(table["kernel"].to_numpy(zero_copy_only=False))
    every = []
    twin = is_twin(table)
    for f in range(folds):
        if ((fold == f) & ~twin).any() and (fold != f).any():
            every += _rank_held_out(table, (fold == f) & ~twin, params, fs)
    kernel_of = dict(zip(table["group_id"].to_pylist(), kernels))
    every = [{**g, "kernel": kernel_of[g["group_id"]]} for g in every]
    per_kernel = {k: _summary([g for g in every if g["kernel"] == k]) for k in sorted({g["kernel"] for g in every})}
    return {"split": f"shape hash, {folds} folds", **_summary(every), "per_kernel": per_kernel, "per_group": every}
