"""A family's call bound to its tensors: the host work of a launch done once, so calling it again costs only the
launch itself.

Through Triton's JIT, ``kernel[grid](*args, **kwargs)`` binds the arguments, computes the specialisation key and
looks the binary up on every call; the matmul launcher also built three host TMA descriptors, allocated the split
tail's workspace and launched a second kernel that way. On the H200 that came to 26-112 us per call, longer than
the kernels of small problems (issue 15). ``Bound`` compiles (or loads) each launch's kernel once, binds its
arguments once, builds the TMA descriptors once (Triton's launcher re-encodes each host ``TensorDescriptor`` into a
CUtensorMap on every call; here the encoded arguments are kept) and keeps the workspaces; a call zeroes what must
start at zero and calls Triton's compiled launcher with the current stream (so CUDA-graph capture works).

Reaching the compiled launcher uses Triton 3.6's ``CompiledKernel.run`` (its ``CudaLauncher``) and the wrapper
Triton puts around it for tensor descriptors; where either is not what this expects (another Triton, a launch hook
such as a profiler's, a kernel that needs global scratch), a call goes through the JIT as before: slower, never
wrong.
"""

from __future__ import annotations

import inspect
import os
from typing import Callable

from costmodel.kernels.base import Launch


class Bound:
    """Call it to run the kernel(s) once more on the same tensors. ``kernel``: the first launch's compiled kernel
    (registers, spills, shared memory), once it is known; ``direct``: whether every launch goes straight to the
    compiled launcher (False where it goes through the JIT)."""

    def __init__(self, calls: list[Callable[[], object]], kernel=None, direct: bool = False):
        self._calls, self.kernel, self.direct = calls, kernel, direct

    def __call__(self) -> None:
        for call in self._calls:
            call()

    @classmethod
    def calling(cls, fn: Callable[[], object]) -> Bound:
        """A family that launches through its own ``launch``: each call runs it (the kernel it returns is kept)."""
        bound = cls([])

        def call():
            bound.kernel = fn()

        bound._calls = [call]
        return bound

    @classmethod
    def of(cls, steps: list[Launch]) -> Bound:
        if os.environ.get("TRITON_INTERPRET") == "1":  # interpreted kernels have no compiled launcher
            return cls([_through_jit(s) for s in steps])
        calls, kernels, direct = zip(*(_bind(s) for s in steps))
        return cls(list(calls), kernels[0], all(direct))


def _through_jit(step: Launch) -> Callable[[], object]:
    def call():
        for z in step.zero:
            z.zero_()
        return step.kernel[step.grid](*step.args, **step.kwargs)

    return call


def _bound_values(step: Launch) -> tuple:
    """The kernel's arguments in its signature's order, defaults filled in: what Triton's JIT hands its launcher."""
    sig = inspect.signature(step.kernel.fn)
    bound = sig.bind(*step.args, **{k: v for k, v in step.kwargs.items() if k in sig.parameters})
    bound.apply_defaults()
    return tuple(bound.arguments.values())


def _unwrap(launch_fn, values: tuple) -> tuple[Callable, tuple]:
    """The compiled launcher and the arguments it takes: where Triton wrapped it to encode tensor descriptors on
    each call, the descriptors encoded now, once."""
    names = getattr(getattr(launch_fn, "__code__", None), "co_freevars", ())
    if not names:  # no tensor descriptor: Triton's launcher is the compiled function itself
        return launch_fn, values
    cells = dict(zip(names, (c.cell_contents for c in launch_fn.__closure__)))
    if not {"launcher", "tensordesc_indices", "tensordesc_meta"} <= set(cells):
        raise LookupError("not Triton 3.6's tensor-descriptor wrapper")
    from triton.backends.nvidia.driver import make_tensordesc_arg

    metas, out = iter(cells["tensordesc_meta"]), []
    for i, v in enumerate(values):
        if i in cells["tensordesc_indices"]:
            out.extend(make_tensordesc_arg(v, next(metas)))
        else:
            out.append(v)
    return cells["launcher"], tuple(out)


def _hooked(hook) -> bool:
    """Whether a launch hook is set: Triton 3.6 keeps a ``HookChain`` there (never None; empty unless a profiler
    added to it), and passes it to every launch, which costs a call. Taken for set, every bound call went through
    the JIT: 17-65 us a call on the H200 instead of the launcher's own."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _bind(step: Launch) -> tuple[Callable[[], None], object, bool]:
    from triton import knobs
    from triton.runtime import driver

    compiled = step.kernel.warmup(*step.args, grid=step.grid, **step.kwargs)
    launcher = compiled.run  # loads the binary (raises OutOfResources as a JIT launch would)
    values = _bound_values(step)
    gx, gy, gz = (*step.grid, 1, 1)[:3]
    slow = _through_jit(step)
    try:
        if launcher.global_scratch_size or launcher.profile_scratch_size:
            raise LookupError("the kernel needs scratch memory per launch")
        raw, args = _unwrap(launcher.launch, values)
        head = (compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
                compiled.packed_metadata, None, None, None)
    except (AttributeError, LookupError):
        return slow, compiled, False
    device = driver.active.get_current_device()
    stream = driver.active.get_current_stream
    zero = step.zero

    def call():
        if _hooked(knobs.runtime.launch_enter_hook):  # a profiler's hook sees every launch, as through the JIT
            slow()
            return
        for z in zero:
            z.zero_()
        raw(gx, gy, gz, stream(device), *head, *args)

    return call, compiled, True
