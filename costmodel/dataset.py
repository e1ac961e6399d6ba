"""The Parquet dataset: schema, atomic shard writer, validated reader, group ids.

Layout: ``<root>/gpu=<slug>/kernel=<family>/part-<run>-<uuid>.parquet`` (hive partitions; ``gpu`` and
``kernel`` live in the path only). One row = one (group, config) measurement; a group = (gpu, kernel, kernel
hash, problem, dtype), the unit the model ranks within. The kernel hash (column ``source_hash``) is what compiles
(``KernelFamily.kernel_hash``); rows recorded before it carry their module text's hash, and a group of today's
kernel recorded under one goes on under its id (``resolve_group``). Every measurement stays on disk; a reader
takes one row per (group, config): its first measurement. Shards are written to a dot-prefixed temp name,
fsynced and renamed, so readers (which skip dot files) never see half a shard; files are never appended to.
Folders whose names start with ``_`` are not read either (pyarrow's discovery skips them): ``_manifests``, and
``PENDING``, where a kernel patch's rows wait until the patch lands (``scripts/pending_data.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord

SCHEMA_VERSION = 1
# union of every family's dims and knobs; flat so they filter and featurise without parsing JSON
DIMS = ("M", "N", "K", "B", "H", "S", "D", "CAUSAL")
KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "TMA", "PERSISTENT", "SPLIT_TAIL", "EPILOGUE_SUBTILE", "ROWS",
         "num_warps", "num_stages")

_HW_FIELDS = [
    ("hw_name", pa.string()), ("hw_cc_major", pa.int32()), ("hw_cc_minor", pa.int32()), ("hw_sm_count", pa.int32()),
    ("hw_smem_per_block", pa.int64()), ("hw_smem_per_sm", pa.int64()), ("hw_regs_per_sm", pa.int64()),
    ("hw_l2_bytes", pa.int64()), ("hw_mem_bandwidth_gbs", pa.float64()), ("hw_max_threads_per_sm", pa.int32()),
]
SCHEMA = pa.schema(
    [("run_id", pa.string()), ("ts", pa.timestamp("ms", tz="UTC")), ("gpu", pa.string()), *_HW_FIELDS,
     ("triton_version", pa.string()), ("helion_version", pa.string()), ("torch_version", pa.string()),
     ("cuda_version", pa.string()), ("driver_version", pa.string()), ("costmodel_version", pa.string()),
     ("kernel", pa.string()), ("source_hash", pa.string()), ("group_id", pa.string()), ("exhaustive", pa.bool_()),
     *[(f"dim_{d}", pa.int64()) for d in DIMS], ("problem_json", pa.string()), ("dtype", pa.string()),
     *[(f"cfg_{k}", pa.int64()) for k in KNOBS], ("config_json", pa.string()),
     ("status", pa.string()), ("latency_ms", pa.float64()), ("p20_ms", pa.float64()), ("p80_ms", pa.float64()),
     ("min_ms", pa.float64()), ("reps", pa.int32()), ("eager_ms", pa.float64()), ("compile_s", pa.float64()),
     ("rel_err", pa.float64()),
     ("n_regs", pa.int32()), ("n_spills", pa.int32()), ("shared_bytes", pa.int64()), ("error", pa.string())],
    metadata={"costmodel_schema_version": str(SCHEMA_VERSION)},
)
PARTITIONS = ("gpu", "kernel")
# <root>/_pending/<patch>/ holds shards recorded under a kernel patch not yet on main, in this layout; the reader skips
# it (its name starts with "_"), so neither training nor main's data tests see them until the patch lands
PENDING = "_pending"
FILE_SCHEMA = pa.schema([f for f in SCHEMA if f.name not in PARTITIONS], metadata=SCHEMA.metadata)
REQUIRED = ("group_id", "problem_json", "config_json", "dtype", "status", "latency_ms")


def new_run_id() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def canonical_json(d: dict) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def twin_key(config: dict, knob: str) -> str:
    """The config without one knob: configs that differ only in that knob (twins) share it."""
    return canonical_json({k: v for k, v in config.items() if k != knob})


def group_id(gpu: str, kernel: str, source_hash: str, problem: dict, dtype: str) -> str:
    key = "|".join([gpu, kernel, source_hash, canonical_json(problem), dtype])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def hw_columns(hw: HardwareRecord) -> dict:
    d = asdict(hw)
    d.pop("gpu")
    return {f"hw_{k}": v for k, v in d.items()}


def hw_from_row(row: dict) -> HardwareRecord:
    return HardwareRecord(gpu=row["gpu"], **{k[3:]: row[k] for k, _ in _HW_FIELDS})


def row_columns(problem: dict, config: dict) -> dict:
    """The flat dim_* / cfg_* columns plus their JSON forms."""
    out = {f"dim_{d}": problem.get(d) for d in DIMS}
    out.update({f"cfg_{k}": config.get(k) for k in KNOBS})
    out["problem_json"], out["config_json"] = canonical_json(problem), canonical_json(config)
    return out


def measurement_rows(hw: HardwareRecord, software: dict, run_id: str, family: str, source_hash: str, gid: str,
                     exhaustive: bool, problem: dict, dtype: str, measurements: list) -> list[dict]:
    """FILE_SCHEMA rows for one group's measurements (``costmodel.benchmark.Measurement``)."""
    from datetime import datetime, timezone

    from costmodel.helion import families as helion_families, helion_version

    # Helion's version is a Helion row's provenance (null on Triton rows and on shards written before the column)
    software = {**software, "helion_version": helion_version() if helion_families.is_helion(family) else None}
    base = {"run_id": run_id, "ts": datetime.now(timezone.utc), **hw_columns(hw), **software, "kernel": family,
            "source_hash": source_hash, "group_id": gid, "exhaustive": exhaustive, "dtype": dtype}
    return [{**base, **row_columns(problem, m.config), "status": m.status, "latency_ms": m.latency_ms,
             "p20_ms": m.p20_ms, "p80_ms": m.p80_ms, "min_ms": m.min_ms, "reps": m.reps, "eager_ms": m.eager_ms, "compile_s": m.compile_s,
             "rel_err": m.rel_err, "n_regs": m.n_regs, "n_spills": m.n_spills, "shared_bytes": m.shared_bytes,
             "error": m.error} for m in measurements]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_shard(root: str | Path, gpu: str, kernel: str, run_id: str, rows: list[dict]) -> Path:
    """Publish ``rows`` (dicts of FILE_SCHEMA columns) as one new shard, atomically."""
    part = Path(root) / f"gpu={gpu}" / f"kernel={kernel}"
    part.mkdir(parents=True, exist_ok=True)
    name = f"part-{run_id}-{uuid.uuid4().hex[:12]}.parquet"
    tmp, final = part / f".tmp-{name}", part / name
    table = pa.Table.from_pylist(rows, schema=FILE_SCHEMA)
    with open(tmp, "wb") as f:
        pq.write_table(table, f, compression="zstd")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    _fsync_dir(part)
    return final


