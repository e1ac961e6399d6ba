"""``costmodel_autotuner``: Helion's ``autotuner_fn`` hook driven by the GPU's Helion cost model (issue 18).

    @helion.kernel(autotuner_fn=costmodel_autotuner)       # or kernel.settings.autotuner_fn = costmodel_autotuner
    def my_kernel(x: torch.Tensor) -> torch.Tensor: ...

Helion calls ``autotuner_fn(bound_kernel, args, **kwargs)`` at a kernel's first call for a shape (1.4.0 and 1.5.1:
``backend.autotune``) and then ``.autotune(skip_cache=...)`` on what it returns. We return Helion's own cache
object (``helion.autotuner.cache_classes[settings.autotune_cache]``, ``LocalAutotuneCache`` by default) around our
search, exactly as Helion's ``default_autotuner_fn`` wraps its own: on a hit it answers from its
``.best_config`` file without searching, on a miss it runs our search and writes the winner there. The key is
Helion's (kernel source, specialisation, device, config spec; not the search), so a second process answers at once,
whichever of the two searches wrote it.

Our search (``CostModelSearch.autotune``): the candidates (``families.candidates`` of the bound kernel: Helion's
default, seed configs, then a seeded random population of its ConfigSpec; the same generation for a kernel that is
no family here), ranked by the model, the top ``k`` and Helion's default timed in one batch through a
``HelionTimer`` (on the GPU: Helion's own compile-and-benchmark path, ``FiniteSearch.benchmark_batch``, with its
accuracy check against the default config's output); the fastest wins. The default is timed beside the top-k, so
the result is never slower than it (as measured in that batch).

Where the model does not fit (no Helion model for this GPU, a model of another feature schema or Helion version,
a kernel whose structure, tiles and reductions, no kernel of its data had), it says so once per reason
(``HelionFallbackWarning``, one line on stderr) and hands over to Helion's own search (what
``default_autotuner_fn`` builds: ``HELION_AUTOTUNER`` or LFBO tree search, the effort profile) with the
``autotune_seed_configs`` setting (1.4.0 and 1.5.1 both read it into the initial population) extended by the top
configs of whichever Helion model there is (another GPU's ranks better than none).

This module imports helion when called, never at import; costmodel/ never imports it."""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from costmodel import model
from costmodel.benchmark import HELION_COMPILE_LIMIT_S
from costmodel.errors import CostModelError
from costmodel.helion import configs as hconfigs, families
from costmodel.helion import features as hfeatures
from costmodel.helion import model as helion_model

K = 8  # timed besides the default; issue 18 measures top-8 on left-out kernels
N_CANDIDATES = 1000  # ranked: the population the collector's "exhaustive" groups sample (collect.plan.HELION_SWEEP)
N_SEEDS = 8  # the model's top configs handed to Helion's search when the model does not fit


class HelionFallbackWarning(UserWarning):
    """The Helion model does not fit this call: Helion's own search runs, seeded with the model's top configs."""


class HelionTimer(Protocol):
    def measure(self, bound, args: Sequence[object], configs: list[dict]) -> list[float | None]:
        """Milliseconds per canonical config (None: it did not compile, run or pass the accuracy check)."""


class HelionBenchmark:
    """Helion's own compile-and-benchmark path on the GPU: a ``FiniteSearch`` over the configs, whose
    ``benchmark_batch`` compiles them (in parallel where Helion precompiles), checks each output against the
    default config's and times it."""

    def measure(self, bound, args, configs):
        from helion.autotuner.finite_search import FiniteSearch

        timed: dict[str, float] = {}

        class Timed(FiniteSearch):
            def _autotune(self):
                results = self.benchmark_batch(self.configs, desc="costmodel top-k")
                for r in results:
                    timed[hconfigs.config_json(r.config, counts)] = r.perf
                return min(results, key=lambda r: r.perf).config

        counts = families.op_counts(bound.config_spec)
        settings = bound.settings
        allowed = settings.autotune_compile_timeout
        # a compile capped at the collector's bound, not Helion's 60 s: Helion's random population holds configs that
        # compile for minutes (their rows are timeouts at 30 s; the ok rows' 99.9th percentile is 28 s on the H200)
        settings.autotune_compile_timeout = min(allowed, int(HELION_COMPILE_LIMIT_S))
        try:
            if len(configs) > 1:  # FiniteSearch needs two
                Timed(bound, args, [_config(c) for c in configs]).autotune(skip_cache=True)
        finally:
            settings.autotune_compile_timeout = allowed
        out = [timed.get(hconfigs.config_json(c, counts)) for c in configs]
        return [t if t is not None and np.isfinite(t) else None for t in out]


