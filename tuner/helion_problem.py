"""One problem of a costmodel Helion kernel (``costmodel/helion/kernels.py``), as ``costmodel tune --kernel
helion:<name>`` runs it: the kernel bound to the problem's seeded inputs, then

- ``predict``: the GPU's Helion model ranks the candidates (``CostModelAutotuner.ranked``), nothing timed, on a CPU
  too. The candidates are the installed Helion's ConfigSpec, so on a machine whose Helion is not the model's the
  ranking is of another space than the GPU host's (the result's ``note`` says so);
- ``tune``: the kernel's first call on the GPU with ``CostModelAutotuner`` as its ``autotuner_fn``, Helion's own
  call path: Helion's cache answers where a process tuned this problem before (``path`` "cache"), the model's search
  runs where the model fits ("model"), else Helion's own search, seeded with the model's top configs ("fallback").
  ``fallback`` gives why the model does not fit, also where the cache answered.

This module imports helion when called, never at import."""

from __future__ import annotations

import time

from costmodel import model
from costmodel.errors import CostModelError
from costmodel.helion import configs as hconfigs, families, helion_version
from costmodel.helion import model as helion_model
from tuner.helion import K, CostModelAutotuner, _gpu_of, time_pick


def model_gpu(gpu: str | None, model_ref: str | None) -> str | None:
    """The GPU whose Helion model ranks where no GPU is visible: ``gpu``; else, where ``model_ref`` names no model,
    the one GPU with a shipped Helion model (none or several: CostModelError, asking for --gpu)."""
    if gpu or model_ref:
        return gpu
    shipped = sorted({m["gpu"] for m in model.shipped(f"*/helion/{model.META_FILE}")})
    if len(shipped) != 1:
        raise CostModelError(f"--predict-only needs --gpu (shipped Helion models: {', '.join(shipped) or 'none'})")
    return shipped[0]


def predict(kernel: str, problem: dict, dtype: str, *, gpu: str | None = None, model_ref: str | None = None,
            k: int = K) -> dict:
    """The model's top ``k`` of ``kernel``'s candidates for ``problem`` (bound on the CPU), and Helion's default."""
    fam = families.get(kernel)
    t0 = time.perf_counter()
    gpu = model_gpu(gpu, model_ref)
    cm = helion_model.load(model_ref or gpu, gpu)  # refused (CostModelError) where there is none: no other GPU's
    bound, args = fam.bind(problem, dtype)
    tuner = CostModelAutotuner(model_ref, k=k, gpu=cm.gpu)
    why = tuner.fit(bound, args)[1]  # another Helion's space, a structure unlike the model's data: said, not refused
    ranked, default = tuner.ranked(cm, bound, args)
    return {"gpu": cm.gpu, "kernel": fam.kernel, "problem": problem, "dtype": dtype,
            "helion_version": helion_version(), "note": why, "candidates": len(ranked), "benchmarked": 0,
            "top": [{"rank": i + 1, "config": c} for i, c in enumerate(ranked[:k])], "default_config": default,
            "wall_s": time.perf_counter() - t0}


def tune(kernel: str, problem: dict, dtype: str, tuner: CostModelAutotuner) -> dict:
    """``kernel``'s first call on ``problem``'s inputs on the GPU, tuned by ``tuner`` through Helion's call path:
    the config it runs, how it was found, and what the tuner timed (``tuner.last``; empty unless the model's search
    ran). ``wall_s``: the first call, compile and search included, the inputs made before it. The pick's and the
    default's latencies are their re-timings in the search's verification, side by side (the default is always
    re-timed), else the batch's; where the model's search did not run (``path`` "cache" or "fallback"), the two
    timed after the call the same way (``time_pick``), not counted in ``wall_s``."""
    fam = families.get(kernel)
    args = fam.args(problem, fam.make_inputs(problem, dtype, "cuda"))
    wall, bound, config = first_call(fam.with_settings(autotuner_fn=tuner), args)
    cm, why = tuner.fit(bound, args)
    last, path = tuner.last, "fallback" if tuner.handed_over else "model" if tuner.last else "cache"
    default = hconfigs.normalise(bound.config_spec.default_config(), families.op_counts(bound.config_spec))
    if path == "model":
        best_ms = last["best"]["ms"]
        key = hconfigs.config_json(default)
        default_ms = next((v["ms"] for v in last["verified"]
                           if hconfigs.config_json(v["config"]) == key and v["ms"] is not None), last["default_ms"])
    else:  # the cache's answer, or Helion's own search's pick (its timings stay inside it): timed now, as verified
        best_ms, default_ms = time_pick(tuner.timer, bound, args, config, default)
    return {"gpu": _gpu_of(args), "kernel": fam.kernel,
            "problem": problem, "dtype": dtype, "helion_version": helion_version(),
            "path": path, "fallback": why,
            "candidates": last.get("candidates"), "benchmarked": len(last.get("timed", [])),
            "best": {"config": config, "latency_ms": best_ms}, "default_latency_ms": default_ms,
            "helion_config": repr(families.helion_config(config)), "wall_s": wall,
            "model_data_hash": cm.meta.get("data", {}).get("hash") if cm else None, "search": last}


def first_call(kern, args) -> tuple[float, object, dict]:
    """(seconds, the bound kernel, the config it ran, canonical) of Helion kernel ``kern``'s first call on ``args``
    on the GPU: its tuning (or cache lookup) and compiles included."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kern(*args)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    bound = kern.bind(args)
    return wall, bound, hconfigs.normalise(bound._config, families.op_counts(bound.config_spec))
