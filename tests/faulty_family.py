"""A tiny kernel family whose FAULT knob injects failures, for the collector's fault-tolerance tests:
0 runs correctly, 1 raises, 2 kills its process (as an illegal memory access would), 3 hangs, 4 computes wrong,
5 runs correctly but slowly (a run long enough to be killed mid-way), 6 raises a CUDA error (the worker reports
it, then restarts: a CUDA error poisons the context)."""

import os
import time

import triton
import triton.language as tl

from costmodel.kernels.base import KernelFamily, Knob, launch, rand_generator


@triton.jit
def scale_kernel(x, y, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * factor, mask=offs < n)


class Faulty(KernelFamily):
    name = "faulty"
    dims = ("N",)
    knobs = (Knob("BLOCK", (16, 32)), Knob("FAULT", (0, 1, 2, 3, 4, 5, 6)))
    dtypes = ("float32",)
    tolerance = {"float32": 1e-5}

    def problems(self, rng, n):
        return [{"N": int(v)} for v in rng.integers(1, 200, n)]

    def is_valid(self, problem, dtype, config, hw):
        return True

    def default_config(self, problem, dtype, hw):
        return {"BLOCK": 16, "FAULT": 0}

    def make_inputs(self, problem, dtype, device, seed=0):
        import torch

        return (torch.randn(problem["N"], device=device, generator=rand_generator(device, seed)),)

    def make_output(self, problem, dtype, device):
        import torch

        return torch.empty(problem["N"], device=device)

    def reference(self, problem, inputs):
        return inputs[0].float() * 2

    def launch(self, problem, inputs, out, config, hw, warmup=False):
        fault = config["FAULT"]
        if fault == 1:
            raise RuntimeError("injected launch failure")
        if fault == 6:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if fault == 2:
            os._exit(9)
        if fault == 3:
            time.sleep(3600)
        if fault == 5:
            time.sleep(0.1)
        factor = 3.0 if fault == 4 else 2.0
        n = problem["N"]
        return launch(scale_kernel, (triton.cdiv(n, config["BLOCK"]),), (inputs[0], out, n, factor),
                      {"BLOCK": config["BLOCK"]}, warmup)

    def flops(self, problem):
        return float(problem["N"])

    def min_bytes(self, problem, dtype):
        return 8.0 * problem["N"]
