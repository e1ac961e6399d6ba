"""A seeded, reproducible plan: groups (family, problem, dtype) and the configs to measure in each."""

from __future__ import annotations

import itertools
import json
import math
import operator
import re
import sys
from dataclasses import dataclass

import numpy as np

from costmodel import benchmarks, space
from costmodel.errors import CostModelError
from costmodel.helion import families as helion_families
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family
from costmodel.kernels.base import Config, Problem


ALIGNED_DIMS = ("M", "N", "K", "S")
_COMPARISONS = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
                ">": operator.gt}


@dataclass(frozen=True)
class DimBound:
    """``DIM<=VALUE`` and the like: a bound on the problems a plan draws (e.g. ``M<=128`` for decode shapes), or on
    a dim's remainder (``K%16!=0``): Triton specialises on divisibility by 16, so bounds on remainders keep a plan in
    one compile class, where a whole-space sweep compiles once for all its shapes."""

    dim: str
    op: str
    value: int
    modulus: int | None = None

    @classmethod
    def parse(cls, text: str) -> "DimBound":
        m = re.fullmatch(r"\s*([A-Za-z_]+)\s*(?:%\s*([1-9]\d*)\s*)?(<=|>=|==|!=|<|>)\s*(\d+)\s*", text)
        if not m:
            raise CostModelError(f"--where: bad bound {text!r}: write DIM<=VALUE (or <, >=, >, ==, !=), e.g. M<=128, "
                                 "or on a remainder, e.g. K%16!=0")
        return cls(m[1], m[3], int(m[4]), int(m[2]) if m[2] else None)

    def __call__(self, problem: Problem) -> bool:
        v = problem[self.dim]
        return _COMPARISONS[self.op](v % self.modulus if self.modulus else v, self.value)

    def __str__(self) -> str:
        return f"{self.dim}{'%' + str(self.modulus) if self.modulus else ''}{self.op}{self.value}"


@dataclass(frozen=True)
class GroupPlan:
    family: str
    problem: Problem
    dtype: str
    configs: tuple[Config, ...]
    exhaustive: bool


def check_bounds(families: list[str], where: tuple[DimBound, ...]) -> None:
    """Every bound names a dim of every family (a bound on a dim a family lacks is a typo, not an empty plan)."""
    for bound in where:
        unknown = [f for f in families if bound.dim not in _family(f).dims]
        if unknown:
            raise CostModelError(f"--where {bound}: {', '.join(unknown)} has no dim {bound.dim}")


def _family(name: str):
    return helion_families.get(name) if helion_families.is_helion(name) else get_family(name)


# configs of a Helion group measured as its ground truth: a random population of the spec, as large as Helion's
# own full-effort search measures (about 780-840 configs; issue 18)
HELION_SWEEP = 1000
# of a sampled Helion group's configs, the share drawn from its Triton twin's space read as its configs
# (``families.twin_candidates``, for a kernel with ``from_twin``): the tuner ranks that space beside Helion's random
# population and times half its top k from it (tuner/helion.py), so the data holds it too, measured as Helion
# compiles and runs it. Session 21: of the twin's 48 valid configs of attention 3x16x3681 (hd 128), 40 fail
# Triton's layout pass in Helion's program (scripts/experiments/helion_twin_compiles.py), and no row of the data
# held such a config. A quarter leaves the random population, the knobs the twin lacks, most of the group.
HELION_TWIN_SHARE = 0.25
# problems drawn, all refused by Helion's compiler, after which a kernel is given up: Helion 1.4.0 refuses
# helion:attention at head dim 64 (half its draws; session 11 drew three in a row), so three was too few
HELION_REFUSALS = 8


