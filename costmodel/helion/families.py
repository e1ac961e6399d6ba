"""Helion kernels as costmodel families: what each kernel is (its problems, inputs, reference, and which problem
extent each of its ConfigSpec's block sizes and reductions spans), and its candidates from Helion's own spec.

Nothing here imports helion until a kernel is bound, so problems and extents work where helion is absent. The
five kernels with a Triton twin (costmodel/kernels/) take the twin's problem generator, inputs and reference: the
same realistic shapes and the same correctness check, written once; a kernel without one states its own
(``KernelSpec``: swiglu, geglu, cross_entropy, add_rms_norm).
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from costmodel.benchmarks import is_named
from costmodel.errors import CostModelError
from costmodel.helion import configs

PREFIX = "helion:"
Problem = dict[str, int]


@dataclass(frozen=True)
class KernelSpec:
    """What a Helion kernel without a Triton twin states itself, as a twin's family does: its dims, dtypes and
    tolerance, realistic problems, seeded inputs and the float32 torch reference (a tuple where the kernel
    returns several tensors, in the same order)."""
    dims: tuple[str, ...]
    problems: Callable[[np.random.Generator, int], list[Problem]]   # drawn; a benchmark's are dropped after
    make_inputs: Callable[[Problem, str, str, int], tuple]          # (problem, dtype, device, seed)
    reference: Callable[[Problem, tuple], Any]                      # (problem, inputs)
    dtypes: tuple[str, ...] = ("float16", "bfloat16")
    # relative error (norm) each output may have against the reference; None: the base family's (one rounding)
    tolerance: dict[str, float] | None = None


def _as_args(problem: Problem, inputs: tuple) -> tuple:
    return tuple(inputs)


def _rows_cols(args: tuple) -> Problem:
    m, n = args[0].shape
    return {"M": int(m), "N": int(n)}


@dataclass(frozen=True)
class HelionFamily:
    name: str                       # the kernel's name in costmodel/helion/kernels.py; dataset kernel "helion:<name>"
    # extents of the problem each ConfigSpec block size tiles, in the spec's block order, and each reduction
    # (roll-able loop) spans; written on columns (name -> array or number), so features use them on a whole table
    tiles: Callable[[dict], list]
    reductions: Callable[[dict], list]
    grid: int                       # the leading tiles that make the launch grid; the rest are loops in a program
    # the memory ops a compiled config runs, (loads, stores), with its reductions unrolled and rolled: a prefix of
    # its ``indexing`` list (the spec lists more ops than run: the entries past the prefix change no code), the
    # stores last and the loads first in ``load_eviction_policies``. Read off generated code (block_ptr on one op
    # at a time, helion 1.5.1): tests/test_helion.py checks them so for every family, tests/test_helion_tune.py
    # against ``features.spec_shape`` on the recorded groups
    memory_ops: tuple[tuple[int, int], tuple[int, int]]
    twin: str | None = None         # the Triton family with the same problems (dims, generator, inputs, reference)
    # the canonical Helion config a config of the twin reads as, for a problem and the kernel's per-op counts
    # (``op_counts``), None where the twin's config uses a knob this kernel has no counterpart of: the twin's rows
    # then train the Helion model too (helion.model.twin_rows), its space joins the tuner's candidates
    from_twin: Callable[[dict, Problem, Mapping[str, int]], dict | None] | None = None
    # the problem as the twin's validity reads it for this kernel's candidates, where a rule of the twin's own program
    # does not bind Helion's (``twin_candidates(..., unaligned=True)``); None: the problem itself
    twin_problem: Callable[[Problem, str], Problem] | None = None
    own: KernelSpec | None = None   # else the kernel's own
    args: Callable[[Problem, tuple], tuple] = _as_args       # the Helion kernel's arguments for (problem, inputs)
    problem_of: Callable[[tuple], Problem] = _rows_cols      # its inverse: the problem of a call's arguments

    def __post_init__(self):
        if (self.twin is None) == (self.own is None):
            raise ValueError(f"{PREFIX}{self.name}: a Triton twin or a KernelSpec of its own, one of the two")

    @property
    def kernel(self) -> str:
        return PREFIX + self.name

    def twin_family(self):
        from costmodel.kernels import get_family

        return get_family(self.twin)

    def source(self):
        """Where the kernel's dims, problems, inputs and reference come from: its twin family or its own spec."""
        return self.own if self.own is not None else self.twin_family()

    @property
    def dims(self) -> tuple[str, ...]:
        return self.source().dims

    @property
    def dtypes(self) -> tuple[str, ...]:
        return self.source().dtypes

    @property
    def tolerance(self) -> dict[str, float]:
        """Relative error (norm) a config's output may have against the float32 reference: the twin's, or the
        kernel's own (by default the base family's: one rounding of each output)."""
        from costmodel.kernels.base import KernelFamily

        return self.source().tolerance or KernelFamily.tolerance

    def kernel_hash(self, version: str | None = None) -> str:
        """The group identity (``source_hash``): the kernel's source, decorator included, and the Helion version
        (``version``, default the installed one), since one config compiles to different code under 1.4 and 1.5.
        Read from the file, so helion is not imported."""
        import hashlib

        text = f"{_kernel_source(self.name)}\nhelion {version or _installed()}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def check_problem(self, problem: Mapping[str, Any]) -> Problem:
        """``problem`` validated as the twin family validates its own (its dims' bounds and limits, such as
        attention's head dims), in this kernel's name; a kernel of its own needs its dims, positive integers."""
        from costmodel.kernels.base import check_dims

        twin = self.twin_family() if self.twin else None
        out = check_dims(self.kernel, self.dims, dict(problem), twin.min_dim if twin else lambda d: 1)
        if twin is not None:
            twin.check_problem_extra(out)
        return out

    def check_dtype(self, dtype: str) -> str:
        from costmodel.kernels.base import check_dtype

        return check_dtype(self.kernel, self.dtypes, dtype)

    def problems(self, rng: np.random.Generator, n: int) -> list[Problem]:
        """``n`` realistic problems, none a benchmark's (costmodel/benchmarks.py, under the twin's name)."""
        out: list[Problem] = []
        for _ in range(100):
            drawn = self.source().problems(rng, n)
            out += [p for p in drawn if not is_named(self.twin or self.kernel, p)][: n - len(out)]
            if len(out) == n:
                return out
        raise CostModelError(f"{self.kernel}: could not draw {n} problems outside the benchmarks' sets")

    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        return self.source().make_inputs(problem, dtype, device, seed)

    def reference(self, problem: Problem, inputs: tuple):
        """The torch result, in float32 (a tuple of them, in the kernel's order, where it returns several)."""
        return self.source().reference(problem, inputs)

    def helion_kernel(self):
        from costmodel.helion import kernels

        return getattr(kernels, self.name)

    def bind(self, problem: Problem, dtype: str, device: str = "cpu", seed: int = 0):
        """The Helion BoundKernel for ``problem`` (its ConfigSpec lives on it) and the arguments it was bound to.
        Bound with Helion's reference mode off: under HELION_INTERPRET=1 a kernel's spec is empty (no tiles)."""
        args = self.args(problem, self.make_inputs(problem, dtype, device, seed))
        return self.with_settings(ref_mode=_ref_mode_off()).bind(args), args

    def with_settings(self, configs: tuple = (), **settings):
        """The kernel with its decorator's settings, ``settings`` changed, and ``configs`` as its only configs:
        with one, a call compiles and runs that config (Helion's own path, in its reference mode too)."""
        import dataclasses

        from helion.runtime.kernel import Kernel

        k = self.helion_kernel()
        return Kernel(k.fn, configs=list(configs), settings=dataclasses.replace(k.settings, **settings))


