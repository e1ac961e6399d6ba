"""Issue 18, CPU: how far the batch's timing (Helion's do_bench, eager: what the tune's walk compares) strays from
the verification's CUDA-graph replay (what the race reads) on each race problem, from every graph-timed race tune's
recorded verification (``costmodel.search.verified``: each finalist's and the default's batch ms beside its graph ms).

Per problem: the finalists' graph ms (the fastest), ``offset_spread`` (per tune, the largest over the smallest
eager/graph ratio among its re-timed configs: how far a cost graph replay does not see moves their eager order; the
median over tunes), ``first_not_fastest`` (the share of tunes whose batch-fastest finalist is not the fastest by
graph replay) and ``default_offset`` (per tune, the default's eager/graph ratio over the median finalist's; the
median over tunes: above 1, eager timing reads the default slower than graph replay does) and
``first_batch_fastest_ms`` (the fastest of each tune's first batch by Helion's timing, what ``walk_graph`` reads:
the least and the most over tunes).

    .venv/bin/python scripts/experiments/helion_eager_graph.py [--out FILE.json]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_helion import read_rows  # noqa: E402
from replay_tune import emit  # noqa: E402

from tuner.helion import first_batch_ms  # noqa: E402

ROWS = "scripts/results/bench_helion*-h200-*.jsonl"


def one_tune(row: dict) -> dict | None:
    """The tune's offsets, where its verification re-timed at least two configs by graph replay; else None."""
    search = (row.get("costmodel") or {}).get("search") or {}
    if search.get("timing") != "graph":
        return None
    timed = [v for v in search.get("verified") or [] if v.get("ms") and v.get("batch_ms")]
    if len(timed) < 2:
        return None
    offset = [v["batch_ms"] / v["ms"] for v in timed]
    default = [o for v, o in zip(timed, offset) if v["config"] == row["default"]["config"]]
    return {"graph_ms": min(v["ms"] for v in timed), "offset_spread": max(offset) / min(offset),
            "first_batch_fastest_ms": min(t for t in first_batch_ms(search) if t is not None),
            "first_not_fastest": min(timed, key=lambda v: v["batch_ms"]) is not min(timed, key=lambda v: v["ms"]),
            "default_offset": default[0] / statistics.median(offset) if default else None}


def by_problem(tunes: dict[str, list[dict]]) -> list[dict]:
    out = []
    for key, ts in tunes.items():
        defaults = [t["default_offset"] for t in ts if t["default_offset"] is not None]
        out.append({"problem": key, "tunes": len(ts), "graph_ms": round(min(t["graph_ms"] for t in ts), 5),
                    "offset_spread": round(statistics.median(t["offset_spread"] for t in ts), 3),
                    "first_not_fastest": round(sum(t["first_not_fastest"] for t in ts) / len(ts), 2),
                    "default_offset": round(statistics.median(defaults), 3) if defaults else None,
                    "first_batch_fastest_ms": [round(f(t["first_batch_fastest_ms"] for t in ts), 5)
                                               for f in (min, max)]})
    return sorted(out, key=lambda p: p["graph_ms"])


@click.command()
@click.option("--out", default=None, help="write the JSON here as well")
def main(out: str | None) -> None:
    tunes = defaultdict(list)
    for path in sorted(ROOT.glob(ROWS)):
        for row in read_rows((str(path),)):
            if (t := one_tune(row)) is not None:
                tunes[f"{row['kernel']} {json.dumps(row['problem'])} {row['dtype']}"].append(t)
    result = {"graph_timed_tunes": sum(map(len, tunes.values())), "problems": by_problem(tunes)}
    emit(result, Path(out) if out else None)


if __name__ == "__main__":
    main()
