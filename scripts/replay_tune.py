"""tune() replayed on a model's held-out groups, under several second-round settings (CPU).

    python scripts/replay_tune.py [--data data] [--model DIR] [--newer] [--settings top8,0.0:1.5,0.5:1.3,always]
        [--explore 0,2] [--out F]

--model: a model directory (default the shipped model; an older one: `git archive REV costmodel/models/SLUG | tar x`).
--newer: also the groups every row of which was recorded after the model was created (data it cannot have seen).
--inner FOLDS: instead, shape-wise folds of the model's training side, each fold's whole-space groups replayed by a
fresh model trained on the other groups of that side: where to choose a setting without the model's held-out groups.
For each group the model never saw in training, tune(k=8) runs with the Replay benchmarker over the recorded
configs; a setting is the second round's thresholds RHO_MIN:SPREAD_MAX (see tuner.tune.disagreement), `topK`
(k=K and no second round: budget 0; the others run k=8) or `always` (a second round whenever configs are left).
Configs are judged by GPU time (objective graph), as the recorded best is. Prints one JSON object: per setting, the geomean, p10 and min of
recorded best / tune's best, over all groups and over those measured over the whole space and the sampled ones,
and on how many groups a second round ran."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel import dataset, evaluation, model  # noqa: E402
from costmodel.benchmark import ReplayBenchmarker  # noqa: E402
from costmodel.evaluation import geomean  # noqa: E402
from costmodel.hardware import KNOWN  # noqa: E402
import tuner.tune as tune_mod  # noqa: E402


def groups(t: pa.Table):
    for gid in sorted(set(t["group_id"].to_pylist())):
        g = t.filter(pc.equal(t["group_id"], gid))
        r = g.slice(0, 1).to_pylist()[0]
        yield (g, r["kernel"], json.loads(r["problem_json"]), r["dtype"], pc.min(g["latency_ms"]).as_py(),
               bool(pc.any(pc.fill_null(g["exhaustive"], False)).as_py()))


def _figures(r: np.ndarray) -> dict:
    return {"groups": len(r), "geomean": round(float(geomean(r)), 4), "p10": round(float(np.quantile(r, 0.1)), 4),
            "min": round(float(r.min()), 4)} if len(r) else {"groups": 0}


def replay_ratios(t: pa.Table, cm, setting: str, explore: int = 0) -> tuple[list[float], list[bool], int]:
    """Per group of ``t``: (recorded best / tune's best, whether measured over the whole space), and on how many
    groups a second round ran."""
    budget, rho, spread, k = None, tune_mod.RHO_MIN, tune_mod.SPREAD_MAX, 8
    if setting.startswith("top"):
        budget, k = 0.0, int(setting[3:])
    elif setting == "always":
        rho, spread = float("inf"), 0.0
    else:
        rho, spread = (float(x) for x in setting.split(":"))
    saved = tune_mod.RHO_MIN, tune_mod.SPREAD_MAX
    tune_mod.RHO_MIN, tune_mod.SPREAD_MAX = rho, spread
    try:
        ratios, swept, second = [], [], 0
        for g, family, problem, dtype, best, exhaustive in groups(t):
            # the group's own rows: a shape measured under two kernel hashes has a group for each
            bench = ReplayBenchmarker(g)
            hw = KNOWN[cm.gpu]
            res = tune_mod.tune(family, problem, dtype, bench, k=k, cost_model=cm, hw=hw,
                                configs=bench.recorded_configs(family, problem, dtype, hw), budget_s=budget,
                                objective="graph", explore=explore)  # GPU time, as the recorded best is
            ratios.append(best / res.best["latency_ms"])
            swept.append(exhaustive)
            second += bool(res.second_round.get("ran"))
    finally:
        tune_mod.RHO_MIN, tune_mod.SPREAD_MAX = saved
    return ratios, swept, second


def summary(setting: str, explore: int, ratios: list[float], swept: list[bool], second: int) -> dict:
    r, swept = np.array(ratios), np.array(swept, bool)
    return {"setting": setting, "explore": explore, "second_rounds": second, **_figures(r),
            "exhaustive": _figures(r[swept]),
            "sampled": _figures(r[~swept])}


def replay(t: pa.Table, cm, setting: str, explore: int = 0) -> dict:
    return summary(setting, explore, *replay_ratios(t, cm, setting, explore))


def inner_folds(table: pa.Table, outside: set[str], folds: int) -> list[tuple[list[str], list[str]]]:
    """Shape-wise folds over the whole-space groups not in ``outside`` (a model's held-out groups): fold f holds out
    every f-th of their shapes (in shape-key order), in every dtype and kernel hash, and trains on the rest of the
    groups not in ``outside``. (training group ids, whole-space test group ids) per fold."""
    info = evaluation.group_info(table)
    ids = np.asarray(info["group_id"].to_pylist())
    _, shape = evaluation.shape_codes(info)
    inside = ~np.isin(ids, sorted(outside))
    swept = np.asarray(pc.fill_null(info["exhaustive"], False).to_pylist(), bool)
    chosen = np.unique(shape[inside & swept])
    out = []
    for f in range(folds):
        test = np.isin(shape, chosen[f::folds])
        out.append((list(ids[inside & ~test]), list(ids[inside & test & swept])))
    return out


def inner(data: str, cm, folds: int, settings: list[str], explores: list[int]) -> dict:
    """The settings replayed on inner folds of ``cm``'s training side (``inner_folds``), each fold by a fresh model
    (``model.FAST``) that never saw its shapes; figures pooled over the folds. Tuner settings chosen here never
    look at the model's held-out groups."""
    table, gpu = model.training_table(data)
    rows = dataset.read(data)
    keys = [(s, e) for e in explores for s in settings]
    per_fold = []  # per fold, (ratios, swept, second rounds) of each key
    for f, (train, test) in enumerate(inner_folds(table, set(cm.meta["heldout"]["groups"]), folds)):
        print(f"fold {f}: {len(train)} training groups, {len(test)} whole-space groups replayed", file=sys.stderr,
              flush=True)
        booster, _ = model.fit(model.select_groups(table, train), model.FAST)
        fold_cm = model.CostModel(booster, {"gpu": gpu, "hardware": KNOWN[gpu].as_dict()})
        t = rows.filter(pc.is_in(rows["group_id"], pa.array(test)))
        per_fold.append([replay_ratios(t, fold_cm, s, e) for s, e in keys])
    pooled = [[sum((fold[i][j] for fold in per_fold), [] if j < 2 else 0) for j in range(3)] for i in range(len(keys))]
    return {"inner_folds": folds, "model_data_hash": cm.meta["data"]["hash"],
            "results": [summary(s, e, *acc) for (s, e), acc in zip(keys, pooled)]}


def newer_groups(t: pa.Table, created: str) -> set[str]:
    """Groups whose first row was recorded after ``created`` (ISO time): a model created then never trained on them."""
    first = t.group_by("group_id").aggregate([("ts", "min")])
    after = pc.greater(first["ts_min"], pa.scalar(datetime.fromisoformat(created), first["ts_min"].type))
    return set(first.filter(after)["group_id"].to_pylist())


def emit(result: dict, out: Path | None) -> None:
    """``result`` as indented JSON on stdout, and in ``out`` where given."""
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        out.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--settings", default="top8,0.0:1.5,0.5:1.3,always")
    ap.add_argument("--explore", default="0", help="first-round slots given to other structures (tuner.tune "
                    "EXPLORE), comma-separated: each setting runs at each")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--model", default=None, help="model directory (default: the shipped H200 model)")
    ap.add_argument("--newer", action="store_true", help="also the groups recorded wholly after the model was created")
    ap.add_argument("--inner", type=int, default=0, metavar="FOLDS", help="instead: FOLDS shape-wise folds of the "
                    "model's training side, each replayed by a fresh model trained on the others (choosing settings)")
    args = ap.parse_args()
    cm = model.load(args.model or "nvidia-h200", gpu="nvidia-h200")
    settings, explores = args.settings.split(","), [int(e) for e in args.explore.split(",")]
    if args.inner:
        result = inner(args.data, cm, args.inner, settings, explores)
    else:
        t = dataset.read(args.data)
        unseen = set(cm.meta["heldout"]["groups"])
        if args.newer:
            unseen |= newer_groups(t, cm.meta["created"])
        t = t.filter(pc.is_in(t["group_id"], pa.array(sorted(unseen))))
        result = {"model_created": cm.meta["created"], "model_data_hash": cm.meta["data"]["hash"],
                  "newer": args.newer, "rows": t.num_rows,
                  "results": [replay(t, cm, s, e) for e in explores for s in settings]}
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
