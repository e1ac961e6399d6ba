"""Run each Helion kernel under HELION_INTERPRET=1 (eager PyTorch on CPU tensors, in tiles of each config's block
sizes) with its default config and RANDOM random configs of its spec, and print one JSON object: per kernel, dtype and
config, the max abs error against the family's torch reference (over every output of a kernel that returns several)
and the scale it is judged at. Run in its own process: Helion refuses HELION_INTERPRET beside TRITON_INTERPRET,
which the test suite sets.

  interpret_check.py PROBLEMS_JSON [RANDOM]
"""

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
RANDOM = int(sys.argv[2]) if len(sys.argv) > 2 else 0


def outputs(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


out = {}
for name, problem in PROBLEMS.items():
    fam = families.get(name)
    for dtype in ("float16", "bfloat16"):
        inputs = fam.make_inputs(problem, dtype, "cpu")
        args = fam.args(problem, inputs)
        bound, _ = fam.bind(problem, dtype)
        want = outputs(fam.reference(problem, inputs))
        # Helion's default first, then random configs of the spec (their block sizes tile the problem otherwise)
        for i, config in enumerate(families.candidates(bound, 1 + RANDOM, seed=11)):
            # the same function as a kernel with one config: Helion's eager mode runs with it (set_config compiles)
            kernel = helion.kernel(fam.helion_kernel().fn, config=helion.Config(**config), static_shapes=True)
            got = [g.float() for g in outputs(kernel(*args))]
            out[f"{name}/{dtype}/{i}"] = {
                "err": max((g - w).abs().max().item() for g, w in zip(got, want)),
                "scale": max(1.0, *(w.abs().max().item() for w in want)),
                "shape_ok": [list(g.shape) for g in got] == [list(w.shape) for w in want],
                "block_sizes": config["block_sizes"]}
print(json.dumps(out))
