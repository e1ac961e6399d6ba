"""Issue 17: does the row stride's alignment to 128 bytes explain the large shapes' gap to cuBLAS?

Every large shape of issue 17 still short of torch.matmul has rows of B and C that are 16-byte aligned (so TMA takes
them) but not 128-byte aligned: 3000x5000x1000 bf16 (a row of 10,000 bytes, 16 past a multiple of 128; 0.77 of
torch), 6000^3 fp16 (96 past; 0.94-0.97) and 10000x2000x3000 fp16 (32 past; 0.95). 8192x3072x1000 bf16, whose rows
of B and C are 128-byte aligned (only A's are not), reaches 0.99, and its 128x256x64 tile runs in 13.4 us against
3000x5000x1000's 17.2 us at the same K (session 30's rows). In the data, matmuls of at least 10 GFLOP whose rows are
all 128-byte aligned peak at a median 732 TFLOPS (192 groups), those with such rows in A alone at 564 (19), in all
three at 391 (3; the one whole-space group among them, 5308x2264x3640 bf16, at 544): `alignment_gap.py --line 128`.
Groups of different sizes: a hint, not a measurement.

This probe measures it on the GPU. Per shape, the family's best config (``--previous``: bench_matmul_gap.py rows;
with ``--data-groups N`` also the best recorded config of the N largest whole-space groups of the data with such
rows) is bound to the same values in tensors whose rows start a multiple of ``LINE`` bytes apart (a view of the
first columns of a wider buffer) for A, B, C, A and B, and all three, each variant checked against torch first.
Then do_bench (L2 flushed) times every variant, torch.matmul on the natural and on the padded tensors, and torch's
strided copies (``copy_*``) and a Triton row copy (``tcopy_*``, checked) of A and B into their padded buffers and of
C out of its (what a launcher that pads would pay each call), in alternating rounds, in this one call. Session 41's
first run (an H100) had no pad_ab and copied B alone; its second no Triton copy.

    PYTHONPATH=. python3 scripts/experiments/stride_probe.py --previous rows.jsonl [--data-groups 3] [--out FILE]
    .venv/bin/python scripts/experiments/stride_probe.py --previous rows.jsonl --dry-run   # CPU: what it would time
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # benchlib
from benchlib import alternating, best_by_shape, log, shape_key  # noqa: E402
from costmodel.kernels.base import DTYPE_BYTES  # noqa: E402

LINE = 128  # bytes a padded row is rounded up to


def misaligned(cols: int, e: int) -> bool:
    """Rows of ``cols`` elements are 16-byte aligned (TMA takes them) but not ``LINE``-byte aligned."""
    return cols * e % 16 == 0 and cols * e % LINE != 0


def shapes(previous: str, data: str, data_groups: int) -> list[tuple[dict, str, dict, str]]:
    """(problem, dtype, config, where the config comes from): issue 17's large shapes with a best config in
    ``previous``, then the data's largest whole-space matmul groups whose rows of B or A are misaligned."""
    from costmodel import benchmarks

    former = best_by_shape(previous)
    out = [(p, d, former[shape_key(p, d)]["best_config"], "previous") for fam, p, d in benchmarks.KERNEL_GAP
           if p["M"] > 64 and shape_key(p, d) in former]
    return out + data_shapes(data, data_groups) if data_groups else out


def misaligned_rows(p: dict, e: int) -> bool:
    """A large problem whose rows TMA takes (16-byte aligned) but which miss a ``LINE``-byte line in A or B and C."""
    tma_takes = p["N"] * e % 16 == 0 == p["K"] * e % 16
    return p["M"] >= 1024 and tma_takes and (misaligned(p["N"], e) or misaligned(p["K"], e))


