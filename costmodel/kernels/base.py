"""What every kernel family provides; one subclass per module under costmodel/kernels/.

A *problem* is a dict of named integer dims (``{"M": 4096, "N": 4096, "K": 4096}``); a *config* is a dict of
knob values. ``num_warps`` and ``num_stages`` are knobs like any other: launchers pass them to Triton.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import io
import itertools
import json
import textwrap
import tokenize
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Iterator

import numpy as np

from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord

Problem = dict[str, int]
Config = dict[str, int]
# columns of many rows (name -> float64 array) or one row (name -> number): a family's cost and resource formulas
# are plain arithmetic and numpy ufuncs, so the launcher and validity (one row) and the features (every row at
# once) compute each kernel fact with the same code. Keys: the dims, the knobs, the hardware record's fields
# (sm_count, smem_per_sm, ...) and "e", bytes per element.
Cols = dict[str, Any]

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[int, ...]
    # for a knob added to a family later: the value its configs recorded before then ran with (the dataset reads
    # their missing column as this); None for a knob the family has always had
    absent: int | None = None
    # a knob that tunes how a program runs its share of the work (warps, pipelining, program order), not how the work
    # is cut: configs that differ only in such knobs are one structure (space.structure), which collect --active's
    # probe and tune's explore draw once
    detail: bool = False
    # a dim of the tile a program works on (rows, columns, a K slice): ``space.neighbours`` reshapes the tile along two
    # such knobs at once, one halved where the other doubles
    tile: bool = False


def torch_dtype(dtype: str):
    import torch

    return getattr(torch, dtype)


def rand_generator(device: str, seed: int):
    """A seeded generator for ``device``; None on "meta" (shape-only inputs, used by the compile pool)."""
    import torch

    return None if device == "meta" else torch.Generator(device=device).manual_seed(seed)


def launch(kernel, grid: tuple[int, ...], args: tuple, kwargs: dict, warmup: bool):
    """Run ``kernel`` on ``grid`` or, with ``warmup``, only compile it (what the compile pool does)."""
    if warmup:
        return kernel.warmup(*args, grid=grid, **kwargs)
    return kernel[grid](*args, **kwargs)


def resident_programs(c: Cols, smem, regs):
    """Programs one SM holds at once: warp slots, registers (allocated 8 a thread at a time) and shared memory; at
    least one (a config over the shared-memory limit is invalid, or shows in the features)."""
    threads = 32 * c["num_warps"]
    by_regs = np.floor(c["regs_per_sm"] / (np.ceil(regs / 8) * 8 * threads))
    by_smem = np.floor(c["smem_per_sm"] / np.maximum(smem, 1.0))
    return np.maximum(1.0, np.minimum(np.minimum(32.0, np.floor(c["max_threads_per_sm"] / threads)),
                                      np.minimum(by_regs, by_smem)))


def busiest_sm_steps(c: Cols, tiles, loop_trips, split_tiles=0.0, parts=1.0):
    """Loop steps of the busiest SM, the schedule's critical path: whole waves of a tile per SM, then the
    ``split_tiles`` of a split tail in ``parts`` each. On a grid that leaves SMs idle it is what a split shortens
    (issue 16's odd matmul: 26 tiles on 132 SMs, 128 K steps each; split in 5, about 26)."""
    whole = np.ceil((tiles - split_tiles) / c["sm_count"])
    rounds = np.ceil(split_tiles * parts / c["sm_count"])  # one, unless the tail was over half the SMs
    return whole * loop_trips + np.where(split_tiles > 0, rounds * np.ceil(loop_trips / parts), 0.0)


def row_cols(problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> Cols:
    """One row as ``Cols``: its dims, knobs, hardware fields and bytes per element."""
    hw_fields = {k: v for k, v in vars(hw).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {**hw_fields, **problem, **config, "e": DTYPE_BYTES[dtype]}


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a family's call: ``kernel[grid](*args, **kwargs)``. ``zero``: buffers the kernel
    expects zeroed (counters), which a launcher that reuses its workspaces zeroes before each launch."""

    kernel: Any
    grid: tuple[int, ...]
    args: tuple
    kwargs: dict
    zero: tuple = ()


def int_specialisation(v: int) -> tuple[bool, bool]:
    """What Triton keys a compiled binary on for a specialised int argument."""
    return v % 16 == 0, v == 1


def check_dims(name: str, dims: tuple[str, ...], problem: dict[str, Any], min_dim=lambda d: 1) -> Problem:
    """``problem`` with every one of ``dims`` and no other, each an integer of at least ``min_dim(dim)``; else a
    CostModelError naming ``name`` (the kernel asked for) and what is wrong."""
    missing = [d for d in dims if d not in problem]
    unknown = [d for d in problem if d not in dims]
    if missing or unknown:
        raise CostModelError(
            f"{name} needs dims {','.join(dims)}"
            + (f"; missing {','.join(missing)}" if missing else "")
            + (f"; unknown {','.join(unknown)}" if unknown else "")
        )
    out: Problem = {}
    for d in dims:
        try:
            v = int(problem[d])
        except (TypeError, ValueError):
            raise CostModelError(f"{name}: dim {d}={problem[d]!r} is not an integer") from None
        if v != float(problem[d]) or v < min_dim(d):
            raise CostModelError(f"{name}: dim {d}={problem[d]!r} must be an integer >= {min_dim(d)}")
        out[d] = v
    return out


def check_dtype(name: str, dtypes: tuple[str, ...], dtype: str) -> str:
    if dtype not in dtypes:
        raise CostModelError(f"{name} does not support dtype {dtype!r}; choose from {', '.join(dtypes)}")
    return dtype


class KernelFamily(ABC):
    """One tunable kernel family: kernels, launcher, config space, problems, reference and costs."""

    name: ClassVar[str]
    dims: ClassVar[tuple[str, ...]]
    knobs: ClassVar[tuple[Knob, ...]]
    dtypes: ClassVar[tuple[str, ...]] = ("float16", "bfloat16")
    # relative error ||out - ref|| / ||ref|| allowed per dtype (fp32 accumulation, half-precision output)
    tolerance: ClassVar[dict[str, float]] = {"float16": 5e-3, "bfloat16": 2e-2}

    # --- problems -------------------------------------------------------------------------------------
    def check_problem(self, problem: dict[str, Any]) -> Problem:
        """Validate and normalise a problem: every dim present, a positive integer; no unknown dims."""
        out = check_dims(self.name, self.dims, problem, self.min_dim)
        self.check_problem_extra(out)
        return out

    def min_dim(self, dim: str) -> int:
        return 1

    def check_problem_extra(self, problem: Problem) -> None:
        """Family-specific limits (e.g. a head dim the kernel supports)."""

    def check_dtype(self, dtype: str) -> str:
        return check_dtype(self.name, self.dtypes, dtype)

    @abstractmethod
    def problems(self, rng: np.random.Generator, n: int) -> list[Problem]:
        """``n`` realistic problems: LLM shapes, skinny decode shapes, odd sizes."""

    # --- config space ---------------------------------------------------------------------------------
    @abstractmethod
    def is_valid(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> bool:
        """Whether ``config`` can run ``problem`` on ``hw`` (shared memory, registers, block limits)."""

    @abstractmethod
    def default_config(self, problem: Problem, dtype: str, hw: HardwareRecord) -> Config:
        """What a user would write without tuning: the baseline every report shows."""

    def twin(self, problem: Problem, config: Config) -> Config:
        """The config of the space that runs what ``config`` runs over ``problem``: ``config`` itself, unless the
        family leaves a knob value out of the space where it changes nothing (a row recorded before then)."""
        return config

    def all_configs(self) -> Iterator[Config]:
        names = [k.name for k in self.knobs]
        for values in itertools.product(*(k.values for k in self.knobs)):
            yield dict(zip(names, values))

    def check_config(self, problem: Problem, dtype: str, config: dict[str, Any], hw: HardwareRecord) -> Config:
        names = {k.name for k in self.knobs}
        if set(config) != names:
            raise CostModelError(
                f"{self.name} config needs knobs {','.join(sorted(names))}, got {','.join(sorted(config))}"
            )
        for k in self.knobs:
            if config[k.name] not in k.values:
                raise CostModelError(f"{self.name}: knob {k.name}={config[k.name]} not in {k.values}")
        if not self.is_valid(problem, dtype, config, hw):
            raise CostModelError(f"{self.name}: config {config} is invalid for {problem} {dtype} on {hw.gpu}")
        return dict(config)

    def compile_key(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> tuple:
        """Problems with equal keys share one compiled binary for ``config``: Triton specialises every int
        argument not in ``do_not_specialize`` on divisibility by 16 and on == 1, so the key holds that of every
        such argument the launch passes (families whose launches pass more than the dims add them)."""
        return (dtype, tuple(sorted(config.items())), tuple(int_specialisation(v) for v in problem.values()))

    # --- running --------------------------------------------------------------------------------------
    @abstractmethod
    def make_inputs(self, problem: Problem, dtype: str, device: str, seed: int = 0) -> tuple:
        """Random inputs (never zeros: they hide unwritten outputs and run faster than real data)."""

    @abstractmethod
    def make_output(self, problem: Problem, dtype: str, device: str):
        """An empty output buffer (the benchmarker poisons it with NaN before a correctness check)."""

    @abstractmethod
    def reference(self, problem: Problem, inputs: tuple):
        """The torch result, in float32."""

    def launches(self, problem: Problem, inputs: tuple, out, config: Config, hw: HardwareRecord) -> list[Launch]:
        """The kernel launches one call makes, in order, with their workspaces allocated. A family defines this
        (then ``launch`` and ``bind`` follow) or overrides ``launch`` itself (then ``bind`` calls it)."""
        raise NotImplementedError

    def launch(self, problem: Problem, inputs: tuple, out, config: Config, hw: HardwareRecord, warmup: bool = False):
        """Launch (or with ``warmup`` only compile) the kernel through Triton's JIT, workspaces allocated afresh;
        returns the first launch's compiled kernel."""
        done = [launch(l.kernel, l.grid, l.args, l.kwargs, warmup) for l in self.launches(problem, inputs, out, config, hw)]
        return done[0]

    def bind(self, problem: Problem, inputs: tuple, out, config: Config, hw: HardwareRecord):
        """A callable that runs the kernel on these tensors with the per-call host work done once (compiled
        kernels, grid, arguments, TMA descriptors, workspaces): what a user calling it again pays, and what the
        benchmarker times (``costmodel.kernels.bound``)."""
        from costmodel.kernels.bound import Bound

        try:
            steps = self.launches(problem, inputs, out, config, hw)
        except NotImplementedError:
            return Bound.calling(lambda: self.launch(problem, inputs, out, config, hw))
        return Bound.of(steps)

    # --- cost and resource terms (the model's features encode them) --------------------------------------
    def terms(self, c: Cols) -> Cols:
        """The family's estimates of what a config does, column-wise over rows of one family (``Cols``): tiles,
        programs, splits, smem, regs, occupancy, loop_trips, loop_remainder, elems_per_thread, bytes_per_tile,
        flops_per_tile, padding (work launched over work needed) and its parts pad_rows, pad_cols, pad_loop, flops,
        min_bytes, tma_ok (whether the problem's strides allow TMA). A family without them gets the generic
        features only (``costmodel.features``)."""
        return {}

    # --- costs for roofline figures -------------------------------------------------------------------
    @abstractmethod
    def flops(self, problem: Problem) -> float: ...

    @abstractmethod
    def min_bytes(self, problem: Problem, dtype: str) -> float:
        """Each input read once, each output written once."""

    # --- identity -------------------------------------------------------------------------------------
    # Module-text hashes under which rows of the kernel that today's code compiles were recorded, keyed by that
    # kernel's ``kernel_hash`` (so a later kernel edit drops them by itself): groups were keyed by the whole
    # module's text until the kernel hash replaced it, so a docstring edit made a new hash for the same kernel.
    recorded_as: ClassVar[dict[str, tuple[str, ...]]] = {}
    # bump when a change outside the jit functions and knobs alters what a config runs (the launcher's grid or
    # runtime arguments): the kernel hash sees only what Triton compiles
    revision: ClassVar[int] = 0

    @cached_property
    def kernel_hash(self) -> str:
        """What compiles: each jit function the family's modules hold (normalised source: no comments or
        docstrings, layout-free), the jit functions and global values they reference, the knob declarations and
        ``revision``. Docstring, comment and Python-side edits keep it; a kernel or knob edit changes it. The
        same under TRITON_INTERPRET=1 (where kernels are InterpretedFunction) as on a GPU."""
        kernels = sorted(_jit_keys(_family_jit_functions(type(self))))
        knobs = [[k.name, list(k.values), k.absent] for k in self.knobs]
        text = json.dumps({"kernels": kernels, "knobs": knobs, "revision": self.revision}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @cached_property
    def source_hash(self) -> str:
        """The text of the family's modules (its class's and its bases'): the hash groups were keyed by before
        ``kernel_hash``; rows recorded under the current text's hash ran today's kernel."""
        src = "".join(inspect.getsource(m) for m in _family_modules(type(self)))
        return hashlib.sha256(src.encode()).hexdigest()[:16]

    @property
    def group_hashes(self) -> tuple[str, ...]:
        """The kernel hashes a group of today's kernel may be recorded under: ``kernel_hash`` (what new groups
        get) first, then the module-text hashes of the same kernel (``recorded_as``, and the current text's)."""
        legacy = (*self.recorded_as.get(self.kernel_hash, ()), self.source_hash)
        return tuple(dict.fromkeys((self.kernel_hash, *legacy)))


def _family_modules(cls: type) -> list:
    """The modules of ``cls`` and of its KernelFamily bases (a skeleton such as rowwise.py), in MRO order."""
    mods = [inspect.getmodule(c) for c in cls.__mro__ if issubclass(c, KernelFamily) and c is not KernelFamily]
    return list(dict.fromkeys(mods))


def _jit_types() -> tuple[type, ...]:
    from triton.runtime import interpreter, jit

    return tuple(t for t in (getattr(jit, "JITCallable", None), jit.JITFunction,
                             getattr(interpreter, "InterpretedFunction", None)) if t is not None)


def _family_jit_functions(cls: type) -> list:
    """The jit functions (JITFunction on a GPU, InterpretedFunction under the interpreter) the family's modules
    hold, defined there or imported."""
    types = _jit_types()
    return [v for m in _family_modules(cls) for v in vars(m).values() if isinstance(v, types)]


def _jit_keys(roots: list) -> list[list[str]]:
    """[qualified name, key] of ``roots`` and every jit function they reference, each once. A key hashes the
    function's tokens (decorator included; comments, blank lines and its docstring left out) and the values of
    the plain global constants it names, as Triton's own cache key does, but without Triton's line numbers."""
    types, seen, out, todo = _jit_types(), set(), [], list(roots)
    while todo:
        fn = todo.pop().fn
        if fn in seen:
            continue
        seen.add(fn)
        src = textwrap.dedent(inspect.getsource(fn))
        consts = []
        for name in sorted({n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}):
            v = fn.__globals__.get(name)
            if isinstance(v, types):
                todo.append(v)
            elif type(v).__name__ == "constexpr" or isinstance(v, (bool, int, float, str)):
                consts.append(f"{name}={getattr(v, 'value', v)!r}")
        digest = hashlib.sha256("\x1f".join([*_code_tokens(src), *consts]).encode()).hexdigest()
        out.append([fn.__qualname__, digest])
    return out


def _code_tokens(src: str) -> list[str]:
    """The tokens of a function's source that compile: no comments, no non-logical newlines, no docstring;
    indentation as markers, so re-indenting or re-wrapping changes nothing."""
    tree = ast.parse(src).body[0]
    doc = None
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(getattr(tree.body[0], "value", None),
                                                                        ast.Constant) \
            and isinstance(tree.body[0].value.value, str):
        d = tree.body[0]
        doc = ((d.lineno, d.col_offset), (d.end_lineno, d.end_col_offset))
    out, skip_newline = [], False
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if doc and doc[0] <= tok.start < doc[1]:
            skip_newline = True
            continue
        if tok.type == tokenize.NEWLINE and skip_newline:
            skip_newline = False
            continue
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER):
            continue
        out.append(tokenize.tok_name[tok.type] if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE)
                   else tok.string)
    return out
