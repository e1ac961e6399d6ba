"""Row softmax of an M x N matrix, float32 statistics; rows up to a vocabulary long (see rowwise.py)."""

from __future__ import annotations

import triton
import triton.language as tl

from costmodel.kernels.base import Problem
from costmodel.kernels.rowwise import RowwiseFamily, load_chunk, store_chunk


@triton.jit
def softmax_single(x_rows, y_rows, row_mask, w, b, N, BLOCK_N: tl.constexpr):
    v, cols, col_mask = load_chunk(x_rows, 0, N, float("-inf"), BLOCK_N, False, "")
    e = tl.exp(v - tl.max(v, axis=1, keep_dims=True))
    store_chunk(y_rows, cols, row_mask, col_mask, e * (1.0 / tl.sum(e, axis=1, keep_dims=True)))


@triton.jit
def softmax_looped(x_rows, y_rows, row_mask, w, b, N, BLOCK_N: tl.constexpr, STAGES: tl.constexpr):
    # online max and sum, one chunk at a time (chunks are kept in L2 for the second read) ...
    m = tl.full(row_mask.shape, float("-inf"), tl.float32)
    s = tl.zeros(row_mask.shape, tl.float32)
    for i in tl.range(0, tl.cdiv(N, BLOCK_N), num_stages=STAGES):
        v, cols, col_mask = load_chunk(x_rows, i, N, float("-inf"), BLOCK_N, False, "evict_last")
        m_new = tl.maximum(m, tl.max(v, axis=1, keep_dims=True))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(v - m_new), axis=1, keep_dims=True)
        m = m_new
    # ... then normalise, last chunk first
    inv = 1.0 / s
    for i in tl.range(0, tl.cdiv(N, BLOCK_N), num_stages=STAGES):
        v, cols, col_mask = load_chunk(x_rows, i, N, float("-inf"), BLOCK_N, True, "evict_first")
        store_chunk(y_rows, cols, row_mask, col_mask, tl.exp(v - m) * inv)


class Softmax(RowwiseFamily):
    name = "softmax"
    passes = (softmax_single, softmax_looped)
    # the module text data/ holds its rows under (before the kernel hash)
    recorded_as = {"92ecb88d92e9cd82": ("19d74686729c65c9",)}
    flops_per_element = 5  # max, subtract, exp, sum, scale
    long_rows = (32000, 50257, 128256)  # vocabularies: LLaMA-2, GPT-2, LLaMA-3

    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        return self.randn([(problem["M"], problem["N"])], dtype, device, seed)

    def reference(self, problem: Problem, inputs: tuple):
        import torch

        return torch.softmax(inputs[0].float(), dim=-1)
