"""Where the shipped model ranks the best config of a whole-space sweep (CPU, no GPU): for each row of
bench_matmul_gap.py's output, the predicted rank of that shape's measured best among every valid config.
A best ranked past k is one a cold `tune -k k` cannot time unless its second round finds it.

    .venv/bin/python scripts/rank_of_best.py scripts/results/bench_matmul_gap-h200-2026-12-01-s11.jsonl
"""

from __future__ import annotations

import json

import click

from costmodel import model
from costmodel.dataset import canonical_json
from costmodel.kernels import get_family
from tuner.tune import predict


@click.command()
@click.argument("rows", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--gpu", default="nvidia-h200", show_default=True)
def main(rows: tuple[str, ...], gpu: str) -> None:
    cm = model.load(gpu, gpu=gpu)
    hw = cm.hardware  # the record its training rows carry, as a live tune on that GPU reads it
    fam = get_family("matmul")
    for path in rows:
        for line in open(path):
            r = json.loads(line)
            if not r.get("best_config") or r.get("knobs"):  # a sweep of one knob value is not the whole space
                continue
            out = predict("matmul", r["problem"], r["dtype"], hw, cm, r["valid"])
            best = canonical_json(fam.twin(r["problem"], r["best_config"]))  # the space's config of its kernel
            rank = next(t["rank"] for t in out["top"] if canonical_json(t["config"]) == best)
            print(json.dumps({"problem": r["problem"], "dtype": r["dtype"], "valid": out["candidates"],
                              "best_rank": rank,
                              "best_vs_torch": round(r["tune_vs_torch"], 3), "rows": path}), flush=True)


if __name__ == "__main__":
    main()
