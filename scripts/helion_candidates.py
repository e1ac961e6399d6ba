"""What the Helion tuner ranks for one problem of a costmodel Helion kernel (CPU): its candidate pools (Helion's
random population, and for a kernel with a Triton twin the twin's space read as Helion configs), the population's
tile sizes, and the model's top k of each pool and of the order the tuner times (``CostModelAutotuner.ranked``).

    python scripts/helion_candidates.py --kernel helion:matmul --problem M=4155,N=4096,K=4476 --dtype bfloat16 \
        [--model nvidia-h200] [--k 8] [--json]

Prints a summary on stderr, and with --json one JSON object on stdout. Bad input: one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import collections
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel.errors import CostModelError  # noqa: E402
from costmodel.helion import families, helion_version, model as helion_model  # noqa: E402


def _brief(c: dict) -> dict:
    return {k: c.get(k) for k in ("block_sizes", "num_warps", "num_stages", "pid_type", "indexing", "l2_groupings",
                                  "reduction_loops")}


def run(args) -> dict:
    from tuner.helion import Call, CostModelAutotuner, by_score

    problem = {k: int(v) for k, v in (kv.split("=") for kv in args.problem.split(","))}
    fam = families.get(args.kernel)
    cm = helion_model.load(args.model)
    bound, call_args = fam.bind(problem, args.dtype)
    tuner = CostModelAutotuner(args.model, gpu=cm.gpu)
    call = Call.of(bound, call_args)
    population = families.candidates(bound, tuner.candidates, tuner.seed)
    twins = families.twin_candidates(bound, fam.kernel, problem, args.dtype, cm.hardware)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranked, default = tuner.ranked(cm, bound, call_args)
    tiles = collections.Counter(tuple(c["block_sizes"][:2]) for c in population)
    return {"kernel": fam.kernel, "problem": problem, "dtype": args.dtype, "helion_version": helion_version(),
            "model_data": cm.meta["data"]["hash"],
            "population": len(population), "twin_candidates": len(twins),
            "population_first_tile": dict(sorted(collections.Counter(c["block_sizes"][0] for c in population).items())),
            "population_top_tiles": [[list(t), n] for t, n in tiles.most_common(5)],
            "top_population": [_brief(c) for c in by_score(cm, call, population)[: args.k]],
            "top_twin": [_brief(c) for c in by_score(cm, call, twins)[: args.k]] if twins else [],
            "timed": [_brief(c) for c in ranked[: args.k]], "default": _brief(default)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", required=True, help="a costmodel Helion kernel, e.g. helion:matmul")
    p.add_argument("--problem", required=True, help="dims, e.g. M=4155,N=4096,K=4476")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--model", default="nvidia-h200", help="a Helion model directory or GPU slug")
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        out = run(args)
    except (CostModelError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{out['kernel']} {out['problem']} {out['dtype']}: {out['population']} random candidates (first tile "
          f"{out['population_first_tile']}), {out['twin_candidates']} from the twin", file=sys.stderr)
    for name in ("top_population", "top_twin", "timed"):
        print(name, file=sys.stderr)
        for c in out[name]:
            print(f"  {c}", file=sys.stderr)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
