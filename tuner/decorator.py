"""``costmodel_autotune``: a drop-in for ``triton.autotune`` on a user's own ``@triton.jit`` kernel of a known family.

Design: we do not subclass or reimplement Triton's ``Autotuner``; we hand it one hook. ``triton.autotune`` accepts
``prune_configs_by={"early_config_prune": f}`` and calls ``f(configs, named_args, **kwargs)`` with the *whole*
config list once per new autotuning key (shapes + dtypes), before it benchmarks anything. That is exactly where a
learned ranker fits: the hook builds the family problem from the call's arguments, converts every
``triton.Config`` into a family config dict, scores them all in one batched model call
(``features.candidates_table`` + ``model.score``) and returns the predicted top-k. Triton then benchmarks only
those, caches the winner per key and exposes ``configs_timings`` / ``best_config`` as usual; everything else
(``reset_to_zero``, ``restore_value``, hooks, ``do_bench``) passes through untouched.

Without a usable model (none shipped for the GPU, a corrupt or mismatched one, a family or dtype the model does
not know) the hook warns once per reason with :class:`CostModelFallbackWarning` and benchmarks
``min(len(configs), 4 * k)`` configs instead: the first config (and the family default when it is among them)
plus a fixed-seed sample of the rest. It never guesses a single config.

    @costmodel_autotune("matmul", key=["M", "N", "K"], configs=[triton.Config({...}, num_warps=8), ...], k=8)
    @triton.jit
    def my_matmul(a, b, c, M, N, K, ..., BLOCK_M: tl.constexpr, ...): ...
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any, Callable

import numpy as np
import triton

from costmodel import hardware
from costmodel.errors import CostModelError
from costmodel.hardware import HardwareRecord
from costmodel.kernels import get_family
from costmodel.kernels.base import Config, KernelFamily, Problem

FALLBACK_SEED = 0
FALLBACK_FACTOR = 4  # without a model, benchmark this many times k configs
_LAUNCH_KNOBS = ("num_warps", "num_stages")  # knobs that are triton.Config attributes, not kwargs


class CostModelFallbackWarning(UserWarning):
    """No usable cost model: the autotuner benchmarks a seeded sample of configs instead of the model's top-k."""


def to_triton(config: Config) -> triton.Config:
    """A family config dict as a ``triton.Config`` (num_warps / num_stages as attributes, the rest as kwargs)."""
    kwargs = {k: v for k, v in config.items() if k not in _LAUNCH_KNOBS}
    return triton.Config(kwargs, num_warps=config.get("num_warps", 4), num_stages=config.get("num_stages", 3))


def space_configs(fam: KernelFamily) -> list[triton.Config]:
    """Every knob combination of the family's space (valid or not: validity depends on the problem)."""
    return [to_triton(c) for c in fam.all_configs()]


