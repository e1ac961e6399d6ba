"""Enumeration and seeded sampling of a family's valid configs for a problem."""

from __future__ import annotations

import numpy as np

from costmodel.hardware import HardwareRecord
from costmodel.kernels.base import Config, KernelFamily, Problem


def config_key(config: Config) -> tuple:
    return tuple(sorted(config.items()))


def enumerate_valid(fam: KernelFamily, problem: Problem, dtype: str, hw: HardwareRecord) -> list[Config]:
    """Every valid config, in the space's fixed order."""
    return [c for c in fam.all_configs() if fam.is_valid(problem, dtype, c, hw)]


def sample(fam: KernelFamily, problem: Problem, dtype: str, hw: HardwareRecord, n: int,
           rng: np.random.Generator) -> list[Config]:
    """Up to ``n`` distinct valid configs, the family's default first (when valid), the rest drawn without
    replacement by ``rng``."""
    valid = enumerate_valid(fam, problem, dtype, hw)
    default = fam.default_config(problem, dtype, hw)
    rest = [c for c in valid if c != default]
    picked = [rest[i] for i in rng.permutation(len(rest))[: max(0, n - 1)]]
    return ([default] if default in valid else []) + picked
