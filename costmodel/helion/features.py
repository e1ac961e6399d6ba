"""Features of Helion configs that travel between kernels (issue 18, item 3), apart from costmodel/features.py's
Triton features for now: ``matrix`` gives its own names and a float64 matrix, NaN where a feature does not apply
(a kernel with fewer tiled dims or reductions than the widest one, a knob the config does not set).

Each canonical config is parsed once (its knobs are lists of per-tile / per-loop / per-op values); every feature
is then a numpy expression over whole columns. Block sizes are read against the problem extents the family says
each one tiles (``HelionFamily.tiles`` / ``reductions``), so a 64-wide tile of a 4096-row matmul and of a 4096-row
softmax read alike. Key order never matters: a config is a mapping.
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from costmodel.helion import families

MAX_TILES, MAX_REDUCTIONS = 3, 2
PID_TYPES = ("flat", "xyz", "persistent_blocked", "persistent_interleaved")
INDEXING = ("pointer", "block_ptr", "tensor_descriptor")
EVICTION = ("first", "last")


def _names() -> list[str]:
    n = ["n_tiles", "n_reductions", "n_loops", "n_memory_ops", "n_loads"]
    for name in ("log2_block", "block_ratio", "log2_tiles"):
        n += [f"{name}_{i}" for i in range(MAX_TILES)]
    for name in ("reduction_rolled", "log2_reduction_block", "reduction_ratio", "log2_reduction_trips"):
        n += [f"{name}_{i}" for i in range(MAX_REDUCTIONS)]
    n += ["log2_programs", "log2_tile_elems", "log2_num_warps", "num_stages", *(f"pid_{p}" for p in PID_TYPES),
          "log2_num_sm_multiplier", "maxnreg_set", "log2_maxnreg", *(f"indexing_{x}" for x in INDEXING),
          *(f"evict_{x}" for x in EVICTION), "log2_l2_grouping", "loop_order_swapped", "flatten_loops",
          "range_unroll_factor_mean", "range_num_stages_mean", "range_multi_buffer", "range_flatten",
          "range_warp_specialize", "static_range", "reduction_fusion"]
    n += PHYSICAL
    return n


# physical facts of a config on its problem, alike for every kernel (``_physical``). Adopted over the features
# before them on leave-one-kernel-out and held-out shapes, 3 boosting seeds each, with FAST's early stopping
# (session 12, a helper's uncommitted runs; the "after" side is scripts/helion_model.py --fast,
# scripts/results/helion_model-fast-cpu-2026-12-01-s12.jsonl): all kernels' top-1 0.288 -> 0.425, top-8 0.766 -> 0.804, swiglu top-8 0.888 -> 0.909 (its
# 1,000-config group 0.758 -> 0.881), matmul 0.263 -> 0.325; held-out shapes top-8 0.926 -> 0.953. Tried and
# dropped on the same runs: elements a program holds and per thread (swiglu top-8 0.52), iteration space and
# bytes per program (0.81), waves over the SMs and the last wave's fill (0.78; all of them together 0.84)
PHYSICAL = ["tile_fill", "reduction_fill", "live_loads", "live_stores",
            *(f"indexing_{op}_{x}" for op in ("load", "store") for x in INDEXING),
            *(f"evict_live_{x}" for x in EVICTION)]


NAMES = tuple(_names())


def _pad(rows: list[list], width: int) -> np.ndarray:
    """Rows of numbers (None allowed) as a (len(rows), width) float array, NaN past each row's end."""
    out = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        vals = [np.nan if v is None else float(v) for v in r[:width]]
        out[i, : len(vals)] = vals
    return out


def _share(rows: list[list], value) -> np.ndarray:
    """Per row: the fraction of its list's entries equal to ``value`` (NaN for an empty list)."""
    return np.array([np.mean([v == value for v in r]) if r else np.nan for r in rows])


def _mean(rows: list[list]) -> np.ndarray:
    """Per row: the mean of the list's set entries (None unset counts as 0; NaN for an empty list)."""
    return np.array([np.mean([v or 0 for v in r]) if r else np.nan for r in rows])


