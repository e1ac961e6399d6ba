"""Flash-attention forward, O = softmax(Q K^T / sqrt(D)) V, for contiguous (B, H, S, D) q, k, v and out.

The kernel follows Triton's tutorial 06 (FlashAttention-2): one program per (query block, batch*head) on a
grid (cdiv(S, BLOCK_M), B*H); the Q tile is loaded once, K and V tiles are streamed through a pipelined loop
with an online softmax in fp32 (exp2, log2(e) folded into the scale) and tl.dot into an fp32 accumulator.

Masking is confined to the blocks that need it, so the bulk of the loop carries none:
- causal: keys [0, diag) are fully visible (no mask), keys [diag, end of the query block) get the causal mask;
- not causal: the whole key blocks run unmasked, a ragged last block (S % BLOCK_N) masks keys past S.
Query rows past S are computed on harmless data and never stored.

``TMA`` selects host-side tensor descriptors over the flattened (B*H*S, D) tensors instead of pointer loads.
A descriptor tile that crosses S reads the next head's rows (or zeros past the end): those keys are masked
like any key past S, and the ragged last query block is stored through masked pointers, not the descriptor.
"""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels.base import (DTYPE_BYTES, Cols, Config, KernelFamily, Knob, Launch, Problem, busiest_sm_steps,
                                    int_specialisation, rand_generator, resident_programs, torch_dtype)


@triton.jit
def _kv_loop(acc, l_i, m_i, q, k, v, kv_row0, lo, hi, S, offs_m, qk_scale,
             BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr, TMA: tl.constexpr):
    """Fold keys [lo, hi) into the running softmax. MASK 0: none; 1: causal; 2: keys past S."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        keys = start_n + offs_n
        if TMA:
            k_tile = k.load([kv_row0 + start_n, 0])
            v_tile = v.load([kv_row0 + start_n, 0])
        else:
            offs = keys[:, None] * HEAD_DIM + offs_d[None, :]
            if MASK:
                k_tile = tl.load(k + offs, mask=keys[:, None] < S, other=0.0)
                v_tile = tl.load(v + offs, mask=keys[:, None] < S, other=0.0)
            else:
                k_tile = tl.load(k + offs)
                v_tile = tl.load(v + offs)
        qk = tl.dot(q, k_tile.T)
        if MASK:
            if MASK == 1:
                keep = offs_m[:, None] >= keys[None, :]
            else:
                keep = keys[None, :] < S
            qk = qk * qk_scale + tl.where(keep, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v_tile.dtype), v_tile, acc * alpha[:, None])
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _store_rows(o, out, rows, S, HEAD_DIM: tl.constexpr):
    offs_d = tl.arange(0, HEAD_DIM)
    tl.store(o + rows[:, None] * HEAD_DIM + offs_d[None, :], out, mask=rows[:, None] < S)


@triton.jit
def attention_kernel(q, k, v, o, o_desc, S, qk_scale,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                     CAUSAL: tl.constexpr, TMA: tl.constexpr):
    # with TMA, q, k, v are descriptors over (B*H*S, D) and o_desc one over the output; o is always a pointer
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    kv_row0 = bh * S
    head = bh.to(tl.int64) * S * HEAD_DIM
    o += head
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if TMA:
        q_tile = q.load([kv_row0 + start_m * BLOCK_M, 0])
    else:
        q += head
        k += head
        v += head
        offs_d = tl.arange(0, HEAD_DIM)
        q_tile = tl.load(q + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=rows[:, None] < S, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        diag = start_m * BLOCK_M // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q_tile, k, v, kv_row0, 0, diag, S, rows, qk_scale,
                                 BLOCK_N, HEAD_DIM, 0, TMA)
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q_tile, k, v, kv_row0, diag, tl.minimum((start_m + 1) * BLOCK_M, S),
                                 S, rows, qk_scale, BLOCK_N, HEAD_DIM, 1, TMA)
    else:
        full = S // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q_tile, k, v, kv_row0, 0, full, S, rows, qk_scale,
                                 BLOCK_N, HEAD_DIM, 0, TMA)
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q_tile, k, v, kv_row0, full, S, S, rows, qk_scale,
                                 BLOCK_N, HEAD_DIM, 2, TMA)

    out = (acc / l_i[:, None]).to(o.dtype.element_ty)
    if TMA:
        if (start_m + 1) * BLOCK_M <= S:
            o_desc.store([kv_row0 + start_m * BLOCK_M, 0], out)
        else:
            _store_rows(o, out, rows, S, HEAD_DIM)
    else:
        _store_rows(o, out, rows, S, HEAD_DIM)


# FLOPs of the largest problem drawn: B4 H32 S4096 D128 (4 * B*H*S*S*D)
_MAX_BHSSD = 4 * 32 * 4096 * 4096 * 128


def _fit(b: int, h: int, s: int, d: int) -> tuple[int, int]:
    """Shrink batch, then heads, until B*H*S*S*D is within the largest problem's size."""
    while b * h * s * s * d > _MAX_BHSSD and b > 1:
        b //= 2
    while b * h * s * s * d > _MAX_BHSSD and h > 1:
        h //= 2
    return b, h


