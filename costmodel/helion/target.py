"""Helion's device checks answered as a recorded GPU answers them, on a machine without that GPU (a CPU).

Helion's ConfigSpec depends on the device a kernel is bound for: tensor-descriptor indexing (compute capability 9
or more), the ``maxnreg`` knob (CUDA only), the register budget that caps ``maxnreg`` by warps, the SM count that
persistent programs ask for, and the hardware (``sm90``) the compiler's seed heuristics ask for. A CPU answers no,
no, an error, nothing and an error. So its random population is not the GPU's (Helion draws every knob in turn from
one seeded generator, and a knob it lacks shifts every later draw), nor its default config (Helion 1.4.0 promotes
its sm90 seed to the default of softmax and the norms).

With only the tensor-descriptor answer (what the CPU analyses of sessions 19-26 gave), the CPU ranked a population
whose first 8 shared only the Triton twin's four with the H200's tune of matmul 4155x4096x4476 bf16. Answered
with ``answer_as`` under Helion 1.4.0, ``tuner.ranked`` and the climb reproduce that tune's record exactly
(session 27): 1,557 candidates and 3 dropped, the first 8 in order, the climb's 472 neighbours scored and its
three configs. The check is ``tests/test_helion_tune.py::test_a_cpu_answering_as_the_h200_ranks_as_its_tune_did``.
"""

from __future__ import annotations

from costmodel.hardware import HardwareRecord


def answer_as(hw: HardwareRecord) -> None:
    """From now on in this process, Helion's device checks answer as ``hw``'s GPU (an NVIDIA GPU, CUDA) does.
    Through the private hooks Helion itself patches in its tests ("call private func we can patch in testing");
    the same in Helion 1.4.0 and 1.5.1."""
    import helion._compat
    import helion._hardware
    import helion.autotuner.config_spec as config_spec
    import helion.runtime
    import torch

    helion._compat._supports_tensor_descriptor = lambda: hw.cc_major >= 9
    helion._compat._supports_maxnreg = lambda: True
    config_spec._regs_per_block = lambda: hw.regs_per_sm  # imported there by name; Helion reads the SM's registers
    helion.runtime.get_num_sm = lambda *a, **k: hw.sm_count
    # what the compiler's seed heuristics ask (imported where used): on sm90 Helion 1.4.0 seeds reductions and
    # pointwise kernels, and promotes the seed to the kernel's default config
    info = helion._hardware.HardwareInfo(device_kind="cuda", hardware_name=hw.name,
                                         runtime_version=str(torch.version.cuda),
                                         compute_capability=f"sm{hw.cc_major}{hw.cc_minor}")
    helion._hardware.get_hardware_info = lambda device=None: info
