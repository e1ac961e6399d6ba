"""C = A @ B for row-major A (M x K) and B (K x N), fp32 accumulation.

Variants that matter on Hopper are knobs of the one kernel: tensor-descriptor (TMA) loads and stores beside
plain pointers (``TMA``), the TMA store of C in two halves (``EPILOGUE_SUBTILE``: half the shared-memory staging,
valid where that is what leaves room for the config's pipeline stages), a persistent schedule over tiles beside
one tile per program (``PERSISTENT``), a split-K tail for that schedule (``SPLIT_TAIL``), GROUP_M swizzling for L2
reuse, tile sizes, warps and pipeline stages. ``TMA=2`` is the pointer path told how far apart rows start.

Why the hint: Triton specialises an integer argument only on its being a multiple of 16, so a row of 1,000 bf16
(2,000 bytes, 16-byte aligned) or of 1,004 (8-byte aligned) reads as unaligned, and the pointer path's loads and
stores compile to single elements, its loads unpipelined (no ``cp.async``). ``TMA=2`` rounds each stride, K and
N down to a multiple of the widest vector they allow (a no-op), and the loads become vectors of up to 16 bytes:
1.48-1.89x on three TMA=0 configs of issue 17's shapes on the H200 (``scripts/experiments/load_probe.py``, session
42). TMA is the faster load there; where TMA is refused (rows 4 or 8 bytes apart) only the pointer path runs. A value
of ``TMA`` rather than a knob of its own: it is a third way to load, valid only without descriptors, and a knob would
be a dataset column and a feature more.

Why the split tail: tiles come in powers of two, so a problem's tiles rarely fill whole waves of the SMs (5120^3 in
128x128 tiles is 1600 tiles, 12.12 waves on 132 SMs: the 13th wave runs 16 tiles while 116 SMs idle). With
``SPLIT_TAIL`` the persistent programs run the whole waves as before, then split the K loop of each tile of the
last, partial wave into ``splits`` parts, one per SM (a tail over half the SMs: in rounds, ``split_of``), and each
part stores its fp32 partial sum. Who adds them up:
with ``SPLIT_TAIL=1`` the last part of a tile to arrive (an atomic counter) reads the others' and writes the tile,
alone, so the sum costs ``splits - 1`` tile reads on one SM; with ``SPLIT_TAIL=2`` a second, small kernel sums
every tail tile in chunks of ``REDUCE_ROWS`` rows, one chunk a program, so it is spread over the SMs at the price of
a second launch. Configs recorded before a knob existed ran with its ``absent`` value, whose code path is the
kernel as it was.

Not a knob: Hopper warp specialisation (issue 17). cuBLAS's kernel for 3000x5000x1000 bf16, 0.80x of this space's
best on the H200, is one TMA producer and two consumer warpgroups (384 threads, Nsight Compute). Triton 3.6 builds
that from this persistent loop marked ``warp_specialize`` with 4 warps (12 launched, setmaxnreg; C stored through
pointers, since the pass splits the tile between the consumers and a host descriptor's block does not follow), but
the compiled kernel hung at its first launch on the H200 (session 9;
``scripts/results/ws_hang-h200-2026-12-01-s9.txt``). Triton's own Hopper runs of its tutorial pass only with
descriptors made on the device (``tl.make_tensor_descriptor``): ``scripts/experiments/ws_probe.py`` tries that.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from costmodel.hardware import HardwareRecord
from costmodel.kernels.base import (DTYPE_BYTES, Cols, Config, KernelFamily, Knob, Launch, Problem, busiest_sm_steps,
                                    int_specialisation, rand_generator, resident_programs, torch_dtype)

MIN_K_TILES_PER_SPLIT = 4  # a part of a split tile runs at least this many K steps (else its pipeline never fills)
REDUCE_ROWS = 8  # rows of a tail tile one program of the SPLIT_TAIL=2 reduction sums
MAX_BALANCED_PARTS = 4  # parts a tail over half the SMs may split into: each part stores a fp32 tile (128 KB at
# 128x256) that is read back, so more parts move more memory for less gain; 4 is a guess, not measured


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _tile_accumulate(a, b, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n, k_first, k_last,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, TMA: tl.constexpr):
    """The tile's sum over K steps [k_first, k_last) of BLOCK_K each."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA == 1:
        for ki in tl.range(k_first, k_last):
            a_tile = a.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b_tile = b.load([ki * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a_tile, b_tile, acc)
    else:
        offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        # clamp instead of masking rows/cols: loads stay unmasked and vectorised, the store masks
        offs_am = tl.max_contiguous(tl.multiple_of(tl.where(offs_am < M, offs_am, 0), BLOCK_M), BLOCK_M)
        offs_bn = tl.max_contiguous(tl.multiple_of(tl.where(offs_bn < N, offs_bn, 0), BLOCK_N), BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        for ki in tl.range(k_first, k_last):
            k = ki * BLOCK_K + offs_k
            a_tile = tl.load(a + offs_am[:, None] * stride_am + k[None, :] * stride_ak, mask=k[None, :] < K, other=0.0)
            b_tile = tl.load(b + k[:, None] * stride_bk + offs_bn[None, :] * stride_bn, mask=k[:, None] < K, other=0.0)
            acc = tl.dot(a_tile, b_tile, acc)
    return acc


@triton.jit
def _rows_store(c, acc, M, N, stride_cm, stride_cn, row, col, ROWS: tl.constexpr, COLS: tl.constexpr):
    """Store the ROWS x COLS block at (row, col) of C through pointers, masked to M x N."""
    offs_cm = row + tl.arange(0, ROWS)
    offs_cn = col + tl.arange(0, COLS)
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn, acc.to(c.dtype.element_ty), mask=mask)


@triton.jit
def _tile_store(c, acc, M, N, stride_cm, stride_cn, pid_m, pid_n,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, TMA: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr):
    if TMA == 1:
        if EPILOGUE_SUBTILE:  # c's descriptor block is BLOCK_M x BLOCK_N // 2
            left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            c.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c.dtype))
            c.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c.dtype))
        else:
            c.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c.dtype))
    else:
        _rows_store(c, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)