def family_config(fam: KernelFamily, config: triton.Config, default: Config) -> Config:
    """A ``triton.Config`` as a family config dict; knobs the config does not set take ``default``'s value."""
    out: Config = {}
    for knob in fam.knobs:
        value = getattr(config, knob.name) if knob.name in _LAUNCH_KNOBS else config.kwargs.get(knob.name)
        value = default[knob.name] if value is None else value
        try:
            out[knob.name] = int(value)
        except (TypeError, ValueError):
            raise CostModelError(f"{fam.name}: knob {knob.name}={value!r} in config {config} is not an integer") \
                from None
    return out


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the user's kernel call, past this module and Triton's."""
    skip = (__file__, os.path.dirname(triton.__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


class _Ranker:
    """The ``early_config_prune`` hook of one decorated kernel; holds the lazily resolved hardware and model."""

    def __init__(self, fn_name: str, family: str, k: int, hw: HardwareRecord | None, cost_model, dims: dict[str, str],
                 whole_space: bool):
        self.fn_name, self.family, self.fam, self.k = fn_name, family, get_family(family), k
        self.dims, self.whole_space = dims, whole_space
        self._hw, self._model, self._model_error = hw, cost_model, None
        self._warned: set[str] = set()

    # --- the problem of a call ---------------------------------------------------------------------------
    def problem(self, args: dict[str, Any]) -> tuple[Problem, str]:
        import torch

        raw = {}
        for dim in self.fam.dims:
            arg = self.dims.get(dim, dim)
            if arg not in args:
                raise CostModelError(f"the call passes no argument {arg!r} for {self.family} dim {dim}")
            raw[dim] = args[arg]
        tensor = next((v for v in args.values() if isinstance(v, torch.Tensor)), None)
        if tensor is None:
            raise CostModelError("the call has no torch tensor argument to take the dtype from")
        return self.fam.check_problem(raw), self.fam.check_dtype(str(tensor.dtype).removeprefix("torch."))

    def hardware(self) -> HardwareRecord:
        if self._hw is None:
            self._hw = hardware.current(hint="pass costmodel_autotune(hw=...) a GPU's record, e.g. "
                                             "costmodel.hardware.KNOWN['nvidia-h200'], to rank for it")
        return self._hw

    def model(self, hw: HardwareRecord):
        """The cost model (loaded once; a load failure is remembered, not retried per key)."""
        from costmodel import model

        if self._model is None and self._model_error is None:
            try:
                self._model = model.load_shipped(hw.gpu)
            except CostModelError as e:
                self._model_error = e
            except ImportError as e:  # a GPU host without xgboost
                self._model_error = CostModelError(f"cannot load a cost model: {e}")
        if self._model_error is not None:
            raise self._model_error
        known = self._model.meta.get("data", {}).get("rows_per_kernel", {self.family: 1})
        if self.family not in known:
            raise CostModelError(f"the {self._model.gpu} model was not trained on kernel family {self.family!r}")
        return self._model

    # --- the hook --------------------------------------------------------------------------------------
    def __call__(self, configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
        problem = dtype = hw = None
        try:
            problem, dtype = self.problem({**named_args, **kwargs})
            hw = self.hardware()
            return self.rank(configs, problem, dtype, hw, self.model(hw))[: self.k]
        except CostModelError as e:
            return self.fallback(configs, problem, dtype, hw, str(e))

    def valid(self, problem: Problem, dtype: str, config: Config, hw: HardwareRecord) -> bool:
        """Whether ``config`` is valid for the problem: of the whole space, as the family says; of a user's own list,
        where its twin is (``KernelFamily.twin``: it runs what a config the space keeps runs)."""
        return self.fam.is_valid(problem, dtype, config if self.whole_space else self.fam.twin(problem, config), hw)

    def rank(self, configs: list[triton.Config], problem: Problem, dtype: str, hw: HardwareRecord,
             cost_model) -> list[triton.Config]:
        """``configs`` predicted fastest first: valid ones for the problem (``valid``), then (for a user's own list
        only) the ones the family deems invalid; all scored in one batch."""
        from costmodel import features, model

        default = self.fam.default_config(problem, dtype, hw)
        dicts = [family_config(self.fam, c, default) for c in configs]
        valid = np.array([self.valid(problem, dtype, d, hw) for d in dicts], bool)
        scores = model.score(cost_model, features.candidates_table(self.family, problem, dtype, dicts, hw))
        order = np.lexsort((-scores, ~valid))  # valid first, then by score, ties in list order
        if self.whole_space:
            order = order[valid[order]]
        if len(order) == 0:
            raise CostModelError(f"no config of the {self.family} space is valid for {problem} {dtype} on {hw.gpu}")
        return [configs[i] for i in order]

    def fallback(self, configs: list[triton.Config], problem: Problem | None, dtype: str | None,
                 hw: HardwareRecord | None, reason: str) -> list[triton.Config]:
        """A fixed-seed sample of ``min(len, 4k)`` configs (valid ones when the problem and GPU are known), always
        holding the first config and the family default when it is among them."""
        pool, must = configs, [0]
        if problem is not None and hw is not None:
            try:
                default = self.fam.default_config(problem, dtype, hw)
                dicts = [family_config(self.fam, c, default) for c in configs]
            except CostModelError:
                dicts = []
            keep = [i for i, d in enumerate(dicts) if self.valid(problem, dtype, d, hw)]
            if keep:
                pool, dicts = [configs[i] for i in keep], [dicts[i] for i in keep]
                must += [i for i, d in enumerate(dicts[1:], 1) if d == default][:1]
        n = min(len(pool), FALLBACK_FACTOR * self.k)
        rest = [i for i in np.random.default_rng(FALLBACK_SEED).permutation(len(pool)) if i not in must]
        picked = sorted(must[:n] + rest[: n - len(must[:n])])
        if reason not in self._warned:
            self._warned.add(reason)
            warnings.warn(f"costmodel_autotune({self.fn_name}): no cost model ranking ({reason}); benchmarking "
                          f"{n} of {len(pool)} configs sampled with seed {FALLBACK_SEED} instead of the top {self.k}",
                          CostModelFallbackWarning, stacklevel=_caller_stacklevel())
        return [pool[i] for i in picked]


def eager_bench(fn: Callable[[], object], quantiles=(0.5, 0.2, 0.8), **_) -> list[float]:
    """A ``do_bench`` for Triton's autotuner that times what an eager caller waits: the per-call time of ``fn``
    called back to back (Triton's launch included), no L2 flush between calls."""
    from costmodel.benchmark import interpreting, time_eager

    if interpreting():  # on a CPU: one timed run (interpreter times mean nothing)
        t0 = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t0) * 1e3
    else:
        ms = time_eager(fn, "cuda", budget_ms=25.0)
    return [ms] * len(quantiles) if quantiles else ms


