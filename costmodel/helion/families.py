"""Helion kernels as costmodel families: what each kernel is (its problems, inputs, reference, and which problem
extent each of its ConfigSpec's block sizes and reductions spans), and its candidates from Helion's own spec.

Nothing here imports helion until a kernel is bound, so problems and extents work where helion is absent. The
five kernels with a Triton twin (costmodel/kernels/) take the twin's problem generator, inputs and reference: the
same realistic shapes and the same correctness check, written once; SwiGLU has its own.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from costmodel.benchmarks import is_named
from costmodel.errors import CostModelError
from costmodel.helion import configs

PREFIX = "helion:"
Problem = dict[str, int]


@dataclass(frozen=True)
class HelionFamily:
    name: str                       # the kernel's name in costmodel/helion/kernels.py; dataset kernel "helion:<name>"
    twin: str | None                # the Triton family with the same problems (dims, generator, inputs, reference)
    # extents of the problem each ConfigSpec block size tiles, in the spec's block order, and each reduction
    # (roll-able loop) spans; written on columns (name -> array or number), so features use them on a whole table
    tiles: Callable[[dict], list]
    reductions: Callable[[dict], list]
    grid: int                       # the leading tiles that make the launch grid; the rest are loops in a program
    # the memory ops a compiled config runs, (loads, stores), with its reductions unrolled and rolled: a prefix of
    # its ``indexing`` list (the spec lists more ops than run: the entries past the prefix change no code), the
    # stores last and the loads first in ``load_eviction_policies``. Read off generated code (block_ptr on one op
    # at a time, helion 1.5.1); tests/test_helion_tune.py checks them against ``features.spec_shape``
    memory_ops: tuple[tuple[int, int], tuple[int, int]]

    @property
    def kernel(self) -> str:
        return PREFIX + self.name

    def twin_family(self):
        from costmodel.kernels import get_family

        return get_family(self.twin)

    @property
    def dims(self) -> tuple[str, ...]:
        return self.twin_family().dims if self.twin else ("M", "N")

    @property
    def dtypes(self) -> tuple[str, ...]:
        return self.twin_family().dtypes if self.twin else ("float16", "bfloat16")

    @property
    def tolerance(self) -> dict[str, float]:
        """Relative error (norm) a config's output may have against the float32 reference: the twin's; SwiGLU
        takes the base family's (one rounding of an elementwise product)."""
        from costmodel.kernels.base import KernelFamily

        return self.twin_family().tolerance if self.twin else KernelFamily.tolerance

    def kernel_hash(self, version: str | None = None) -> str:
        """The group identity (``source_hash``): the kernel's source, decorator included, and the Helion version
        (``version``, default the installed one), since one config compiles to different code under 1.4 and 1.5.
        Read from the file, so helion is not imported."""
        import hashlib

        text = f"{_kernel_source(self.name)}\nhelion {version or _installed()}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def problems(self, rng: np.random.Generator, n: int) -> list[Problem]:
        """``n`` realistic problems, none a benchmark's (costmodel/benchmarks.py, under the twin's name)."""
        out: list[Problem] = []
        for _ in range(100):
            drawn = self.twin_family().problems(rng, n) if self.twin else _swiglu_problems(rng, n)
            out += [p for p in drawn if not is_named(self.twin or self.kernel, p)][: n - len(out)]
            if len(out) == n:
                return out
        raise CostModelError(f"{self.kernel}: could not draw {n} problems outside the benchmarks' sets")

    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        if self.twin:
            return self.twin_family().make_inputs(problem, dtype, device, seed)
        import torch

        from costmodel.kernels.base import rand_generator, torch_dtype

        g = rand_generator(device, seed)
        return tuple(torch.randn(problem["M"], problem["N"], device=device, generator=g).to(torch_dtype(dtype))
                     for _ in range(2))

    def args(self, problem: Problem, inputs: tuple) -> tuple:
        """The Helion kernel's arguments for ``inputs``."""
        if self.name == "attention":  # keys j <= i + shift kept: S keeps all, 0 is causal
            return (*inputs, 0 if problem["CAUSAL"] else problem["S"])
        return tuple(inputs)

    def problem_of(self, args: tuple) -> Problem:
        """The problem of a call's arguments (the inverse of ``args``: what the Helion tuner ranks for)."""
        x = args[0]
        if self.name == "matmul":
            (m, k), n = x.shape, args[1].shape[1]
            return {"M": int(m), "N": int(n), "K": int(k)}
        if self.name == "attention":
            b, h, s, d = x.shape
            return {"B": int(b), "H": int(h), "S": int(s), "D": int(d), "CAUSAL": int(args[3] == 0)}
        m, n = x.shape
        return {"M": int(m), "N": int(n)}

    def reference(self, problem: Problem, inputs: tuple):
        """The torch result, in float32."""
        if self.twin:
            return self.twin_family().reference(problem, inputs)
        import torch.nn.functional as F

        gate, up = (t.float() for t in inputs)
        return F.silu(gate) * up

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


def _swiglu_problems(rng: np.random.Generator, n: int) -> list[Problem]:
    # tokens x intermediate size of LLM MLPs (Llama 2 7B 11008, Llama 3 8B 14336, 70B 28672, Mistral 14336, ...)
    inter = (2816, 5632, 8192, 11008, 13824, 14336, 18944, 28672)
    out = []
    for _ in range(n):
        kind = rng.choice(["prefill", "decode", "odd"], p=[0.5, 0.25, 0.25])
        if kind == "prefill":
            m, n_ = int(rng.choice([256, 512, 1024, 2048, 4096, 8192, 16384])), int(rng.choice(inter))
        elif kind == "decode":
            m, n_ = int(rng.choice([1, 2, 4, 8, 16, 32, 64, int(rng.integers(1, 129))])), int(rng.choice(inter))
        else:  # neither dim a multiple of 16
            m, n_ = int(rng.integers(17, 9000)), int(rng.choice([int(rng.integers(1000, 30000)), 11007, 3001]))
        out.append({"M": max(1, min(m, (1 << 28) // n_)), "N": n_})
    return out


def _rows(c):
    return [c["M"]]


FAMILIES = {f.name: f for f in (
    HelionFamily("matmul", "matmul", lambda c: [c["M"], c["N"], c["K"]], lambda c: [], 2, ((2, 1), (2, 1))),
    # a rolled reduction reads the row again in each pass after the first (max, then sum and store)
    HelionFamily("softmax", "softmax", _rows, lambda c: [c["N"]], 1, ((1, 1), (3, 1))),
    HelionFamily("layer_norm", "layernorm", _rows, lambda c: [c["N"]], 1, ((3, 1), (5, 1))),
    HelionFamily("rms_norm", "rmsnorm", _rows, lambda c: [c["N"]], 1, ((2, 1), (3, 1))),
    # (batch x heads, query rows, key rows); the head dim is specialised, whole in every tile
    HelionFamily("attention", "attention", lambda c: [c["B"] * c["H"], c["S"], c["S"]], lambda c: [], 2,
                 ((3, 1), (3, 1))),
    HelionFamily("swiglu", None, lambda c: [c["M"], c["N"]], lambda c: [], 2, ((2, 1), (2, 1))),
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
