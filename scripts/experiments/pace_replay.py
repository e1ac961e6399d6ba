"""Replays the recorded collect runs through ``collect.runner.Pace``: before each group, what the pace estimated the
group would take, against what it took (the time between its rows' timestamp and the previous group's). A run's
first group is left out (its start is not recorded). Prints, and writes with --out, per estimator: how many groups
ran past their estimate by more than --late seconds (what lets a run overshoot its --time-budget and be killed), the
most seconds any did, and the seconds estimated beyond what groups took (groups a budget would have skipped for
nothing). "rate" is the estimate before session 17 (the run's seconds per config), "fit" today's. A live run fits
the seconds a group spent timing; the rows do not record its compile waits, so the replay fits walls, waits
included, and overstates what the fit estimates after a wait.

    .venv/bin/python scripts/experiments/pace_replay.py [--data data] [--min-groups 8] [--late 20] [--out F]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow.dataset as ds  # noqa: E402

from collect.plan import GroupPlan  # noqa: E402
from costmodel import hardware  # noqa: E402
from collect.runner import Pace, group_work  # noqa: E402


def runs(data: str, gpu: str, min_groups: int) -> dict[str, list[dict]]:
    """Per run id, its groups in the order they were published: configs, end time (s), family, problem, dtype."""
    cols = ["run_id", "ts", "group_id", "kernel", "problem_json", "dtype"]
    t = ds.dataset(data, format="parquet", partitioning="hive").to_table(columns=cols, filter=ds.field("gpu") == gpu)
    groups: dict[tuple[str, str], dict] = {}
    for r in t.to_pylist():
        g = groups.setdefault((r["run_id"], r["group_id"]), {"n": 0, "end": r["ts"].timestamp(), "family": r["kernel"],
                                                             "problem": json.loads(r["problem_json"]),
                                                             "dtype": r["dtype"]})
        g["n"] += 1
        g["end"] = max(g["end"], r["ts"].timestamp())
    by_run: dict[str, list[dict]] = {}
    for (run_id, _), g in groups.items():
        by_run.setdefault(run_id, []).append(g)
    return {k: sorted(v, key=lambda g: g["end"]) for k, v in by_run.items() if len(v) >= min_groups}


def replay(groups: list[dict], hw) -> list[dict]:
    """Each group after the first: its wall and both estimates, from the groups before it."""
    now = [groups[0]["end"]]
    pace = Pace(clock=lambda: now[0])
    out = []
    for prev, g in zip(groups, groups[1:]):
        work = group_work(GroupPlan(g["family"], g["problem"], g["dtype"], (), True), hw)
        wall = g["end"] - prev["end"]
        if pace.configs:
            rate = g["n"] * (now[0] - pace.started) / pace.configs
            out.append({"n": g["n"], "problem": g["problem"], "family": g["family"], "wall_s": round(wall, 2),
                        "rate_s": round(rate, 2), "fit_s": round(pace.estimate(g["n"], work), 2)})
        pace.begin()
        now[0] = g["end"]
        pace.measured(g["n"], work)
    return out


def score(rows: list[dict], key: str, late: float) -> dict:
    over = [r["wall_s"] - r[key] for r in rows]
    return {"late_groups": sum(o > late for o in over), "most_late_s": round(max(over), 1),
            "overestimate_s": round(sum(-o for o in over if o < 0), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--gpu", default="nvidia-h200")
    ap.add_argument("--min-groups", type=int, default=8)
    ap.add_argument("--late", type=float, default=20.0)
    ap.add_argument("--out")
    a = ap.parse_args()
    result = {"data": a.data, "gpu": a.gpu, "late_s": a.late, "runs": {}}
    all_rows, hw = [], hardware.KNOWN[a.gpu]
    for run_id, groups in sorted(runs(a.data, a.gpu, a.min_groups).items()):
        rows = replay(groups, hw)
        all_rows += rows
        result["runs"][run_id] = {"groups": len(rows), "rate": score(rows, "rate_s", a.late),
                                  "fit": score(rows, "fit_s", a.late),
                                  "longest": max(rows, key=lambda r: r["wall_s"])}
    result["all"] = {"groups": len(all_rows), "runs": len(result["runs"]),
                     "rate": score(all_rows, "rate_s", a.late), "fit": score(all_rows, "fit_s", a.late),
                     "walls_s": round(sum(r["wall_s"] for r in all_rows), 1)}
    print(json.dumps(result["all"], indent=1))
    for run_id, r in result["runs"].items():
        if r["rate"]["late_groups"] or r["fit"]["late_groups"]:
            print(run_id, "rate", r["rate"], "fit", r["fit"])
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