def is_helion(kernel: str) -> bool:
    return kernel.startswith(PREFIX)


def _installed() -> str:
    from costmodel.helion import helion_version

    return helion_version() or "none"


def _kernel_source(name: str) -> str:
    """``name``'s definition in kernels.py, decorators included."""
    import ast
    from pathlib import Path

    text = (Path(__file__).parent / "kernels.py").read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            lines = text.splitlines()[min(d.lineno for d in [*node.decorator_list, node]) - 1: node.end_lineno]
            return "\n".join(lines)
    raise CostModelError(f"no Helion kernel {name!r} in costmodel/helion/kernels.py")


def _ref_mode_off():
    from helion.runtime.ref_mode import RefMode

    return RefMode.OFF


# --- the kernels without a Triton twin: problems, inputs, references -------------------------------------------

def _tokens_by_width(widths: tuple[int, ...], odd_width: Callable[[np.random.Generator], int], cap: int):
    """A generator of (tokens M, width N) problems: half a prefill's tokens, a quarter a decode step's (a few
    rows), a quarter with neither dim a multiple of 16; M*N at most ``cap`` elements."""
    def problems(rng: np.random.Generator, n: int) -> list[Problem]:
        out = []
        for _ in range(n):
            kind = rng.choice(["prefill", "decode", "odd"], p=[0.5, 0.25, 0.25])
            if kind == "prefill":
                m, n_ = int(rng.choice([256, 512, 1024, 2048, 4096, 8192, 16384])), int(rng.choice(widths))
            elif kind == "decode":
                m, n_ = int(rng.choice([1, 2, 4, 8, 16, 32, 64, int(rng.integers(1, 129))])), int(rng.choice(widths))
            else:
                m, n_ = int(rng.integers(17, 9000)), odd_width(rng)
            out.append({"M": max(1, min(m, cap // n_)), "N": n_})
        return out
    return problems


def _odd_width(lo: int, hi: int, fixed: tuple[int, ...]) -> Callable[[np.random.Generator], int]:
    return lambda rng: int(rng.choice([int(rng.integers(lo, hi)), *fixed]))


def _randn(shapes: list[tuple[int, ...]], dtype: str, device: str, seed: int) -> tuple:
    import torch

    from costmodel.kernels.base import rand_generator, torch_dtype

    g = rand_generator(device, seed)
    return tuple(torch.randn(*s, device=device, generator=g).to(torch_dtype(dtype)) for s in shapes)


def _gate_up(problem: Problem, dtype: str, device: str, seed: int) -> tuple:
    return _randn([(problem["M"], problem["N"])] * 2, dtype, device, seed)


def _swiglu_reference(problem: Problem, inputs: tuple):
    import torch.nn.functional as F

    gate, up = (t.float() for t in inputs)
    return F.silu(gate) * up


def _geglu_reference(problem: Problem, inputs: tuple):
    import torch.nn.functional as F

    gate, up = (t.float() for t in inputs)
    return F.gelu(gate, approximate="tanh") * up


# elements a problem's tensor may hold: past 2**31 - 1 Helion indexes with int64 (1.4.0 and 1.5.1), other code
_INT32_ELEMENTS = 2**31 - 1
# vocabularies of LLMs: Llama 2 and Mistral, GPT-2, Llama 3, Qwen 2
_VOCABS = (32000, 50257, 128256, 151936)


def _loss_problems(rng: np.random.Generator, n: int) -> list[Problem]:
    """Tokens x vocabulary of an LLM's loss: half a training batch's tokens (512-16384), a fifth a few rows (1-256),
    the rest any count from 17; M*N within int32 indexing (with Qwen 2's vocabulary at most 14134 tokens)."""
    out = []
    for _ in range(n):
        kind = rng.choice(["batch", "few", "odd"], p=[0.5, 0.2, 0.3])
        v = int(rng.choice(_VOCABS))
        if kind == "batch":
            m = int(rng.choice([512, 1024, 2048, 4096, 8192, 16384]))
        elif kind == "few":
            m = int(rng.choice([1, 2, 8, 32, 128, int(rng.integers(1, 257))]))
        else:
            m = int(rng.integers(17, 16385))
        out.append({"M": min(m, _INT32_ELEMENTS // v), "N": v})
    return out


def _loss_inputs(problem: Problem, dtype: str, device: str, seed: int) -> tuple:
    """Logits (M, N) of ``dtype`` and int64 targets (M,) in [0, N)."""
    import torch

    from costmodel.kernels.base import rand_generator

    (logits,) = _randn([(problem["M"], problem["N"])], dtype, device, seed)
    target = torch.randint(0, problem["N"], (problem["M"],), device=device, generator=rand_generator(device, seed + 1))
    return logits, target


def _loss_reference(problem: Problem, inputs: tuple):
    import torch.nn.functional as F

    logits, target = inputs
    return F.cross_entropy(logits.float(), target, reduction="none")


def _add_rms_norm_inputs(problem: Problem, dtype: str, device: str, seed: int) -> tuple:
    m, n = problem["M"], problem["N"]
    return _randn([(m, n), (m, n), (n,)], dtype, device, seed)


def _add_rms_norm_reference(problem: Problem, inputs: tuple):
    """(rms_norm(h) * weight, h) for h = x + residual, as vLLM's fused_add_rms_norm computes them, in float32."""
    import torch

    from costmodel.kernels.rmsnorm import EPS

    x, residual, weight = (t.float() for t in inputs)
    h = x + residual
    return h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight, h


SWIGLU = KernelSpec(
    ("M", "N"),
    # tokens x intermediate size of LLM MLPs (Llama 2 7B 11008, Llama 3 8B 14336, 70B 28672, Mistral 14336, ...)
    _tokens_by_width((2816, 5632, 8192, 11008, 13824, 14336, 18944, 28672), _odd_width(1000, 30000, (11007, 3001)),
                     1 << 28),
    _gate_up, _swiglu_reference)
GEGLU = KernelSpec(
    ("M", "N"),
    # tokens x intermediate size of GeGLU MLPs (Gemma 2B 16384, 7B 24576; Gemma 2 2B 9216, 9B 14336, 27B 36864;
    # Gemma 3 1B 6912, 4B 10240, 12B 15360, 27B 21504)
    _tokens_by_width((6912, 9216, 10240, 14336, 15360, 16384, 21504, 24576, 36864),
                     _odd_width(1000, 37000, (9215, 2049)), 1 << 28),
    _gate_up, _geglu_reference)
CROSS_ENTROPY = KernelSpec(("M", "N"), _loss_problems, _loss_inputs, _loss_reference)  # N: the vocabulary
ADD_RMS_NORM = KernelSpec(
    ("M", "N"),
    # tokens x hidden size (Qwen 2 1.5B 1536, Llama 3.2 1B 2048, 3B 3072, Qwen 2.5 7B 3584, Llama 3 8B 4096, Mistral
    # Small 5120, DeepSeek V3 7168, Llama 3 70B 8192, 405B 16384)
    _tokens_by_width((1536, 2048, 3072, 3584, 4096, 5120, 7168, 8192, 16384), _odd_width(500, 16000, (4095, 1001)),
                     1 << 28),
    _add_rms_norm_inputs, _add_rms_norm_reference)


def _rows(c):
    return [c["M"]]


def _matmul_problem(args: tuple) -> Problem:
    (m, k), n = args[0].shape, args[1].shape[1]
    return {"M": int(m), "N": int(n), "K": int(k)}


def _attention_args(problem: Problem, inputs: tuple) -> tuple:
    return (*inputs, 0 if problem["CAUSAL"] else problem["S"])  # keys j <= i + shift kept: S keeps all, 0 causal


def _attention_problem(args: tuple) -> Problem:
    b, h, s, d = args[0].shape
    return {"B": int(b), "H": int(h), "S": int(s), "D": int(d), "CAUSAL": int(args[3] == 0)}


# --- a Triton twin's configs as the Helion kernel's -------------------------------------------------------------
# Helion's matmul is its twin's program: one output tile per program, a loop over K inside it, tensor descriptors
# where the twin uses TMA, a persistent grid striding over the tiles as the twin's does (persistent_interleaved, one
# program an SM).
# The knobs the twin lacks read at Helion's defaults (no per-loop settings, no eviction policy); a twin config with
# a knob Helion's matmul has not (split tail, epilogue subtile, warp specialisation, the pointer path's alignment
# hint: TMA=2) reads as none.

def _matmul_from_twin(c: dict, problem: Problem | None = None, counts: Mapping[str, int] | None = None
                      ) -> dict | None:
    if any(c.get(k, 0) for k in ("SPLIT_TAIL", "EPILOGUE_SUBTILE", "WARP_SPECIALIZE")) or c.get("TMA", 0) == 2:
        return None
    persistent = {"pid_type": "persistent_interleaved", "num_sm_multiplier": 1}
    grid = persistent if c.get("PERSISTENT", 0) else {"pid_type": "flat"}
    return {"atomic_indexing": [], "block_sizes": [c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]],
            "indexing": ["tensor_descriptor" if c.get("TMA", 0) else "pointer"] * 3, "l2_groupings": [c["GROUP_M"]],
            "load_eviction_policies": ["", ""], "loop_orders": [[0, 1]], "num_stages": c["num_stages"],
            "num_warps": c["num_warps"], **grid, "range_flattens": [None, None], "range_multi_buffers": [None, None],
            "range_num_stages": [0, 0], "range_unroll_factors": [0, 0], "range_warp_specializes": []}


# The twin refuses TMA for the whole config where a row stride of A, B or C is not 16-byte aligned (``tma_ok``): its
# program builds descriptors for all three. Helion's tensor-descriptor indexing decides tensor by tensor and loads or
# stores through pointers where a descriptor is not supported (1.4.0 and 1.5.1:
# helion/_compiler/indexing_strategy.py, TensorDescriptorIndexingStrategy.codegen_load). So on an unaligned problem
# the twin's space lacks every tensor-descriptor config Helion runs. All three of the race's matmuls are unaligned;
# on 4155x4096x4476 bf16 (rows of K 8,952 bytes) the twin gave 560 candidates, none with tensor descriptors, and 1,088
# with its rows rounded up (528 with them); the shipped model scores the best of those 1.75, the best of the 560 1.01;
# Helion quick's pick there, 2-10% faster than the tunes' in sessions 26-30, has three tensor-descriptor loads
# (scripts/experiments/helion_twin_unaligned.py, Helion 1.4.0 answering as the H200: its output
# scripts/results/helion_twin_unaligned-helion140-cpu-2026-12-03-s30.jsonl).
def _matmul_aligned(problem: Problem, dtype: str) -> Problem:
    """``problem`` with K and N rounded up to 16-byte rows of ``dtype``: what the twin's validity reads for Helion's
    candidates (its other rules, shared memory and registers, read the config alone)."""
    from costmodel.kernels.base import DTYPE_BYTES

    per = 16 // DTYPE_BYTES[dtype]
    return {**problem, **{d: -(-problem[d] // per) * per for d in ("K", "N")}}


# The row-wise kernels are their twin's program too (costmodel/kernels/rowwise.py): ROWS whole rows a program, a
# row of N in one block (BLOCK_N >= N: no reduction loop) or in BLOCK_N chunks (a reduction loop of BLOCK_N),
# programs over the rows or one an SM striding over them (PERSISTENT). Their one loop's settings and every memory
# op's indexing and eviction are the twin's: pointers, no policy. Session 20's race: on softmax 11365x6000 bf16
# Helion quick's pick (one row a program, no reduction loop, 8 warps) ran in 0.0736 ms, costmodel's, Helion's default
# (two rows a program), in 0.0974 ms: the model's other picks of Helion's random population were rolled reductions,
# 0.117-0.201 ms in the batch. The twin's space holds quick's config.
def _rows_from_twin(c: dict, problem: Problem, counts: Mapping[str, int]) -> dict | None:
    persistent = {"pid_type": "persistent_interleaved", "num_sm_multiplier": 1}
    grid = persistent if c["PERSISTENT"] else {"pid_type": "flat"}
    return {"atomic_indexing": [], "block_sizes": [c["ROWS"]],
            "indexing": ["pointer"] * counts["indexing"],
            "load_eviction_policies": [""] * counts["load_eviction_policies"],
            "num_stages": c["num_stages"], "num_warps": c["num_warps"], **grid, "range_flattens": [None],
            "range_multi_buffers": [None], "range_num_stages": [0], "range_unroll_factors": [0],
            "range_warp_specializes": [], "reduction_loops": [c["BLOCK_N"] if c["BLOCK_N"] < problem["N"] else None]}


# Helion's attention is its twin's program too (costmodel/kernels/attention.py): one program a (batch x head, BLOCK_M
# query rows) tile, the query tile loaded once, BLOCK_N key rows a step of the loop over the keys, the query tiles
# of one head next to each other in launch order (loop order [1, 0]: pid 0 walks the query tiles), tensor
# descriptors where the twin uses TMA. It runs every key block, masked, where the twin's causal program stops at
# the diagonal. Its space joins the candidates only: its rows do not train (helion/model.py: with them, the one
# Helion attention group's held-out top-8 went from 0.847 to 0.029: a lead, session 19, seed 0, output not kept).
# Session 21's race (scripts/results/bench_helion-h200-2026-12-02-s21b.jsonl, then -s21c): with Helion's random
# population alone, on attention 1x32x8192 causal bf16 six of the model's top 8 did not compile (256- to 2048-row
# tiles) and two ran in 108-131 ms against quick's 3.65 ms. With this space, the twin's 128x128 tile at 8 warps and 2
# stages won that problem and 3x16x3681 (1.750 and 1.075 of quick) and lost 4x16x2049 (0.781). Its 32- and 64-key
# blocks at 2-4 stages do not compile in Helion's program (scripts/experiments/helion_twin_compiles.py): the data
# holds some of this space for the model to learn that (collect/plan.py, HELION_TWIN_SHARE).
def _attention_from_twin(c: dict, problem: Problem, counts: Mapping[str, int]) -> dict | None:
    return {"atomic_indexing": [], "block_sizes": [1, c["BLOCK_M"], c["BLOCK_N"]],
            "indexing": ["tensor_descriptor" if c["TMA"] else "pointer"] * counts["indexing"], "l2_groupings": [1],
            "load_eviction_policies": [""] * counts["load_eviction_policies"], "loop_orders": [[1, 0]],
            "num_stages": c["num_stages"], "num_warps": c["num_warps"], "pid_type": "flat",
            "range_flattens": [None, None], "range_multi_buffers": [None, None], "range_num_stages": [0, 0],
            "range_unroll_factors": [0, 0], "range_warp_specializes": []}


FAMILIES = {f.name: f for f in (
    HelionFamily("matmul", lambda c: [c["M"], c["N"], c["K"]], lambda c: [], 2, ((2, 1), (2, 1)), twin="matmul",
                 problem_of=_matmul_problem, from_twin=_matmul_from_twin, twin_problem=_matmul_aligned),
    # a rolled reduction reads the row again in each pass after the first (max, then sum and store)
    HelionFamily("softmax", _rows, lambda c: [c["N"]], 1, ((1, 1), (3, 1)), twin="softmax",
                 from_twin=_rows_from_twin),
    HelionFamily("layer_norm", _rows, lambda c: [c["N"]], 1, ((3, 1), (5, 1)), twin="layernorm",
                 from_twin=_rows_from_twin),
    HelionFamily("rms_norm", _rows, lambda c: [c["N"]], 1, ((2, 1), (3, 1)), twin="rmsnorm",
                 from_twin=_rows_from_twin),
    # (batch x heads, query rows, key rows); the head dim is specialised, whole in every tile
    HelionFamily("attention", lambda c: [c["B"] * c["H"], c["S"], c["S"]], lambda c: [], 2, ((3, 1), (3, 1)),
                 twin="attention", args=_attention_args, problem_of=_attention_problem,
                 from_twin=_attention_from_twin),
    HelionFamily("swiglu", lambda c: [c["M"], c["N"]], lambda c: [], 2, ((2, 1), (2, 1)), own=SWIGLU),
    HelionFamily("geglu", lambda c: [c["M"], c["N"]], lambda c: [], 2, ((2, 1), (2, 1)), own=GEGLU),
    # rows, then the vocabulary in a loop of each program (its amax and sum reduce a tile: no reduction loop); the
    # logits, the targets and the gathered target logits loaded, the loss stored
    HelionFamily("cross_entropy", lambda c: [c["M"], c["N"]], lambda c: [], 1, ((3, 1), (3, 1)), own=CROSS_ENTROPY),
    # a rolled reduction reads x and the residual again in its second pass, with the weight; both stores there
    HelionFamily("add_rms_norm", _rows, lambda c: [c["N"]], 1, ((3, 2), (5, 2)), own=ADD_RMS_NORM),
)}


def get(kernel: str) -> HelionFamily:
    """The family of ``kernel`` ("helion:softmax" or "softmax")."""
    name = kernel[len(PREFIX):] if kernel.startswith(PREFIX) else kernel
    if name not in FAMILIES:
        raise CostModelError(f"unknown Helion kernel {kernel!r}; known: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[name]


# --- candidates ------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _seeded(seed: int):
    """Helion's config generation draws from the global ``random`` module (1.4.0 and 1.5.1): seed it, then put
    the caller's state back."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def op_counts(spec) -> dict[str, int]:
    """Counts of the per-op lists of the bound kernel's spec, from its default config (memory ops, loads)."""
    d = configs.as_dict(spec.default_config())
    return {k: len(d[k]) for k in configs.PER_OP if isinstance(d.get(k), list)}


def candidates(bound, n: int, seed: int, seed_configs: tuple = ()) -> list[dict]:
    """Up to ``n`` distinct canonical configs of ``bound``'s ConfigSpec: Helion's default first, then
    ``seed_configs`` and the compiler's own seed configs, then a random population drawn with ``seed`` (Helion's
    ``ConfigGeneration.random_population``). Fewer than ``n`` only where the spec holds fewer."""
    from helion.autotuner.config_generation import ConfigGeneration

    spec = bound.config_spec
    counts = op_counts(spec)
    out: dict[str, dict] = {}
    for c in [spec.default_config(), *seed_configs]:
        out.setdefault(configs.config_json(c, counts), configs.normalise(c, counts))
    gen = ConfigGeneration(spec)
    with _seeded(seed):
        for _ in range(8):  # later rounds only top up what random duplicates left short
            for c in gen.random_population(max(n, 2), user_seed_configs=list(seed_configs)):
                out.setdefault(configs.config_json(c, counts), configs.normalise(c, counts))
            if len(out) >= n:
                break
    return list(out.values())[:n]


def neighbours(bound, config: Mapping, radius: int = 1) -> list[dict]:
    """The canonical configs one step from ``config`` in ``bound``'s ConfigSpec, as Helion's pattern search steps
    (1.4.0 and 1.5.1): each knob its fragment's ``pattern_neighbors`` within ``radius`` (a power of two's steps
    count in log2: radius 2 takes a block size or a reduction loop of 4,096 to 1,024-16,384; Helion 1.4.0's
    surrogate pattern search, quick's, uses 2), the others as they are, and two block sizes at once; distinct,
    ``config`` itself left out, in Helion's order."""
    from helion.autotuner.config_generation import ConfigGeneration

    spec = bound.config_spec
    counts = op_counts(spec)
    gen = ConfigGeneration(spec)
    base = gen.flatten(helion_config(config))
    fixed = set(gen.overridden_flat_indices)
    steps = [[] if i in fixed else f.pattern_neighbors(base[i], radius) for i, f in enumerate(gen.flat_spec)]
    flats = [[*base[:i], v, *base[i + 1:]] for i, vs in enumerate(steps) for v in vs]
    blocks = [i for i in gen.block_size_indices if i not in fixed]
    for a, i in enumerate(blocks):
        for j in blocks[a + 1:]:
            for vi in steps[i]:
                for vj in steps[j]:
                    f = [*base]
                    f[i], f[j] = vi, vj
                    flats.append(f)
    own = configs.config_json(config, counts)
    out: dict[str, dict] = {}
    for f in flats:
        c = configs.normalise(gen.unflatten(f), counts)
        out.setdefault(configs.config_json(c, counts), c)
    out.pop(own, None)
    return list(out.values())


def helion_config(canonical: Mapping):
    """The ``helion.Config`` of a canonical config."""
    import helion

    return helion.Config(**dict(canonical))


def twin_candidates(bound, kernel: str, problem: Problem, dtype: str, hw, unaligned: bool = False) -> list[dict]:
    """The twin family's valid configs of ``problem`` on ``hw`` (``costmodel.space``) that ``kernel`` can express
    (``from_twin``) and ``bound``'s ConfigSpec accepts, canonical, in the twin space's order; none for a kernel
    without ``from_twin``. ``unaligned``: valid for the problem as the family's ``twin_problem`` gives it (matmul's:
    the rows rounded up to 16 bytes, since Helion's tensor descriptors fall back per tensor where the twin's TMA
    refuses the config). Candidates beside the random population: on a 4155x4096x4476 bf16 matmul 698 of Helion's
    1,000 random configs have 16-row tiles and 570 are 16x16 (scripts/helion_candidates.py, Helion 1.5.1:
    scripts/results/helion_candidates-cpu-2026-12-02-s19.json), and the race's quick search won with 64x256x64
    (session 19, BENCHMARKS), a tile the twin's space holds."""
    import helion

    fam = get(kernel)
    if fam.from_twin is None:
        return []
    from costmodel import space

    spec, out = bound.config_spec, {}
    counts = op_counts(spec)
    as_read = fam.twin_problem(problem, dtype) if unaligned and fam.twin_problem else problem
    for c in space.enumerate_valid(fam.twin_family(), as_read, dtype, hw):
        h = fam.from_twin(c, problem, counts)
        key = None if h is None else configs.config_json(h, counts)
        if key is None or key in out:
            continue
        try:
            spec.normalize(helion.Config(**h))
        except Exception:  # noqa: BLE001 - a config this spec does not allow (Helion raises several kinds)
            continue
        out[key] = configs.normalise(h, counts)
    return list(out.values())


def structure(bound) -> dict[str, Any]:
    """The kernel's shape as its ConfigSpec exposes it: tiled dims, reductions, loops, memory ops, loads."""
    spec = bound.config_spec
    counts = op_counts(spec)
    return {"tiles": len(spec.block_sizes), "reductions": len(spec.reduction_loops),
            "loop_orders": len(spec.loop_orders), "l2_groupings": len(spec.l2_groupings),
            "loops": len(spec.range_unroll_factors), "memory_ops": counts.get("indexing", 0),
            "loads": counts.get("load_eviction_policies", 0),
            "tile_hints": [b.size_hint for b in spec.block_sizes],
            "reduction_hints": [r.size_hint for r in spec.reduction_loops]}
