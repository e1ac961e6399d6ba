"""What num_stages buys a pointer-load matmul config, by whether Triton can pipeline its operands' loads (CPU, the
recorded H200 rows of today's kernel): the time at num_stages=2 over the same config's best stage count, and the
compiled kernels' shared memory, registers and spills at each stage count (128x256 tiles, 8 warps, persistent).
Operands are aligned when their row stride is a multiple of 16 elements (A's is K, B's is N): Triton
specialises int arguments on that, and vectorises, and so pipelines, only loads along such a stride.

    .venv/bin/python scripts/pipelined_loads.py [--data data] [--out F]
"""

from __future__ import annotations

import json

import click
import numpy as np
import pandas as pd

from costmodel import dataset
from costmodel.kernels import get_family

COLUMNS = ["kernel", "status", "latency_ms", "source_hash", "dim_K", "dim_N", "group_id", "config_json",
           "cfg_num_stages", "cfg_BLOCK_M", "cfg_BLOCK_N", "cfg_BLOCK_K", "cfg_TMA", "cfg_num_warps", "cfg_PERSISTENT",
           "cfg_SPLIT_TAIL", "shared_bytes", "n_regs", "n_spills"]


def rows(data: str) -> pd.DataFrame:
    t = dataset.read(data, COLUMNS).to_pandas()
    t = t[(t.kernel == "matmul") & (t.status == "ok") & t.source_hash.isin(get_family("matmul").group_hashes)
          & (t.cfg_TMA == 0)].copy()
    k_al, n_al = t.dim_K % 16 == 0, t.dim_N % 16 == 0
    t["operands"] = np.where(k_al & n_al, "both aligned", np.where(~k_al & ~n_al, "both unaligned", "one aligned"))
    return t


def stage_two_over_best(t: pd.DataFrame) -> list[dict]:
    """Per operand alignment and BLOCK_K: a config's time at num_stages=2 over its best stage count (configs timed
    at more than one stage count, 2 among them)."""
    rest = t.config_json.map(lambda s: dataset.twin_key(json.loads(s), "num_stages"))
    twins = t.groupby([t.group_id, rest]).latency_ms
    t = t.assign(best=twins.transform("min"), twins=twins.transform("size"))
    two = t[(t.cfg_num_stages == 2) & (t.twins > 1)]
    d = (two.latency_ms / two.best).groupby([two.operands, two.cfg_BLOCK_K.astype(int)]).agg(["size", "median", "max"])
    return [{"operands": k[0], "BLOCK_K": k[1], "configs": int(r["size"]), "median": round(float(r["median"]), 4),
             "max": round(float(r["max"]), 4)} for k, r in d.iterrows()]


def compiled(t: pd.DataFrame) -> list[dict]:
    sel = t[(t.cfg_BLOCK_M == 128) & (t.cfg_BLOCK_N == 256) & (t.cfg_num_warps == 8) & (t.cfg_PERSISTENT == 1)
            & (t.cfg_SPLIT_TAIL == 0)]
    med = sel.groupby(["operands", "cfg_BLOCK_K", "cfg_num_stages"])[["shared_bytes", "n_regs", "n_spills"]].median()
    return [{"operands": k[0], "BLOCK_K": int(k[1]), "num_stages": int(k[2]),
             **{c: float(v) for c, v in r.items()}} for k, r in med.iterrows()]


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--out", default=None, help="also write the JSON here")
def main(data: str, out: str | None) -> None:
    t = rows(data)
    result = {"stage2_over_best": stage_two_over_best(t), "compiled_128x256_8warps_persistent": compiled(t)}
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        open(out, "w").write(text + "\n")


if __name__ == "__main__":
    main()
