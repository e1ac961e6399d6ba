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
    """A registered family by name, or a user's own as "package.module:ClassName"."""
    import importlib

    if ":" in name:
        module, cls = name.split(":", 1)
    elif name in _MODULES:
        module, cls = _MODULES[name]
    else:
        raise CostModelError(f"unknown kernel family {name!r}; known: {', '.join(_MODULES)}")
    try:
        return getattr(importlib.import_module(module), cls)()
    except (ImportError, AttributeError) as e:
        raise CostModelError(f"cannot load kernel family {name!r}: {e}") from None


__all__ = ["Config", "KernelFamily", "Knob", "Problem", "family_names", "get_family"]
