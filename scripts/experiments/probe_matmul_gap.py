"""H200, 5120^3: where the gap to torch.matmul (cuBLAS) comes from. Times torch, the space's best config, a
128x256 one, and variants outside the space (persistent TMA with the C store split in two halves, which frees the
shared memory for a fourth stage at 128x256), alternating order, two ways: the benchmarker's short bursts (5 ms a
config, L2 flushed) and do_bench's sustained 100 ms. Then names the kernel cuBLAS runs (torch.profiler).

    PYTHONPATH=. python3 scripts/experiments/probe_matmul_gap.py [--out probe_matmul_gap.json]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import click
import torch
import triton
import triton.language as tl
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor

from costmodel import hardware
from costmodel.benchmark import time_callable
from costmodel.kernels import get_family
from costmodel.kernels.matmul import _tile_accumulate, _tile_coords

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib
from benchlib import alternating  # noqa: E402

PROBLEM = {"M": 5120, "N": 5120, "K": 5120}
SPACE_BEST = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "TMA": 1, "PERSISTENT": 1, "SPLIT_TAIL": 0,
              "num_warps": 4, "num_stages": 5}  # what the race's tune picked at 5120^3
SPACE_128x256 = dict(SPACE_BEST, BLOCK_N=256, num_warps=8, num_stages=3)
HALF_STORE = [(128, 256, 64, 8, 8, 4), (128, 256, 64, 8, 8, 3), (128, 256, 64, 16, 8, 4), (256, 128, 64, 8, 8, 4)]


@triton.jit
def half_store_kernel(a, b, c, M, N, K, num_programs, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, num_programs, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_accumulate(a, b, M, N, K, 0, 0, 0, 0, pid_m, pid_n, 0, tl.cdiv(K, BLOCK_K),
                               BLOCK_M, BLOCK_N, BLOCK_K, True)
        left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        c.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c.dtype))
        c.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c.dtype))


def half_store(a, b, c, hw, bm, bn, bk, group_m, warps, stages):
    M, K = a.shape
    N = b.shape[1]
    programs = min(triton.cdiv(M, bm) * triton.cdiv(N, bn), hw.sm_count)
    half_store_kernel[(programs,)](
        TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
        TensorDescriptor.from_tensor(c, [bm, bn // 2]), M, N, K, programs, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_M=group_m, num_warps=warps, num_stages=stages)


def probe(dtype: str, hw) -> dict:
    fam = get_family("matmul")
    a, b = fam.make_inputs(PROBLEM, dtype, "cuda")
    c = fam.make_output(PROBLEM, dtype, "cuda")
    ref = (a @ b).float()
    timed = {"torch": lambda: torch.matmul(a, b),
             "space_best_128x128": lambda: fam.launch(PROBLEM, (a, b), c, SPACE_BEST, hw),
             "space_128x256_s3": lambda: fam.launch(PROBLEM, (a, b), c, SPACE_128x256, hw)}
    notes = {}
    for args in HALF_STORE:
        name = "half_store_{}x{}x{}_g{}_w{}_s{}".format(*args)
        c.fill_(float("nan"))
        half_store(a, b, c, hw, *args)
        err = ((c.float() - ref).norm() / ref.norm()).item()
        if err < fam.tolerance[dtype]:
            timed[name] = lambda args=args: half_store(a, b, c, hw, *args)
        else:
            notes[name] = f"wrong result: rel_err {err}"
    short = alternating(timed, 8, lambda fn: statistics.median(time_callable(fn, "cuda", 5.0, 10, 200)[0]))
    sustained = alternating(timed, 4, lambda fn: do_bench(fn, return_mode="median"))
    names = list(timed)
    out = {k: {"short_ms": statistics.median(short[k]), "do_bench_ms": statistics.median(sustained[k])} for k in names}
    for k in names:
        out[k]["vs_torch_short"] = out["torch"]["short_ms"] / out[k]["short_ms"]
        out[k]["vs_torch_do_bench"] = out["torch"]["do_bench_ms"] / out[k]["do_bench_ms"]
    return {**out, **notes}


def cublas_kernels() -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    a, b = get_family("matmul").make_inputs(PROBLEM, "float16", "cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


@click.command()
@click.option("--out", default=os.path.join(os.environ.get("OUT", "."), "probe_matmul_gap.json"), show_default=True)
def main(out: str) -> None:
    hw = hardware.current()
    res = {dtype: probe(dtype, hw) for dtype in ("float16", "bfloat16")}
    res["cublas_kernels"] = cublas_kernels()
    print(json.dumps(res, indent=1))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
