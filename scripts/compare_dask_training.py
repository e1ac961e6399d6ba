"""`train --dask` against single-process training on the same data and held-out split (issue 13).

    python scripts/compare_dask_training.py --dask tcp://HOST:8786 [--data data] [--seeds 0,1,2] [--out F]

Trains the shipped model's way (TrainParams, held-out split of seed 0) in this process once per boosting seed,
which gives the noise band of the held-out figures (row and column subsampling are seeded), then once on the Dask
cluster with seed 0. Prints one JSON object: each model's held-out figures and wall time, the single-process
band (min, max), and whether each Dask figure lies within the band widened by its width (within noise)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel import evaluation, model  # noqa: E402

FIGURES = ("top1_score", "top8_score", "p10_top8_score", "ndcg_at_8", "kendall_tau")


def fit(table, gpu: str, params: model.TrainParams) -> dict:
    t0 = time.perf_counter()
    booster, meta, _ = evaluation.train_model(table, gpu, params, seed=0, extra_params=None)
    return {"seed": params.seed, "dask": bool(params.dask), "trees": meta["trees"],
            "wall_s": round(time.perf_counter() - t0, 1), **{k: meta["metrics"][k] for k in FIGURES}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dask", required=True, help="scheduler address")
    ap.add_argument("--data", default="data")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    table, gpu = model.training_table(args.data)
    single = [fit(table, gpu, model.TrainParams(seed=int(s))) for s in args.seeds.split(",")]
    on_dask = fit(table, gpu, dataclasses.replace(model.TrainParams(seed=0), dask=args.dask))
    band = {k: (min(r[k] for r in single), max(r[k] for r in single)) for k in FIGURES}
    within = {k: band[k][0] - (band[k][1] - band[k][0]) <= on_dask[k] <= band[k][1] + (band[k][1] - band[k][0])
              for k in FIGURES}
    result = {"rows": table.num_rows, "single": single, "dask": on_dask, "single_band": band, "within_noise": within}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