def graph_bench(fn: Callable[[], object], quantiles=(0.5, 0.2, 0.8), **_) -> list[float]:
    """A ``do_bench`` that times GPU time with the launch hidden: Triton's CUDA-graph benchmark."""
    return triton.testing.do_bench_cudagraph(fn, quantiles=list(quantiles) if quantiles else None)


BENCHES = {"eager": eager_bench, "graph": graph_bench}


def costmodel_autotune(family: str, key: list[str], configs: list[triton.Config] | None = None, k: int = 8,
                       hw: HardwareRecord | None = None, cost_model=None, dims: dict[str, str] | None = None,
                       objective: str = "eager", **autotune_kwargs: Any) -> Callable:
    """Like ``triton.autotune(configs=..., key=key, **autotune_kwargs)``, but Triton benchmarks only the cost
    model's top-``k`` configs for each new key.

    ``family``: a registered kernel family ("matmul", ...) or "package.module:Class". A knob that ``configs`` do
    not set (e.g. TMA for a plain pointer kernel) is scored at the family default's value.
    ``configs``: the candidates; None means the family's whole space (the kernel then takes every knob as a
    constexpr), filtered per problem by ``is_valid``.
    ``hw``: the GPU record (default: the visible GPU's); ``cost_model``: a loaded ``CostModel`` (default: the
    shipped model for ``hw``); ``dims``: family dim name -> kernel argument name where they differ.
    ``objective``: what Triton times the top-k by: ``eager`` (default), each config's per-call time when called back
    to back as eager PyTorch calls it, launch included (through Triton's JIT a launch costs 20-80 us on the H200,
    more than small kernels run: BENCHMARKS, issue 15); ``graph``, GPU time in a CUDA graph. A ``do_bench`` passed
    in ``autotune_kwargs`` takes precedence.
    The result is Triton's own ``Autotuner``: ``best_config``, ``configs_timings`` and ``cache`` work as usual.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if "prune_configs_by" in autotune_kwargs:
        raise TypeError("costmodel_autotune sets prune_configs_by itself")
    if objective not in BENCHES:
        raise CostModelError(f"objective {objective!r}: one of {', '.join(BENCHES)}")
    autotune_kwargs.setdefault("do_bench", BENCHES[objective])
    fam = get_family(family)
    dims = dict(dims or {})
    if unknown := set(dims) - set(fam.dims):
        raise CostModelError(f"{family} has dims {','.join(fam.dims)}; dims= names unknown {','.join(sorted(unknown))}")
    configs_list = space_configs(fam) if configs is None else list(configs)

    def decorator(fn) -> triton.runtime.Autotuner:
        missing = [dims.get(d, d) for d in fam.dims if dims.get(d, d) not in fn.arg_names]
        if missing:
            raise CostModelError(f"kernel {fn.__name__} has no argument {', '.join(missing)} for the {family} dims "
                                 f"{','.join(fam.dims)} (map them with dims={{dim: arg}})")
        ranker = _Ranker(fn.__name__, family, k, hw, cost_model, dims, whole_space=configs is None)
        return triton.autotune(configs=configs_list, key=key, prune_configs_by={"early_config_prune": ranker},
                               **autotune_kwargs)(fn)

    return decorator


__all__ = ["CostModelFallbackWarning", "costmodel_autotune", "eager_bench", "family_config", "graph_bench",
           "space_configs", "to_triton"]
