"""Vectorised features of (problem, config, hardware) rows, the one code path for training rows and candidates.

Input is a pyarrow Table (or a dict of columns) with the dataset's columns: ``kernel``, ``dtype``, ``dim_*``,
``cfg_*`` and ``hw_*``. Rows read from the dataset and rows built by :func:`candidates_table` carry the same
columns, so a config gets the same features whether it was measured or is a candidate.

Besides log2 of dims and knobs, each family contributes hardware-aware terms computed column-wise (never per
row): tiles and programs launched, shared memory per block, estimated registers and occupancy, waves over the
SMs and the fill of the last one, loop trips, elements per thread, bytes and FLOPs per tile and padding waste.
The shared-memory formulas mirror each family's ``smem_bytes`` (tests check they agree); occupancy and
registers are estimates, the model learns how much to trust them. A family without a deriver here gets only
the generic features (its derived ones are missing values, which XGBoost handles).

Bump ``FEATURE_SCHEMA_VERSION`` on any change to a formula; names are checked separately on load.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from costmodel import dataset
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels import family_names, get_family
from costmodel.kernels.base import DTYPE_BYTES, Config, Problem

FEATURE_SCHEMA_VERSION = 4

_LOG_DIMS = ("M", "N", "K", "B", "H", "S", "D")
_FLAG_DIMS = ("CAUSAL",)
_LOG_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "ROWS", "num_warps", "num_stages")
_FLAG_KNOBS = ("TMA", "PERSISTENT", "SPLIT_TAIL", "EPILOGUE_SUBTILE")
_HW = ("sm_count", "smem_per_block", "smem_per_sm", "regs_per_sm", "l2_bytes", "mem_bandwidth_gbs",
       "max_threads_per_sm", "cc_major", "cc_minor")
# what each family's deriver returns, per row of that family
_DERIVED = ("tiles", "programs", "splits", "smem", "regs", "occupancy", "loop_trips", "elems_per_thread", "bytes_per_tile",
            "flops_per_tile", "padding", "flops", "min_bytes")
# derived terms given to the model as log2, then as plain ratios
_LOG_TERMS = ("tiles", "programs", "splits", "tiles_per_program", "waves", "loop_trips", "elems_per_thread", "bytes_per_tile",
              "flops_per_tile", "tile_intensity", "arith_intensity", "flops", "min_bytes", "mem_time_us",
              "bytes_over_l2")
_RATIO_TERMS = ("occupancy", "regs", "smem_frac", "smem_over", "last_wave_fill", "padding")

COLUMNS = ("kernel", "dtype", *(f"dim_{d}" for d in dataset.DIMS), *(f"cfg_{k}" for k in dataset.KNOBS),
           *(f"hw_{h}" for h in _HW))

FEATURE_NAMES: tuple[str, ...] = (
    *(f"family_{f}" for f in family_names()),
    *(f"dtype_{d}" for d in DTYPE_BYTES), "dtype_bytes",
    *(f"log2_{d}" for d in _LOG_DIMS), *_FLAG_DIMS,
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


def _occupancy(c: Cols, smem: np.ndarray, regs: np.ndarray) -> np.ndarray:
    """Programs one SM holds at once: warp slots, registers (allocated 8 a thread at a time) and shared memory
    (at least one; a config over the shared-memory limit shows in ``smem_over``). The row-wise families size
    persistent grids by the same rule."""
    threads = 32 * c["num_warps"]
    return np.maximum(1.0, np.minimum.reduce([
        np.full_like(smem, 32.0), np.floor(c["max_threads_per_sm"] / threads),
        np.floor(c["regs_per_sm"] / (np.ceil(regs / 8) * 8 * threads)),
        np.floor(c["smem_per_sm"] / np.maximum(smem, 1.0))]))


def _matmul(c: Cols, min_k_tiles_per_split: int) -> Cols:
    M, N, K, bm, bn, bk, e = c["M"], c["N"], c["K"], c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["e"]
    tiles = np.ceil(M / bm) * np.ceil(N / bn)
    threads = 32 * c["num_warps"]
    acc = bm * bn / threads
    subtile = c["EPILOGUE_SUBTILE"]
    smem = (c["num_stages"] * (bm * bk + bk * bn) * e + c["TMA"] * bm * bn * e / (1 + subtile)
            + subtile * (bm < 16 * c["num_warps"]) * bm * bn * 2)
    # fp32 accumulator plus one stage of operand fragments (two half-precision values a register)
    regs = np.minimum(255.0, 32 + acc + (bm + bn) * bk * e / 4 / threads)
    # SPLIT_TAIL: the last wave's tiles each split over K into this many parts (matmul.tail_split)
    tail = np.mod(tiles, c["sm_count"])
    with np.errstate(divide="ignore", invalid="ignore"):
        splits = np.minimum(np.floor(c["sm_count"] / tail), np.floor(np.ceil(K / bk) / min_k_tiles_per_split))
    split = (c["SPLIT_TAIL"] > 0) & (tail > 0) & (splits >= 2)
    return {
        "tiles": tiles,
        "programs": np.where(split, c["sm_count"],
                             np.where(c["PERSISTENT"] > 0, np.minimum(tiles, c["sm_count"]), tiles)),
        "splits": np.where(split, splits, 1.0),
        "smem": smem,
        "regs": regs,
        "occupancy": _occupancy(c, smem, regs),
        "loop_trips": np.ceil(K / bk),
        "elems_per_thread": acc,
        "bytes_per_tile": (bm * K + K * bn + bm * bn) * e,
        "flops_per_tile": 2 * bm * bn * K,
        "padding": np.ceil(M / bm) * bm / M * np.ceil(N / bn) * bn / N * np.ceil(K / bk) * bk / K,
        "flops": 2 * M * N * K,
        "min_bytes": (M * K + K * N + M * N) * e,
    }


def _attention(c: Cols) -> Cols:
    B, H, S, D, e = c["B"], c["H"], c["S"], c["D"], c["e"]
    bm, bn = c["BLOCK_M"], c["BLOCK_N"]
    tiles = np.ceil(S / bm) * B * H
    # keys a query block visits: all of them, or under the causal mask about half plus the diagonal block
    kv = np.where(c["CAUSAL"] > 0, np.minimum(S, (S + bm) / 2), S)
    elems = bm * (D + bn) / (32 * c["num_warps"])
    flops = 4 * B * H * S * S * D
    smem = (bm * D + c["num_stages"] * 2 * bn * D) * e + 1024 * c["TMA"]
    regs = np.minimum(255.0, 32 + elems)
    return {
        "tiles": tiles,
        "programs": tiles,
        "smem": smem,
        "regs": regs,
        "occupancy": _occupancy(c, smem, regs),
        "loop_trips": np.ceil(kv / bn),
        "elems_per_thread": elems,
        "bytes_per_tile": (2 * bm * D + 2 * kv * D) * e,
        "flops_per_tile": 4 * bm * kv * D,
        "padding": np.ceil(S / bm) * bm / S * np.ceil(S / bn) * bn / S,
        "flops": np.where(c["CAUSAL"] > 0, flops / 2, flops),
        "min_bytes": 4 * B * H * S * D * e,
    }


def _rowwise(vectors: int, accumulators: int, flops_per_element: int) -> Callable[[Cols], Cols]:
    def derive(c: Cols) -> Cols:
        M, N, e, bn, rows = c["M"], c["N"], c["e"], c["BLOCK_N"], c["ROWS"]
        per_thread = rows * bn / (32 * c["num_warps"])
        single = bn >= N
        tiles = np.ceil(M / rows)
        # the family's estimates. Registers: row values (and the looped pass's accumulators), doubled for rows
        # too unaligned for 8-byte loads, plus two a row, capped where the kernel would spill. Shared memory:
        # pipelined loads of rows and vectors, reduction scratch and, for norms on rows not 16-byte aligned,
        # the output tile's layout conversion
        row_bytes_align = np.gcd(np.nan_to_num(N).astype(np.int64), 16) * e
        values = per_thread * np.where(single, 1, 1 + accumulators) * np.where(row_bytes_align < 8, 2, 1)
        regs = np.minimum(np.floor(16 + 2 * rows + values), np.minimum(255, np.floor(65536 / (32 * c["num_warps"]))))
        smem = ((c["num_stages"] - 1) * rows * (1 + vectors) * bn * e + 8 * rows * c["num_warps"]
                + np.where((vectors > 0) & (row_bytes_align < 16), rows * bn * 4, 0))
        occupancy = _occupancy(c, smem, regs)
        return {
            "tiles": tiles,
            # a persistent grid holds as many programs as the GPU runs at once (the family's launcher)
            "programs": np.where(c["PERSISTENT"] > 0, np.minimum(tiles, c["sm_count"] * occupancy), tiles),
            "smem": smem,
            "regs": regs,
            "occupancy": occupancy,
            "loop_trips": np.where(single, 1.0, 2 * np.ceil(N / bn)),
            "elems_per_thread": per_thread,
            # looped rows are read twice
            "bytes_per_tile": rows * N * e * np.where(single, 2, 3) + vectors * N * e,
            "flops_per_tile": flops_per_element * rows * N,
            "padding": np.ceil(N / bn) * bn / N * tiles * rows / M,
            "flops": flops_per_element * M * N,
            "min_bytes": (2 * M * N + vectors * N) * e,
        }

    return derive


@cache
def _derivers() -> dict[str, Callable[[Cols], Cols]]:
    """Per-family derivers; family objects are consulted once, for constants only."""
    from costmodel.kernels import matmul
    from costmodel.kernels.rowwise import RowwiseFamily

    out: dict[str, Callable[[Cols], Cols]] = {
        "matmul": partial(_matmul, min_k_tiles_per_split=matmul.MIN_K_TILES_PER_SPLIT), "attention": _attention}
    for name in family_names():
        fam = get_family(name)
        if isinstance(fam, RowwiseFamily):
            out[name] = _rowwise(fam.vectors, fam.looped_accumulators, fam.flops_per_element)
    return out


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
    for fam, derive in _derivers().items():
        mask = family_masks[fam]
        if mask.any():
            for term, values in derive({k: v[mask] for k, v in c.items()}).items():
                derived[term][mask] = values
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = {**derived, **_combined_terms(c, derived)}
        columns = [
            *family_masks.values(), *dtype_masks.values(), c["e"],
            *(np.log2(c[d]) for d in _LOG_DIMS), *(c[d] for d in _FLAG_DIMS),
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