class HelionReplay:
    """Answers from recorded rows (a dataset table of one group): each config's recorded ``latency_ms`` where it
    ran, None where it failed or was not recorded. How the tuner is tested on a machine without a GPU."""

    def __init__(self, table):
        ok = [(c, t) for c, s, t in zip(table["config_json"].to_pylist(), table["status"].to_pylist(),
                                         table["latency_ms"].to_pylist()) if s == "ok" and t]
        self.latency = dict(ok)
        self.asked: list[list[dict]] = []

    def measure(self, bound, args, configs):
        self.asked.append(list(configs))
        return [self.latency.get(hconfigs.config_json(c)) for c in configs]


def _config(canonical: dict):
    import helion

    return helion.Config(**canonical)


def _dtype(args) -> str:
    import torch

    t = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return str(t.dtype).removeprefix("torch.") if t is not None else "float32"


def _gpu_of(args) -> str | None:
    """The slug of the CUDA device the arguments are on (None on a CPU)."""
    import torch

    from costmodel.hardware import slug

    t = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if t is None or t.device.type != "cuda":
        return None
    return slug(torch.cuda.get_device_name(t.device))


def family_of(bound) -> families.HelionFamily | None:
    """The costmodel family of a bound kernel (one defined in costmodel/helion/kernels.py), else None."""
    fn = bound.kernel.fn
    if fn.__module__ == "costmodel.helion.kernels" and fn.__name__ in families.FAMILIES:
        return families.FAMILIES[fn.__name__]
    return None


@dataclasses.dataclass
class Call:
    """What the tuner knows of one call: the kernel as the model reads it."""

    kernel: str
    problem: dict
    dtype: str
    shape: dict | None  # the spec's extents for a kernel that is no family here (features.spec_shape)

    @classmethod
    def of(cls, bound, args) -> "Call":
        fam = family_of(bound)
        if fam is not None:
            return cls(fam.kernel, fam.problem_of(tuple(args)), _dtype(args), None)
        return cls(f"user:{bound.kernel.name}", {}, _dtype(args), hfeatures.spec_shape(bound))


class CostModelAutotuner:
    """A Helion ``autotuner_fn``. ``model``: a Helion model directory or GPU slug (default: the shipped model of
    the arguments' GPU); ``gpu``: the GPU the timings are for (default: the arguments' device; set it to replay
    another GPU's rows on a CPU); ``helion_version``: the Helion the timings come from (default: the installed
    one; a replay's rows may be of another); ``timer``: a ``HelionTimer`` (default ``HelionBenchmark``);
    ``candidates``: how many to rank, or a function of the bound kernel giving canonical configs."""

    def __init__(self, model: str | None = None, *, k: int = K, candidates: int | Callable = N_CANDIDATES,
                 seed: int = 0, timer: HelionTimer | None = None, gpu: str | None = None,
                 helion_version: str | None = None, n_seeds: int = N_SEEDS):
        self.model, self.k, self.candidates, self.seed = model, k, candidates, seed
        self.timer = timer or HelionBenchmark()
        self.gpu, self.helion_version, self.n_seeds = gpu, helion_version, n_seeds
        self.said: set[str] = set()
        self.last: dict = {}  # what the last search did: candidates, the timed configs, the best, wall time

    # --- Helion's hook -------------------------------------------------------------------------------------

    def __call__(self, bound_kernel, args, **kwargs):
        from helion.autotuner import cache_classes

        cache_cls = cache_classes[bound_kernel.settings.autotune_cache]
        cm, why = self.fit(bound_kernel, args)
        if why is None:
            def search():
                return CostModelSearch(self, cm, bound_kernel, args)

            return cache_cls(search(), autotuner_factory=search)
        self.say_once(why)
        return self.helion_search(bound_kernel, args, cm, **kwargs)

    # --- does the model fit? -------------------------------------------------------------------------------

    def fit(self, bound, args) -> tuple[model.CostModel | None, str | None]:
        """(the model to rank with, None) where it fits this call; else (a model to seed Helion's search with,
        or None, and the reason it does not fit)."""
        from costmodel.helion import helion_version

        gpu = self.gpu or _gpu_of(args)
        version = self.helion_version or helion_version()
        try:
            cm = helion_model.load(self.model or gpu, gpu) if (self.model or gpu) else None
        except CostModelError as e:
            return _any_model(self.model), f"no usable Helion cost model for GPU {gpu}: {e}"
        if cm is None:
            return _any_model(), "no Helion cost model without a CUDA GPU (pass gpu= to replay a GPU's rows)"
        if version not in cm.meta.get("helion_versions", []):
            return cm, (f"the Helion cost model for {cm.gpu} was trained on Helion "
                        f"{', '.join(cm.meta.get('helion_versions', [])) or 'unknown'}, this is Helion {version}")
        spec = bound.config_spec
        structure = [len(spec.block_sizes), len(spec.reduction_loops)]
        if structure not in cm.meta.get("structures", []):
            return cm, (f"{bound.kernel.name}: {structure[0]} tiled dims and {structure[1]} reductions, a structure "
                        f"none of the Helion cost model's kernels had")
        return cm, None

    def say_once(self, why: str) -> None:
        if why not in self.said:
            self.said.add(why)
            warnings.warn(f"costmodel: {why}; Helion's own search runs, seeded with the model's top configs",
                          HelionFallbackWarning, stacklevel=3)

    # --- ranking -------------------------------------------------------------------------------------------

    def ranked(self, cm: model.CostModel, bound, args) -> tuple[list[dict], dict]:
        """(candidates predicted fastest first, Helion's default config), canonical."""
        spec = bound.config_spec
        counts = families.op_counts(spec)
        cands = (self.candidates(bound) if callable(self.candidates)
                 else families.candidates(bound, int(self.candidates), self.seed))
        cands = [hconfigs.normalise(c, counts) for c in cands]
        call = Call.of(bound, args)
        scores = helion_model.score(cm, call.kernel, call.problem, call.dtype,
                                    [hconfigs.config_json(c) for c in cands], call.shape)
        order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
        return [cands[i] for i in order], hconfigs.normalise(spec.default_config(), counts)

    def helion_search(self, bound, args, cm, **kwargs):
        """Helion's own search, wrapped in its cache as ``default_autotuner_fn`` builds it, with the model's top
        configs added to the ``autotune_seed_configs`` setting when it runs (a cache hit ranks nothing)."""
        from helion.runtime.settings import default_autotuner_fn

        tuner = default_autotuner_fn(bound, args, **kwargs)
        seeds: Callable[[], list] = (lambda: [_config(c) for c in self.ranked(cm, bound, args)[0][: self.n_seeds]]
                                     ) if cm is not None else list
        factory = tuner._autotuner_factory
        tuner.autotuner = Seeded(tuner.autotuner, seeds)
        if factory is not None:
            tuner._autotuner_factory = lambda: Seeded(factory(), seeds)
        return tuner


