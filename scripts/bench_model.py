"""Featurise and score 10,000 candidate configs on the CPU: many matmul problems, each with its valid configs
through ``candidates_table``, featurised and scored in one batch (``batched_ms``, the target: <= 50 ms), and
one ``score`` call per problem, as the tuner ranks a single problem (``per_problem_ms``).

    .venv/bin/python scripts/bench_model.py [--model SLUG|DIR] [--candidates 10000] [--repeats 20]

Prints median wall times (ms) over repeats. Enumerating the valid configs (the config space's job) happens
once, outside the timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import pyarrow as pa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="nvidia-h200", help="GPU slug of a shipped model or a model directory")
    ap.add_argument("--candidates", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()

    from costmodel import features, model, space
    from costmodel.hardware import for_gpu
    from costmodel.kernels import get_family

    cm = model.load(args.model)
    hw = for_gpu(cm.gpu)
    fam = get_family("matmul")
    work, total = [], 0
    for problem in fam.problems(np.random.default_rng(0), 1000):
        configs = space.enumerate_valid(fam, problem, "float16", hw)[: args.candidates - total]
        work.append((problem, configs))
        total += len(configs)
        if total >= args.candidates:
            break

    def tables() -> list[pa.Table]:
        return [features.candidates_table("matmul", problem, "float16", configs, hw) for problem, configs in work]

    def batched() -> None:
        model.score(cm, pa.concat_tables(tables()))

    def per_problem() -> None:
        for t in tables():
            model.score(cm, t)

    def median_ms(fn) -> float:
        fn()  # warm: first calls build caches (family constants, xgboost's predictor)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return round(statistics.median(times), 2)

    print(json.dumps({"candidates": total, "problems": len(work), "trees": cm.booster.num_boosted_rounds(),
                      "batched_ms": median_ms(batched), "per_problem_ms": median_ms(per_problem), "target_ms": 50}))


if __name__ == "__main__":
    main()
