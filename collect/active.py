"""Where to spend whole-space sweeps (issue 16): probe many candidate shapes cheaply, sweep where the model is wrong.

A sweep of one matmul shape's valid space is a few thousand configs; a probe is at most 3k + 1: the model's top k,
the best-ranked config of k structures the top k lack, k others drawn at random and the family default. What the
probe measured says how wrong the model is on that shape:
its regret, the best of the probe over the best of the top k (1 where the top k held the probe's best; 0.45 on the
odd matmul issue 16 found, where a config outside the top 8 ran 2.2x faster). The shapes of lowest regret are
swept; a sweep skips the pairs the probe measured (resume), and the group counts as measured over the whole space
(``evaluation.group_info``).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from collect.plan import GroupPlan
from costmodel import dataset, features, model, space
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family

PROBE_K = 8


def probe_plan(candidates: list[GroupPlan], cost_model, hw: HardwareRecord, k: int = PROBE_K,
               seed: int = 0) -> list[GroupPlan]:
    """Each candidate's group as a probe: the model's top ``k`` first (in its order), then the best-ranked config
    of each of ``k`` other structures (``space.other_structures``), then ``k`` other valid configs drawn at random, then
    the default. Valid on ``hw``; ranked as on the model's GPU (under the interpreter ``hw`` is the interpreter's
    record, which no model is for)."""
    out = []
    for i, g in enumerate(candidates):
        fam = get_family(g.family)
        valid = space.enumerate_valid(fam, g.problem, g.dtype, hw)
        rows = features.candidates_table(g.family, g.problem, g.dtype, valid, cost_model.hardware)
        order = model.rank(cost_model, rows)
        ranked = [valid[j] for j in order]
        top = ranked[:k]
        # a random draw rarely reaches the structure a shape needs (issue 16's all-unaligned matmuls: 8 random
        # configs beside the top 8 gave every probe a regret of 1.0; the best of the next 8 structures found
        # 0.82-0.94 on three of the four then swept)
        others = space.other_structures(fam, ranked[k:], top, k)
        rest = [c for c in ranked[k:] if c not in others]
        drawn = [rest[j] for j in np.random.default_rng([seed, i]).permutation(len(rest))[:k]]
        default = fam.default_config(g.problem, g.dtype, hw)
        extra = [default] if default in valid and default not in top + others + drawn else []
        out.append(GroupPlan(g.family, g.problem, g.dtype, tuple(top + others + drawn + extra), False))
    return out


def regrets(probes: list[GroupPlan], table: pa.Table, k: int = PROBE_K) -> list[dict]:
    """Per probe, from the measured rows (``table``: kernel, problem_json, dtype, config_json, status,
    latency_ms): the best of its top ``k`` and of the whole probe, and the regret (NaN where nothing ran)."""
    lat: dict[tuple, float] = {}
    for r in table.to_pylist():
        if r["status"] == "ok" and r["latency_ms"]:
            key = (r["kernel"], r["problem_json"], r["dtype"], r["config_json"])
            lat[key] = min(lat.get(key, math.inf), r["latency_ms"])
    out = []
    for i, g in enumerate(probes):
        pj = dataset.canonical_json(g.problem)
        ms = [lat.get((g.family, pj, g.dtype, dataset.canonical_json(c)), math.inf) for c in g.configs]
        best_top, best = min(ms[:k], default=math.inf), min(ms, default=math.inf)
        regret = math.nan if math.isinf(best) else best / best_top
        out.append({"index": i, "family": g.family, "problem": g.problem, "dtype": g.dtype, "regret": regret,
                    "best_top_ms": None if math.isinf(best_top) else best_top, "best_probe_ms": None if
                    math.isinf(best) else best})
    return out


def by_regret(ranked: list[dict]) -> list[dict]:
    """``regrets``' rows, lowest regret first (nothing that ran in the top k: regret 0), those where nothing ran
    (NaN) last."""
    return sorted(ranked, key=lambda r: (math.isnan(r["regret"]), r["regret"]))


def sweep_plan(probes: list[GroupPlan], ranked: list[dict], n: int, hw: HardwareRecord) -> list[GroupPlan]:
    """The ``n`` probes of lowest regret, each over its whole valid space."""
    out = []
    for r in [r for r in by_regret(ranked) if not math.isnan(r["regret"])][:n]:
        g = probes[r["index"]]
        configs = space.enumerate_valid(get_family(g.family), g.problem, g.dtype, hw)
        out.append(GroupPlan(g.family, g.problem, g.dtype, tuple(configs), True))
    return out
