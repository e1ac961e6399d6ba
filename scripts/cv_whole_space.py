"""Shape-wise cross-validation on one kind's whole-space groups (CPU): the shapes of a kind (KINDS of
costmodel.evaluation, e.g. unaligned matmuls) that have a group measured over the whole valid space go into
``--folds`` folds; each fold's shapes are held out in every dtype and kernel hash, a fresh model (the evaluation
splits' FAST parameters) trains on every other group, sampled groups of the same kind included, and ranks the
held-out whole-space groups. That is the case a live tune meets: a new shape of a kind the data has. Figures per
group and pooled (top1, top8 against the space's best), so that two feature sets compare on the same folds.

    .venv/bin/python scripts/cv_whole_space.py --kind unaligned --folds 4 --json
"""

from __future__ import annotations

import dataclasses
import json
import sys

import click
import numpy as np

from costmodel import evaluation, features, model
from costmodel.evaluation import Split, geomean


def folds_of(info, kind: str, folds: int) -> list[Split]:
    """The kind's shapes with a whole-space group (``info``: evaluation.group_info), dealt round-robin in shape-key
    order into ``folds`` splits."""
    shapes, shape = evaluation.shape_codes(info)
    ids = np.asarray(info["group_id"].to_pylist())
    exhaustive = np.asarray(info["exhaustive"].to_pylist(), bool)
    of_kind = evaluation.kind_mask(info, kind)
    chosen = np.unique(shape[of_kind & exhaustive])
    out = []
    for f in range(folds):
        held_shapes = chosen[f::folds]
        test = np.isin(shape, held_shapes)
        out.append(Split(f"cv{f}", tuple(ids[~test]), tuple(ids[test & exhaustive]),
                         {"kind": kind, "fold": f, "shapes": [str(shapes[s]) for s in held_shapes]}))
    return out


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--kind", default="unaligned", type=click.Choice(sorted(evaluation.KINDS)), show_default=True)
@click.option("--folds", default=4, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def main(data: str, kind: str, folds: int, seed: int, as_json: bool) -> None:
    table, gpu = model.training_table(data)
    params = dataclasses.replace(model.FAST, seed=seed)
    info = evaluation.group_info(table)
    names = {r["group_id"]: (json.loads(r["problem_json"]), r["dtype"]) for r in info.to_pylist()}
    groups = []
    for split in folds_of(info, kind, folds):
        print(f"fold {split.rule['fold']}: {len(split.test)} whole-space groups held out", file=sys.stderr, flush=True)
        _, _, ev = evaluation.run_split(table, split, gpu, params)
        groups += [{"problem": names[g.group_id][0], "dtype": names[g.group_id][1], "fold": split.rule["fold"],
                    "top1": g.metrics["top1_score"], "top8": g.metrics["top8_score"]} for g in ev.groups]
    t1, t8 = np.array([g["top1"] for g in groups]), np.array([g["top8"] for g in groups])
    out = {"kind": kind, "folds": folds, "seed": seed, "feature_schema": features.FEATURE_SCHEMA_VERSION,
           "groups": len(groups), "top1": float(geomean(t1)), "top8": float(geomean(t8)),
           "p10_top8": float(np.percentile(t8, 10)), "min_top8": float(t8.min()), "per_group": groups}
    print(json.dumps(out, indent=1) if as_json else
          f"{kind}: {len(groups)} whole-space groups in {folds} folds, top1 {out['top1']:.3f}, top8 {out['top8']:.3f}, "
          f"p10 {out['p10_top8']:.3f}, min {out['min_top8']:.3f}")


if __name__ == "__main__":
    main()
