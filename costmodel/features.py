"""Vectorised features of (problem, config, hardware) rows, the one code path for training rows and candidates.

Input is a pyarrow Table (or a dict of columns) with the dataset's columns: ``kernel``, ``dtype``, ``dim_*``,
``cfg_*`` and ``hw_*``. Rows read from the dataset and rows built by :func:`candidates_table` carry the same
columns, so a config gets the same features whether it was measured or is a candidate.

Besides log2 of dims and knobs and whether each dim is a multiple of 16 (what Triton specialises its int
arguments on; the families' strides are products of their dims), each family contributes its own hardware-aware
terms, computed column-wise by the family itself (``KernelFamily.terms``, the same formulas its launcher and
validity use): tiles and programs launched, tail splits, shared memory per block, estimated registers and
occupancy, loop trips and the last iteration's share, elements per thread, bytes and FLOPs per tile, the work
padded tiles add in the tile's rows, columns and loop, TMA eligibility. This module only encodes them, and adds
what every family shares: waves over the SMs and the fill of the last one, tiles left over a whole number of
SM-waves, shared memory against the limit, intensities. A family without terms gets only the generic features
(its derived ones are missing values, which XGBoost handles).

Bump ``FEATURE_SCHEMA_VERSION`` on any change to a formula; names are checked separately on load.
"""

from __future__ import annotations

from functools import cache
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from costmodel import dataset
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels import family_names, get_family
from costmodel.kernels.base import DTYPE_BYTES, Config, Problem

FEATURE_SCHEMA_VERSION = 6

_LOG_DIMS = ("M", "N", "K", "B", "H", "S", "D")
_FLAG_DIMS = ("CAUSAL",)
_LOG_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "ROWS", "num_warps", "num_stages")
_FLAG_KNOBS = ("TMA", "PERSISTENT", "SPLIT_TAIL", "EPILOGUE_SUBTILE")
_HW = ("sm_count", "smem_per_block", "smem_per_sm", "regs_per_sm", "l2_bytes", "mem_bandwidth_gbs",
       "max_threads_per_sm", "cc_major", "cc_minor")
# what each family's deriver returns, per row of that family
_DERIVED = ("tiles", "programs", "splits", "smem", "regs", "occupancy", "loop_trips", "critical_steps", "loop_remainder",
            "elems_per_thread", "bytes_per_tile", "flops_per_tile", "padding", "pad_rows", "pad_cols", "pad_loop", "flops",
            "min_bytes", "tma_ok")
# derived terms given to the model as log2, then as plain ratios
_LOG_TERMS = ("tiles", "programs", "splits", "tiles_per_program", "waves", "loop_trips", "critical_steps",
              "elems_per_thread", "bytes_per_tile", "flops_per_tile", "tile_intensity", "arith_intensity", "flops",
              "min_bytes", "mem_time_us", "bytes_over_l2")
_RATIO_TERMS = ("occupancy", "regs", "smem_frac", "smem_over", "last_wave_fill", "tiles_over_sms", "padding", "pad_rows",
                "pad_cols", "pad_loop", "loop_remainder", "tma_ok")

COLUMNS = ("kernel", "dtype", *(f"dim_{d}" for d in dataset.DIMS), *(f"cfg_{k}" for k in dataset.KNOBS),
           *(f"hw_{h}" for h in _HW))

FEATURE_NAMES: tuple[str, ...] = (
    *(f"family_{f}" for f in family_names()),
    *(f"dtype_{d}" for d in DTYPE_BYTES), "dtype_bytes",
    *(f"log2_{d}" for d in _LOG_DIMS), *(f"div16_{d}" for d in _LOG_DIMS), *_FLAG_DIMS,
    *(f"log2_{k}" for k in _LOG_KNOBS), *_FLAG_KNOBS,
    *(f"log2_{t}" for t in _LOG_TERMS), *_RATIO_TERMS,
    *(f"hw_{h}" for h in _HW),
)

Cols = dict[str, np.ndarray]

# the largest dim a problem may have: 2**31-1, the largest int32. Triton passes an int argument under 2**31 as
# int32 and the families index with it (and with program ids) in 32 bits, CUDA caps a grid at 2**31-1 programs,
# and no tensor with a dim past it and another over 64 fits an H200's 141 GB. Past 2**53 the float64 features
# round and past 2**63 the int64 columns overflow: a dim is refused before either.
MAX_DIM = 2**31 - 1


def check_dims(problem: Problem) -> None:
    over = [f"{d}={v}" for d, v in problem.items() if v > MAX_DIM]
    if over:
        raise CostModelError(f"dim {', '.join(over)} is over the largest dim, {MAX_DIM} (2**31-1)")


@cache
def _families() -> dict[str, Callable[[Cols], Cols]]:
    """Each registered family's column-wise terms."""
    return {name: get_family(name).terms for name in family_names()}


