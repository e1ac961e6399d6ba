"""What the row-wise reductions (softmax, layernorm, rmsnorm) share: one kernel skeleton, config space, problems,
launcher and costs. A family module adds only its two row passes (jit functions), its inputs and its reference.

Each program handles ``ROWS`` whole rows of an M x N matrix as a 2D ``[ROWS, BLOCK_N]`` block. When a row fits
in one block (``BLOCK_N >= N``) the family's *single* pass loads it once, reduces and writes it; a longer row is
*looped* over in ``BLOCK_N`` chunks: a statistics pass, then a write pass that walks the chunks backwards so the
most recently read ones are still in cache. ``PERSISTENT`` launches a grid of about as many programs as the GPU
holds at once, each looping over row blocks (and ``num_stages`` then prefetches the next block's rows).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import triton
import triton.language as tl

from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels.base import (DTYPE_BYTES, Cols, Config, KernelFamily, Knob, Launch, Problem, busiest_sm_steps,
                                    rand_generator, resident_programs, row_cols, torch_dtype)


@triton.jit
def row_range(M, ROWS: tl.constexpr, PERSISTENT: tl.constexpr):
    """First, end and step of this program's row blocks: all of them grid-strided, or its own one."""
    pid = tl.program_id(0)
    if PERSISTENT:
        end = tl.cdiv(M, ROWS)
        step = tl.num_programs(0)
    else:
        end = pid + 1
        step = 1
    return pid, end, step


@triton.jit
def row_block(x, y, rb, M, stride_x, stride_y, ROWS: tl.constexpr):
    """[ROWS, 1] row pointers into x and y for row block ``rb`` and the mask of rows that exist. Rows past M
    read the last row instead (loads stay unmasked along rows, no NaN from empty rows); only stores mask them."""
    rows = rb * ROWS + tl.arange(0, ROWS)[:, None]
    row_mask = rows < M
    rows = tl.where(row_mask, rows, M - 1).to(tl.int64)
    return x + rows * stride_x, y + rows * stride_y, row_mask


@triton.jit
def load_chunk(x_rows, i, N, other, BLOCK_N: tl.constexpr, REVERSE: tl.constexpr, EVICT: tl.constexpr):
    """Chunk ``i`` (counted from the row's end with ``REVERSE``) of the rows, in float32, with its [1, BLOCK_N]
    column offsets and mask; masked columns read ``other``."""
    if REVERSE:
        start = (tl.cdiv(N, BLOCK_N) - 1 - i) * BLOCK_N
    else:
        start = i * BLOCK_N
    cols = start + tl.arange(0, BLOCK_N)[None, :]
    col_mask = cols < N
    v = tl.load(x_rows + cols, mask=col_mask, other=other, eviction_policy=EVICT).to(tl.float32)
    return v, cols, col_mask


@triton.jit
def load_vector(w, cols, col_mask, row_mask):
    """A length-N parameter vector's chunk in float32, loaded as [ROWS, BLOCK_N] (rows repeat, from L1): a
    [1, BLOCK_N] load gets a layout of its own and Triton would convert the whole tile through shared memory."""
    shape: tl.constexpr = (row_mask.shape[0], cols.shape[1])
    return tl.load(tl.broadcast_to(w + cols, shape), mask=tl.broadcast_to(col_mask, shape), other=0.0).to(tl.float32)


@triton.jit
def store_chunk(y_rows, cols, row_mask, col_mask, value):
    tl.store(y_rows + cols, value.to(y_rows.dtype.element_ty), mask=row_mask & col_mask)


@triton.jit(do_not_specialize=["M", "N_div", "stride_x_div", "stride_y_div"])
def rowwise_kernel(x, w, b, y, M, N_div, stride_x_div, stride_y_div, SINGLE_PASS: tl.constexpr,
                   LOOPED_PASS: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr, SINGLE: tl.constexpr,
                   PERSISTENT: tl.constexpr, ALIGN: tl.constexpr, STAGES: tl.constexpr):
    # N and the row strides arrive divided by ALIGN (their largest power-of-two divisor up to 16) and no int is
    # specialised: multiplying back tells the compiler their alignment, so loads vectorise for N = 1000 as for
    # N = 1024, and one binary serves every M and N of the same ALIGN
    N = N_div * ALIGN
    stride_x = stride_x_div * ALIGN
    stride_y = stride_y_div * ALIGN
    # STAGES pipelines the innermost loop's loads: the row-block loop's for a single pass, the chunk loops' for a
    # looped one (Triton pipelines loads that feed no dot only in loops given num_stages explicitly)
    first, end, step = row_range(M, ROWS, PERSISTENT)
    for rb in tl.range(first, end, step, num_stages=STAGES if SINGLE else 1):
        x_rows, y_rows, row_mask = row_block(x, y, rb, M, stride_x, stride_y, ROWS)
        if SINGLE:
            SINGLE_PASS(x_rows, y_rows, row_mask, w, b, N, BLOCK_N)
        else:
            LOOPED_PASS(x_rows, y_rows, row_mask, w, b, N, BLOCK_N, STAGES)