class ShardWriter:
    """Buffers rows per (gpu, kernel) and publishes a shard every ``flush_rows`` rows, every ``flush_s``
    seconds and on ``flush()``. A crash loses only the rows not yet flushed."""

    def __init__(self, root: str | Path, run_id: str, flush_rows: int = 2000, flush_s: float = 60.0):
        self.root, self.run_id, self.flush_rows, self.flush_s = Path(root), run_id, flush_rows, flush_s
        self._buf: dict[tuple[str, str], list[dict]] = {}
        self._last_flush = time.monotonic()
        self.shards: list[Path] = []
        self.rows_written = 0

    def add(self, gpu: str, kernel: str, rows: list[dict]) -> None:
        buf = self._buf.setdefault((gpu, kernel), [])
        buf.extend(rows)
        if len(buf) >= self.flush_rows:
            self._flush_one(gpu, kernel)
        if time.monotonic() - self._last_flush > self.flush_s:
            self.flush()

    def _flush_one(self, gpu: str, kernel: str) -> None:
        rows = self._buf.pop((gpu, kernel), [])
        if rows:
            self.shards.append(write_shard(self.root, gpu, kernel, self.run_id, rows))
            self.rows_written += len(rows)

    def flush(self) -> None:
        for gpu, kernel in list(self._buf):
            self._flush_one(gpu, kernel)
        self._last_flush = time.monotonic()


