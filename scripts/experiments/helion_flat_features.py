"""Issue 18, on the CPU: does the Helion model rank a held-out kernel's flattened tile loops better when its
features read them as Helion's code runs them? Helion's code for a flattened loop (``flatten_loops``) is one block
of the tiles' product over the flattened extent (``offsets = pid * B + arange(B)``, the indices by division and
remainder), so it pads only that extent's tail, and its lanes run along the loop order's last dim. Extra columns
beside the shipped features (helion/model.py's ``FEATURES``):
- ``flat_fill``, ``flat_log2_programs``: the tile fill and program count of the launch grid, the flattened extent's
  where the loop is flattened, else the per-dim ones (as ``tile_fill`` and ``log2_programs``);
- ``flat_strided``: a flattened loop whose order's last dim is not the tensor's contiguous (last) one;
- ``log2_elems_per_thread``: the tile's elements over 32 x num_warps.

For each boosting seed, the held-out kernels' groups ranked by a model fitted on the rest (twin rows included, as
``training_table`` gives them), with the shipped features and with these added: each group's top-8 score.

    .venv/bin/python scripts/experiments/helion_flat_features.py [--hold helion:swiglu] [--seeds 0,1,2] [--out F]
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from costmodel import model  # noqa: E402
from costmodel.helion import features, model as hm  # noqa: E402

EXTRA = ("flat_fill", "flat_log2_programs", "flat_strided", "log2_elems_per_thread")


def extra_columns(table: pa.Table) -> np.ndarray:
    cfg = [json.loads(c) for c in table["config_json"].to_pylist()]
    problems = [json.loads(p) for p in table["problem_json"].to_pylist()]
    kernels = table["kernel"].to_pylist()
    b = features._pad([c.get("block_sizes") or [] for c in cfg], features.MAX_TILES)
    ext = features._extents(kernels, problems, "tiles", features.MAX_TILES)
    in_grid = np.arange(b.shape[1]) < features._grid(kernels)[:, None]
    flat = features._share([c.get("flatten_loops") or [] for c in cfg], True) == 1
    last_fastest = np.array([not o or o[0][-1] == max(o[0]) for o in (c.get("loop_orders") or [] for c in cfg)])
    warps = np.array([c["num_warps"] for c in cfg], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        fills = ext / (np.ceil(ext / b) * b)
        flat_ext = np.nanprod(np.where(in_grid, ext, 1), 1)
        block = np.nanprod(np.where(in_grid, b, 1), 1)
        fused = np.ceil(flat_ext / block)
        rest = np.nanprod(np.where(in_grid, 1, fills), 1)
        fill = np.where(flat, flat_ext / (fused * block) * rest, np.nanprod(fills, 1))
        programs = np.where(flat, np.log2(fused), np.nansum(np.where(in_grid, np.log2(np.ceil(ext / b)), 0), 1))
        per_thread = np.nansum(np.log2(b), 1) - np.log2(32 * warps)
    return np.column_stack([fill, programs, flat & ~last_fastest, per_thread]).astype(np.float32)


FLAT = model.FeatureSet("helion-flat", (*hm.NAMES, *EXTRA), hm.SCHEMA_VERSION,
                        lambda t: np.column_stack([hm.table_matrix(t), extra_columns(t)]), hm._kernels)


@click.command()
@click.option("--hold", default="helion:swiglu", show_default=True, help="kernels held out together, comma-separated")
@click.option("--seeds", default="0,1,2", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="also write the lines here")
def main(hold: str, seeds: str, out: str | None) -> None:
    table, _ = hm.training_table(ROOT / "data", "nvidia-h200")
    held = np.asarray(pc.is_in(table["kernel"], pa.array(hold.split(",")))) & ~hm.is_twin(table)
    lines = []
    for seed in map(int, seeds.split(",")):
        params = dataclasses.replace(hm.PARAMS, seed=seed)
        for fs in (hm.FEATURES, FLAT):
            groups = hm._rank_held_out(table, held, params, fs)
            line = {"features": fs.name, "seed": seed, "held_out": hold, "groups": len(groups),
                    "top8_geomean": hm._summary(groups)["top8_score"],
                    "top8_by_group": {g["group_id"][:12]: round(g["top8_score"], 3) for g in groups},
                    "configs_by_group": {g["group_id"][:12]: g["configs"] for g in groups}}
            lines.append(line)
            print(json.dumps(line), flush=True)
    if out:
        Path(out).write_text("".join(json.dumps(ln) + "\n" for ln in lines))


if __name__ == "__main__":
    main()