def _extents(kernels: Sequence[str], problems: Sequence[dict], attr: str, width: int,
             shape: dict | None = None) -> np.ndarray:
    """The extents each row's block sizes (``tiles``) or reductions span, columns of the family's formulas (or
    ``shape[attr]`` for every row: a kernel that is no family here, its extents read off its ConfigSpec)."""
    out = np.full((len(kernels), width), np.nan)
    if shape is not None:
        ext = [np.nan if e is None else e for e in shape[attr][:width]]
        out[:, : len(ext)] = ext
        return out
    kernels = np.asarray(kernels)
    for k in np.unique(kernels):
        rows = np.flatnonzero(kernels == k)
        cols = {d: np.array([problems[i][d] for i in rows], dtype=float) for d in problems[rows[0]]}
        for j, e in enumerate(getattr(families.get(k), attr)(cols)[:width]):
            out[rows, j] = e
    return out


def _memory_ops(kernels: Sequence[str], shape: dict | None = None) -> np.ndarray:
    """(rows, 2, 2): each row's kernel's live (loads, stores), reductions unrolled [:, 0] and rolled [:, 1]."""
    if shape is not None:
        return np.broadcast_to(np.asarray(shape["memory_ops"], dtype=float), (len(kernels), 2, 2))
    kernels = np.asarray(kernels)
    out = np.zeros((len(kernels), 2, 2))
    for k in np.unique(kernels):
        out[kernels == k] = families.get(k).memory_ops
    return out


def _live_share(rows: list[list], lo: np.ndarray, hi: np.ndarray, value) -> np.ndarray:
    """Per row: the share of entries ``lo:hi`` of its list equal to ``value`` (NaN where the slice is empty)."""
    return np.array([np.mean([v == value for v in r[int(a):int(b)]]) if b > a and len(r) >= b else np.nan
                     for r, a, b in zip(rows, lo, hi)])


def _physical(b, tile_ext, r_block, red_ext, r_set, mem_ops, indexing, evictions) -> dict:
    """The share of a config's tiles and reduction blocks that covers the problem (the rest pads past the
    extent: masked lanes), and the indexing and eviction of the memory ops that run (loads and stores apart; a
    rolled reduction runs more loads), the same for every kernel."""
    trips = np.ceil(red_ext / r_block)
    rolled = (~np.isnan(r_set)).any(1).astype(int)
    live = mem_ops[np.arange(len(b)), rolled]  # (rows, [loads, stores])
    loads, ops = live[:, 0], live.sum(1)
    return {
        "tile_fill": np.nanprod(tile_ext / (np.ceil(tile_ext / b) * b), 1),
        "reduction_fill": np.where(np.isnan(red_ext).all(1), np.nan, np.nanprod(red_ext / (trips * r_block), 1)),
        "live_loads": loads, "live_stores": live[:, 1],
        **{f"indexing_load_{x}": _live_share(indexing, np.zeros_like(loads), loads, x) for x in INDEXING},
        **{f"indexing_store_{x}": _live_share(indexing, loads, ops, x) for x in INDEXING},
        **{f"evict_live_{x}": _live_share(evictions, np.zeros_like(loads), loads, x) for x in EVICTION},
    }


def _grid(kernels: Sequence[str], shape: dict | None = None) -> np.ndarray:
    if shape is not None:
        return np.full(len(kernels), shape["grid"], dtype=float)
    kernels = np.asarray(kernels)
    out = np.zeros(len(kernels))
    for k in np.unique(kernels):
        out[kernels == k] = families.get(k).grid
    return out


