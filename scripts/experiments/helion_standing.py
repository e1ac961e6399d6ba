"""Issue 18, CPU: where the shipped Helion tuner stands on the race's problems, from every recorded race row that still
measures it (``bench_helion.still_valid``: the same ranker, and the same configs timed and picked, under ``--recipe``'s
changes), not only each problem's last row: per problem, every such tune's ratio against Helion quick's pick and
against the default (CUDA-graph replay in the row's own call, as the race reads), the knobs where its pick differs
from quick's, and their geomean, then ``bench_helion.summarise`` over each problem's last such row. ``same_pairs`` is
the noise those ratios carry: over every row read, the ratios of one costmodel pick against one quick pick that were
raced in more than one row. ``full_effort``: every row timed beside Helion full effort, its ratio, and whether a tune
of the shipped tuner picked the same config (so that the ratio still stands for it).

    .venv/bin/python scripts/experiments/helion_standing.py [--recipe restarts=1] [--out FILE.json]
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_helion import latest, parse_recipe, ratio, read_rows, still_valid, summarise  # noqa: E402
from replay_tune import emit  # noqa: E402

from costmodel.dataset import canonical_json  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402

ROWS = "scripts/results/bench_helion-retimed-h200-*.jsonl"


def problem_key(r: dict) -> str:
    return f"{r['index']} {r['kernel']} {json.dumps(r['problem'])} {r['dtype']}"


def vs_quick(r: dict) -> float:
    return round(r["graph_ms"]["quick"] / r["graph_ms"]["costmodel"], 4)


def differs(r: dict, who: str = "quick") -> dict:
    """The knobs where costmodel's pick differs from ``who``'s: {knob: [costmodel's value, theirs]}."""
    c, o = r["costmodel"]["config"], r[who]["config"]
    return {k: [c.get(k), o.get(k)] for k in sorted(set(c) | set(o)) if c.get(k) != o.get(k)}


def pick(r: dict) -> str:
    return canonical_json(r["costmodel"]["config"])


def geomean(xs: list[float]) -> float:
    return round(math.exp(sum(math.log(x) for x in xs) / len(xs)), 4)


def same_pairs(rows: list[dict]) -> dict:
    """Per problem, the ratios against quick of each (costmodel pick, quick pick) pair raced in several rows."""
    pairs = defaultdict(list)
    for r in rows:
        if r.get("graph_ms") and r["costmodel"].get("config") and r["quick"].get("config"):
            pair = pick(r), canonical_json(r["quick"]["config"])
            pairs[problem_key(r), pair].append(r)
    out = defaultdict(list)
    for (k, _), v in pairs.items():
        if len(v) > 1:
            out[k].append({"differs_from_quick": differs(v[0]), "vs_quick": [vs_quick(r) for r in v]})
    return dict(sorted(out.items(), key=lambda kv: int(kv[0].split()[0])))


@click.command()
@click.option("--recipe", "recipe_pairs", multiple=True, help="NAME=N: the tuner's knobs changed (bench_helion)")
@click.option("--out", default=None, help="write the JSON here as well")
def main(recipe_pairs: tuple[str, ...], out: str | None) -> None:
    cm, recipe = helion_model.load("nvidia-h200"), parse_recipe(recipe_pairs)
    rows = read_rows(tuple(str(p) for p in sorted(ROOT.glob(ROWS))))
    kept = [r for r, o in zip(rows, still_valid(rows, cm, recipe)) if o["valid"]]
    tunes = defaultdict(list)
    for r in kept:
        g = r["graph_ms"]
        tunes[problem_key(r)].append({"vs_quick": vs_quick(r), "vs_default": round(g["default"] / g["costmodel"], 4),
                                      "differs_from_quick": differs(r)})
    result = {"recipe": recipe, "rows_read": len(rows), "rows_valid": len(kept),
              "problems": {k: {"tunes": len(v), "below_quick": sorted(t["vs_quick"] for t in v if t["vs_quick"] < 1),
                               "vs_quick": [t["vs_quick"] for t in v], "vs_default": [t["vs_default"] for t in v],
                               "differs_from_quick": [t["differs_from_quick"] for t in v],
                               "geomean_vs_quick": geomean([t["vs_quick"] for t in v])}
                           for k, v in sorted(tunes.items(), key=lambda kv: int(kv[0].split()[0]))},
              "same_pairs": same_pairs(rows),
              "full_effort": [{"problem": problem_key(r), "vs_full": round(ratio(r, "full"), 4),
                               "picked_by_the_shipped_tuner": any(
                                   problem_key(k) == problem_key(r) and pick(k) == pick(r) for k in kept)}
                              for r in rows if ratio(r, "full") is not None],
              "last_valid_rows": summarise(latest(kept))}
    emit(result, Path(out) if out else None)


if __name__ == "__main__":
    main()
