"""A tiny kernel family whose FAULT knob injects failures, for the collector's fault-tolerance tests:
0 runs correctly, 1 raises, 2 kills its process (as an illegal memory access would), 3 hangs, 4 computes wrong,
5 runs correctly but slowly (a run long enough to be killed mid-way), 6 raises a CUDA error (the worker reports
it, then restarts: a CUDA error poisons the context), 7 stores near address 0: a real illegal memory access on
the device (the CUDA error of 6, raised by the driver), a segmentation fault under the interpreter (the death of 2),
8 spins in its kernel for good: on a GPU a kernel that never ends (as a deadlocked warp-specialised matmul did on the
H200 in session 9), under the interpreter a hang of the worker (the hang of 3).
On a GPU the compile pool runs ``launch`` too (compiling only), where 1, 2, 3 and 6 act before the timing worker
sees them (3 then hangs the run); 0, 4, 5 and 7 reach the timing worker."""

import os
import time

import triton
import triton.language as tl

from costmodel.kernels.base import KernelFamily, Knob, launch, rand_generator


@triton.jit
def scale_kernel(x, y, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * factor, mask=offs < n)


@triton.jit
def null_store_kernel(x, y, n, BLOCK: tl.constexpr):
    """Stores x, unmasked, at byte address (y mod 4096) + 4 * offset: below 64 KiB for N up to 12000, where no
    process maps memory (Linux's default mmap_min_addr, so not even host memory the GPU reaches through HMM is
    there) and the device faults. The address comes from y at run time: no constant null store to fold away."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    page0 = (y.to(tl.int64) % 4096).to(tl.pointer_type(tl.float32))
    tl.store(page0 + offs, tl.load(x + offs, mask=offs < n))


@triton.jit
def spin_kernel(x, y, n, BLOCK: tl.constexpr):
    """Waits for x[0] to change, which nothing writes: a kernel that never ends."""
    first = tl.load(x, volatile=True)
    spins = 0
    while tl.load(x, volatile=True) == first:
        spins += 1
    tl.store(y, spins.to(tl.float32) + n)


class Faulty(KernelFamily):
    name = "faulty"
    dims = ("N",)
    knobs = (Knob("BLOCK", (16, 32)), Knob("FAULT", (0, 1, 2, 3, 4, 5, 6, 7, 8)))
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
        if fault == 8:
            return launch(spin_kernel, (1,), (inputs[0], out, n), {"BLOCK": config["BLOCK"]}, warmup)
        if fault == 7:
            return launch(null_store_kernel, (triton.cdiv(n, config["BLOCK"]),), (inputs[0], out, n),
                          {"BLOCK": config["BLOCK"]}, warmup)
        return launch(scale_kernel, (triton.cdiv(n, config["BLOCK"]),), (inputs[0], out, n, factor),
                      {"BLOCK": config["BLOCK"]}, warmup)

    def flops(self, problem):
        return float(problem["N"])

    def min_bytes(self, problem, dtype):
        return 8.0 * problem["N"]


class SlowSetup(Faulty):
    """Faulty whose torch reference takes a second: what setting a group up costs the timing worker."""

    name = "slow_setup"

    def reference(self, problem, inputs):
        time.sleep(1.0)
        return super().reference(problem, inputs)


class SlowGroups(SlowSetup):
    """SlowSetup without the faults: every group sets up for a second and then runs correctly, so a collect of many
    groups lasts at least that many seconds on any machine (a run to stop mid-way)."""

    name = "slow_groups"
    knobs = (Knob("BLOCK", (16, 32)), Knob("FAULT", (0,)))