def next_pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _align(c: Cols):
    """The largest power of two up to 16 dividing N (row or column-wise): rows start that aligned."""
    return np.gcd(np.asarray(c["N"]).astype(np.int64), 16)


def align_of(*values: int) -> int:
    """Largest power of two up to 16 dividing every value."""
    g = math.gcd(16, *values)
    return g & -g


# LLM shapes: rows are tokens (prefill, decode batches, odd counts), N a hidden size (odd ones too)
_HIDDEN = (1024, 2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192, 12288, 16384)
_ODD_HIDDEN = (1000, 1536, 3001, 4000, 5000, 6000, 10000, 11008, 13824)
_TOKENS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
_MAX_ELEMENTS = 1 << 28


class RowwiseFamily(KernelFamily):
    """A row-wise reduction over the last dim of an M x N matrix; subclasses set name, ``passes`` (the single
    and looped row passes), ``vectors`` (length-N parameters: weight, bias), ``looped_accumulators``,
    ``flops_per_element`` and ``long_rows`` (extra row lengths the generator draws, e.g. vocab sizes)."""

    dims = ("M", "N")
    knobs = (
        Knob("BLOCK_N", (256, 512, 1024, 2048, 4096, 8192, 16384, 32768), tile=True),  # 64K would spill at any width
        Knob("ROWS", (1, 2, 4, 8, 16), tile=True),
        Knob("PERSISTENT", (0, 1)),
        Knob("num_warps", (1, 2, 4, 8, 16, 32), detail=True),
        Knob("num_stages", (1, 2, 3), detail=True),
    )
    passes: ClassVar[tuple]
    vectors: ClassVar[int] = 0
    flops_per_element: ClassVar[int]
    long_rows: ClassVar[tuple[int, ...]] = ()
    looped_accumulators: ClassVar[int] = 0  # float32 values the looped pass keeps per row value

    MIN_PER_THREAD = 2  # row values per thread; below it threads would hold copies of the same elements
    MIN_PER_THREAD_LOOPED = 8  # a chunk of fewer than 8 values per thread gives short, latency-bound loops
    MAX_PER_THREAD = 64
    MAX_PER_THREAD_LOOPED = 32  # larger chunks buy nothing over a single pass (and spill)
    MAX_CHUNKS = 8  # a looped row takes at most this many chunks, or as many as 8192-element chunks take
    MAX_N = 1 << 20

    # --- problems -------------------------------------------------------------------------------------
    def problems(self, rng: np.random.Generator, n: int) -> list[Problem]:
        out = []
        kinds, p = ["prefill", "decode", "odd"], [0.5, 0.25, 0.25]
        if self.long_rows:
            kinds, p = kinds + ["long"], [0.35, 0.2, 0.2, 0.25]
        for _ in range(n):
            kind = rng.choice(kinds, p=p)
            n_ = int(rng.choice(_HIDDEN))
            if kind == "prefill":
                m = int(rng.choice(_TOKENS))
            elif kind == "decode":
                m = int(rng.choice([1, 2, 4, 8, 16, 32, 64, int(rng.integers(1, 65))]))
            elif kind == "odd":  # token counts and widths that are not multiples of 16
                m = int(rng.integers(65, 20000))
                n_ = int(rng.choice([n_, int(rng.choice(_ODD_HIDDEN)), int(rng.integers(1000, 16385))]))
            else:  # rows over a vocabulary: fewer of them
                n_ = int(rng.choice(self.long_rows))
                m = int(rng.choice([1, 7, 32, 128, 512, 1000, 2048]))
            out.append({"M": max(1, min(m, _MAX_ELEMENTS // n_)), "N": n_})
        return out

    def check_problem_extra(self, problem: Problem) -> None:
        if problem["N"] > self.MAX_N:
            raise CostModelError(f"{self.name}: rows of N={problem['N']} are longer than the {self.MAX_N} supported")

    # --- config space ---------------------------------------------------------------------------------
    @staticmethod
    def single_block(N: int) -> int:
        """The one BLOCK_N a single pass uses: the smallest knob value covering the row."""
        return max(256, next_pow2(N))

    @staticmethod
    def per_thread(config: Config) -> float:
        return config["ROWS"] * config["BLOCK_N"] / (32 * config["num_warps"])

    def registers_of(self, c: Cols):
        """Estimated registers per thread: the float32 row values (plus the looped pass's accumulators), doubled
        where rows are too unaligned for 8-byte vector loads (one address per element), and two per row of
        statistics. Fitted to ptxas -v on sm_90 (Triton 3.6) over ~5000 configs of the three families: under the
        cap (65536 / threads, at most 255) few configs spill, and those under 150 bytes."""
        looped = c["BLOCK_N"] < c["N"]
        narrow = _align(c) * c["e"] < 8
        values = self.per_thread(c) * (1 + looped * self.looped_accumulators) * (1 + narrow)
        return np.floor(16 + 2 * c["ROWS"] + values)

    @staticmethod
    def register_cap_of(c: Cols):
        return np.minimum(255, np.floor(65536 / (32 * c["num_warps"])))

    def smem_of(self, c: Cols):
        """Buffers of pipelined loads (num_stages - 1 chunks of the rows and of each parameter vector, loaded at
        the rows' shape: what Triton allocates), the cross-warp reduction scratch and, for the norms on rows not
        16-byte aligned, the output tile's layout conversion (its loads and the aligned parameter loads get
        different layouts)."""
        bn, rows = c["BLOCK_N"], c["ROWS"]
        convert = (self.vectors > 0) * (_align(c) * c["e"] < 16) * rows * bn * 4
        return (c["num_stages"] - 1) * rows * (1 + self.vectors) * bn * c["e"] + 8 * rows * c["num_warps"] + convert

    def resident_of(self, c: Cols):
        """Programs one SM holds at once (warp slots, estimated registers, shared memory): a persistent grid
        is this many per SM."""
        return resident_programs(c, self.smem_of(c), np.minimum(self.registers_of(c), self.register_cap_of(c)))

    def programs_of(self, c: Cols):
        blocks = np.ceil(c["M"] / c["ROWS"])
        return np.where(c["PERSISTENT"] > 0, np.minimum(blocks, c["sm_count"] * self.resident_of(c)), blocks)

    def registers(self, problem: Problem, dtype: str, config: Config) -> int:
        return int(self.registers_of({**problem, **config, "e": DTYPE_BYTES[dtype]}))

    @staticmethod
    def register_cap(config: Config) -> int:
        return int(RowwiseFamily.register_cap_of(config))

    def smem_bytes(self, problem: Problem, dtype: str, config: Config) -> int:
        return int(self.smem_of({**problem, **config, "e": DTYPE_BYTES[dtype]}))

    def resident(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> int:
        return int(self.resident_of(row_cols(problem, dtype, config, hw)))

    def programs(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> int:
        return int(self.programs_of(row_cols(problem, dtype, config, hw)))

    def is_valid(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> bool:
        M, N = problem["M"], problem["N"]
        bn, per_thread = config["BLOCK_N"], self.per_thread(config)
        if config["ROWS"] > next_pow2(M) or not self.MIN_PER_THREAD <= per_thread <= self.MAX_PER_THREAD:
            return False
        # num_stages pipelines loads through cp.async (4 bytes at least) and only matters where there is a loop
        if config["num_stages"] > 1:
            if align_of(N) * DTYPE_BYTES[dtype] < 4 or (bn >= N and not config["PERSISTENT"]):
                return False
        if bn >= N:
            if bn != self.single_block(N):  # single pass: only the smallest covering block
                return False
        elif bn < min(next_pow2(triton.cdiv(N, self.MAX_CHUNKS)), 8192) or not (
                self.MIN_PER_THREAD_LOOPED <= per_thread <= self.MAX_PER_THREAD_LOOPED):
            return False
        if self.registers(problem, dtype, config) > self.register_cap(config):
            return False
        if self.smem_bytes(problem, dtype, config) > hw.smem_per_block:
            return False
        # persistent only where it differs from one block per program: more row blocks than programs
        return not config["PERSISTENT"] or triton.cdiv(M, config["ROWS"]) > self.programs(problem, dtype, config, hw)

    def default_config(self, problem: Problem, dtype: str, hw: HardwareRecord) -> Config:
        # the rule users copy (Triton tutorial 02, unsloth's calculate_settings): the whole row in one block, warps
        # growing with it; longer rows loop in 32K chunks with 32 warps (Liger's cross-entropy), or where that
        # would spill in 16K, 8K or 4K chunks with 16 warps
        bn = min(self.single_block(problem["N"]), 32768)
        warps = 32 if bn >= 32768 else 16 if bn >= 8192 else 8 if bn >= 2048 else 4
        candidates = [{"BLOCK_N": bn, "ROWS": 1, "PERSISTENT": 0, "num_warps": warps, "num_stages": 1}]
        candidates += [{"BLOCK_N": b, "ROWS": 1, "PERSISTENT": 0, "num_warps": 16, "num_stages": s}
                       for b in (16384, 8192, 4096) if b < problem["N"] for s in (2, 1)]
        for c in candidates:
            if self.is_valid(problem, dtype, c, hw):
                return c
        return candidates[0]

    def compile_key(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> tuple:
        """No int argument is specialised: the binary depends on the config, on whether the row fits one block,
        and on N's alignment (contiguous rows: the strides are N)."""
        return (dtype, tuple(sorted(config.items())), config["BLOCK_N"] >= problem["N"], align_of(problem["N"]))

    # --- running --------------------------------------------------------------------------------------
    def randn(self, shapes: list[tuple[int, ...]], dtype: str, device: str, seed: int) -> tuple:
        import torch

        g = rand_generator(device, seed)
        return tuple(torch.randn(*s, device=device, generator=g).to(torch_dtype(dtype)) for s in shapes)

    def make_output(self, problem: Problem, dtype: str, device: str):
        import torch

        return torch.empty(problem["M"], problem["N"], device=device, dtype=torch_dtype(dtype))

    def launches(self, problem: Problem, inputs: tuple, out, config: Config, hw: HardwareRecord) -> list[Launch]:
        x, *vectors = inputs
        w, b = (vectors + [None, None])[:2]
        M, N = problem["M"], problem["N"]
        align = align_of(N, x.stride(0), out.stride(0))
        dtype = str(x.dtype).removeprefix("torch.")
        args = (x, w, b, out, M, N // align, x.stride(0) // align, out.stride(0) // align)
        kwargs = dict(SINGLE_PASS=self.passes[0], LOOPED_PASS=self.passes[1], BLOCK_N=config["BLOCK_N"],
                      ROWS=config["ROWS"], SINGLE=int(config["BLOCK_N"] >= N), PERSISTENT=config["PERSISTENT"],
                      ALIGN=align, STAGES=config["num_stages"], num_warps=config["num_warps"],
                      num_stages=config["num_stages"])
        return [Launch(rowwise_kernel, (self.programs(problem, dtype, config, hw),), args, kwargs)]

    # --- costs ----------------------------------------------------------------------------------------
    def terms(self, c: Cols) -> Cols:
        M, N, e, bn, rows = c["M"], c["N"], c["e"], c["BLOCK_N"], c["ROWS"]
        single = bn >= N
        tiles = np.ceil(M / rows)
        regs = np.minimum(self.registers_of(c), self.register_cap_of(c))
        pad_rows, pad_cols = tiles * rows / M, np.ceil(N / bn) * bn / N
        return {
            "tiles": tiles,
            "programs": self.programs_of(c),  # a persistent grid holds as many as the GPU runs at once
            "smem": self.smem_of(c),
            "regs": regs,
            "occupancy": self.resident_of(c),
            "loop_trips": np.where(single, 1.0, 2 * np.ceil(N / bn)),
            "critical_steps": busiest_sm_steps(c, tiles, np.where(single, 1.0, 2 * np.ceil(N / bn))),
            "loop_remainder": np.where(single, 0.0, np.mod(N, bn) / bn),
            "elems_per_thread": self.per_thread(c),
            # looped rows are read twice
            "bytes_per_tile": rows * N * e * np.where(single, 2, 3) + self.vectors * N * e,
            "flops_per_tile": self.flops_per_element * rows * N,
            "padding": pad_cols * pad_rows,
            "pad_rows": pad_rows, "pad_cols": pad_cols, "pad_loop": np.where(single, 1.0, pad_cols),
            "flops": self.flops(c),
            "min_bytes": self._bytes(c),
        }

    def flops(self, problem: Problem) -> float:
        return 1.0 * self.flops_per_element * problem["M"] * problem["N"]

    def min_bytes(self, problem: Problem, dtype: str) -> float:
        return float(self._bytes({**problem, "e": DTYPE_BYTES[dtype]}))

    def _bytes(self, c: Cols):
        return c["e"] * (2 * c["M"] * c["N"] + self.vectors * c["N"])