def dataset(root: str | Path) -> ds.Dataset:
    """The dataset under ``root`` with the explicit current schema; every shard checked to be ours."""
    root = Path(root)
    if not root.exists():
        raise CostModelError(f"no dataset at {root}")
    try:
        d = ds.dataset(root, schema=SCHEMA, format="parquet", partitioning="hive")
    except (pa.ArrowInvalid, OSError) as e:
        raise CostModelError(f"cannot read dataset at {root}: {e}") from None
    for frag in d.get_fragments():
        try:
            names = set(frag.physical_schema.names)
        except (pa.ArrowInvalid, OSError) as e:
            raise CostModelError(f"corrupt Parquet shard {frag.path}: {e}") from None
        missing = [c for c in REQUIRED if c not in names]
        if missing:
            raise CostModelError(f"{frag.path} is not a costmodel shard (missing columns {', '.join(missing)})")
    return d


def read(root: str | Path, columns: list[str] | None = None, filter=None, every_measurement: bool = False) -> pa.Table:
    """Read rows (optionally only ``columns``, filtered by a pyarrow expression). Partition filters on gpu
    and kernel prune whole folders. Configs recorded before a knob was added read with the knob's ``absent``
    value, in its column and in ``config_json``, so every row speaks the families' current knobs.

    Each (group_id, config_json) pair reads once: its first measurement (earliest ``ts``, then run id, then
    shard path), or, in a group that one run measured whole, that run's (``first_measurements``), whatever other
    runs measured (``every_measurement`` returns them all). The choice is
    made among the rows ``filter`` leaves, so filter on group-level columns (gpu, kernel, group_id, dtype)
    for the same choice as an unfiltered read."""
    d = dataset(root)
    cols = list(SCHEMA.names) if columns is None else list(columns)
    need = ["kernel"] if every_measurement else ["kernel", "group_id", "config_json", *_FIRST_BY]
    try:
        table = d.to_table(columns=cols + [c for c in need if c not in cols], filter=filter)
    except (pa.ArrowInvalid, OSError) as e:
        raise CostModelError(f"cannot read dataset at {root}: {e}") from None
    table = with_absent_knobs(table)
    if not every_measurement:
        table = first_measurements(table)
    return table.select(cols)


# which measurement of a pair counts: the first, or its group's earliest whole run's; adding shards changes a pair
# already read only by giving its group its first whole run (`collect --complete --remeasure`)
_FIRST_BY = ("ts", "run_id", "__filename")


def first_measurements(table: pa.Table) -> pa.Table:
    """``table`` with one row per (group_id, config_json), the earliest by ``_FIRST_BY``; rows keep their order.
    A group that one run measured whole (every config the group holds) reads that run's rows, the earliest such
    run's: its times then come from one call. A whole-space group swept after a sample of its shape (``--resume``
    skipped the sampled pairs) mixes two calls, and rmsnorm's held-out top-1 on such groups was 0.762 against 0.971
    on groups of one run (session 12, scripts/run_drift.py); ``collect --complete --remeasure`` measures one whole."""
    n = table.num_rows
    if n < 2:
        return table
    table = _whole_run_rows(table)
    n = table.num_rows
    keys = [("group_id", "ascending"), ("config_json", "ascending"), *((c, "ascending") for c in _FIRST_BY)]
    order = pc.sort_indices(table.select([k for k, _ in keys]), sort_keys=keys)
    g, c = (table[k].take(order).combine_chunks() for k in ("group_id", "config_json"))
    same = pc.and_(pc.equal(g.slice(1), g.slice(0, n - 1)), pc.equal(c.slice(1), c.slice(0, n - 1)))
    repeat = np.r_[False, np.asarray(pc.fill_null(same, False))]
    if not repeat.any():
        return table
    keep = np.ones(n, bool)
    keep[order.to_numpy()[repeat]] = False
    return table.filter(pa.array(keep))


def _whole_run_rows(table: pa.Table) -> pa.Table:
    """``table`` less the rows of other runs in each group that one run measured whole (the earliest such run by its
    first ``ts``, then run id)."""
    configs = table.group_by("group_id").aggregate([("config_json", "count_distinct")])
    runs = table.group_by(["group_id", "run_id"]).aggregate([("config_json", "count_distinct"), ("ts", "min")])
    runs = runs.join(configs, "group_id", right_suffix="_group")
    whole = runs.filter(pc.equal(runs["config_json_count_distinct"], runs["config_json_count_distinct_group"]))
    if whole.num_rows == 0:
        return table
    whole = whole.sort_by([("group_id", "ascending"), ("ts_min", "ascending"), ("run_id", "ascending")])
    gid = whole["group_id"].combine_chunks()
    firsts = pa.array(np.r_[True, np.asarray(pc.not_equal(gid.slice(1), gid.slice(0, len(gid) - 1)))])
    chosen = whole.filter(firsts)

    def key(t):
        return pc.binary_join_element_wise(t["group_id"], t["run_id"], "/")

    keep = pc.or_(pc.invert(pc.is_in(table["group_id"], chosen["group_id"])), pc.is_in(key(table), key(chosen)))
    return table.filter(pc.fill_null(keep, False))


