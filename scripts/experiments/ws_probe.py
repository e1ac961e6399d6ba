"""Session 9, issue 17: does Hopper warp specialisation run, and pay, on the H200 with descriptors made on the device?

The family's persistent TMA loop marked ``warp_specialize`` (host descriptors, C stored through pointers; commit
f241993) compiled to a producer and two consumer warpgroups and hung at its first launch on the H200
(`scripts/results/ws_hang-h200-2026-12-01-s9.txt`). Triton's own Hopper runs pass warp specialisation only with
descriptors made in the kernel (``tl.make_tensor_descriptor``), which this probe's kernel uses (it compiles for sm_90
to 12 warps with setmaxnreg, checked on the CPU). Per shape and config: one call under a watchdog (a hang prints the
stacks and ends the process; the rows before it are kept), the result against torch, then do_bench (L2 flushed) in
alternating rounds against torch.matmul and, with ``--previous``, the family's best config from a
`bench_matmul_gap.py` row, all in this one call. Rows are appended to --out. Usage on a GPU host:

    PYTHONPATH=. timeout 300 python3 scripts/experiments/ws_probe.py [--previous rows.jsonl] [--out ws_probe.jsonl]
"""

from __future__ import annotations

import faulthandler
import json
import statistics
import sys
from pathlib import Path

import click
import triton
import triton.language as tl

from costmodel.kernels.matmul import _tile_coords

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib
from benchlib import alternating, best_by_shape, log, shape_key  # noqa: E402

SHAPES = (({"M": 3000, "N": 5000, "K": 1000}, "bfloat16"), ({"M": 10000, "N": 2000, "K": 3000}, "float16"),
          ({"M": 6000, "N": 6000, "K": 6000}, "float16"), ({"M": 8192, "N": 3072, "K": 1000}, "bfloat16"))
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages): within 227 KiB of shared memory with C staged whole
CONFIGS = ((128, 256, 64, 3), (128, 128, 64, 4), (256, 128, 64, 3), (128, 128, 128, 3))


@triton.jit
def ws_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, WS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=False, warp_specialize=WS):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def call_of(a, b, c, cfg: tuple, ws: bool, sms: int):
    bm, bn, bk, stages = cfg
    tiles = triton.cdiv(a.shape[0], bm) * triton.cdiv(b.shape[1], bn)
    return lambda: ws_matmul[(min(sms, tiles),)](a, b, c, a.shape[0], b.shape[1], a.shape[1], BLOCK_M=bm, BLOCK_N=bn,
                                                 BLOCK_K=bk, GROUP_M=8, NUM_SMS=sms, WS=ws, num_warps=4,
                                                 num_stages=stages)


@click.command()
@click.option("--previous", default=None, type=click.Path(exists=True, dir_okay=False),
              help="bench_matmul_gap.py rows: race each shape's best config of the family too")
@click.option("--watchdog", default=30, show_default=True, help="seconds one config's first call may take")
@click.option("--rounds", default=6, show_default=True)
@click.option("--out", default="ws_probe.jsonl", show_default=True)
def main(previous: str | None, watchdog: int, rounds: int, out: str) -> None:
    import torch
    from triton.testing import do_bench

    from costmodel import hardware
    from costmodel.kernels import get_family

    triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    hw, fam = hardware.current(), get_family("matmul")
    former = best_by_shape(previous)
    with open(out, "a") as sink:
        for problem, dtype in SHAPES:
            a, b = fam.make_inputs(problem, dtype, "cuda")
            c, ref = fam.make_output(problem, dtype, "cuda"), (a @ b).float()
            best = former.get(shape_key(problem, dtype), {}).get("best_config")
            for cfg in CONFIGS:
                for ws in (False, True):
                    faulthandler.dump_traceback_later(watchdog, exit=True)
                    fn = call_of(a, b, c, cfg, ws, hw.sm_count)
                    c.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    faulthandler.cancel_dump_traceback_later()
                    err = float((c.float() - ref).norm() / ref.norm())
                    row = {"problem": problem, "dtype": dtype, "config": cfg, "ws": ws, "rel_err": err}
                    if err <= fam.tolerance[dtype]:
                        timed = {"probe": fn, "torch": lambda: torch.matmul(a, b)}
                        if best:
                            timed["family_best"] = fam.bind(problem, (a, b), fam.make_output(problem, dtype, "cuda"),
                                                            best, hw)
                        ms = {k: statistics.median(v) for k, v in
                              alternating(timed, rounds, lambda f: do_bench(f, return_mode="median")).items()}
                        row |= {"ms": ms, "probe_vs_torch": ms["torch"] / ms["probe"],
                                **({"family_best_vs_torch": ms["torch"] / ms["family_best"]} if best else {})}
                    log(json.dumps(row))
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()


if __name__ == "__main__":
    main()
