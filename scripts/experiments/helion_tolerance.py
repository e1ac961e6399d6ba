"""Issue 18, CPU: which recorded Helion tunes would have picked otherwise under a smaller ``TOLERANCE`` (the margin by
which a finalist must beat the default in the final verification), replayed with ``tuner.helion.pick`` over each race
row's recorded verification (``costmodel.search.verified``: each finalist's re-timed ms, the default's included).

Only tunes whose verification timed by CUDA-graph replay (``timing`` "graph", as the race does) count. Per changed
pick: how much faster than the default the new pick re-timed in the verification, and the row's race figure (its pick
against quick's, graph replay in alternating rounds). ``estimate`` is that figure times the verification's ratio: an
estimate of where the new pick would land, not a measurement (the new pick was never raced).

    .venv/bin/python scripts/experiments/helion_tolerance.py [--tolerance 0.01] [--out FILE.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_helion import read_rows  # noqa: E402
from replay_tune import emit  # noqa: E402

from tuner import helion as htune  # noqa: E402

ROWS = "scripts/results/bench_helion*-h200-*.jsonl"


def replay(row: dict, tolerance: float) -> dict | None:
    """The row's pick replayed at ``tolerance``, where it differs from the pick the tune recorded; else None."""
    search = row["costmodel"]["search"]
    finals = [v["config"] for v in search["verified"]]
    steady = [v.get("ms") for v in search["verified"]]
    default, then = row["default"]["config"], search["best"]["config"]
    if default not in finals or then not in finals:
        return None
    now, now_ms = htune.pick(finals, steady, default, tolerance)
    if now == then:
        return None
    then_ms = steady[finals.index(then)]
    graph = row["graph_ms"]
    vs_quick = graph["quick"] / graph["costmodel"]
    return {"kernel": row["kernel"], "problem": row["problem"], "dtype": row["dtype"],
            "was_default": then == default, "verified_gain": then_ms / now_ms, "race_vs_quick": vs_quick,
            "estimate_vs_quick": vs_quick * then_ms / now_ms}


@click.command()
@click.option("--tolerance", default=0.01, show_default=True)
@click.option("--out", default=None, help="write the JSON here as well")
def main(tolerance: float, out: str | None) -> None:
    tunes, changed = 0, []
    for path in sorted(ROOT.glob(ROWS)):
        for row in read_rows((str(path),)):
            search = (row.get("costmodel") or {}).get("search") or {}
            if not search.get("verified") or search.get("timing") != "graph" or not row.get("graph_ms"):
                continue
            tunes += 1
            if (c := replay(row, tolerance)) is not None:
                changed.append({"rows": path.name, **c})
    result = {"tolerance": tolerance, "shipped": htune.TOLERANCE, "graph_timed_tunes": tunes, "changed": changed}
    emit(result, Path(out) if out else None)


if __name__ == "__main__":
    main()
