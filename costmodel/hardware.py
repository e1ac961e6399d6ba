"""The hardware record: what the model knows of a GPU, from its device properties or from the dataset."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class HardwareRecord:
    gpu: str  # slug, e.g. "nvidia-h200"
    name: str
    cc_major: int
    cc_minor: int
    sm_count: int
    smem_per_block: int  # opt-in maximum shared memory per block, bytes
    smem_per_sm: int
    regs_per_sm: int
    l2_bytes: int
    mem_bandwidth_gbs: float  # datasheet-free estimate from bus width and memory clock
    max_threads_per_sm: int = 2048

    def as_dict(self) -> dict:
        return asdict(self)


def slug(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# Known records, for CPU-side work (tests under TRITON_INTERPRET, --predict-only) where no GPU answers.
# The H200 row is what torch reported on the H200 we collect on (132 SMs, 60 MB L2, 227 KB opt-in smem).
KNOWN = {
    "nvidia-h200": HardwareRecord(
        gpu="nvidia-h200", name="NVIDIA H200", cc_major=9, cc_minor=0, sm_count=132,
        smem_per_block=232448, smem_per_sm=233472, regs_per_sm=65536, l2_bytes=62914560,
        mem_bandwidth_gbs=4800.0,
    ),
}

# What `collect` records under TRITON_INTERPRET=1: kernels run on the CPU (about 1 s a config), so the timings say
# nothing of any GPU. They go under their own slug, marked in hw_name, which no GPU's training reads; the H200's
# limits stay so that plans draw the same valid configs.
INTERPRETER = replace(KNOWN["nvidia-h200"], gpu="interpreter", name="Triton interpreter (CPU)")


def current(device: int | None = None, hint: str = "run on a GPU host") -> HardwareRecord:
    """The record of the visible CUDA device; without one, an error ending in ``hint``: what the caller can do
    instead."""
    import torch

    if not torch.cuda.is_available():
        from costmodel.errors import CostModelError

        raise CostModelError(f"no CUDA GPU is visible: {hint}")
    idx = torch.cuda.current_device() if device is None else device
    p = torch.cuda.get_device_properties(idx)
    from triton.runtime import driver

    dev = driver.active.utils.get_device_properties(idx)
    bw = 2 * dev["mem_clock_rate"] * 1e3 * dev["mem_bus_width"] / 8 / 1e9
    return HardwareRecord(
        gpu=slug(p.name), name=p.name, cc_major=p.major, cc_minor=p.minor, sm_count=p.multi_processor_count,
        smem_per_block=dev["max_shared_mem"], smem_per_sm=getattr(p, "shared_memory_per_multiprocessor", dev["max_shared_mem"]),
        regs_per_sm=getattr(p, "regs_per_multiprocessor", 65536), l2_bytes=p.L2_cache_size, mem_bandwidth_gbs=round(bw, 1),
        max_threads_per_sm=getattr(p, "max_threads_per_multi_processor", 2048),
    )


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity, where the OS says)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def compile_workers(cores: int, sharers: int = 1) -> int:
    """Compile processes for one benchmarker: the cores but two (the timing worker and its parent), shared
    among ``sharers`` benchmarkers on the host."""
    return max(1, (cores - 2) // sharers)


def for_gpu(gpu: str) -> HardwareRecord:
    if gpu not in KNOWN:
        from costmodel.errors import CostModelError

        raise CostModelError(f"no hardware record for GPU {gpu!r}; known: {', '.join(KNOWN)}")
    return KNOWN[gpu]


def software_versions() -> dict:
    """Provenance columns: triton, torch, CUDA, driver and costmodel versions of this host."""
    import subprocess

    import torch
    import triton

    import costmodel

    driver = None
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=10).stdout.split("\n")[0].strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"triton_version": triton.__version__, "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "driver_version": driver, "costmodel_version": costmodel.__version__}