def _any_model(asked: str | None = None) -> model.CostModel | None:
    """The Helion model the caller named whatever its GPU, else a shipped one of any GPU (its top configs seed
    Helion's search better than none), or None."""
    for d in [*([asked] if asked else []), *sorted(model.MODELS_DIR.glob("*/helion"))]:
        try:
            return helion_model.load(d)
        except CostModelError:
            continue
    return None


class Seeded:
    """Helion's search with seeds added to its ``autotune_seed_configs`` setting before it runs."""

    def __init__(self, search, seeds: Callable[[], list]):
        self.search, self.seeds = search, seeds

    def __getattr__(self, name: str) -> Any:
        return getattr(self.search, name)

    def autotune(self, *args, **kwargs):
        s = self.search
        own = s.settings.autotune_seed_configs
        own = [] if own is None else [own] if not isinstance(own, (list, tuple)) else list(own)
        s.settings = dataclasses.replace(s.settings, autotune_seed_configs=[*own, *self.seeds()])
        return s.autotune(*args, **kwargs)


class CostModelSearch:
    """What Helion's cache layer runs on a miss: rank, time the top-k and the default, return the fastest. It has
    what that layer reads of a search (kernel, args, settings, config_spec, log, best_perf_so_far)."""

    def __init__(self, tuner: CostModelAutotuner, cm: model.CostModel, bound, args):
        from helion.autotuner.logger import AutotuningLogger

        self.tuner, self.cm, self.kernel, self.args = tuner, cm, bound, args
        self.settings, self.config_spec = bound.settings, bound.config_spec
        self.log = AutotuningLogger(self.settings)
        self.best_perf_so_far = float("inf")

    def autotune(self, *, skip_cache: bool = False):
        t0 = time.perf_counter()
        ranked, default = self.tuner.ranked(self.cm, self.kernel, self.args)
        t_ranked = time.perf_counter()
        top = ranked[: self.tuner.k]
        batch = top if default in top else [*top, default]
        ms = self.tuner.timer.measure(self.kernel, self.args, batch)
        ran = [(t, c) for t, c in zip(ms, batch) if t is not None]
        best_ms, best = min(ran, key=lambda tc: tc[0]) if ran else (None, default)
        self.best_perf_so_far = best_ms if best_ms is not None else float("inf")
        default_ms = ms[batch.index(default)]
        self.tuner.last = {
            "candidates": len(ranked), "timed": [{"config": c, "ms": t} for c, t in zip(batch, ms)],
            "best": {"config": best, "ms": best_ms}, "default_ms": default_ms,
            "rank_s": t_ranked - t0, "wall_s": time.perf_counter() - t0}
        if not ran:
            print("costmodel: none of the top configs ran; Helion's default config is used", file=sys.stderr)
        self.log(f"costmodel: ranked {len(ranked)} configs in {t_ranked - t0:.2f} s, timed {len(batch)}, best "
                 f"{best_ms} ms (default {default_ms} ms)")
        return _config(best)


costmodel_autotuner = CostModelAutotuner()

__all__ = ["CostModelAutotuner", "CostModelSearch", "HelionBenchmark", "HelionFallbackWarning", "HelionReplay",
           "costmodel_autotuner", "family_of"]