def helion_plan(name: str, n: int, n_exhaustive: int, configs_per_group: int, dtypes: list[str] | None,
                rng: np.random.Generator, seed: int, where: tuple[DimBound, ...], device: str,
                hw: HardwareRecord | None = None) -> list[GroupPlan]:
    """``n`` groups of the Helion kernel ``name``: problems from its family (none a benchmark's), configs from
    ``families.candidates`` of the kernel bound on ``device`` (Helion's default first, then its seed configs and
    a random population); ``n_exhaustive`` of them, spread out, take a population of ``HELION_SWEEP``. Given
    ``hw``, a sampled group of a kernel with a twin seeds its candidates with ``HELION_TWIN_SHARE`` of them drawn
    from the twin's space (``twin_seeds``); an exhaustive group stays the random population alone."""
    fam = helion_families.get(name)
    kinds = [d for d in (dtypes or fam.dtypes) if d in fam.dtypes]
    if not kinds or n == 0:
        return []
    problems = [p for p in fam.problems(rng, n * (40 if where else 4)) if all(b(p) for b in where)]
    stride = max(1, n // n_exhaustive) if n_exhaustive else 0
    plan: list[GroupPlan] = []
    seen: set[tuple] = set()
    failures: list[str] = []
    for problem in problems:
        i = len(plan)
        if i == n:
            break
        dtype = kinds[i % len(kinds)]
        if (tuple(problem.items()), dtype) in seen:
            continue
        seen.add((tuple(problem.items()), dtype))
        exhaustive = bool(stride) and i % stride == 0 and i // stride < n_exhaustive
        try:
            bound, _ = fam.bind(problem, dtype, device, seed)
        except Exception as e:  # noqa: BLE001 - Helion's own compiler refusing the kernel for this problem
            # (Helion 1.4.0 on the H200 raised ShapeMismatch tracing helion:attention); the other kernels go on
            failures.append(f"{json.dumps(problem)} {dtype}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            sys.stderr.write(f"{fam.kernel}: Helion could not compile the kernel for {failures[-1]}; group skipped\n")
            if len(failures) >= HELION_REFUSALS and not plan:
                raise CostModelError(f"{fam.kernel}: Helion could not compile the kernel for the first "
                                     f"{len(failures)} problems drawn (first: {failures[0]})") from None
            continue
        size = HELION_SWEEP if exhaustive else configs_per_group
        seeds = () if exhaustive or hw is None else twin_seeds(bound, fam, problem, dtype, hw, size, seed + i)
        configs = helion_families.candidates(bound, size, seed + i, seeds)
        plan.append(GroupPlan(fam.kernel, problem, dtype, tuple(configs), exhaustive))
    return plan


def twin_seeds(bound, fam, problem: Problem, dtype: str, hw: HardwareRecord, size: int, seed: int) -> tuple:
    """``HELION_TWIN_SHARE`` of ``size`` configs of the twin's space read as ``fam``'s (none for a kernel without
    a twin), drawn with ``seed``, as Helion configs in the space's order."""
    import helion

    twins = helion_families.twin_candidates(bound, fam.kernel, problem, dtype, hw)
    k = min(len(twins), int(size * HELION_TWIN_SHARE))
    picked = sorted(np.random.default_rng(seed).choice(len(twins), size=k, replace=False)) if k else []
    return tuple(helion.Config(**twins[j]) for j in picked)


def _spread(total: int, parts: int) -> list[int]:
    """``total`` split over ``parts`` as evenly as can be, the first parts taking one more."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def make_plan(families: list[str], n_groups: int, configs_per_group: int, dtypes: list[str] | None, seed: int,
              hw: HardwareRecord, exhaustive_share: float = 0.1, pool_size: int = 240,
              where: tuple[DimBound, ...] = (), device: str = "cuda") -> list[GroupPlan]:
    """``n_groups`` groups spread evenly over ``families``. ``exhaustive_share`` of them, rounded down, are
    measured over the whole valid space, as ground truth for evaluation (spread over the families as the groups
    are): rounding down, a plan never sweeps more than asked, so ``--groups 1 --configs-per-group 2`` measures
    2 configs. The others measure the family default plus configs drawn from a seeded pool per (family, dtype):
    drawing from a pool rather than the whole space lets one compiled binary serve many shapes, which is what
    makes collection fast. ``where`` keeps only the problems within every bound (drawn from the family's usual
    mix, so the plan aims at a region of it). Helion kernels (``helion:<name>``) are planned by ``helion_plan``,
    their candidates bound on ``device``."""
    check_bounds(families, where)
    if not 0 <= exhaustive_share <= 1:
        raise CostModelError(f"--exhaustive-share {exhaustive_share}: a share of the groups, from 0 to 1")
    rng = np.random.default_rng(seed)
    per_family_plans: list[list[GroupPlan]] = []
    per_family = _spread(n_groups, len(families))
    # the epsilon keeps a share exact in decimal (0.1 of 30) from flooring one short in binary
    per_family_exhaustive = _spread(math.floor(exhaustive_share * n_groups + 1e-9), len(families))
    for name, n, n_exhaustive in zip(families, per_family, per_family_exhaustive):
        if helion_families.is_helion(name):
            try:
                per_family_plans.append(helion_plan(name, n, n_exhaustive, configs_per_group, dtypes, rng, seed,
                                                    where, device, hw))
            except CostModelError as e:  # one refused kernel does not cost the others their groups
                if len(families) == 1:
                    raise
                sys.stderr.write(f"{e}; its groups are left out, the other kernels' planned\n")
            continue
        fam = get_family(name)
        kinds = [d for d in (dtypes or fam.dtypes) if d in fam.dtypes]
        if not kinds or n == 0:
            continue
        all_configs = list(fam.all_configs())
        pools = {d: [all_configs[i] for i in rng.permutation(len(all_configs))[:pool_size]] for d in kinds}
        plan: list[GroupPlan] = []
        seen: set[tuple] = set()
        problems = [p for p in fam.problems(rng, n * (40 if where else 4))
                    if all(b(p) for b in where) and not benchmarks.is_named(name, p)]  # benchmarks' shapes stay out
        # ground-truth groups take aligned shapes: they share compile classes, so a whole space compiles once
        aligned = [p for p in problems if all(v % 16 == 0 for d, v in p.items() if d in ALIGNED_DIMS)]
        stride = max(1, n // n_exhaustive) if n_exhaustive else 0
        for problem in problems:
            i = len(plan)
            if i == n:
                break
            exhaustive = bool(stride) and i % stride == 0 and i // stride < n_exhaustive
            if exhaustive and aligned:
                problem = aligned.pop(0)
            dtype = kinds[i % len(kinds)]
            key = (tuple(problem.items()), dtype)
            if key in seen:
                continue
            valid = space.enumerate_valid(fam, problem, dtype, hw)
            if not valid:
                continue
            seen.add(key)
            if exhaustive:
                configs = valid
            else:
                default = fam.default_config(problem, dtype, hw)
                valid_keys = {space.config_key(c) for c in valid}
                picks = [c for c in pools[dtype] if space.config_key(c) in valid_keys and c != default]
                picked = {space.config_key(c) for c in picks}
                # small valid spaces (decode shapes) meet few pool configs: top up from the whole valid space
                top_up = [c for c in valid if space.config_key(c) not in picked and c != default]
                picks += [top_up[j] for j in rng.permutation(len(top_up))]
                configs = ([default] if default in valid else []) + picks[: configs_per_group - 1]
            plan.append(GroupPlan(name, problem, dtype, tuple(configs), exhaustive))
        per_family_plans.append(plan)
    # interleave families (and their exhaustive groups) so a run cut short still covers every family
    return [g for row in itertools.zip_longest(*per_family_plans) for g in row if g is not None]


def complete_plan(out: str, families: list[str], dtypes: list[str] | None, hw: HardwareRecord,
                  where: tuple[DimBound, ...] = ()) -> list[GroupPlan]:
    """The whole-space groups of today's kernels that ``out`` holds (recorded under one of the family's
    ``group_hashes``), each planned over today's whole valid space: measured with --resume, a group sweeps only
    what it lacks, which after a knob was added is that knob's new values (issue 17's WARP_SPECIALIZE: 90 configs a
    shape beside the 1,300-2,200 of a fresh sweep). Helion kernels have no such groups yet."""
    import pyarrow.dataset as ds

    from costmodel import dataset

    check_bounds(families, where)
    plan = []
    for name in families:
        fam = get_family(name)
        rows = dataset.read(out, ["problem_json", "dtype"], (ds.field("kernel") == name) & ds.field("exhaustive")
                            & ds.field("source_hash").isin(list(fam.group_hashes)))
        seen = sorted({(p, d) for p, d in zip(rows["problem_json"].to_pylist(), rows["dtype"].to_pylist())
                       if dtypes is None or d in dtypes})
        for problem_json, dtype in seen:
            problem = json.loads(problem_json)
            if all(b(problem) for b in where) and not benchmarks.is_named(name, problem):
                plan.append(GroupPlan(name, problem, dtype, tuple(space.enumerate_valid(fam, problem, dtype, hw)), True))
    return plan
