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
# The H200 row is what torch reported on the H200 we collect on (132 SMs, 60 MB L2, 227 KB opt-in smem), the
# bandwidth as every recorded row carries it: the model's trees split on it (session 11: 4800, a rounded figure,
# ranked a matmul's 8th config differently from the 4814.3 of its training rows)
KNOWN = {
    "nvidia-h200": HardwareRecord(
        gpu="nvidia-h200", name="NVIDIA H200", cc_major=9, cc_minor=0, sm_count=132,
        smem_per_block=232448, smem_per_sm=233472, regs_per_sm=65536, l2_bytes=62914560,
        mem_bandwidth_gbs=4814.3,
    ),
}

# What `collect` records under TRITON_INTERPRET=1: kernels run on the CPU (about 1 s a config), so the timings say
# nothing of any GPU. They go under their own slug, marked in hw_name, which no GPU's training reads; the H200's
# limits stay so that plans draw the same valid configs.
INTERPRETER = replace(KNOWN["nvidia-h200"], gpu="interpreter", name="Triton interpreter (CPU)")


def current(device: int | None = None, hint: str = "run on a GPU host") -> HardwareRecord:
    """The record of the visible CUDA device; without one, an error ending in ``hint``: what the caller can do
    instead. Asked of the CUDA driver where it loads, else of torch."""
    return from_driver(device or 0) or from_torch(device, hint)


# CUdevice_attribute values (cuda.h) of the record's fields
_ATTRIBUTES = {"sm_count": 16, "mem_clock_khz": 36, "mem_bus_bits": 37, "l2_bytes": 38, "max_threads_per_sm": 39,
               "cc_major": 75, "cc_minor": 76, "smem_per_sm": 81, "regs_per_sm": 82, "smem_per_block": 97}


def from_driver(device: int = 0) -> HardwareRecord | None:
    """The record from the CUDA driver API (libcuda through ctypes), or None where the driver or a device is not
    there. It creates no CUDA context and imports no torch: a `tune` command's own process then never does, and its
    start-up is not 3.8 s of `import torch` and 1.35 s of a context on the H200 host
    (scripts/results/bench_startup-h200-2026-11-29.json) before it can rank; its timing worker, a child of the
    process server, has them already. Device ordinals follow CUDA_VISIBLE_DEVICES, as torch's do."""
    import ctypes

    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    handle, count, value = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    name = ctypes.create_string_buffer(256)
    if (cu.cuInit(0) or cu.cuDeviceGetCount(ctypes.byref(count)) or not 0 <= device < count.value
            or cu.cuDeviceGet(ctypes.byref(handle), device) or cu.cuDeviceGetName(name, len(name), handle)):
        return None
    got = {}
    for field, attribute in _ATTRIBUTES.items():
        if cu.cuDeviceGetAttribute(ctypes.byref(value), attribute, handle):
            return None
        got[field] = value.value
    return _record(name.value.decode(), got)


def _record(name: str, a: dict) -> HardwareRecord:
    bw = 2 * a["mem_clock_khz"] * 1e3 * a["mem_bus_bits"] / 8 / 1e9  # double data rate
    return HardwareRecord(
        gpu=slug(name), name=name, cc_major=a["cc_major"], cc_minor=a["cc_minor"], sm_count=a["sm_count"],
        smem_per_block=a["smem_per_block"], smem_per_sm=a["smem_per_sm"], regs_per_sm=a["regs_per_sm"],
        l2_bytes=a["l2_bytes"], mem_bandwidth_gbs=round(bw, 1), max_threads_per_sm=a["max_threads_per_sm"])


def from_torch(device: int | None = None, hint: str = "run on a GPU host") -> HardwareRecord:
    """The record as torch and Triton's driver report it (the way every recorded row's was taken)."""
    import torch

    if not torch.cuda.is_available():
        from costmodel.errors import CostModelError

        raise CostModelError(f"no CUDA GPU is visible: {hint}")
    idx = torch.cuda.current_device() if device is None else device
    p = torch.cuda.get_device_properties(idx)
    from triton.runtime import driver

    dev = driver.active.utils.get_device_properties(idx)
    return _record(p.name, {
        "sm_count": p.multi_processor_count, "mem_clock_khz": dev["mem_clock_rate"], "mem_bus_bits": dev["mem_bus_width"],
        "l2_bytes": p.L2_cache_size, "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", 2048),
        "cc_major": p.major, "cc_minor": p.minor, "smem_per_block": dev["max_shared_mem"],
        "smem_per_sm": getattr(p, "shared_memory_per_multiprocessor", dev["max_shared_mem"]),
        "regs_per_sm": getattr(p, "regs_per_multiprocessor", 65536)})


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