@triton.jit
def _split_tail(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, num_programs,
                num_pid_m, num_pid_n, first_tile, partials, arrivals, split_tiles, splits,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                TMA: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, SPLIT_TAIL: tl.constexpr):
    """Tiles first_tile.. (split_tiles of them), each as ``splits`` parts over K, one part a program."""
    k_tiles = tl.cdiv(K, BLOCK_K)
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    for unit in tl.range(tl.program_id(0), split_tiles * splits, num_programs):
        tail_tile = unit // splits
        part = unit % splits
        pid_m, pid_n = _tile_coords(first_tile + tail_tile, num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_accumulate(a, b, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                               part * k_tiles // splits, (part + 1) * k_tiles // splits, BLOCK_M, BLOCK_N, BLOCK_K, TMA)
        tl.store(partials + unit * (BLOCK_M * BLOCK_N) + offs, acc)
        if SPLIT_TAIL == 1:  # else _reduce_tail_kernel sums the partials after this kernel
            tl.debug_barrier()  # every thread's partial is stored before the program announces it
            arrived = tl.atomic_add(arrivals + tail_tile, 1, sem="acq_rel")
            if arrived == splits - 1:  # the last part of this tile: add the others' and write the tile
                for other in tl.range(0, splits):
                    if other != part:
                        acc += tl.load(partials + (tail_tile * splits + other) * (BLOCK_M * BLOCK_N) + offs,
                                       cache_modifier=".cg")
                _tile_store(c, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N, TMA, EPILOGUE_SUBTILE)


@triton.jit(do_not_specialize=["first_tile", "splits"])
def _reduce_tail_kernel(c, partials, M, N, stride_cm, stride_cn, first_tile, splits, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr, ROWS: tl.constexpr, VEC: tl.constexpr = 1):
    """SPLIT_TAIL=2: program i sums the ``splits`` partials of chunk i of ROWS rows of the tail tiles and stores it."""
    if VEC > 1:  # TMA=2's hint, as in matmul_kernel
        stride_cm = stride_cm // VEC * VEC
        N = N // VEC * VEC
    chunks: tl.constexpr = BLOCK_M // ROWS
    tail_tile = tl.program_id(0) // chunks
    row = tl.program_id(0) % chunks * ROWS
    pid_m, pid_n = _tile_coords(first_tile + tail_tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    offs = (row + tl.arange(0, ROWS))[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for part in tl.range(0, splits):
        acc += tl.load(partials + (tail_tile * splits + part) * (BLOCK_M * BLOCK_N) + offs)
    _rows_store(c, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M + row, pid_n * BLOCK_N, ROWS, BLOCK_N)


@triton.jit(do_not_specialize=["split_tiles", "splits"])
def matmul_kernel(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, num_programs,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  TMA: tl.constexpr, PERSISTENT: tl.constexpr,
                  partials, arrivals, split_tiles, splits, SPLIT_TAIL: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                  VEC: tl.constexpr = 1):
    if TMA == 2:  # pointers, each row stride, K and N a multiple of VEC (the launcher checked): rounding them down
        # changes nothing but tells the compiler, which sees only multiples of 16 (``hint_width``)
        stride_am = stride_am // VEC * VEC
        stride_bk = stride_bk // VEC * VEC
        stride_cm = stride_cm // VEC * VEC
        K = K // VEC * VEC
        N = N // VEC * VEC
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if PERSISTENT:
        num_tiles = num_pid_m * num_pid_n
        if SPLIT_TAIL:
            whole_tiles = num_tiles - split_tiles
        else:
            whole_tiles = num_tiles
        for tile_id in tl.range(tl.program_id(0), whole_tiles, num_programs, flatten=True):
            pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
            acc = _tile_accumulate(a, b, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                                   0, tl.cdiv(K, BLOCK_K), BLOCK_M, BLOCK_N, BLOCK_K, TMA)
            _tile_store(c, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N, TMA, EPILOGUE_SUBTILE)
        if SPLIT_TAIL:
            _split_tail(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                        num_programs, num_pid_m, num_pid_n, whole_tiles, partials, arrivals, split_tiles, splits,
                        BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, TMA, EPILOGUE_SUBTILE, SPLIT_TAIL)
    else:
        pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_accumulate(a, b, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                               0, tl.cdiv(K, BLOCK_K), BLOCK_M, BLOCK_N, BLOCK_K, TMA)
        _tile_store(c, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N, TMA, EPILOGUE_SUBTILE)


def tiles_of(c: Cols):
    return np.ceil(c["M"] / c["BLOCK_M"]) * np.ceil(c["N"] / c["BLOCK_N"])


def split_of(c: Cols, tiles):
    """(tiles of the last, partial wave, parts each is split into over K) for ``SPLIT_TAIL``; (0, 1) where no
    split fits: a full last wave, too few K steps for two parts, or a tail over half the SMs that no split shortens.
    A tail of at most half the SMs splits into as many parts as fit on the SMs at once (one round of parts). A
    larger tail splits into the count of parts (at most ``MAX_BALANCED_PARTS``) that leaves the busiest SM the
    least of a tile, ``ceil(tail * parts / SMs) / parts``, the fewest parts among equals, where that is under a
    whole tile. Issue 17's three large shapes short of cuBLAS leave such tails: 6000^3 in 128x256 tiles is 1,128
    tiles, 8.55 waves of 132 SMs, whose last 72 tiles in 3 parts each take 2/3 of a tile's time."""
    sms = c["sm_count"]
    tail = np.mod(tiles, sms)
    k_parts = np.floor(np.ceil(c["K"] / c["BLOCK_K"]) / MIN_K_TILES_PER_SPLIT)
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = np.where(2 * tail <= sms, np.floor(sms / tail), _balanced_parts(tail, sms, k_parts))
    parts = np.minimum(parts, k_parts)
    fits = (tail > 0) & (parts >= 2)
    return np.where(fits, tail, 0), np.where(fits, parts, 1)


def _balanced_parts(tail, sms, k_parts):
    """The parts count in 2..MAX_BALANCED_PARTS (and at most ``k_parts``) with the least ``ceil(tail * p / sms) /
    p`` under 1, the fewest among equals; 1 where none is under 1."""
    best_p, best = np.ones_like(tail * 1.0), np.ones_like(tail * 1.0)
    for p in range(2, MAX_BALANCED_PARTS + 1):
        share = np.ceil(tail * p / sms) / p
        better = (share < best) & (p <= k_parts)
        best_p, best = np.where(better, p, best_p), np.where(better, share, best)
    return best_p


def programs_of(c: Cols, tiles, split_tiles):
    """Programs launched: a tile each, at most one per SM when persistent, one per SM with a split tail."""
    splitting = (c["SPLIT_TAIL"] > 0) & (split_tiles > 0)
    return np.where(splitting, c["sm_count"], np.where(c["PERSISTENT"] > 0, np.minimum(tiles, c["sm_count"]), tiles))


def smem_of(c: Cols):
    """Shared memory per block: num_stages of A and B tiles, the TMA store's staging of C (in halves with
    EPILOGUE_SUBTILE) and, with warpgroups side by side along N, the fp32 accumulator split through shared memory
    (on sm_90, 64x256 tiles with 8 warps asked for 32 KiB more than the rest)."""
    bm, bn, bk, e, subtile = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["e"], c["EPILOGUE_SUBTILE"]
    epilogue = (c["TMA"] == 1) * bm * bn * e / (1 + subtile) + subtile * (bm < 16 * c["num_warps"]) * bm * bn * 2
    return c["num_stages"] * (bm * bk + bk * bn) * e + epilogue


def tma_ok(c: Cols):
    """TMA needs 16-byte aligned row strides: of A (K) and of B and C (N)."""
    return (np.mod(c["K"] * c["e"], 16) == 0) & (np.mod(c["N"] * c["e"], 16) == 0)


def hint_width(e: int, *values: int) -> int:
    """The most elements, a power of two up to a 16-byte vector, that every value is a multiple of: the ``VEC``
    ``TMA=2`` passes (1: no vector wider than an element)."""
    n = 16 // e
    while n > 1 and any(v % n for v in values):
        n //= 2
    return n


def hint_helps(problem: Problem, e: int) -> bool:
    """Whether ``TMA=2`` tells the compiler anything on this problem's contiguous inputs: a vector wider than an
    element fits every row, and Triton does not already see it (K or N not a multiple of 16)."""
    return hint_width(e, problem["K"], problem["N"]) > 1 and bool(problem["K"] % 16 or problem["N"] % 16)


# GROUP_M's value where it orders nothing: over a grid of one row of tiles (M within one BLOCK_M, every decode shape)
# both values run the tiles in one order, and over one column the same tiles, only the last group's rows permuted.
# So GROUP_M=1 leaves the space there, and a tune's top k holds no two configs that run one kernel. Measured on the
# H200 rows (scripts/experiments/group_m_twins.py): the GROUP_M=8 over GROUP_M=1 time of otherwise equal configs is
# 1.000 at the median over one row of tiles (42,039 pairs, p5-p95 0.978-1.031, a re-timing's noise) and over one
# column (7,405; 0.975-1.044), and 0.998 where the grid has more of both (63,943; 0.858-1.103)
GROUP_M_ALONE = 8


def one_row_or_column(problem: Problem, config: Config) -> bool:
    """Whether ``config``'s grid of tiles over ``problem`` is one row or one column."""
    return problem["M"] <= config["BLOCK_M"] or problem["N"] <= config["BLOCK_N"]


def tail_split(problem: Problem, config: Config, hw: HardwareRecord) -> tuple[int, int]:
    """``split_of`` for one config: what the launcher splits."""
    c = {"M": problem["M"], "N": problem["N"], "K": problem["K"], **config, "sm_count": hw.sm_count}
    split_tiles, parts = split_of(c, tiles_of(c))
    return int(split_tiles), int(parts)


# LLM GEMMs (tokens x hidden -> projections) for a few model widths
_HIDDEN = (2048, 4096, 5120, 8192)
_TOKENS = (256, 512, 1024, 2048, 4096, 8192, 16384)
_DECODE_M = (1, 8, 16, 32, 64, 128)


def _log_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """An integer log-uniform in [lo, hi]: as many small values as large ones, of every alignment."""
    return int(round(float(np.exp(rng.uniform(np.log(lo), np.log(hi))))))


def _wide(rng: np.random.Generator, h: int) -> int:
    """A wide dim: a model width (or a multiple of it), or any integer 1024-16384."""
    return int(h * rng.choice([1, 3, 4])) if rng.random() < 0.5 else _log_int(rng, 1024, 16384)


class Matmul(KernelFamily):
    name = "matmul"
    dims = ("M", "N", "K")
    knobs = (
        Knob("BLOCK_M", (64, 128, 256), tile=True),
        Knob("BLOCK_N", (64, 128, 256), tile=True),
        Knob("BLOCK_K", (32, 64, 128), tile=True),
        Knob("GROUP_M", (1, 8), detail=True),
        Knob("TMA", (0, 1, 2)),
        Knob("PERSISTENT", (0, 1)),
        Knob("SPLIT_TAIL", (0, 1, 2), absent=0),
        Knob("EPILOGUE_SUBTILE", (0, 1), absent=0),
        Knob("num_warps", (4, 8), detail=True),
        Knob("num_stages", (2, 3, 4, 5), detail=True),
    )
    # the module texts of commits 7c30845, b01d8f8, eac6a39 and bafb748 (edits to docstrings, is_valid and
    # smem_bytes only) all give the kernel hash 51499b6997b732c2; data/ holds rows recorded under the last three. TMA=2
    # (the hint) made this hash; configs of TMA 0 and 1 compile to the instructions they did (compare_kernel_ptx.py)
    recorded_as = {"38360491cf6a1dd5": ("51499b6997b732c2", "2fa80221ffc53c63", "b457d84e5d202e6f", "24ad1867b4fb7ede",
                                        "39f0dac82c6fac9f")}

    def problems(self, rng: np.random.Generator, n: int) -> list[Problem]:
        out = []
        for _ in range(n):
            kind = rng.choice(["llm", "decode", "square", "odd", "skinny", "narrow", "small"],
                              p=[0.3, 0.15, 0.1, 0.2, 0.1, 0.075, 0.075])
            h = int(rng.choice(_HIDDEN))
            if kind == "llm":
                m = int(rng.choice(_TOKENS))
                n_, k = (h, int(h * rng.choice([1, 3, 4]) // 1)) if rng.random() < 0.5 else (int(h * rng.choice([1, 3, 4])), h)
            elif kind == "decode":
                m, n_, k = int(rng.choice(_DECODE_M)), int(h * rng.choice([1, 3])), h
            elif kind == "square":
                m = n_ = k = int(rng.choice([512, 1024, 2048, 3072, 4096, 6144, 8192]))
            elif kind == "odd":  # odd sizes: not multiples of 16, unaligned for TMA in some dims
                m = int(rng.integers(17, 6000))
                n_ = int(rng.choice([int(rng.integers(17, 6000)), h]))
                k = int(rng.choice([int(rng.integers(17, 6000)) // 8 * 8 + 8, h, int(rng.integers(17, 6000))]))
            elif kind == "skinny":  # any M up to 64 (a decode batch, a few rows), wide N and K of any alignment
                m, n_, k = _log_int(rng, 1, 64), _wide(rng, h), _wide(rng, h)
            elif kind == "narrow":  # tall and narrow: many rows, N up to 1024
                m, n_, k = _log_int(rng, 1024, 16384), _log_int(rng, 16, 1024), _wide(rng, h)
            else:  # small: every dim 16-1024 (under about 1 GFLOP), where launch and tile waste dominate
                m, n_, k = (_log_int(rng, 16, 1024) for _ in range(3))
            out.append({"M": m, "N": n_, "K": k})
        return out

    def smem_bytes(self, dtype: str, config: Config) -> int:
        return int(smem_of({**config, "e": DTYPE_BYTES[dtype]}))

    def is_valid(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> bool:
        if self.smem_bytes(dtype, config) > hw.smem_per_block:
            return False
        # fp32 accumulator registers per thread; over 128 the kernel spills
        if config["BLOCK_M"] * config["BLOCK_N"] // (32 * config["num_warps"]) > 128:
            return False
        if config["TMA"] == 1 and not tma_ok({**problem, "e": DTYPE_BYTES[dtype]}):
            return False
        # the store in halves only where staging the whole tile leaves no room for this many stages
        if config["EPILOGUE_SUBTILE"] and (config["TMA"] != 1 or self.smem_bytes(
                dtype, dict(config, EPILOGUE_SUBTILE=0)) <= hw.smem_per_block):
            return False
        # the hinted pointer path only where the hint tells the compiler something
        if config["TMA"] == 2 and not hint_helps(problem, DTYPE_BYTES[dtype]):
            return False
        # a split tail belongs to the persistent schedule, and only where it splits something
        if config["SPLIT_TAIL"] and (not config["PERSISTENT"] or tail_split(problem, config, hw)[1] < 2):
            return False
        return config["GROUP_M"] == GROUP_M_ALONE or not one_row_or_column(problem, config)

    def twin(self, problem: Problem, config: Config) -> Config:
        return dict(config, GROUP_M=GROUP_M_ALONE) if one_row_or_column(problem, config) else config

    def default_config(self, problem: Problem, dtype: str, hw: HardwareRecord) -> Config:
        # Triton tutorial 03's first config: what users copy
        return {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "TMA": 0, "PERSISTENT": 0,
                "SPLIT_TAIL": 0, "EPILOGUE_SUBTILE": 0, "num_warps": 8, "num_stages": 3}

    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        import torch

        g = rand_generator(device, seed)
        t = torch_dtype(dtype)
        a = torch.randn(problem["M"], problem["K"], device=device, generator=g).to(t)
        b = torch.randn(problem["K"], problem["N"], device=device, generator=g).to(t)
        return a, b

    def make_output(self, problem: Problem, dtype: str, device: str):
        import torch

        return torch.empty(problem["M"], problem["N"], device=device, dtype=torch_dtype(dtype))

    def reference(self, problem: Problem, inputs: tuple):
        a, b = inputs
        return (a.float() @ b.float()) if a.device.type == "cpu" else (a @ b).float()

    def compile_key(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> tuple:
        """Beside the dims, the launch passes ``num_programs`` (specialised: a problem whose program count
        differs in divisibility needs a binary of its own), with a split tail, tensors where else None, and with
        ``TMA=2`` the vector width it passes."""
        _, split_tiles, _, programs = self._schedule(problem, config, hw)
        vec = hint_width(DTYPE_BYTES[dtype], problem["K"], problem["N"]) if config["TMA"] == 2 else 1
        return (*super().compile_key(problem, dtype, config, hw), int_specialisation(programs), split_tiles > 0, vec)

    @staticmethod
    def _schedule(problem: Problem, config: Config, hw: HardwareRecord) -> tuple[int, int, int, int]:
        """(tiles, tail tiles split, parts each, programs launched) of one launch."""
        tiles = triton.cdiv(problem["M"], config["BLOCK_M"]) * triton.cdiv(problem["N"], config["BLOCK_N"])
        split_tiles, splits = tail_split(problem, config, hw) if config["SPLIT_TAIL"] else (0, 1)
        return tiles, split_tiles, splits, int(programs_of({**config, "sm_count": hw.sm_count}, tiles, split_tiles))

    def launches(self, problem: Problem, inputs: tuple, out, config: Config, hw: HardwareRecord) -> list[Launch]:
        a, b = inputs
        M, N, K = problem["M"], problem["N"], problem["K"]
        bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
        tiles, split_tiles, splits, programs = self._schedule(problem, config, hw)
        split_tail = config["SPLIT_TAIL"] if split_tiles else 0
        partials = arrivals = None
        if split_tiles:
            import torch

            partials = torch.empty(split_tiles * splits * bm * bn, device=a.device, dtype=torch.float32)
            if split_tail == 1:
                arrivals = torch.zeros(split_tiles, device=a.device, dtype=torch.int32)
        if config["TMA"] == 1:
            from triton.tools.tensor_descriptor import TensorDescriptor

            args = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
                    TensorDescriptor.from_tensor(out, [bm, bn // (1 + config["EPILOGUE_SUBTILE"])]))
        else:
            args = (a, b, out)
        args += (M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1), programs)
        # the widest vector these tensors' rows allow (views may be further apart than K and N)
        vec = hint_width(a.element_size(), a.stride(0), b.stride(0), out.stride(0), K, N) if config["TMA"] == 2 else 1
        kwargs = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=config["GROUP_M"], TMA=config["TMA"],
                      PERSISTENT=config["PERSISTENT"], partials=partials, arrivals=arrivals, split_tiles=split_tiles,
                      splits=splits, SPLIT_TAIL=split_tail, EPILOGUE_SUBTILE=config["EPILOGUE_SUBTILE"], VEC=vec,
                      num_warps=config["num_warps"], num_stages=config["num_stages"])
        steps = [Launch(matmul_kernel, (programs,), args, kwargs, zero=() if arrivals is None else (arrivals,))]
        if split_tail == 2:
            steps.append(Launch(_reduce_tail_kernel, (split_tiles * bm // REDUCE_ROWS,),
                                (out, partials, M, N, out.stride(0), out.stride(1), tiles - split_tiles, splits),
                                dict(BLOCK_M=bm, BLOCK_N=bn, GROUP_M=config["GROUP_M"], ROWS=REDUCE_ROWS, VEC=vec,
                                     num_warps=4)))
        return steps

    def terms(self, c: Cols) -> Cols:
        M, N, K, bm, bn, bk, e = c["M"], c["N"], c["K"], c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["e"]
        tiles = tiles_of(c)
        split_tiles, parts = split_of(c, tiles)
        threads = 32 * c["num_warps"]
        acc = bm * bn / threads
        smem = smem_of(c)
        # fp32 accumulator plus one stage of operand fragments (two half-precision values a register). Unpipelined
        # loads (scripts/pipelined_loads.py: a row stride Triton does not know to be a multiple of 16) stage their
        # tiles through registers too; counting them, with a share-of-pipelined-loads feature, ranked no better
        # (session 14: held-out matmul top-8 0.977 against 0.989 without; BENCHMARKS), so they are not counted
        regs = np.minimum(255.0, 32 + acc + (bm + bn) * bk * e / 4 / threads)
        pad_rows, pad_cols, pad_loop = np.ceil(M / bm) * bm / M, np.ceil(N / bn) * bn / N, np.ceil(K / bk) * bk / K
        splitting = (c["SPLIT_TAIL"] > 0) & (split_tiles > 0)
        return {
            "tiles": tiles,
            "programs": programs_of(c, tiles, split_tiles),
            "splits": np.where(c["SPLIT_TAIL"] > 0, parts, 1.0),
            "smem": smem,
            "regs": regs,
            "occupancy": resident_programs(c, smem, regs),
            "loop_trips": np.ceil(K / bk),
            "critical_steps": busiest_sm_steps(c, tiles, np.ceil(K / bk), np.where(splitting, split_tiles, 0.0), parts),
            "loop_remainder": np.mod(K, bk) / bk,
            "elems_per_thread": acc,
            "bytes_per_tile": (bm * K + K * bn + bm * bn) * e,
            "flops_per_tile": 2 * bm * bn * K,
            "padding": pad_rows * pad_cols * pad_loop,
            "pad_rows": pad_rows, "pad_cols": pad_cols, "pad_loop": pad_loop,
            "flops": self.flops(c),
            "min_bytes": _bytes(c),
            "tma_ok": tma_ok(c) * 1.0,
        }

    def flops(self, problem: Problem) -> float:
        return 2.0 * problem["M"] * problem["N"] * problem["K"]

    def min_bytes(self, problem: Problem, dtype: str) -> float:
        return float(_bytes({**problem, "e": DTYPE_BYTES[dtype]}))


def _bytes(c: Cols):
    return c["e"] * (c["M"] * c["K"] + c["K"] * c["N"] + c["M"] * c["N"])
