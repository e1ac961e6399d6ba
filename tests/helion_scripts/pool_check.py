"""The compile pool's Helion path on a CPU, for an sm_90 target (no GPU, no libcuda): run outside
TRITON_INTERPRET, with Triton's on-disk cache in CACHE.

  pool_check.py pool CACHE FAMILY N [LIMIT]
                                        the benchmarker's capture (``_HelionLaunches``: its thread, the kernel bound
                                        on CPU tensors) of the family's first N candidates, one with
                                        tensor-descriptor indexing, each compiled in a forkserver process by
                                        ``benchmark._compile_helion`` within LIMIT seconds (default its own)
  pool_check.py worker CACHE FAMILY N   the timing worker's path in a fresh process: the group's kernel bound as the
                                        worker binds it, each config through Helion's compile_config and first call
                                        (Helion's own launcher; warmup only: nothing runs here), the N pooled
                                        configs and then the next candidate, which no pool compiled

Prints one JSON line: per config, its outcome and the entries it added to the cache.
"""

import json
import os
import sys
import time

PROBLEMS = {"matmul": {"M": 200, "N": 136, "K": 96}, "softmax": {"M": 37, "N": 1000},
            "cross_entropy": {"M": 37, "N": 1000}}  # int64 targets among its launch's arguments


def target_only() -> None:
    """Triton's CUDA driver answering device queries for an sm_90 target, and building no launcher (that loads
    libcuda); Helion's device checks answered as the H200's (tensor descriptors, maxnreg, its SMs)."""
    from triton.runtime import driver

    from costmodel.benchmark import target_only_driver
    from costmodel.hardware import KNOWN
    from costmodel.helion.target import answer_as

    driver.set_active(target_only_driver())
    answer_as(KNOWN["nvidia-h200"])


def configs(family: str, n: int) -> list[dict]:
    from costmodel.helion import families

    fam = families.get(family)
    out = families.candidates(fam.bind(PROBLEMS[family], "float16", "cpu")[0], n + 1, seed=0)
    if out[0].get("indexing"):  # the default config again, every memory op through a tensor descriptor
        out[1] = dict(out[0], indexing=["tensor_descriptor"] * len(out[0]["indexing"]))
    return out


def entries(cache: str) -> set[str]:
    return set(os.listdir(cache)) if os.path.isdir(cache) else set()


def pool(cache: str, family: str, n: int, limit_s: float | None = None) -> list[dict]:
    from concurrent.futures import ProcessPoolExecutor

    from costmodel import benchmark
    from costmodel.hardware import KNOWN

    launches = benchmark._HelionLaunches("cpu", 0, limit_s or benchmark.HELION_COMPILE_LIMIT_S)
    with ProcessPoolExecutor(2, mp_context=benchmark.process_context(), initializer=target_only) as ex:
        futs = [launches.submit("helion:" + family, PROBLEMS[family], "float16", c, lambda: ex, KNOWN["nvidia-h200"])
                for c in configs(family, n)[:n]]
        return [f.result() for f in futs]


def worker(cache: str, family: str, n: int) -> list[dict]:
    import helion
    import triton.runtime.jit as jit

    from costmodel import benchmark

    run = jit.JITFunction.run
    jit.JITFunction.run = lambda self, *a, **k: run(self, *a, **{**k, "warmup": True})  # compile or load, no launch
    _, _, args, bound = benchmark._helion_bound("helion:" + family, PROBLEMS[family], "float16", "cpu", 0)
    out = []
    for c in configs(family, n):
        before, t0 = entries(cache), time.perf_counter()
        bound.compile_config(helion.Config(**c))(*args)
        out.append({"first_call_s": time.perf_counter() - t0, "new_entries": len(entries(cache) - before)})
    return out


if __name__ == "__main__":
    mode, cache, family, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    os.environ["TRITON_CACHE_DIR"] = cache
    target_only()
    if mode == "pool":
        results = pool(cache, family, n, float(sys.argv[5]) if len(sys.argv) > 5 else None)
    else:
        results = worker(cache, family, n)
    print(json.dumps({"results": results}))
