"""Issue 17: do pointer loads pay less than TMA for rows that miss a 128-byte line?

The stride probe (session 41, an H100) found the family's TMA configs 13-39% slower when the rows of A, B or C are
16-byte but not 128-byte aligned, and the same config on padded views of the same values near cuBLAS (3000x5000x1000
bf16: 0.747 of torch.matmul natural, 0.948 with A and B padded). cuBLAS loses 0-6.5% there. A tile's row is loaded
in 128-byte TMA messages (a 128-byte swizzle's widest box), so a misaligned row costs two lines a message where an
aligned one costs one; a warp's pointer load of a 512-byte row of B (BLOCK_N 256) touches five lines where it would
touch four. If lines touched are what the loads pay, pointer loads of B should recover part of the loss and pointer
loads of A (rows of BLOCK_K 64, 128 bytes) none. But the family's pointer path is crippled on these very shapes:
Triton specialises an integer argument only on its being a multiple of 16, so a stride of 1,000 or 5,000 bf16 reads
as unaligned and the loads compile to scalar loads, never pipelined (``--dry-run --compile``: no ``cp.async`` in the
PTX of 3000x5000x1000's TMA=0 twin, 12 with the hint). Mode ``v`` gives that hint (``vec``).

This probe measures it. Per shape (the stride probe's: issue 17's large shapes' best configs from ``--previous``,
with ``--data-groups N`` the data's largest such whole-space groups), the best config when it is a TMA config runs
in a copy of the family's kernel whose loads of A and B and store of C each take TMA, pointers (the family's two code
paths, chosen per operand) or hinted pointers: the mixes in ``MIXES``, each checked against torch first. They are
timed in alternating do_bench rounds (L2 flushed) in this one call with the family's own kernel on the natural strides
(``family``: the all-TMA mix must match it) and on views with A and B padded to 128-byte rows (``pad_ab``,
stride_probe's), and with torch.matmul.

    PYTHONPATH=. python3 scripts/experiments/load_probe.py --previous rows.jsonl [--data-groups 1] [--out FILE]
    .venv/bin/python scripts/experiments/load_probe.py --previous rows.jsonl --dry-run   # CPU: what it would time
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # benchlib
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))  # stride_probe
from stride_probe import (checked, data_shapes, median_times, padded, shape_options, shapes,  # noqa: E402
                          write_rows)

from costmodel.kernels.matmul import _tile_coords, _tile_store  # noqa: E402

MODES = {"t": 0, "p": 1, "v": 2}  # an operand through TMA, pointers, or pointers told how far apart rows start
MIXES = ("ttt", "ppp", "vvv", "vtt", "tvt", "vvt", "ttv", "tvv")
# a mix's name gives A's, B's and C's mode in turn: "ttt" is the family's TMA config, "ppp" its TMA=0 twin


def todo(previous: str, data: str, data_groups: int) -> list[tuple[dict, str, dict, str]]:
    """The stride probe's shapes whose best config is a TMA config without a split tail (the probe's kernel has
    none)."""
    return [s for s in shapes(previous, data, data_groups) if s[2]["TMA"] == 1 and not s[2].get("SPLIT_TAIL")]


def vec(e: int, *values: int) -> int:
    """The most elements (a power of two, at most a 16-byte vector's ``16 // e``) that every value is a multiple of:
    what the ``v`` mode may tell the compiler. Triton's own specialisation knows only whether an integer argument is
    a multiple of 16 (elements here), so rows of 1,000 bf16 (2,000 bytes, 16-byte aligned) read as unaligned: the
    pointer path's loads and stores are scalar and its loads are not pipelined (no ``cp.async`` in the PTX,
    ``--compile``)."""
    n = 16 // e
    while n > 1 and any(v % n for v in values):
        n //= 2
    return n


def unaligned(data: str, n: int) -> list[tuple[dict, str, dict, str]]:
    """The ``n`` largest whole-space matmul groups of the data whose rows TMA refuses (not 16-byte aligned) but
    which ``vec`` may hint (rows 4 or 8 bytes apart), with their best recorded config (a pointer config), skipping
    groups whose best has a split tail: the probe's kernel has none, so its ``ppp`` would not be that config (session
    43: on 4055x2362x4826, MxNxK, ``ppp`` ran 0.55x as fast as the SPLIT_TAIL=2 best)."""
    def keep(p: dict, e: int) -> bool:
        return bool(p["K"] * e % 16 or p["N"] * e % 16) and vec(e, p["K"], p["N"]) > 1

    every = data_shapes(data, sys.maxsize, keep, "data, unaligned")
    return [s for s in every if not s[2].get("SPLIT_TAIL")][:n]


def mixes_of(config: dict) -> tuple[str, ...]:
    """The mixes a config runs: all of ``MIXES`` for a TMA config, the two pointer modes for a pointer one (TMA 0, or
    2: the family's hinted pointers, since session 45 the best of most groups whose rows TMA refuses)."""
    return MIXES if config["TMA"] == 1 else ("ppp", "vvv")


# The family's kernel (``costmodel.kernels.matmul``) without the split tail, A, B and C each through TMA or pointers
# (``MODES``). The ``v`` mode rounds each stride, K and N down to a multiple of ``VEC`` (a no-op: ``vec`` chose a
# ``VEC`` they all are multiples of), which tells the compiler what Triton's specialisation could not.


@triton.jit
def accumulate(a, b, M, N, K, stride_am, stride_bk, pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, A: tl.constexpr, B: tl.constexpr, VEC: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_am = tl.max_contiguous(tl.multiple_of(tl.where(offs_am < M, offs_am, 0), BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(tl.where(offs_bn < N, offs_bn, 0), BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    if A == 2:
        stride_am = stride_am // VEC * VEC
    if B == 2:
        stride_bk = stride_bk // VEC * VEC
    k_end = K // VEC * VEC if A == 2 else K
    for ki in tl.range(0, tl.cdiv(K, BLOCK_K)):
        k = ki * BLOCK_K + offs_k
        if A == 0:
            a_tile = a.load([pid_m * BLOCK_M, ki * BLOCK_K])
        else:
            a_tile = tl.load(a + offs_am[:, None] * stride_am + k[None, :], mask=k[None, :] < k_end, other=0.0)
        if B == 0:
            b_tile = b.load([ki * BLOCK_K, pid_n * BLOCK_N])
        else:
            b_tile = tl.load(b + k[:, None] * stride_bk + offs_bn[None, :], mask=k[:, None] < K, other=0.0)
        acc = tl.dot(a_tile, b_tile, acc)
    return acc


@triton.jit
def store(c, acc, M, N, stride_cm, pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
          C: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, VEC: tl.constexpr):
    if C == 2:
        stride_cm = stride_cm // VEC * VEC
        N = N // VEC * VEC
    _tile_store(c, acc, M, N, stride_cm, 1, pid_m, pid_n, BLOCK_M, BLOCK_N, C == 0, EPILOGUE_SUBTILE)


@triton.jit
def mixed(a, b, c, M, N, K, stride_am, stride_bk, stride_cm, num_programs, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PERSISTENT: tl.constexpr,
          A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, VEC: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if PERSISTENT:
        for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, num_programs, flatten=True):
            pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
            acc = accumulate(a, b, M, N, K, stride_am, stride_bk, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K,
                             A, B, VEC)
            store(c, acc, M, N, stride_cm, pid_m, pid_n, BLOCK_M, BLOCK_N, C, EPILOGUE_SUBTILE, VEC)
    else:
        pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
        acc = accumulate(a, b, M, N, K, stride_am, stride_bk, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, A, B, VEC)
        store(c, acc, M, N, stride_cm, pid_m, pid_n, BLOCK_M, BLOCK_N, C, EPILOGUE_SUBTILE, VEC)


def bound_mix(fam, problem: dict, a, b, c, config: dict, hw, mix: str, warmup: bool = False):
    """A callable running ``config`` with A, B and C in the modes ``mix`` names, descriptors made once (with
    ``warmup`` it compiles and launches nothing: meta tensors will do)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from costmodel.kernels.base import launch

    ma, mb, mc = (MODES[x] for x in mix)
    bm, bn, bk, sub = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"], config["EPILOGUE_SUBTILE"] * (mc == 0)
    *_, programs = fam._schedule(problem, config, hw)
    args = (TensorDescriptor.from_tensor(a, [bm, bk]) if ma == 0 else a,
            TensorDescriptor.from_tensor(b, [bk, bn]) if mb == 0 else b,
            TensorDescriptor.from_tensor(c, [bm, bn // (1 + sub)]) if mc == 0 else c,
            problem["M"], problem["N"], problem["K"], a.stride(0), b.stride(0), c.stride(0), programs)
    hint = "v" in mix and vec(a.element_size(), a.stride(0), b.stride(0), c.stride(0), problem["K"], problem["N"])
    kwargs = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=config["GROUP_M"], PERSISTENT=config["PERSISTENT"],
                  A=ma, B=mb, C=mc, EPILOGUE_SUBTILE=sub, VEC=int(hint or 1), num_warps=config["num_warps"],
                  num_stages=config["num_stages"])
    return lambda: launch(mixed, (programs,), args, kwargs, warmup)


def compiled(fam, problem: dict, dtype: str, config: dict, hw) -> dict:
    """Each mix compiled for the GPU of ``hw`` on this machine (no GPU needed): its PTX's count of TMA loads
    (``cp.async.bulk.tensor``), pointer copies to shared memory (``cp.async.cg``/``.ca``) and TMA stores, or why it
    did not compile."""
    from costmodel.benchmark import meta_inputs

    (a, b), c = meta_inputs(fam, problem, dtype)
    out = {}
    for name in mixes_of(config):
        try:
            ptx = bound_mix(fam, problem, a, b, c, config, hw, name, warmup=True)().asm["ptx"]
        except Exception as e:  # noqa: BLE001 - recorded, the rest go on
            out[name] = f"{type(e).__name__}: {str(e)[:200]}"
            continue
        out[name] = {"tma_loads": len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared", ptx)),
                     "cp_async": len(re.findall(r"cp\.async\.c[ag]\.shared", ptx)),
                     "tma_stores": len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.global", ptx)),
                     "st_v4": len(re.findall(r"st\.global\.v4", ptx)),
                     "ld_v4": len(re.findall(r"ld\.global\.v4", ptx))}
    return out


def probe(fam, problem: dict, dtype: str, config: dict, hw, rounds: int) -> dict:
    import torch

    a, b = fam.make_inputs(problem, dtype, "cuda")
    ref = fam.reference(problem, (a, b))
    c = fam.make_output(problem, dtype, "cuda")
    pa, pb = padded(a), padded(b)
    row = {"problem": problem, "dtype": dtype, "config": config, "rel_err": {}}
    runs = {"family": lambda: fam.bind(problem, (a, b), c, config, hw),
            "pad_ab": lambda: fam.bind(problem, (pa, pb), c, config, hw)}
    runs |= {m: (lambda m=m: bound_mix(fam, problem, a, b, c, config, hw, m)) for m in mixes_of(config)}
    timed = {"torch": lambda: torch.matmul(a, b)}
    for name, make in runs.items():
        checked(name, make, c, ref, fam.tolerance[dtype], row, timed)
    ms = median_times(timed, rounds)
    return row | {"ms": ms, "vs_family": {k: ms["family"] / v for k, v in ms.items() if "family" in ms},
                  "vs_torch": {k: ms["torch"] / v for k, v in ms.items()}}


@click.command()
@shape_options
@click.option("--unaligned", "unaligned_groups", default=0, show_default=True,
              help="also the N largest whole-space groups whose rows TMA refuses but vec may hint (pointer configs)")
@click.option("--compile", "compile_", is_flag=True,
              help="with --dry-run: also compile every mix for the H200 here and count its TMA and pointer loads")
@click.option("--out", default="load_probe.jsonl", show_default=True)
def main(previous: str, data: str, data_groups: int, unaligned_groups: int, rounds: int, dry_run: bool, compile_: bool,
         out: str) -> None:
    from costmodel import hardware
    from costmodel.kernels import get_family

    shapes_ = todo(previous, data, data_groups) + (unaligned(data, unaligned_groups) if unaligned_groups else [])
    if dry_run:
        if compile_:
            from triton.runtime import driver

            from costmodel.benchmark import target_only_driver

            driver.set_active(target_only_driver())
        for p, d, c, src in shapes_:
            row = {"problem": p, "dtype": d, "config": c, "from": src, "mixes": list(mixes_of(c))}
            if compile_:
                row["ptx"] = compiled(get_family("matmul"), p, d, c, hardware.KNOWN["nvidia-h200"])
            print(json.dumps(row), flush=True)
        return
    fam, hw = get_family("matmul"), hardware.current()
    write_rows(shapes_, out, lambda p, d, c: probe(fam, p, d, c, hw, rounds))


if __name__ == "__main__":
    main()