def _as_table(data: pa.Table | dict) -> pa.Table:
    table = data if isinstance(data, pa.Table) else pa.table(data)
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise CostModelError(f"cannot compute features: missing columns {', '.join(missing)}")
    return table


def numeric(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """float64 values, nulls as NaN."""
    return np.asarray(pc.fill_null(pc.cast(col, pa.float64()), np.nan))


def equals(col: pa.ChunkedArray | pa.Array, value: str) -> np.ndarray:
    """Boolean mask of ``col == value``, nulls False."""
    return np.asarray(pc.fill_null(pc.equal(col, value), False))


def _combined_terms(c: Cols, d: Cols) -> Cols:
    """Terms every family shares, from its derived ones: waves of tiles over the SMs at the estimated occupancy,
    the last wave's fill, shared memory against the limit, intensities and the roofline memory time."""
    waves = d["tiles"] / (c["sm_count"] * d["occupancy"])
    limit = c["smem_per_block"]
    return {
        "tiles_per_program": d["tiles"] / d["programs"],
        "waves": waves,
        "last_wave_fill": waves - np.ceil(waves) + 1,
        # tiles past a whole number of one-per-SM waves, over the SMs: the tail a split or a persistent grid meets
        "tiles_over_sms": np.mod(d["tiles"], c["sm_count"]) / c["sm_count"],
        "smem_frac": d["smem"] / limit,
        "smem_over": np.maximum(0.0, d["smem"] - limit) / limit,
        "tile_intensity": d["flops_per_tile"] / d["bytes_per_tile"],
        "arith_intensity": d["flops"] / d["min_bytes"],
        "mem_time_us": d["min_bytes"] / (c["mem_bandwidth_gbs"] * 1e3),
        "bytes_over_l2": d["min_bytes"] / c["l2_bytes"],
    }


def feature_matrix(data: pa.Table | dict) -> np.ndarray:
    """The (rows x len(FEATURE_NAMES)) float32 feature matrix; missing values are NaN."""
    table = _as_table(data)
    n = table.num_rows
    c: Cols = {d: numeric(table[f"dim_{d}"]) for d in dataset.DIMS}
    c.update({k: numeric(table[f"cfg_{k}"]) for k in dataset.KNOBS})
    c.update({h: numeric(table[f"hw_{h}"]) for h in _HW})
    dtype_masks = {d: equals(table["dtype"], d) for d in DTYPE_BYTES}
    c["e"] = np.select(list(dtype_masks.values()), list(DTYPE_BYTES.values()), np.nan).astype(np.float64)
    family_masks = {f: equals(table["kernel"], f) for f in family_names()}

    derived = {t: np.full(n, np.nan) for t in _DERIVED}
    for fam, derive in _families().items():
        mask = family_masks[fam]
        if mask.any():
            for term, values in derive({k: v[mask] for k, v in c.items()}).items():
                derived[term][mask] = values
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = {**derived, **_combined_terms(c, derived)}
        columns = [
            *family_masks.values(), *dtype_masks.values(), c["e"],
            *(np.log2(c[d]) for d in _LOG_DIMS),
            *(np.where(np.isnan(c[d]), np.nan, np.mod(c[d], 16) == 0) for d in _LOG_DIMS), *(c[d] for d in _FLAG_DIMS),
            *(np.log2(c[k]) for k in _LOG_KNOBS), *(c[k] for k in _FLAG_KNOBS),
            *(np.log2(terms[t]) for t in _LOG_TERMS), *(terms[t] for t in _RATIO_TERMS),
            *(c[h] for h in _HW),
        ]
    return np.column_stack(columns).astype(np.float32) if n else np.empty((0, len(FEATURE_NAMES)), np.float32)


def candidates_table(family: str, problem: Problem, dtype: str, configs: list[Config], hw: HardwareRecord) -> pa.Table:
    """Rows for scoring ``configs`` of one problem: the dataset's own columns (gpu, kernel, dtype, dim_*,
    problem_json, cfg_*, hw_*), so :func:`feature_matrix` treats them exactly like measured rows. Knob columns
    are built column-wise (no per-config JSON) to keep ranking thousands of candidates cheap."""
    check_dims(problem)
    unknown = set().union(*configs) - set(dataset.KNOBS) if configs else set()
    if unknown:
        raise CostModelError(f"config knobs {', '.join(sorted(unknown))} are not dataset columns")
    n = len(configs)
    fixed = {"gpu": hw.gpu, "kernel": family, "dtype": dtype, **dataset.row_columns(problem, {}),
             **dataset.hw_columns(hw)}
    fixed.pop("config_json")
    cols = {name: pa.repeat(pa.scalar(v, dataset.SCHEMA.field(name).type), n) for name, v in fixed.items()
            if not name.startswith("cfg_")}
    for k in dataset.KNOBS:
        cols[f"cfg_{k}"] = pa.array([cfg.get(k) for cfg in configs], pa.int64())
    return pa.table(cols)
