"""What every claim about a model is measured with: group splits, per-group metrics, baselines, reports.

Per held-out group the model orders the group's measured configs; with ``best`` the group's best latency:

* top-k score = best / best latency among the model's first k (1.0: the best config is in its top k),
  regret at k = 1 / top-k score - 1, hit at k = whether the best config is in the top k;
* NDCG@8 with the training gains (best / latency, failures 0) and linear gain; Kendall tau-b between the
  model's scores and measured speed over the configs that ran.

Baselines at the same k: random-k (the exact expected value of a uniformly random k-subset), the family's
default config, and nearest-k: the best configs of the nearest training shapes (same family and dtype, nearest
in log2 dims), skipping a shape whose best config was not measured in the held-out group.

Scores aggregate as geometric means (clipped at 1e-3 so one all-failed top-k does not zero the mean) and 10th
percentiles over groups; rates and correlations as means; overall and per kernel family.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Callable
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from costmodel import dataset, features, model
from costmodel.errors import CostModelError
from costmodel.kernels import get_family

KS = (1, 4, 8, 16)
CURVE_LEN = 64  # configs benchmarked, for best-so-far curves
SCORE_FLOOR = 1e-3
SPLITS = ("heldout", "dissimilar", "family", "kind")
# heldout: a shape (family, problem) is held out, in every dtype and under every kernel hash at once, when its
# seeded hash falls under the share for its kind: a group whose twin (same shape, other dtype or older kernel
# hash) trained would flatter the model (34 of the 91 held-out groups of the model shipped with issue 16 had
# one). A hash, not a draw over the current group list, keeps a shape's side fixed as the dataset grows (see
# tracking's champion rule)
HELDOUT_SHARE = 0.15
HELDOUT_SHARE_EXHAUSTIVE = 0.5  # a shape with a group measured over the whole space has complete ground truth:
# prefer it for evaluation. 0.75 until session 15, when it trained the shipped model on 5 of the 31 whole-space
# matmul groups, the kind it ranks worst (no dim a multiple of 16). Half of session 15's 128 such shapes trains 23
# of 46 whole-space matmul groups and still holds out 76 whole-space groups


@dataclass(frozen=True)
class Kind:
    """A kind of shape the kind split holds out whole: ``test(info)`` marks the groups of that kind."""
    family: str
    rule: str
    test: Callable[[pa.Table], np.ndarray]  # group_info table -> bool per group


def _dims(info: pa.Table, *names: str) -> np.ndarray:
    return np.column_stack([features.numeric(info[f"dim_{d}"]) for d in names])


# matmul shapes unlike the aligned LLM shapes most data has: the ones issue 16's live tries reached 0.45-0.96 on
KINDS = {
    "unaligned": Kind("matmul", "matmul problems with M, N or K not a multiple of 16",
                      lambda info: (_dims(info, "M", "N", "K") % 16 != 0).any(axis=1)),
    "skinny": Kind("matmul", "matmul problems with M <= 64", lambda info: _dims(info, "M")[:, 0] <= 64),
}
DISSIMILAR_SHARE = 0.1  # of each family: this share largest, this share skinniest
_NON_EXTENT_DIMS = ("CAUSAL", "D")  # flags and head dims: not extents of the problem


@dataclass(frozen=True)
class Split:
    name: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    rule: dict


@dataclass
class GroupResult:
    group_id: str
    kernel: str
    exhaustive: bool  # measured over the whole valid space: the best is the space's best, not a sample's
    metrics: dict[str, float]
    curves: dict[str, np.ndarray]  # strategy -> fraction of best after 1..CURVE_LEN configs
    ranks: np.ndarray  # (predicted, measured) rank percentiles of the configs that ran


@dataclass
class Evaluation:
    split: str
    groups: list[GroupResult] = field(default_factory=list)
    records: int = 0
    twin_groups: int = 0  # test groups whose shape has a group on the training side

    def summary(self) -> dict:
        kernel = np.array([g.kernel for g in self.groups])
        exhaustive = np.array([g.exhaustive for g in self.groups], bool)
        top = {k: np.array([g.metrics[f"top{k}_score"] for g in self.groups]) for k in (1, 8)}
        out = {"split": self.split, "groups": len(self.groups), "records": self.records,
               "twin_groups": self.twin_groups, **_aggregate([g.metrics for g in self.groups]),
               **_by_truth(top, exhaustive)}
        out["per_kernel"] = {k: {"groups": int((kernel == k).sum()),
                                 **_aggregate([g.metrics for g in self.groups if g.kernel == k]),
                                 **_by_truth(top, exhaustive, kernel == k)} for k in sorted(set(kernel))}
        return out


def _by_truth(top: dict[int, np.ndarray], exhaustive: np.ndarray, where: np.ndarray | None = None) -> dict:
    """Headline figures over the groups measured over the whole space (``*_exhaustive``: their best is the
    space's best) and over the sampled ones (``*_sampled``: the best of a 30-100 config sample) apart."""
    where = np.ones(len(exhaustive), bool) if where is None else where
    out: dict = {}
    for name, part in (("exhaustive", where & exhaustive), ("sampled", where & ~exhaustive)):
        t1, t8 = top[1][part], top[8][part]
        out[f"{name}_groups"] = int(part.sum())
        out[f"top1_{name}"] = float(geomean(t1)) if len(t1) else None
        out[f"top8_{name}"] = float(geomean(t8)) if len(t8) else None
        out[f"p10_top8_{name}"] = float(np.percentile(t8, 10)) if len(t8) else None
        out[f"min_top8_{name}"] = float(t8.min()) if len(t8) else None
    return out


# --- groups and splits ---------------------------------------------------------------------------------

def group_info(table: pa.Table) -> pa.Table:
    """One row per group (table sorted by group): its first row's identity columns, and ``exhaustive`` when any of
    its rows came from a whole-space sweep (a sweep measures every valid config not measured yet: a group probed
    with a sample first and swept later holds rows of both)."""
    bounds = model.group_bounds(table)
    cols = ["group_id", "kernel", "dtype", "problem_json", "gpu", *(c for c in table.column_names
                                                                    if c.startswith(("dim_", "hw_")))]
    info = table.select(cols).take(bounds[:-1])
    swept = np.asarray(pc.fill_null(table["exhaustive"], False), bool)
    return info.append_column("exhaustive", pa.array(np.logical_or.reduceat(swept, bounds[:-1]) if len(swept)
                                                     else np.zeros(0, bool)))


def _extents(info: pa.Table) -> np.ndarray:
    """log2 of each group's extent dims (NaN where a family has no such dim)."""
    dims = [d for d in dataset.DIMS if d not in _NON_EXTENT_DIMS]
    with np.errstate(divide="ignore"):
        return np.log2(np.column_stack([features.numeric(info[f"dim_{d}"]) for d in dims]))


def _unit_hash(keys: list[str], seed: int) -> np.ndarray:
    return np.array([int(hashlib.sha256(f"{seed}:{g}".encode()).hexdigest()[:12], 16) / 16**12 for g in keys])


def shape_codes(info: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(shape keys 'family:problem_json', per-group index into them): a shape's groups are its dtypes and
    kernel hashes."""
    keys = np.char.add(np.char.add(np.asarray(info["kernel"].to_pylist(), str), ":"),
                       np.asarray(info["problem_json"].to_pylist(), str))
    return np.unique(keys, return_inverse=True)


def kind_mask(info: pa.Table, kind: str) -> np.ndarray:
    """Which groups of ``info`` (group_info) are of the kind ``kind``."""
    k = KINDS[kind]
    return np.asarray(pc.equal(info["kernel"], k.family)) & np.asarray(k.test(info), bool)


def split_groups(table: pa.Table, how: str, seed: int = 0, kind: str | None = None) -> list[Split]:
    """Train/test splits of the groups of ``table`` (never of rows): one split, or one per family for
    leave-one-family-out. ``kind`` (a KINDS name) is the kind of shape the kind split holds out."""
    info = group_info(table)
    ids = np.asarray(info["group_id"].to_pylist())
    kernels = np.asarray(info["kernel"].to_pylist())
    if how == "heldout":
        shapes, shape = shape_codes(info)
        any_exhaustive = np.zeros(len(shapes), bool)
        np.logical_or.at(any_exhaustive, shape, np.asarray(pc.fill_null(info["exhaustive"], False)))
        u = _unit_hash(list(shapes), seed)
        test = np.where(any_exhaustive, u < HELDOUT_SHARE_EXHAUSTIVE, u < HELDOUT_SHARE)[shape]
        rule = {"split": how, "seed": seed, "share": HELDOUT_SHARE, "share_exhaustive": HELDOUT_SHARE_EXHAUSTIVE,
                "rule": "a shape is held out, in every dtype and kernel hash, when sha256(f'{seed}:{kernel}:"
                        "{problem_json}') as a fraction < share (share_exhaustive when any of its groups was "
                        "measured over the whole space)"}
        splits = [(how, test)]
    elif how == "kind":
        if kind not in KINDS:
            raise CostModelError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
        test = kind_mask(info, kind)
        rule = {"split": f"kind:{kind}", "kind": kind,
                "rule": f"all {KINDS[kind].rule} held out; the model trains on the rest"}
        splits = [(f"kind:{kind}", test)]
    elif how == "dissimilar":
        shapes, shape = shape_codes(info)  # ranked by shape, so a shape's dtypes and kernel hashes go together
        first = np.unique(shape, return_index=True)[1]
        ext, fams = _extents(info)[first], kernels[first]
        size, skinny = np.nansum(ext, axis=1), np.nanmax(ext, axis=1) - np.nanmin(ext, axis=1)
        held = np.zeros(len(shapes), bool)
        for k in np.unique(fams):
            idx = np.flatnonzero(fams == k)
            q = max(1, math.ceil(DISSIMILAR_SHARE * len(idx)))
            for key in (size, skinny):  # ties broken by shape key, so the split is reproducible
                held[idx[np.lexsort((shapes[idx], -key[idx]))[:q]]] = True
        test = held[shape]
        rule = {"split": how, "share": DISSIMILAR_SHARE,
                "rule": "per family, the largest (product of extent dims) and the skinniest (log2 max/min extent "
                        f"dim, dims {', '.join(_NON_EXTENT_DIMS)} excluded) shares of shapes held out, in every "
                        "dtype and kernel hash"}
        splits = [(how, test)]
    elif how == "family":
        fams = np.unique(kernels)
        if len(fams) < 2:
            raise CostModelError("leave-one-family-out needs data of at least two kernel families")
        rule = {"split": how, "rule": "each family held out in turn; the model trains on the others"}
        splits = [(f"family:{f}", kernels == f) for f in fams]
    else:
        raise CostModelError(f"unknown split {how!r}; choose from {', '.join(SPLITS)}")
    out = []
    for name, test in splits:
        if test.all() or not test.any():
            raise CostModelError(f"split {name}: too few groups ({len(ids)}) to hold some out and train on the rest")
        out.append(Split(name, tuple(ids[~test]), tuple(ids[test]), rule))
    return out


# --- per-group metrics ---------------------------------------------------------------------------------

def expected_best_of_random_k(sorted_gains: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """Expected best of a uniformly random k-subset, for each k, exactly (values sorted best first: gains
    descending, or latencies ascending for the expected fastest latency): the i-th best is the subset's best
    with probability C(n-1-i, k-1) / C(n, k)."""
    n = len(sorted_gains)
    lg = np.array([math.lgamma(x + 1) for x in range(n + 1)])
    out = np.empty(len(ks))
    for j, k in enumerate(ks):
        k = min(int(k), n)
        i = np.arange(n - k + 1)
        a = n - 1 - i
        logp = (lg[a] - lg[k - 1] - lg[a - k + 1]) - (lg[n] - lg[k] - lg[n - k])
        out[j] = float(np.sum(np.exp(logp) * sorted_gains[: n - k + 1]))
    return out


def _kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2:
        return math.nan
    sx, sy = np.sign(x[:, None] - x[None, :]), np.sign(y[:, None] - y[None, :])
    denom = math.sqrt(np.abs(sx).sum() * np.abs(sy).sum())
    return float((sx * sy).sum() / denom) if denom else math.nan


def _ndcg(gain_in_order: np.ndarray, k: int = 8) -> float:
    disc = 1 / np.log2(np.arange(2, k + 2))
    ideal = np.sort(gain_in_order)[::-1][:k]
    idcg = float((ideal * disc[: len(ideal)]).sum())
    return float((gain_in_order[:k] * disc[: min(k, len(gain_in_order))]).sum()) / idcg if idcg else math.nan


def _pct_rank(values: np.ndarray) -> np.ndarray:
    r = np.argsort(np.argsort(values, kind="stable"), kind="stable")
    return r / max(1, len(values) - 1)


class _Nearest:
    """Best config of each training group, and the training groups of a (family, dtype) by distance."""

    def __init__(self, train: pa.Table):
        info = group_info(train)
        lat = model.latencies(train)
        _, codes = model.group_codes(train)
        order = np.lexsort((lat, codes))  # per group, fastest first
        first = order[np.r_[True, codes[order][1:] != codes[order][:-1]]] if len(order) else order
        ok = np.isfinite(lat[first])
        configs = train["config_json"].take(pa.array(first, pa.int64())).to_pylist()
        self.key = list(zip(info["kernel"].to_pylist(), info["dtype"].to_pylist()))
        self.ext = np.nan_to_num(_extents(info), nan=0.0)
        self.best = [c if o else None for c, o in zip(configs, ok)]

    def configs(self, kernel: str, dtype: str, ext: np.ndarray) -> list[str]:
        """Best configs of same-family, same-dtype training groups, nearest shape first, without repeats."""
        idx = [i for i, key in enumerate(self.key) if key == (kernel, dtype) and self.best[i] is not None]
        dist = np.linalg.norm(self.ext[idx] - np.nan_to_num(ext, nan=0.0), axis=1) if idx else np.array([])
        out: list[str] = []
        for i in np.array(idx)[np.argsort(dist, kind="stable")] if idx else []:
            if self.best[i] not in out:
                out.append(self.best[i])
        return out


def _group_result(info: dict, ext: np.ndarray, rows: pa.Table, scores: np.ndarray, nearest: _Nearest) -> GroupResult:
    lat = model.latencies(rows)
    n = len(lat)
    best = lat.min()
    gain = np.where(np.isfinite(lat), best / lat, 0.0)
    order = np.argsort(-scores, kind="stable")
    steps = np.minimum(np.arange(1, CURVE_LEN + 1), n)
    model_curve = np.maximum.accumulate(gain[order])[steps - 1]
    sorted_gain = np.sort(gain)[::-1]
    random_curve = expected_best_of_random_k(sorted_gain, steps)

    configs = rows["config_json"].to_pylist()
    by_config = dict(zip(configs, gain))
    fam = get_family(info["kernel"])
    default = dataset.canonical_json(fam.default_config(json.loads(info["problem_json"]), info["dtype"],
                                                        dataset.hw_from_row(info)))
    g_default = by_config.get(default, math.nan)
    if math.isnan(g_default):
        default_curve = np.full(CURVE_LEN, math.nan)
    else:  # the default first, then random picks among the others
        others = np.sort(np.delete(gain, configs.index(default)))[::-1]
        rest = expected_best_of_random_k(np.maximum(others, g_default), np.maximum(steps - 1, 1)) if len(others) else steps * 0.0
        default_curve = np.where(steps == 1, g_default, np.maximum(rest, g_default))
    near = [by_config[c] for c in nearest.configs(info["kernel"], info["dtype"], ext) if c in by_config]

    m: dict[str, float] = {}
    for k in KS:
        m[f"top{k}_score"] = float(model_curve[k - 1])
        m[f"hit_at_{k}"] = float(model_curve[k - 1] >= 1.0)
        m[f"random{k}_score"] = float(random_curve[k - 1])
        m[f"nearest{k}_score"] = float(max(near[:k])) if near else math.nan
    m["default_score"] = float(g_default)
    m["ndcg_at_8"] = _ndcg(gain[order])
    ran = np.isfinite(lat)
    m["kendall_tau"] = _kendall_tau_b(scores[ran].astype(np.float64), -lat[ran])
    ranks = np.column_stack([_pct_rank(-scores[ran]), _pct_rank(lat[ran])]) if ran.sum() > 1 else np.empty((0, 2))
    return GroupResult(info["group_id"], info["kernel"], bool(info["exhaustive"]), m,
                       {"model": model_curve, "random": random_curve, "default-first": default_curve}, ranks)


def evaluate(cm: model.CostModel, test: pa.Table, train: pa.Table, split: str) -> Evaluation:
    """Metrics of ``cm`` on every group of ``test`` (sorted by group) with at least one config that ran;
    ``train`` supplies the nearest-shape baseline."""
    scores = model.score(cm, test)
    bounds = model.group_bounds(test)
    ran = np.isfinite(model.latencies(test))
    infos = group_info(test)
    ext = _extents(infos)
    nearest = _Nearest(train)
    shapes, shape = shape_codes(infos)
    twin = np.isin(shapes, shape_codes(group_info(train))[0] if train.num_rows else [])[shape]
    ev = Evaluation(split)
    for j, info in enumerate(infos.to_pylist()):
        lo, hi = bounds[j], bounds[j + 1]
        if ran[lo:hi].any():
            rows = test.slice(lo, hi - lo)
            ev.groups.append(_group_result(info, ext[j], rows, scores[lo:hi], nearest))
            ev.records += int(hi - lo)
            ev.twin_groups += int(twin[j])
    if not ev.groups:
        raise CostModelError(f"split {split}: no held-out group has a config that ran")
    return ev


def geomean(v: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Geometric mean of scores, clipped at SCORE_FLOOR so that one zero does not zero the mean."""
    return np.exp(np.log(np.maximum(v, SCORE_FLOOR)).mean(axis=axis))


def _aggregate(ms: list[dict[str, float]]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    if not ms:
        return out
    for key in ms[0]:
        v = np.array([m[key] for m in ms], dtype=np.float64)
        v = v[~np.isnan(v)]
        if key.endswith("_score"):
            out[key] = float(geomean(v)) if len(v) else None
            out[f"p10_{key}"] = float(np.percentile(v, 10)) if len(v) else None
        else:
            out[key] = float(v.mean()) if len(v) else None
    for k in KS:
        s = out.get(f"top{k}_score")
        out[f"regret_at_{k}"] = 1 / s - 1 if s else None
    return out


# --- training with its report --------------------------------------------------------------------------

def run_split(table: pa.Table, split: Split, gpu: str, params: model.TrainParams) -> tuple[object, dict, Evaluation]:
    """Train a fresh model on the split's training groups and evaluate it on its test groups: (booster,
    training facts, evaluation)."""
    train = model.select_groups(table, split.train)
    booster, fit_info = model.fit(train, params)
    test = model.select_groups(table, split.test)
    return booster, fit_info, evaluate(model.CostModel(booster, {"gpu": gpu}), test, train, split.name)


def evaluate_split(table: pa.Table, how: str, gpu: str, params: model.TrainParams, seed: int = 0,
                   progress=None, kind: str | None = None) -> Evaluation:
    """Every fold of a split, pooled: with leave-one-family-out each family is scored by the model that never
    saw it, so the pooled per-kernel figures are the per-fold ones. ``progress(line)`` hears of each fold."""
    splits = split_groups(table, how, seed, kind)
    name = splits[0].rule["split"]
    ev = Evaluation(name)
    for i, split in enumerate(splits, 1):
        if progress:
            progress(f"{name} split: fresh model {i} of {len(splits)} ({len(split.test)} groups held out)")
        _, _, fold = run_split(table, split, gpu, params)
        ev.groups += fold.groups
        ev.records += fold.records
        ev.twin_groups += fold.twin_groups
    return ev


def train_model(table: pa.Table, gpu: str, params: model.TrainParams = model.TrainParams(), seed: int = 0,
                extra_params: model.TrainParams | None = model.FAST, progress=None
                ) -> tuple[object, dict, dict[str, Evaluation]]:
    """Fit the model to ship on every group outside the held-out split, evaluate it there, and (unless
    ``extra_params`` is None) evaluate fresh models on the dissimilar, leave-one-family-out and kind splits
    (``kind_<name>``: each of KINDS the data holds, beside groups of other kinds).
    Returns (booster, meta, evaluations by split); ``progress(line)``, when given, hears of each stage."""
    split = split_groups(table, "heldout", seed)[0]
    booster, fit_info, heldout_eval = run_split(table, split, gpu, params)
    hw = dataset.hw_from_row(table.slice(0, 1).to_pylist()[0]).as_dict()
    evals = {"heldout": heldout_eval}
    if extra_params is not None:
        kernels = pc.unique(table["kernel"])
        for how in ("dissimilar", "family") if len(kernels) > 1 else ("dissimilar",):
            evals[how] = evaluate_split(table, how, gpu, extra_params, seed, progress)
        info = group_info(table)
        for kind in KINDS:
            if 0 < kind_mask(info, kind).sum() < info.num_rows:
                evals[f"kind_{kind}"] = evaluate_split(table, "kind", gpu, extra_params, seed, progress, kind)
    heldout = {**split.rule, "groups": list(split.test)}
    meta = model.new_meta(gpu, hw, table, fit_info, heldout, evals["heldout"].summary())
    meta["extra_splits"] = {k: headline(v.summary()) for k, v in evals.items() if k != "heldout"}
    return booster, meta, evals


# --- reports -------------------------------------------------------------------------------------------

_HEADLINE = ("groups", "records", "top1_score", "top8_score", "p10_top8_score", "ndcg_at_8", "kendall_tau",
             "random8_score", "default_score", "nearest8_score", "twin_groups",
             *(f"{k}_{t}" for t in ("exhaustive", "sampled")
               for k in ("top1", "top8", "p10_top8", "min_top8")), "exhaustive_groups", "sampled_groups")


def headline(summary: dict) -> dict:
    """The figures reports lead with, overall and per kernel."""
    return {k: summary.get(k) for k in _HEADLINE} | {
        "per_kernel": {f: {k: v.get(k) for k in _HEADLINE} for f, v in summary.get("per_kernel", {}).items()}}


def comparison_rows(summary: dict) -> list[list[str]]:
    """k, model, random, nearest (+ p10 of model) rows for tables and the model card."""
    return [[str(k), fmt(summary.get(f"top{k}_score")), fmt(summary.get(f"p10_top{k}_score")),
             fmt(summary.get(f"hit_at_{k}")), fmt(summary.get(f"random{k}_score")),
             fmt(summary.get(f"nearest{k}_score"))] for k in KS]


COMPARISON_HEADER = ["k", "model top-k", "model p10", "hit@k", "random-k", "nearest-k"]


def fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def kernel_rows(summary: dict) -> list[list[str]]:
    return [[f, fmt(s.get("groups")), fmt(s.get("top1_score")), fmt(s.get("top8_score")),
             fmt(s.get("p10_top8_score")), fmt(s.get("random8_score")), fmt(s.get("default_score")),
             fmt(s.get("nearest8_score")), fmt(s.get("ndcg_at_8")), fmt(s.get("kendall_tau")),
             fmt(s.get("exhaustive_groups")), fmt(s.get("top8_exhaustive")), fmt(s.get("min_top8_exhaustive"))]
            for f, s in summary.get("per_kernel", {}).items()]


KERNEL_HEADER = ["kernel", "groups", "top1", "top8", "p10top8", "rand8", "default", "near8", "ndcg8", "tau", "exh",
                 "top8exh", "min8exh"]


def truth_line(summary: dict) -> str:
    """The headline figures over groups measured over the whole space, then over the sampled ones."""
    return "; ".join(
        f"{name} ({fmt(summary.get(f'{t}_groups'))} groups): top1 {fmt(summary.get(f'top1_{t}'))}, top8 "
        f"{fmt(summary.get(f'top8_{t}'))}, p10 {fmt(summary.get(f'p10_top8_{t}'))}, min "
        f"{fmt(summary.get(f'min_top8_{t}'))}"
        for t, name in (("exhaustive", "measured over the whole space"), ("sampled", "sampled")))

# what the columns mean (table captions, the model card; the README says the same)
COMPARISON_LEGEND = ("Scores are fractions of each group's best measured latency, geomean over groups. model top-k: "
                     "the best among the model's first k configs; model p10: its 10th percentile over groups; hit@k: "
                     "share of groups whose best config is in the model's top k; random-k: expected score of k random "
                     "configs; nearest-k: the best configs of the nearest training shapes.")
KERNEL_LEGEND = ("top1, top8: model top-k score at k=1, 8; p10top8: 10th percentile of top8 over groups; rand8, "
                 "near8: random-8 and nearest-8 baselines; default: the family's default config; ndcg8: NDCG@8 "
                 "(gain best/latency); tau: Kendall tau-b of predicted vs measured speed; exh, top8exh, min8exh: "
                 "groups measured over the whole valid space (their best is the space's best, not a sample's), top8 "
                 "over them (geomean) and its minimum.")


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                      *("| " + " | ".join(r) + " |" for r in rows)])


def model_card(meta: dict, evals: dict[str, Evaluation]) -> str:
    d, h = meta["data"], evals["heldout"].summary()
    lines = [
        f"# costmodel ranking model for {meta['gpu']}",
        "",
        f"Trained {meta['created']} with XGBoost {meta['xgboost_version']} (rank:ndcg, top-k pairs, training gain = (best "
        f"latency / latency)^{meta['params']['gain_power']:g}), {meta['trees']} trees, feature schema v{meta['feature_schema_version']} "
        f"({len(meta['feature_names'])} features).",
        "",
        f"Data: hash `{d['hash']}`, {d['rows']} measurements in {d['groups']} groups "
        f"({', '.join(f'{k} {v}' for k, v in sorted(d['rows_per_kernel'].items()))}). "
        f"Trained on {meta['train_groups']} groups (+{meta['valid_groups']} for early stopping).",
        "",
        f"## Held-out groups ({h['groups']} groups, {h['records']} measurements, never seen in training)",
        "",
        f"Rule: {meta['heldout']['rule']}.",
        "",
        _md_table(COMPARISON_HEADER, comparison_rows(h)),
        "",
        f"Over groups {truth_line(h)}. Held-out groups whose shape has a group in training: "
        f"{fmt(h.get('twin_groups'))}.",
        "",
        f"Family default config: {fmt(h.get('default_score'))} of the best (geomean; p10 "
        f"{fmt(h.get('p10_default_score'))}). NDCG@8 {fmt(h.get('ndcg_at_8'))}, Kendall tau "
        f"{fmt(h.get('kendall_tau'))}.",
        "",
        _md_table(KERNEL_HEADER, kernel_rows(h)),
    ]
    titles = {"dissimilar": "Dissimilar shapes (largest and skinniest held out)",
              "family": "Leave one kernel family out",
              **{f"kind_{k}": f"A kind of shape held out, {k}: {v.rule}" for k, v in KINDS.items()}}
    for how, title in titles.items():
        if how in evals:
            s = evals[how].summary()
            lines += ["", f"## {title}: a fresh model per split ({s['groups']} groups)", "",
                      _md_table(COMPARISON_HEADER, comparison_rows(s)), "", f"Over groups {truth_line(s)}.", "",
                      _md_table(KERNEL_HEADER, kernel_rows(s))]
    lines += ["", COMPARISON_LEGEND, "", KERNEL_LEGEND, f"Written {datetime.now(timezone.utc).date().isoformat()}.", ""]
    return "\n".join(lines)
