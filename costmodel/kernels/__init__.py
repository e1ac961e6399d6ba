"""The kernel-family registry: one module per family, looked up by name."""

from __future__ import annotations

from costmodel.errors import CostModelError
from costmodel.kernels.base import Config, KernelFamily, Knob, Problem

_MODULES = {
    "matmul": ("costmodel.kernels.matmul", "Matmul"),
    "attention": ("costmodel.kernels.attention", "Attention"),
    "softmax": ("costmodel.kernels.softmax", "Softmax"),
    "layernorm": ("costmodel.kernels.layernorm", "LayerNorm"),
    "rmsnorm": ("costmodel.kernels.rmsnorm", "RMSNorm"),
}


def family_names() -> list[str]:
    return list(_MODULES)


def get_family(name: str) -> KernelFamily:
    if name not in _MODULES:
        raise CostModelError(f"unknown kernel family {name!r}; known: {', '.join(_MODULES)}")
    import importlib

    module, cls = _MODULES[name]
    return getattr(importlib.import_module(module), cls)()


__all__ = ["Config", "KernelFamily", "Knob", "Problem", "family_names", "get_family"]