def data_shapes(data: str, n: int, keep=misaligned_rows, label: str = "data") -> list[tuple[dict, str, dict, str]]:
    """The ``n`` largest (in M*N*K) whole-space matmul groups of the data whose problem ``keep(problem, element
    bytes)`` accepts, each with its best recorded config."""
    import numpy as np

    from costmodel import model

    table, _ = model.training_table(data)
    t = table.select(["kernel", "dtype", "problem_json", "group_id", "exhaustive", "config_json", "latency_ms"])
    t = t.to_pandas()
    t = t[(t.kernel == "matmul") & t.exhaustive & t.latency_ms.notna()]
    best = t.loc[t.groupby("group_id").latency_ms.idxmin()]
    rows = []
    for r in best.itertuples():
        p = json.loads(r.problem_json)
        if keep(p, DTYPE_BYTES[r.dtype]):
            rows.append((float(np.prod([p["M"], p["N"], p["K"]])), p, r.dtype, json.loads(r.config_json)))
    rows.sort(key=lambda x: -x[0])
    return [(p, d, c, label) for _, p, d, c in rows[:n]]


COPY_ROWS, COPY_COLS = 16, 256  # the block one program of the row copy moves (tma-pad's copy; a guess)


def _copy_rows_kernel():
    """A Triton kernel copying a matrix row by row between two row strides (what a launcher padding an operand would
    run), built on first use so that the dry run needs no Triton."""
    import triton
    import triton.language as tl

    @triton.jit
    def copy_rows(src, dst, ROWS, COLS, stride_src, stride_dst, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        col_blocks = tl.cdiv(COLS, BLOCK_C)
        rows = (tl.program_id(0) // col_blocks * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
        cols = tl.program_id(0) % col_blocks * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (rows[:, None] < ROWS) & (cols[None, :] < COLS)
        tl.store(dst + rows[:, None] * stride_dst + cols[None, :],
                 tl.load(src + rows[:, None] * stride_src + cols[None, :], mask=mask), mask=mask)

    return copy_rows


def row_copy(src, dst):
    """A callable copying ``src`` into ``dst`` (same shape, rows back to back within each) with one Triton launch."""
    import triton

    kernel, (rows, cols) = _copy_rows_kernel(), src.shape
    grid = (triton.cdiv(rows, COPY_ROWS) * triton.cdiv(cols, COPY_COLS),)
    return lambda: kernel[grid](src, dst, rows, cols, src.stride(0), dst.stride(0), BLOCK_R=COPY_ROWS,
                                BLOCK_C=COPY_COLS, num_warps=4)


def padded(t):
    """``t``'s values in a view whose rows start a multiple of ``LINE`` bytes apart (the first columns of a wider
    buffer)."""
    import torch

    rows, cols = t.shape
    per_line = LINE // t.element_size()
    wide = torch.empty(rows, -(-cols // per_line) * per_line, device=t.device, dtype=t.dtype)[:, :cols]
    return wide.copy_(t)


def checked(name: str, make, out, ref, tolerance: float, row: dict, timed: dict) -> None:
    """Correctness before speed: the callable ``make()`` builds is run once on a NaN-poisoned ``out``, its error
    against ``ref`` (or why it failed) goes to ``row["rel_err"]``, and it joins ``timed`` only within ``tolerance``."""
    import torch

    out.fill_(float("nan"))
    try:
        fn = make()
        fn()
        if out.is_cuda:
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - refused by Triton or the driver: recorded, the rest go on
        row["rel_err"][name] = f"{type(e).__name__}: {str(e)[:200]}"
        return
    row["rel_err"][name] = err = float((out.float() - ref).norm() / ref.norm())
    if err <= tolerance:
        timed[name] = fn


def median_times(timed: dict, rounds: int) -> dict[str, float]:
    """Each callable's median do_bench time (ms, L2 flushed) over ``rounds`` alternating rounds."""
    from triton.testing import do_bench

    return {k: statistics.median(v) for k, v in
            alternating(timed, rounds, lambda f: do_bench(f, return_mode="median")).items()}


def probe(fam, problem: dict, dtype: str, config: dict, hw, rounds: int) -> dict:
    import torch

    a, b = fam.make_inputs(problem, dtype, "cuda")
    ref = fam.reference(problem, (a, b))
    c = fam.make_output(problem, dtype, "cuda")
    pa, pb, pc = padded(a), padded(b), padded(c)
    row = {"problem": problem, "dtype": dtype, "config": config, "strides": {}, "rel_err": {}}
    tensors = {"natural": (a, b, c), "pad_a": (pa, b, c), "pad_b": (a, pb, c), "pad_c": (a, b, pc),
               "pad_ab": (pa, pb, c), "pad_all": (pa, pb, pc)}
    timed = {"torch": lambda: torch.matmul(a, b), "torch_pad_ab": lambda: torch.matmul(pa, pb),
             "copy_a": lambda: pa.copy_(a), "copy_b": lambda: pb.copy_(b), "copy_c": lambda: c.copy_(pc),
             "tcopy_a": row_copy(a, pa), "tcopy_b": row_copy(b, pb), "tcopy_c": row_copy(pc, c)}
    pc.normal_()
    for name, (src, dst) in {"tcopy_a": (a, pa), "tcopy_b": (b, pb), "tcopy_c": (pc, c)}.items():
        dst.fill_(float("nan"))  # poisoned: the copy must write every element
        timed[name]()
        row.setdefault("copy_ok", {})[name] = bool(torch.equal(src, dst))
    for name, (x, y, o) in tensors.items():
        row["strides"][name] = [x.stride(0), y.stride(0), o.stride(0)]
        if name != "natural" and row["strides"][name] == row["strides"]["natural"]:
            continue  # nothing padded: the natural variant already is this one
        checked(name, lambda x=x, y=y, o=o: fam.bind(problem, (x, y), o, config, hw), o, ref, fam.tolerance[dtype],
                row, timed)
    ms = median_times(timed, rounds)
    base = ms.get("natural")
    runs = {k: v for k, v in ms.items() if "copy_" not in k}
    return row | {"ms": ms, "vs_natural": {k: base / v for k, v in runs.items() if base},
                  "vs_torch": {k: ms["torch"] / v for k, v in runs.items()}}


def shape_options(fn):
    """The options choosing the shapes and rounds, which this probe and load_probe.py share."""
    for option in reversed((
            click.option("--previous", required=True, type=click.Path(exists=True, dir_okay=False),
                         help="bench_matmul_gap.py rows: each shape's best config of the family"),
            click.option("--data", default=str(ROOT / "data"), show_default=True),
            click.option("--data-groups", default=0, show_default=True,
                         help="also the N largest whole-space groups of the data with misaligned rows"),
            click.option("--rounds", default=6, show_default=True),
            click.option("--dry-run", is_flag=True,
                         help="print the shapes and configs it would time (CPU), time nothing"))):
        fn = option(fn)
    return fn


@click.command()
@shape_options
@click.option("--out", default="stride_probe.jsonl", show_default=True)
def main(previous: str, data: str, data_groups: int, rounds: int, dry_run: bool, out: str) -> None:
    from costmodel import hardware
    from costmodel.kernels import get_family

    todo = shapes(previous, data, data_groups)
    if dry_run:
        for p, d, c, src in todo:
            print(json.dumps({"problem": p, "dtype": d, "config": c, "from": src, "misaligned":
                              {"A": misaligned(p["K"], DTYPE_BYTES[d]), "B_C": misaligned(p["N"], DTYPE_BYTES[d])}}))
        return
    fam, hw = get_family("matmul"), hardware.current()
    write_rows(todo, out, lambda p, d, c: probe(fam, p, d, c, hw, rounds))


def write_rows(todo: list[tuple[dict, str, dict, str]], out: str, measure) -> None:
    """Each shape's row, ``measure(problem, dtype, config)`` and where the config came from, logged and appended to
    ``out`` as soon as it is done (a call cut short keeps the shapes it finished)."""
    with open(out, "a") as sink:
        for p, d, c, src in todo:
            row = {**measure(p, d, c), "from": src}
            log(json.dumps(row))
            sink.write(json.dumps(row) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
