"""A Helion config's Triton launch as data, so that the benchmarker's compile pool can compile it.

Helion's generated host function takes a ``_launcher`` keyword (1.4.0 and 1.5.1; Helion's own autotuner
precompiles through it): called with a launcher that records what it is given, it hands over the Triton
JITFunction, the grid, the positional arguments and the launch options, and launches nothing. ``capture`` does
that in a process that holds the bound kernel and its arguments on the device; ``LaunchSpec`` is the result with
every tensor described by shape, stride and dtype (a Triton ``TensorDescriptor``, which Helion passes under
``tensor_descriptor`` indexing, by its fields over a described base), so it pickles; ``compile_launch`` compiles
it in another process, the tensors made on the meta device, with ``warmup=True`` (compile, no launch). The
generated module is loaded there from its source text (``PyCodeCache``), so its JITFunction, its source and hence
Triton's cache key are those of the process that times the config: its first call finds the binary in Triton's
on-disk cache.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str  # torch dtype name, "float16"


@dataclass(frozen=True)
class Described:
    """An object of a dataclass (a Triton ``TensorDescriptor``) by its class and fields, each described."""
    cls: tuple[str, str]  # module, qualified name
    fields: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class LaunchSpec:
    code: str           # the generated module's source
    kernel: str         # the Triton kernel's name in it
    grid: tuple
    args: tuple         # described (Tensor, Described) or plain values
    options: tuple      # the launcher's keyword arguments, sorted
    codegen_s: float    # seconds Helion's code generation and the capture took


class _Captured(Exception):
    def __init__(self, kernel, grid, args, kwargs):
        super().__init__("captured")
        self.kernel, self.grid, self.args, self.kwargs = kernel, grid, args, kwargs


def _capturing_launcher(triton_kernel, grid, *args, **kwargs):
    raise _Captured(triton_kernel, grid, args, kwargs)


def capture(bound, config: dict, args: tuple) -> LaunchSpec:
    """The launch of ``config`` of the bound kernel on ``args``, compiled by Helion's own path (``compile_config``,
    as the timing worker compiles it, so this process's module is the one it loads) and captured, not launched.
    Raises what Helion raises for a config it cannot generate."""
    import helion

    t0 = time.perf_counter()
    host = bound.compile_config(helion.Config(**config), allow_print=False)
    try:
        host(*args, _launcher=_capturing_launcher)
    except _Captured as c:
        code = open(sys.modules[host.__module__].__file__).read()
        args, options = _compile_only(c.args, c.kwargs)
        return LaunchSpec(code, c.kernel.fn.__name__, tuple(c.grid), tuple(describe(a) for a in args),
                          tuple(sorted(options.items())), time.perf_counter() - t0)
    raise RuntimeError("Helion's host function returned without calling its launcher")


def describe(value):
    import torch

    if isinstance(value, torch.Tensor):
        if value.data_ptr() % 16:  # a compile on a meta tensor would assume the alignment the real one lacks
            raise ValueError("a tensor argument not 16-byte aligned")
        return Tensor(tuple(value.shape), tuple(value.stride()), str(value.dtype).removeprefix("torch."))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return Described((type(value).__module__, type(value).__qualname__),
                         tuple((f.name, describe(getattr(value, f.name))) for f in dataclasses.fields(value)))
    if isinstance(value, (list, tuple)):
        return type(value)(describe(v) for v in value)
    return value


def rebuild(desc):
    """``desc``'s value with meta tensors for the tensors."""
    import importlib

    import torch

    if isinstance(desc, Tensor):
        return torch.empty_strided(desc.shape, desc.stride, dtype=getattr(torch, desc.dtype), device="meta")
    if isinstance(desc, Described):
        cls = importlib.import_module(desc.cls[0])
        for part in desc.cls[1].split("."):
            cls = getattr(cls, part)
        return cls(**{k: rebuild(v) for k, v in desc.fields})
    if isinstance(desc, (list, tuple)):
        return type(desc)(rebuild(v) for v in desc)
    return desc


def _compile_only(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The launcher's arguments as a compile reads them: Helion's own ``compile_only_launch_args`` (1.5: its
    private launcher keywords dropped, the buffers its launcher appends as empty tensors); 1.4.0's launcher has
    neither, so they pass as they are."""
    try:
        from helion.runtime.triton.launcher import compile_only_launch_args
    except ImportError:
        return args, kwargs
    return compile_only_launch_args(*args, **kwargs)


def run_options(options: dict) -> dict:
    """The launcher's keywords as Helion's default launcher hands them to ``JITFunction.run`` (1.4.0 and 1.5.1):
    ``launch_cooperative_grid`` always, ``ptx_options`` only when set."""
    run = {"launch_cooperative_grid": False, **{k: v for k, v in options.items() if k != "ptx_options"}}
    if options.get("ptx_options") is not None:
        run["ptx_options"] = options["ptx_options"]
    return run


def load_modules() -> None:
    """Import what loading a generated module imports: helion (the module's own imports) and inductor's code cache,
    5-15 s once in a fresh process on the 2-core CPU machine, which a compile's time should not carry."""
    import helion  # noqa: F401
    from torch._inductor.codecache import PyCodeCache  # noqa: F401


def compile_launch(spec: LaunchSpec):
    """The Triton kernel of ``spec`` compiled for the active driver's target, tensors on the meta device; the
    CompiledKernel (into Triton's on-disk cache, not loaded)."""
    from torch._inductor.codecache import PyCodeCache

    jit = getattr(PyCodeCache.load(spec.code), spec.kernel)
    return jit.run(*rebuild(spec.args), grid=spec.grid, warmup=True, **run_options(dict(spec.options)))
