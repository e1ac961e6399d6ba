"""y = x / sqrt(mean(x^2) + 1e-6) * w over the last dim of an M x N matrix (see rowwise.py)."""

from __future__ import annotations

import triton
import triton.language as tl

from costmodel.kernels.base import Problem
from costmodel.kernels.rowwise import RowwiseFamily, load_chunk, load_vector, store_chunk

EPS = 1e-6
_EPS = tl.constexpr(EPS)


@triton.jit
def rmsnorm_single(x_rows, y_rows, row_mask, w, b, N, BLOCK_N: tl.constexpr):
    v, cols, col_mask = load_chunk(x_rows, 0, N, 0.0, BLOCK_N, False, "")
    rstd = tl.rsqrt(tl.sum(v * v, axis=1, keep_dims=True) / N + _EPS)
    store_chunk(y_rows, cols, row_mask, col_mask, v * rstd * load_vector(w, cols, col_mask, row_mask))


@triton.jit
def rmsnorm_looped(x_rows, y_rows, row_mask, w, b, N, BLOCK_N: tl.constexpr, STAGES: tl.constexpr):
    # squares summed per element, reduced once at the end ...
    acc_sq = tl.zeros((row_mask.shape[0], BLOCK_N), tl.float32)
    for i in tl.range(0, tl.cdiv(N, BLOCK_N), num_stages=STAGES):
        v, cols, col_mask = load_chunk(x_rows, i, N, 0.0, BLOCK_N, False, "evict_last")
        acc_sq += v * v
    rstd = tl.rsqrt(tl.sum(acc_sq, axis=1, keep_dims=True) / N + _EPS)
    # ... then normalise, last chunk first
    for i in tl.range(0, tl.cdiv(N, BLOCK_N), num_stages=STAGES):
        v, cols, col_mask = load_chunk(x_rows, i, N, 0.0, BLOCK_N, True, "evict_first")
        store_chunk(y_rows, cols, row_mask, col_mask, v * rstd * load_vector(w, cols, col_mask, row_mask))


class RMSNorm(RowwiseFamily):
    name = "rmsnorm"
    passes = (rmsnorm_single, rmsnorm_looped)
    # the module text data/ holds its rows under (before the kernel hash)
    recorded_as = {"0be36ae39bafb536": ("29620dc3fea7ae5a",)}
    vectors = 1
    looped_accumulators = 1  # sum of x^2
    flops_per_element = 5  # square, sum, scale, weight (+ the reduction)

    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        M, N = problem["M"], problem["N"]
        return self.randn([(M, N), (N,)], dtype, device, seed)

    def reference(self, problem: Problem, inputs: tuple):
        import torch

        x, w = (t.float() for t in inputs)
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w