def with_absent_knobs(table: pa.Table) -> pa.Table:
    """``table`` with each later-added knob filled in for the rows of its family recorded without it."""
    from costmodel.kernels import family_names, get_family

    for family in family_names():
        knobs = get_family(family).knobs
        names = sorted(k.name for k in knobs)
        # last key first, so that the key each goes in front of is already in every row
        for knob in sorted((k for k in knobs if k.absent is not None), key=lambda k: k.name, reverse=True):
            col = f"cfg_{knob.name}"
            has_column, has_config = col in table.column_names, "config_json" in table.column_names
            if not (has_column or has_config):
                continue
            missing = pc.equal(table["kernel"], family)
            if has_column:
                missing = pc.and_(missing, pc.is_null(table[col]))
            else:
                missing = pc.and_(missing, pc.invert(pc.match_substring(table["config_json"], f'"{knob.name}":')))
            missing = pc.fill_null(missing, False)
            if not pc.any(missing).as_py():
                continue
            if has_column:
                filled = pc.if_else(missing, pa.scalar(knob.absent, pa.int64()), table[col])
                table = table.set_column(table.column_names.index(col), col, filled)
            if has_config:
                after = [n for n in names if n > knob.name]
                filled = _with_key(table["config_json"], knob.name, knob.absent, after[0] if after else None)
                table = table.set_column(table.column_names.index("config_json"), "config_json",
                                         pc.if_else(missing, filled, table["config_json"]))
    return table


def _with_key(config_json, key: str, value: int, next_key: str | None):
    """``canonical_json`` strings (keys sorted, no spaces) with ``key`` added in front of ``next_key``, or last."""
    if next_key is None:
        return pc.replace_substring_regex(config_json, "}$", f',"{key}":{value}}}')
    return pc.replace_substring(config_json, f'"{next_key}":', f'"{key}":{value},"{next_key}":', max_replacements=1)


def measured_pairs(root: str | Path, group_ids: list[str]) -> set[tuple[str, str]]:
    """(group_id, config_json) already recorded under ``root`` for these groups (what --resume skips)."""
    if not Path(root).exists() or not group_ids:
        return set()
    t = read(root, ["group_id", "config_json"], ds.field("group_id").isin(group_ids), every_measurement=True)
    return set(zip(t["group_id"].to_pylist(), t["config_json"].to_pylist()))


def group_candidates(gpu: str, family: str, problem: dict, dtype: str) -> list[tuple[str, str]]:
    """(group id, kernel hash) of each identity a group of today's ``family`` kernel may be recorded under:
    the one a new group gets first, then those of rows recorded under the module-text hashes of the same
    kernel (``KernelFamily.group_hashes``)."""
    from costmodel.helion import families as helion_families
    from costmodel.kernels import get_family

    if helion_families.is_helion(family):  # one identity: the kernel's source and the Helion version
        hashes = [helion_families.get(family).kernel_hash()]
    else:
        hashes = get_family(family).group_hashes
    return [(group_id(gpu, family, h, problem, dtype), h) for h in hashes]


def resolve_group(candidates: list[tuple[str, str]], measured: set[tuple[str, str]]) -> tuple[str, str, set[str]]:
    """(group id, kernel hash) to record a group under: the first of ``candidates`` with pairs in
    ``measured`` (so a group recorded under an older hash of the same kernel goes on under its id), else the
    first; and the config_json of every pair measured under any of them."""
    ids = {gid for gid, _ in candidates}
    configs = {c for gid, c in measured if gid in ids}
    with_rows = {gid for gid, _ in measured if gid in ids}
    gid, khash = next((c for c in candidates if c[0] in with_rows), candidates[0])
    return gid, khash, configs
