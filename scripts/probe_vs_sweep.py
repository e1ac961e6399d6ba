"""Did `collect --active` sweep where the model was wrong? For each whole-space group a collect's probe chose
(CPU): the probe's regret, from the collect's JSON output, beside the probing model's top-8 (and top-1) over the
whole space the sweep then measured, and the best config's rank in that model's order. A probe that reads the
model's error agrees with the sweep; one that reads 1.000 where the sweep found 0.8 saw no other structure.

    .venv/bin/python scripts/probe_vs_sweep.py --model DIR scripts/results/collect-h200-2026-12-01-s15a.json [...]

--model is the model the collect ranked with (it must not have trained on the groups: an older one from git,
`git archive REV costmodel/models/SLUG | tar x`). Prints one JSON line per group, then a summary line.
"""

from __future__ import annotations

import json

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from costmodel import dataset, features, model
from costmodel.dataset import canonical_json
from costmodel.kernels import get_family


def collect_outputs(path: str) -> list[dict]:
    """The JSON objects of one `collect --json` output file (device_job.sh appends one object per collect)."""
    text, decoder, i, out = open(path).read(), json.JSONDecoder(), 0, []
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text):
            obj, i = decoder.raw_decode(text, i)
            out.append(obj)
    return out


def whole_space_figures(cm, family: str, rows: list[dict], problem: dict, dtype: str) -> dict:
    """The model's top-1 and top-8 over a whole-space group's recorded ok configs, and the best's rank (1-based)."""
    best_by_config: dict[str, float] = {}
    for r in rows:
        best_by_config[r["config_json"]] = min(best_by_config.get(r["config_json"], np.inf), r["latency_ms"])
    keys = list(best_by_config)
    lat = np.array([best_by_config[k] for k in keys])
    table = features.candidates_table(family, problem, dtype, [json.loads(k) for k in keys], cm.hardware)
    order = np.asarray(model.rank(cm, table))
    best = lat.min()
    return {"configs": len(keys), "top1": float(best / lat[order[0]]), "top8": float(best / lat[order[:8]].min()),
            "best_rank": int(np.flatnonzero(order == lat.argmin())[0]) + 1}


@click.command()
@click.argument("outputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--model", "model_dir", required=True, help="the model the collects probed with")
@click.option("--data", default="data", show_default=True)
def main(outputs: tuple[str, ...], model_dir: str, data: str) -> None:
    cm = model.load(model_dir)
    probe_of = {}
    for path in outputs:
        for obj in collect_outputs(path):
            for r in (obj.get("active") or {}).get("regrets", []):
                probe_of[(r["family"], canonical_json(r["problem"]), r["dtype"])] = r["regret"]
    table = dataset.read(data, ["kernel", "problem_json", "dtype", "config_json", "status", "latency_ms", "exhaustive",
                                "source_hash"])
    table = table.filter(pc.and_(pc.equal(table["status"], "ok"),
                                 pc.is_in(table["problem_json"], pa.array(sorted({k[1] for k in probe_of})))))
    # today's kernel only: a shape swept under an older kernel hash is not a sweep of the probed group
    today = {(name, h) for name in {k[0] for k in probe_of} for h in get_family(name).group_hashes}
    table = table.filter(pa.array([(k, h) in today for k, h in zip(table["kernel"].to_pylist(),
                                                                     table["source_hash"].to_pylist())]))
    by_group: dict[tuple, list[dict]] = {}
    exhaustive = set()
    for r in table.to_pylist():
        key = (r["kernel"], r["problem_json"], r["dtype"])
        if key in probe_of:
            by_group.setdefault(key, []).append(r)
            if r["exhaustive"]:
                exhaustive.add(key)
    out = []
    for key in sorted(exhaustive):
        family, pj, dtype = key
        row = {"family": family, "problem": json.loads(pj), "dtype": dtype, "probe_regret": round(probe_of[key], 4),
               **whole_space_figures(cm, family, by_group[key], json.loads(pj), dtype)}
        out.append(row)
        print(json.dumps(row), flush=True)
    probe, top8 = np.array([r["probe_regret"] for r in out]), np.array([r["top8"] for r in out])
    print(json.dumps({"groups": len(out), "model_created": cm.meta["created"],
                      "probe_minus_top8_median": round(float(np.median(probe - top8)), 4) if out else None,
                      "probe_minus_top8_max": round(float(np.max(probe - top8)), 4) if out else None,
                      "top8_geomean": round(float(np.exp(np.log(top8).mean())), 4) if out else None}))


if __name__ == "__main__":
    main()
