"""Issue 18: where a Helion tune's walk met a tie (``tuner.helion`` recipe knob ``ties``; CPU, nothing timed).

Per race row (``bench_helion.py`` output, its tune's record): for the first batch and each step that found a faster
config, the fastest config's index and the first within ``TIE`` of it (``tuner.helion.tied``), how far apart they
timed, how far apart the fastest three timed, and the move the first tied config made from the step's source; and the
row's ratio against quick (graph replay where it has one). Where the two indices differ, ``ties`` would walk on from
another config.

    .venv/bin/python scripts/experiments/helion_ties.py scripts/results/bench_helion-retimed-h200-2026-12-04-*.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tuner.helion import TIE, moves, recorded_walk, tied  # noqa: E402


def where(ms: list[float | None], these: range, source: dict | None, timed: list[dict]) -> dict:
    fastest, first = tied(ms, these, 0.0), tied(ms, these, TIE)
    top = sorted(t for j in these if (t := ms[j]) is not None)[:3]
    return {"fastest": fastest - these.start, "first_tied": first - these.start,
            "gap": ms[first] / ms[fastest] - 1, "top3_span": top[-1] / top[0] - 1,
            "first_tied_move": None if source is None else moves(source, timed[first]["config"])}


def one(row: dict, name: str) -> dict:
    search = row["costmodel"]["search"]
    timed = search["timed"]
    ms = [t["ms"] for t in timed]
    batch, steps = recorded_walk(search)
    out = [{"at": "batch", **where(ms, batch, None, timed)}] if any(ms[i] is not None for i in batch) else []
    out += [{"at": f"step {n + 1}", **where(ms, these, s["from"], timed)}
            for n, (s, these) in enumerate(steps) if s.get("faster")]
    lat = row.get("graph_ms") or row.get("latency_ms", {})
    return {"file": name, "kernel": row["kernel"], "problem": row["problem"], "dtype": row["dtype"],
            "recipe_ties": search.get("recipe", {}).get("ties", 0),
            "vs_quick": lat["quick"] / lat["costmodel"] if {"quick", "costmodel"} <= set(lat) else None,
            "ties": out, "changes": sum(t["fastest"] != t["first_tied"] for t in out)}


@click.command()
@click.argument("rows_files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
def main(rows_files) -> None:
    """One JSON line per race row with a tune's record."""
    for f in rows_files:
        for line in Path(f).read_text().splitlines():
            row = json.loads(line)
            if row.get("costmodel", {}).get("search", {}).get("timed"):
                print(json.dumps(one(row, Path(f).name)))


if __name__ == "__main__":
    main()