def _flattened(b: np.ndarray, ext: np.ndarray, grid: np.ndarray, flat: np.ndarray, orders: list[list]
               ) -> tuple[np.ndarray, np.ndarray]:
    """(block sizes, extents) as a flattened tile loop runs them: Helion's code for ``flatten_loops`` is one block of
    the grid tiles' product over the flattened extent (``offsets = pid * B + arange(B)``, the indices by division
    and remainder), its lanes along the loop order's last dim. So where that dim is the tensors' contiguous (last)
    one the block reads as ``[1, ..., B]`` over ``[1, ..., M x N]``, else as ``[B, ..., 1]``. Adopted in session 22
    (scripts/helion_model.py, boosting seeds 0-4, scripts/results/helion_model-cpu-2026-12-02-s22.jsonl before,
    helion_model-flat-cpu-2026-12-02-s22.jsonl after): swiglu's 1,000-config group held out ranks at top-8 0.905 at
    every seed before, 0.969-1.000 after. Read as 2-D tiles, its 1x1024 tile (which pads each row) outranked every
    flattened tile, though the group's best configs are all flattened."""
    b, ext = b.copy(), ext.copy()
    along = np.array([not o or o[0][-1] == max(o[0]) for o in orders])
    for g in np.unique(grid[flat]).astype(int):
        if g < 2:
            continue
        rows = flat & (grid == g)
        for a in (b, ext):
            product = np.prod(a[rows, :g], 1)
            a[np.ix_(rows, np.arange(g))] = 1.0
            a[rows & along, g - 1] = product[along[rows]]
            a[rows & ~along, 0] = product[~along[rows]]
    return b, ext


def matrix(kernels: Sequence[str], problems: Sequence[dict], config_jsons: Sequence[str],
           shape: dict | None = None) -> tuple[list[str], np.ndarray]:
    """(feature names, matrix) for rows of (kernel, problem, canonical config JSON). ``shape`` ({"tiles",
    "reductions": extents, "grid": tiles in the launch grid, "memory_ops"}) stands for the family's facts for a
    kernel that is not one of costmodel's families (``spec_shape``)."""
    cfg = [json.loads(c) if isinstance(c, str) else c for c in config_jsons]

    def col(key):
        return [c.get(key) for c in cfg]

    def lists(key):
        return [c.get(key) or [] for c in cfg]

    blocks, red = lists("block_sizes"), lists("reduction_loops")
    red_ext = _extents(kernels, problems, "reductions", MAX_REDUCTIONS, shape)
    orders = lists("loop_orders")
    grid = _grid(kernels, shape)
    b, tile_ext = _flattened(_pad(blocks, MAX_TILES), _extents(kernels, problems, "tiles", MAX_TILES, shape), grid,
                             _share(lists("flatten_loops"), True) == 1, orders)
    tiles = np.ceil(tile_ext / b)
    r_set = _pad(red, MAX_REDUCTIONS)
    r_has = ~np.isnan(red_ext)
    # an unrolled (persistent) reduction spans the whole extent in one block of the next power of two
    r_block = np.where(np.isnan(r_set), 2.0 ** np.ceil(np.log2(red_ext)), r_set)
    pid = np.array(col("pid_type"), dtype=object)
    persistent = np.isin(pid, PID_TYPES[2:])
    sm_mult = np.array([np.nan if v is None else v for v in col("num_sm_multiplier")], dtype=float)
    maxnreg = np.array([np.nan if v is None else v for v in col("maxnreg")], dtype=float)
    l2 = _pad(lists("l2_groupings"), 1)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        physical = _physical(b, tile_ext, r_block, red_ext, r_set, _memory_ops(kernels, shape), lists("indexing"),
                             lists("load_eviction_policies"))
    feats = {
        "n_tiles": [len(x) for x in blocks], "n_reductions": r_has.sum(1),
        "n_loops": [len(x) for x in lists("range_unroll_factors")], "n_memory_ops": [len(x) for x in lists("indexing")],
        "n_loads": [len(x) for x in lists("load_eviction_policies")],
        **{f"log2_block_{i}": np.log2(b[:, i]) for i in range(MAX_TILES)},
        **{f"block_ratio_{i}": b[:, i] / tile_ext[:, i] for i in range(MAX_TILES)},
        **{f"log2_tiles_{i}": np.log2(tiles[:, i]) for i in range(MAX_TILES)},
        **{f"reduction_rolled_{i}": np.where(r_has[:, i], ~np.isnan(r_set[:, i]), np.nan) for i in range(MAX_REDUCTIONS)},
        **{f"log2_reduction_block_{i}": np.log2(r_block[:, i]) for i in range(MAX_REDUCTIONS)},
        **{f"reduction_ratio_{i}": r_block[:, i] / red_ext[:, i] for i in range(MAX_REDUCTIONS)},
        **{f"log2_reduction_trips_{i}": np.log2(np.ceil(red_ext[:, i] / r_block[:, i])) for i in range(MAX_REDUCTIONS)},
        # the tiles of the grid's dims (not a matmul's K, not attention's keys: loops inside a program)
        "log2_programs": np.nansum(np.where(np.arange(MAX_TILES) < grid[:, None], np.log2(tiles), 0), 1),
        "log2_tile_elems": np.nansum(np.log2(b), 1),
        "log2_num_warps": np.log2(np.array(col("num_warps"), dtype=float)),
        "num_stages": np.array(col("num_stages"), dtype=float),
        **{f"pid_{p}": (pid == p).astype(float) for p in PID_TYPES},
        "log2_num_sm_multiplier": np.where(persistent, np.log2(np.where(np.isnan(sm_mult), 1.0, sm_mult)), np.nan),
        "maxnreg_set": ~np.isnan(maxnreg), "log2_maxnreg": np.log2(maxnreg),
        **{f"indexing_{x}": _share(lists("indexing"), x) for x in INDEXING},
        **{f"evict_{x}": _share(lists("load_eviction_policies"), x) for x in EVICTION},
        "log2_l2_grouping": np.log2(l2),
        "loop_order_swapped": np.array([float(o[0] != sorted(o[0])) if o else np.nan for o in orders]),
        "flatten_loops": _share(lists("flatten_loops"), True),
        "range_unroll_factor_mean": _mean(lists("range_unroll_factors")),
        "range_num_stages_mean": _mean(lists("range_num_stages")),
        "range_multi_buffer": _share(lists("range_multi_buffers"), True),
        "range_flatten": _share(lists("range_flattens"), True),
        "range_warp_specialize": _share(lists("range_warp_specializes"), True),
        "static_range": _share(lists("static_ranges"), True),
        "reduction_fusion": [float(bool(c.get("reduction_fusion"))) for c in cfg],
        **physical,
    }
    assert tuple(feats) == NAMES
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.column_stack([np.asarray(v, dtype=float) for v in feats.values()])
    return list(NAMES), m


