"""Issue 17, CPU: would the Triton model rank better if its training rows of GROUP_M=1 configs the matmul space has
left (``KernelFamily.twin``: their GROUP_M=8 twin runs the same tiles) were read as that twin? For each seed (which
also draws the held-out split), a model is trained on the rows as recorded and one on the rows so read (the shipped
parameters, ``evaluation.train_model``, in memory); each then tunes its held-out whole-space groups in replay, as
``group_m_twins.py``'s ``after`` does (candidates valid today, each config read at its valid twin's time, tune k 8,
objective graph). Seed 0 as recorded is the shipped model. Geomean, p10 and min of best / tune's best, over all those
groups and over the matmuls with M <= 64.

    .venv/bin/python scripts/experiments/group_m_twin_training.py [--seeds 0,1,2,3] [--out FILE.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))
from costmodel import dataset, evaluation, model  # noqa: E402
from costmodel.hardware import KNOWN  # noqa: E402
from group_m_twins import MATMUL, tune_ratios  # noqa: E402
from replay_tune import _figures, emit  # noqa: E402


def read_as_twins(table: pa.Table) -> pa.Table:
    """``table`` (a training table) with each matmul row's config read as its twin's, sorted as training sorts."""
    cols = {n: table[n].to_pylist() for n in ("kernel", "problem_json", "config_json")}
    group_m, configs = table["cfg_GROUP_M"].to_pylist(), cols["config_json"]
    for i, (kernel, pj, cj) in enumerate(zip(*cols.values())):
        if kernel == "matmul":
            twin = MATMUL.twin(json.loads(pj), json.loads(cj))
            group_m[i], configs[i] = twin["GROUP_M"], dataset.canonical_json(twin)
    for name, values in (("cfg_GROUP_M", group_m), ("config_json", configs)):
        col = table.schema.get_field_index(name)
        table = table.set_column(col, table.schema.field(col), pa.array(values, table.schema.field(col).type))
    return table.sort_by([("group_id", "ascending"), ("config_json", "ascending")])


def replay(cm, rows: pa.Table) -> dict:
    """best / tune's best over ``cm``'s held-out whole-space groups of ``rows`` (as recorded), all and skinny."""
    got = tune_ratios(cm, rows, KNOWN[cm.gpu])
    skinny = [r for f, p, _, r in got if f == "matmul" and p["M"] <= 64]
    return {"all": _figures(np.array([r[-1] for r in got])), "skinny": _figures(np.array(skinny))}


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--seeds", default="0,1,2,3", show_default=True)
@click.option("--out", default=None, help="write the JSON here as well")
def main(data: str, seeds: str, out: str | None) -> None:
    table, gpu = model.training_table(data)
    rows = dataset.read(data)
    readings = {"as_recorded": table, "as_twins": read_as_twins(table)}
    result = {}
    for seed in (int(s) for s in seeds.split(",")):
        for name, t in readings.items():
            booster, meta, _ = evaluation.train_model(t, gpu, model.TrainParams(seed=seed), seed, None)
            cm = model.CostModel(booster, meta)
            result.setdefault(f"seed {seed}", {})[name] = {"data_hash": meta["data"]["hash"], **replay(cm, rows)}
            print(f"seed {seed} {name}: {result[f'seed {seed}'][name]['all']}", file=sys.stderr, flush=True)
    emit(result, Path(out) if out else None)


if __name__ == "__main__":
    main()