class Attention(KernelFamily):
    name = "attention"
    dims = ("B", "H", "S", "D", "CAUSAL")
    knobs = (
        Knob("BLOCK_M", (64, 128), tile=True),
        Knob("BLOCK_N", (32, 64, 128), tile=True),
        Knob("TMA", (0, 1)),
        Knob("num_warps", (4, 8), detail=True),
        Knob("num_stages", (2, 3, 4), detail=True),
    )
    # the module text data/ holds its rows under (before the kernel hash)
    recorded_as = {"c83d6efb1db38449": ("02310c31d6714787",)}

    def min_dim(self, dim: str) -> int:
        return 0 if dim == "CAUSAL" else 1

    def check_problem_extra(self, problem: Problem) -> None:
        if problem["D"] not in (64, 128):
            raise CostModelError(f"attention: head dim D={problem['D']} not supported; choose 64 or 128")
        if problem["CAUSAL"] not in (0, 1):
            raise CostModelError(f"attention: CAUSAL={problem['CAUSAL']} must be 0 or 1")

    def problems(self, rng: np.random.Generator, n: int) -> list[Problem]:
        out = []
        for _ in range(n):
            kind = rng.choice(["prefill", "long", "odd", "short"], p=[0.45, 0.1, 0.25, 0.2])
            d = int(rng.choice([64, 128]))
            if kind == "prefill":  # LLM prefill
                b, h = int(rng.choice([1, 2, 4, 8])), int(rng.choice([8, 12, 16, 32, 40, 64]))
                s = int(rng.choice([512, 1024, 2048, 3072, 4096, 8192, 16384]))
            elif kind == "long":
                b, h, s = 1, int(rng.choice([4, 8, 16])), int(rng.choice([8192, 12288, 16384]))
            elif kind == "odd":  # ragged sequence lengths: not multiples of 16 or of any block
                b, h = int(rng.integers(1, 5)), int(rng.choice([4, 8, 16, 32]))
                s = int(rng.choice([int(rng.integers(17, 6000)), int(rng.choice([77, 1000, 2049, 3001]))]))
            else:  # small batch, short sequences (decode-like chunks)
                b, h = int(rng.integers(1, 9)), int(rng.choice([8, 16, 32, 64]))
                s = int(rng.choice([int(rng.integers(1, 513)), int(rng.choice([64, 128, 256, 512]))]))
            b, h = _fit(b, h, s, d)
            out.append({"B": b, "H": h, "S": s, "D": d, "CAUSAL": int(rng.integers(0, 2))})
        return out

    def smem_bytes(self, problem: Problem, dtype: str, config: Config) -> int:
        return int(_smem({**problem, **config, "e": DTYPE_BYTES[dtype]}))

    def is_valid(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> bool:
        if self.smem_bytes(problem, dtype, config) > hw.smem_per_block:
            return False
        # fp32 registers per thread for the accumulator (BM x D) and the scores (BM x BN): every config over 128
        # spills, or sits at ptxas's 255-register cap, in some variant on sm_90
        bm = config["BLOCK_M"]
        return (bm * problem["D"] + bm * config["BLOCK_N"]) // (32 * config["num_warps"]) <= 128

    def default_config(self, problem: Problem, dtype: str, hw: HardwareRecord) -> Config:
        # the tutorial's long-standing hard-coded choice (before it was autotuned)
        if problem["D"] <= 64:
            return {"BLOCK_M": 128, "BLOCK_N": 64, "TMA": 0, "num_warps": 4, "num_stages": 4}
        return {"BLOCK_M": 128, "BLOCK_N": 32, "TMA": 0, "num_warps": 8, "num_stages": 3}

    def compile_key(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> tuple:
        return (dtype, tuple(sorted(config.items())), problem["D"], problem["CAUSAL"], *int_specialisation(problem["S"]))

    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        import torch

        g = rand_generator(device, seed)
        shape = (problem["B"], problem["H"], problem["S"], problem["D"])
        return tuple(torch.randn(shape, device=device, generator=g).to(torch_dtype(dtype)) for _ in range(3))

    def make_output(self, problem: Problem, dtype: str, device: str):
        import torch

        shape = (problem["B"], problem["H"], problem["S"], problem["D"])
        return torch.empty(shape, device=device, dtype=torch_dtype(dtype))

    def reference(self, problem: Problem, inputs: tuple):
        import torch.nn.functional as F

        q, k, v = (t.float() for t in inputs)
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(problem["CAUSAL"]))

    def launches(self, problem: Problem, inputs: tuple, out, config: Config, hw: HardwareRecord) -> list[Launch]:
        q, k, v = inputs
        B, H, S, D = problem["B"], problem["H"], problem["S"], problem["D"]
        bm, bn = config["BLOCK_M"], config["BLOCK_N"]
        if config["TMA"]:
            from triton.tools.tensor_descriptor import TensorDescriptor

            def desc(t, block):
                return TensorDescriptor.from_tensor(t.view(B * H * S, D), [block, D])

            args = (desc(q, bm), desc(k, bn), desc(v, bn), out, desc(out, bm))
        else:
            args = (q, k, v, out, None)
        args += (S, 1.44269504 / math.sqrt(D))
        kwargs = dict(BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=D, CAUSAL=problem["CAUSAL"], TMA=config["TMA"],
                      num_warps=config["num_warps"], num_stages=config["num_stages"])
        return [Launch(attention_kernel, (triton.cdiv(S, bm), B * H), args, kwargs)]

    def terms(self, c: Cols) -> Cols:
        B, H, S, D, e = c["B"], c["H"], c["S"], c["D"], c["e"]
        bm, bn = c["BLOCK_M"], c["BLOCK_N"]
        tiles = np.ceil(S / bm) * B * H
        # keys a query block visits: all of them, or under the causal mask about half plus the diagonal block
        kv = np.where(c["CAUSAL"] > 0, np.minimum(S, (S + bm) / 2), S)
        elems = bm * (D + bn) / (32 * c["num_warps"])
        smem, regs = _smem(c), np.minimum(255.0, 32 + elems)
        pad_rows, pad_loop = np.ceil(S / bm) * bm / S, np.ceil(S / bn) * bn / S
        return {
            "tiles": tiles,
            "programs": tiles,
            "smem": smem,
            "regs": regs,
            "occupancy": resident_programs(c, smem, regs),
            "loop_trips": np.ceil(kv / bn),
            "critical_steps": busiest_sm_steps(c, tiles, np.ceil(kv / bn)),
            "loop_remainder": np.mod(S, bn) / bn,
            "elems_per_thread": elems,
            "bytes_per_tile": (2 * bm * D + 2 * kv * D) * e,
            "flops_per_tile": 4 * bm * kv * D,
            "padding": pad_rows * pad_loop,
            "pad_rows": pad_rows, "pad_cols": np.ones_like(pad_rows), "pad_loop": pad_loop,
            "flops": self.flops(c),
            "min_bytes": _bytes(c),
            "tma_ok": (np.mod(D * e, 16) == 0) * 1.0,  # rows of D values: always, for the head dims supported
        }

    def flops(self, problem: Problem) -> float:
        f = 4.0 * problem["B"] * problem["H"] * problem["S"] * problem["S"] * problem["D"]
        return f / (1 + (problem["CAUSAL"] > 0))  # the causal mask skips about half

    def min_bytes(self, problem: Problem, dtype: str) -> float:
        return float(_bytes({**problem, "e": DTYPE_BYTES[dtype]}))


def _smem(c: Cols):
    """Q tile + num_stages K and V tiles (the TMA epilogue reuses them; its barriers take under 1 KB): what Triton
    3.6 allocates for sm_90."""
    return (c["BLOCK_M"] * c["D"] + c["num_stages"] * 2 * c["BLOCK_N"] * c["D"]) * c["e"] + 1024 * c["TMA"]


def _bytes(c: Cols):
    return 4 * c["e"] * c["B"] * c["H"] * c["S"] * c["D"]
