"""How far one config's time moves between device calls, from the dataset alone (CPU): every (group, config) pair
measured ok in more than one run, its later time over its first, by family and by the first time's size; and the
whole-space groups whose rows come from more than one run, with the shipped model's held-out top-1 on those
groups beside the groups measured in one run.

    .venv/bin/python scripts/run_drift.py [--data data] [--gpu nvidia-h200] [--json]

Readers keep each pair's first measurement unless one run measured its group whole (``dataset.first_measurements``),
so a group measured over several calls compares times taken in different calls, and a ratio is honest only within
one call. Prints tables on stderr, with
--json one JSON object on stdout. Bad input: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel import dataset, evaluation, model  # noqa: E402
from costmodel.errors import CostModelError  # noqa: E402

SIZES_MS = (0.0, 0.01, 0.03, 0.1, 1.0, np.inf)  # bins of the first measurement, ms
COLS = ["kernel", "group_id", "config_json", "status", "latency_ms", "run_id", "ts", "exhaustive"]


def _rows(data: str, gpu: str):
    import pyarrow.dataset as pads

    t = dataset.read(data, COLS, pads.field("gpu") == gpu, every_measurement=True).to_pandas()
    if t.empty:
        raise CostModelError(f"no rows of {gpu} under {data}")
    return t[~t["kernel"].str.startswith("helion:")]


def drift(t):
    """Every pair measured ok in two or more runs: its family, first and last time and run, last / first."""
    ok = t[t["status"] == "ok"].sort_values(["ts", "run_id"])
    runs = ok.groupby(["group_id", "config_json"])["run_id"].transform("nunique")
    ok = ok[runs > 1]
    pairs = ok.groupby(["group_id", "config_json"]).agg(kernel=("kernel", "first"), first=("latency_ms", "first"),
                                                        last=("latency_ms", "last"), first_run=("run_id", "first"),
                                                        last_run=("run_id", "last"))
    pairs["ratio"] = pairs["last"] / pairs["first"]
    return pairs


def by_size(pairs) -> list[dict]:
    out = []
    for (kernel, lo, hi), grp in _bins(pairs):
        r = grp["ratio"].to_numpy()
        out.append({"kernel": kernel, "first_ms_from": lo, "first_ms_to": hi, "pairs": len(r),
                    "median": float(np.median(r)), "p10": float(np.percentile(r, 10)),
                    "p90": float(np.percentile(r, 90))})
    return out


def by_runs(pairs) -> list[dict]:
    """Per (first run, last run) of the pairs: how many, and the median of last / first under 30 us and over."""
    out = []
    for (a, b), grp in pairs.groupby(["first_run", "last_run"]):
        tiny = grp["first"] <= 0.03
        out.append({"first_run": a, "last_run": b, "pairs": len(grp), "pairs_under_30us": int(tiny.sum()),
                    "median_under_30us": float(grp.loc[tiny, "ratio"].median()) if tiny.any() else None,
                    "median_over_30us": float(grp.loc[~tiny, "ratio"].median()) if (~tiny).any() else None})
    return out


def _bins(pairs):
    for kernel, grp in pairs.groupby("kernel"):
        for lo, hi in zip(SIZES_MS[:-1], SIZES_MS[1:]):
            sel = grp[(grp["first"] > lo) & (grp["first"] <= hi)]
            if len(sel):
                yield (kernel, lo, hi), sel


def mixed_groups(t, data: str, gpu: str) -> list[dict]:
    """Per family: whole-space groups, those of them whose kept rows come from several runs, and the shipped model's
    held-out top-1 (geomean) over each kind."""
    import pyarrow.dataset as pads

    kept = dataset.read(data, COLS, pads.field("gpu") == gpu).to_pandas()  # the pairs as readers read them
    kept = kept[~kept["kernel"].str.startswith("helion:")]
    whole = set(kept.loc[kept["exhaustive"], "group_id"])
    runs = kept[kept["group_id"].isin(whole)].groupby("group_id")["run_id"].nunique()
    top1 = _heldout_top1(data, gpu)
    out = []
    for kernel in sorted(kept["kernel"].unique()):
        ids = set(kept.loc[kept["kernel"] == kernel, "group_id"]) & whole
        row = {"kernel": kernel, "whole_space_groups": len(ids), "mixed_runs": int(sum(runs[g] > 1 for g in ids))}
        for kind, sel in (("single", lambda g: runs[g] == 1), ("mixed", lambda g: runs[g] > 1)):
            v = [s for g, s in top1.items() if g in ids and sel(g)]
            row[f"heldout_{kind}_groups"] = len(v)
            row[f"heldout_{kind}_top1"] = float(evaluation.geomean(np.array(v))) if v else None
        out.append(row)
    return out


def _heldout_top1(data: str, gpu: str) -> dict[str, float]:
    """group_id -> the shipped model's top-1 score on its held-out whole-space groups (as `costmodel evaluate`)."""
    cm = model.load_shipped(gpu)
    table, _ = model.training_table(data, gpu)
    held, ids = set(cm.meta["heldout"]["groups"]), set(table["group_id"].to_pylist())
    ev = evaluation.evaluate(cm, model.select_groups(table, held & ids), model.select_groups(table, ids - held),
                             "heldout")
    return {g.group_id: g.metrics["top1_score"] for g in ev.groups if g.exhaustive}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data")
    p.add_argument("--gpu", default="nvidia-h200")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        t = _rows(args.data, args.gpu)
        pairs = drift(t)
        out = {"gpu": args.gpu, "drift": by_size(pairs), "by_runs": by_runs(pairs),
               "whole_space": mixed_groups(t, args.data, args.gpu)}
    except CostModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in out["drift"]:
        print(f"{r['kernel']:10} first {r['first_ms_from']:g}-{r['first_ms_to']:g} ms  pairs {r['pairs']:5}  later/first "
              f"median {r['median']:.3f}  p10 {r['p10']:.3f}  p90 {r['p90']:.3f}", file=sys.stderr)
    for r in [*out["by_runs"], *out["whole_space"]]:
        print(json.dumps(r), file=sys.stderr)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
