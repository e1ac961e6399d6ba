"""Fresh models with other training parameters on one split of the committed data, side by side (CPU):

    .venv/bin/python scripts/compare_params.py --split heldout '{}' '{"max_depth": 7}' '{"max_depth": 7, "seed": 1}'
    .venv/bin/python scripts/compare_params.py --inner 1,2,3 '{}' '{"num_parallel_tree": 4}'

Each argument is a JSON object of `model.TrainParams` fields over the defaults; one JSON line per model (and split).
With ``--inner SEEDS`` the models never see the held-out split's test groups: each inner split holds out, by the
same rule with that seed, groups of the held-out split's training groups, which is where training parameters are
chosen; the shipped model's held-out figures stay a test.
"""

from __future__ import annotations

import json

import click

from costmodel import evaluation, model


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--gpu", default="nvidia-h200", show_default=True)
@click.option("--split", default="heldout", show_default=True, type=click.Choice(["heldout", "dissimilar"]))
@click.option("--inner", default="", help="seeds (comma-separated) of inner splits of the held-out split's training groups")
@click.argument("specs", nargs=-1, required=True)
def main(data: str, gpu: str, split: str, inner: str, specs: tuple[str, ...]) -> None:
    table, _ = model.training_table(data, gpu)
    if inner:
        table = model.select_groups(table, evaluation.split_groups(table, "heldout")[0].train)
        chosen = [(f"inner:{s}", evaluation.split_groups(table, "heldout", int(s))[0]) for s in inner.split(",")]
    else:
        chosen = [(split, evaluation.split_groups(table, split)[0])]
    for spec in specs:
        for name, part in chosen:
            _report(table, part, gpu, name, spec)


def _report(table, part, gpu: str, name: str, spec: str) -> None:
    _, fit_info, ev = evaluation.run_split(table, part, gpu, model.TrainParams(**json.loads(spec)))
    s = ev.summary()
    print(json.dumps({"params": json.loads(spec), "split": name, "groups": s["groups"],
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
