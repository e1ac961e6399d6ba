"""Fresh models with other training parameters on one split of the committed data, side by side (CPU):

    .venv/bin/python scripts/compare_params.py --split heldout '{}' '{"max_depth": 7}' '{"max_depth": 7, "seed": 1}'

Each argument is a JSON object of `model.TrainParams` fields over the defaults; one JSON line per model.
"""

from __future__ import annotations

import json

import click

from costmodel import evaluation, model


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--gpu", default="nvidia-h200", show_default=True)
@click.option("--split", default="heldout", show_default=True, type=click.Choice(["heldout", "dissimilar"]))
@click.argument("specs", nargs=-1, required=True)
def main(data: str, gpu: str, split: str, specs: tuple[str, ...]) -> None:
    table, _ = model.training_table(data, gpu)
    chosen = evaluation.split_groups(table, split)[0]
    for spec in specs:
        _, fit_info, ev = evaluation.run_split(table, chosen, gpu, model.TrainParams(**json.loads(spec)))
        s = ev.summary()
        print(json.dumps({"params": json.loads(spec), "split": split, "groups": s["groups"],
                          "trees": fit_info.get("trees"), "top1": round(s["top1_score"], 4),
                          "top8": round(s["top8_score"], 4), "p10_top8": round(s["p10_top8_score"], 4),
                          "matmul_top8": round(s["per_kernel"]["matmul"]["top8_score"], 4),
                          **{k: _round(s.get(k)) for k in EXHAUSTIVE},
                          "matmul_top8_exhaustive": _round(s["per_kernel"]["matmul"].get("top8_exhaustive"))}),
              flush=True)


EXHAUSTIVE = ("exhaustive_groups", "top1_exhaustive", "top8_exhaustive", "p10_top8_exhaustive", "min_top8_exhaustive")


def _round(v):
    return round(v, 4) if isinstance(v, float) else v


if __name__ == "__main__":
    main()
