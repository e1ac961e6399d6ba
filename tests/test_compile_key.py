"""A family's compile key against what Triton keys a binary on: problems that share a key must launch with the
same specialisation of every int argument (else the compile pool's one binary does not serve them, and the
timing worker compiles the other one itself, serially: issue 16's sweeps lost half their time so)."""

import inspect
import itertools

import pytest

from costmodel import space
from costmodel.hardware import KNOWN
from costmodel.benchmark import meta_inputs
from costmodel.kernels import get_family
from costmodel.kernels.base import int_specialisation

HW = KNOWN["nvidia-h200"]


def launch_specialisation(fam, problem, dtype, config) -> tuple:
    """Per launch of one call: the kernel, its specialised int arguments' (divisible by 16, == 1), which
    arguments are None, and the constexprs."""
    inputs, out = meta_inputs(fam, problem, dtype)
    key = []
    for launch in fam.launches(problem, inputs, out, config, HW):
        kernel = launch.kernel
        args = dict(zip(kernel.arg_names, launch.args)) | launch.kwargs
        # a JITFunction, or under TRITON_INTERPRET=1 an InterpretedFunction that keeps triton.jit's arguments
        dns = getattr(kernel, "do_not_specialize", None) or getattr(kernel, "kwargs", {}).get("do_not_specialize")
        skip = {kernel.arg_names[i] if isinstance(i, int) else i for i in dns or ()}
        params = inspect.signature(kernel.fn).parameters
        for name in kernel.arg_names:
            v = args.get(name)
            if v is None or isinstance(v, bool):
                key.append((name, v))
            elif isinstance(v, int) and name not in skip:
                constexpr = "constexpr" in str(params[name].annotation)
                key.append((name, v) if constexpr else (name, int_specialisation(v)))
        key.append(kernel.fn.__name__)
    return tuple(key)


# one dims class each (every dim unaligned, or every dim a multiple of 16), tile counts of every divisibility
SHAPES = {
    "matmul": [{"M": m, "N": n, "K": k} for m, n, k in
               [(298, 2321, 3768), (173, 2187, 241), (486, 2882, 5192), (4897, 2755, 381), (1023, 1025, 999)]] +
              [{"M": m, "N": n, "K": 1024} for m, n in [(2048, 2048), (4096, 1024), (128, 16384), (64, 2048)]],
    "attention": [{"B": b, "H": h, "S": s, "D": 64, "CAUSAL": c} for b, h, s, c in
                  [(2, 16, 1000, 1), (8, 8, 333, 1), (1, 3, 4097, 1), (4, 32, 2048, 0), (1, 1, 512, 0), (3, 5, 16, 0)]],
    **{name: [{"M": m, "N": n} for m, n in [(1, 4096), (3, 8192), (1000, 12288), (4097, 50257), (333, 1001),
                                             (17, 777), (65536, 128)]] for name in ("softmax", "layernorm", "rmsnorm")},
}


@pytest.mark.parametrize("family", sorted(SHAPES))
def test_problems_sharing_a_compile_key_launch_the_same_binary(family):
    fam = get_family(family)
    by_key: dict = {}
    for problem, dtype in itertools.product(SHAPES[family], ("float16",)):
        configs = space.enumerate_valid(fam, problem, dtype, HW)
        for config in configs[::7]:
            spec = launch_specialisation(fam, problem, dtype, config)
            by_key.setdefault(fam.compile_key(problem, dtype, config, HW), set()).add(spec)
    shared = [specs for specs in by_key.values() if len(specs) > 1]
    assert not shared, f"{len(shared)} compile keys stand for launches Triton compiles apart"
    assert len(by_key) < sum(len(space.enumerate_valid(fam, p, "float16", HW)[::7]) for p in SHAPES[family])
