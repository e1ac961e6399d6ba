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


def structure(fam: KernelFamily, config: Config) -> tuple:
    """How ``config`` cuts the work: its values of the family's knobs that are not ``detail`` knobs (warps,
    pipelining, program order)."""
    return tuple((k.name, config[k.name]) for k in fam.knobs if not k.detail and k.name in config)


def other_structures(fam: KernelFamily, ranked: list[Config], taken: list[Config], k: int) -> list[Config]:
    """The best-ranked config (first in ``ranked``) of each of the first ``k`` structures ``taken`` lacks."""
    seen, out = {structure(fam, c) for c in taken}, []
    for c in ranked:
        if len(out) == k:
            break
        if (s := structure(fam, c)) not in seen:
            seen.add(s)
            out.append(c)
    return out


def first_batch(fam: KernelFamily, ranked: list[Config], k: int, explore: int) -> list[Config]:
    """``k`` configs to time first: the model's top ``k - explore``, then the best-ranked config of ``explore``
    structures those lack, topped up in rank order where the space has fewer structures; in rank order."""
    head = ranked[:max(0, k - explore)]
    chosen = head + other_structures(fam, ranked[len(head):], head, explore)
    picked = {config_key(c) for c in chosen}
    chosen += [c for c in ranked[len(head):] if config_key(c) not in picked][:k - len(chosen)]
    order = {config_key(c): i for i, c in enumerate(ranked)}
    return sorted(chosen, key=lambda c: order[config_key(c)])


def neighbours(fam: KernelFamily, base: Config, configs: list[Config]) -> list[Config]:
    """Those of ``configs`` one step from ``base``: one knob changed, or the tile reshaped (two ``tile`` knobs
    changed, the tile's size kept: one dim halved where another doubles, say 64x256x64 -> 64x128x128), in their
    order."""
    tiles = {k.name for k in fam.knobs if k.tile}

    def size(c: Config) -> int:
        return int(np.prod([c[t] for t in tiles if t in c]))

    out, base_size = [], size(base)
    for c in configs:
        changed = {knob for knob, v in c.items() if v != base.get(knob)}
        if len(changed) == 1 or (len(changed) == 2 and changed <= tiles and size(c) == base_size):
            out.append(c)
    return out
