"""Run each Helion kernel with its default config under HELION_INTERPRET=1 (eager PyTorch on CPU tensors) and print
one JSON object: kernel -> max abs error against the family's torch reference, and the tolerance it must meet.
Run in its own process: Helion refuses HELION_INTERPRET beside TRITON_INTERPRET, which the test suite sets."""

import json
import os
import sys

assert os.environ.get("HELION_INTERPRET") == "1" and "TRITON_INTERPRET" not in os.environ
import helion
import torch

# torch's CPU build has no mm/bmm with out_dtype (aten::mm.dtype is CUDA-only in 2.13), which Helion's eager hl.dot
# calls; compute them in out_dtype, what the GPU op's fp32 accumulation gives
_lib = torch.library.Library("aten", "IMPL")
_lib.impl("mm.dtype", lambda a, b, out_dtype: torch.mm(a.to(out_dtype), b.to(out_dtype)), "CPU")
_lib.impl("bmm.dtype", lambda a, b, out_dtype: torch.bmm(a.to(out_dtype), b.to(out_dtype)), "CPU")

from costmodel.helion import families  # noqa: E402

PROBLEMS = json.loads(sys.argv[1])
out = {}
for name, problem in PROBLEMS.items():
    fam = families.get(name)
    for dtype in ("float16", "bfloat16"):
        bound, args = fam.bind(problem, dtype)
        default = bound.config_spec.default_config()
        # the same function as a kernel with one config: Helion's eager mode runs with it (set_config compiles)
        kernel = helion.kernel(fam.helion_kernel().fn, config=default, static_shapes=True)
        got = kernel(*args).float()
        want = fam.reference(problem, args[: len(args) - (name == "attention")])
        out[f"{name}/{dtype}"] = {"err": (got - want).abs().max().item(),
                                 "scale": max(1.0, want.abs().max().item()), "shape_ok": list(got.shape) == list(want.shape)}
print(json.dumps(out))