def spec_shape(bound) -> dict:
    """The extents of a bound kernel's tiles and reductions as its ConfigSpec's size hints give them (what the
    families' formulas give, tests/test_helion.py checks), its launch grid's tiles (``grid_block_ids``, in
    1.4.0 and 1.5.1) and the memory ops its code runs (``HelionFamily.memory_ops``: the loads and stores of its
    default config's code with pointer indexing, reductions unrolled and rolled), for a kernel that is not a
    family here."""
    spec = bound.config_spec
    return {"tiles": [b.size_hint for b in spec.block_sizes],
            "reductions": [r.size_hint for r in spec.reduction_loops], "grid": len(spec.grid_block_ids),
            "memory_ops": live_memory_ops(bound)}


def live_memory_ops(bound) -> list[list[int]]:
    """[[loads, stores] with reductions unrolled, the same rolled] of ``bound``'s generated Triton code (about
    0.1 s a codegen on CPU); a kernel without reductions gives the same pair twice."""
    import re

    import helion

    from costmodel.helion import configs

    d = configs.as_dict(bound.config_spec.default_config())
    d["indexing"] = ["pointer"] * len(d.get("indexing") or [])
    out = []
    for rolled in (False, True):
        if d.get("reduction_loops"):
            # rolled: a power of two below the extent (the spec takes only powers of two), at most 64
            d["reduction_loops"] = [min(64, 1 << max(0, (r.size_hint - 1).bit_length() - 1)) if rolled else None
                                    for r in bound.config_spec.reduction_loops]
        code = bound.to_triton_code(helion.Config(**d))
        out.append([len(re.findall(r"\btl\.load\(", code)), len(re.findall(r"\btl\.store\(", code))])
    return out


def from_table(table) -> tuple[list[str], np.ndarray]:
    """``matrix`` of a dataset table's rows (columns kernel, problem_json, config_json)."""
    problems = [json.loads(p) for p in table["problem_json"].to_pylist()]
    return matrix(table["kernel"].to_pylist(), problems, table["config_json"].to_pylist())
