"""y = (x - mean) / sqrt(var + 1e-5) * w + b over the last dim of an M x N matrix (see rowwise.py)."""

from __future__ import annotations

import triton
import triton.language as tl

from costmodel.kernels.base import Problem
from costmodel.kernels.rowwise import RowwiseFamily, load_chunk, load_vector, store_chunk

EPS = 1e-5
_EPS = tl.constexpr(EPS)


@triton.jit
def layernorm_single(x_rows, y_rows, row_mask, w, b, N, BLOCK_N: tl.constexpr):
    v, cols, col_mask = load_chunk(x_rows, 0, N, 0.0, BLOCK_N, False, "")
    d = tl.where(col_mask, v - tl.sum(v, axis=1, keep_dims=True) / N, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=1, keep_dims=True) / N + _EPS)
    y = d * rstd * load_vector(w, cols, col_mask, row_mask) + load_vector(b, cols, col_mask, row_mask)
    store_chunk(y_rows, cols, row_mask, col_mask, y)


@triton.jit
def layernorm_looped(x_rows, y_rows, row_mask, w, b, N, BLOCK_N: tl.constexpr, STAGES: tl.constexpr):
    # sums of x - x[0] and its square per element (shifting by the row's first value keeps the variance exact
    # when the mean is large), reduced once at the end ...
    shift = tl.load(x_rows).to(tl.float32)
    acc = tl.zeros((row_mask.shape[0], BLOCK_N), tl.float32)
    acc_sq = tl.zeros((row_mask.shape[0], BLOCK_N), tl.float32)
    for i in tl.range(0, tl.cdiv(N, BLOCK_N), num_stages=STAGES):
        v, cols, col_mask = load_chunk(x_rows, i, N, 0.0, BLOCK_N, False, "evict_last")
        d = tl.where(col_mask, v - shift, 0.0)
        acc += d
        acc_sq += d * d
    mean_d = tl.sum(acc, axis=1, keep_dims=True) / N
    rstd = tl.rsqrt(tl.maximum(tl.sum(acc_sq, axis=1, keep_dims=True) / N - mean_d * mean_d, 0.0) + _EPS)
    mean = shift + mean_d
    # ... then normalise, last chunk first
    for i in tl.range(0, tl.cdiv(N, BLOCK_N), num_stages=STAGES):
        v, cols, col_mask = load_chunk(x_rows, i, N, 0.0, BLOCK_N, True, "evict_first")
        y = (v - mean) * rstd * load_vector(w, cols, col_mask, row_mask) + load_vector(b, cols, col_mask, row_mask)
        store_chunk(y_rows, cols, row_mask, col_mask, y)


class LayerNorm(RowwiseFamily):
    name = "layernorm"
    passes = (layernorm_single, layernorm_looped)
    # the module text data/ holds its rows under (before the kernel hash)
    recorded_as = {"815a688e4c95d26e": ("9ee34e5e9fb75a7b",)}
    vectors = 2
    looped_accumulators = 2  # sums of x and x^2
    flops_per_element = 8  # sum, subtract, square, sum, scale, weight, bias (+ the reductions)

    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        M, N = problem["M"], problem["N"]
        return self.randn([(M, N), (N,), (N,)], dtype, device, seed)

    def reference(self, problem: Problem, inputs: tuple):
        import torch.nn.functional as F

        x, w, b = (t.float() for t in inputs)
        return F.layer_norm(x, (problem["N"],), w, b, EPS)
