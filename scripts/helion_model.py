"""The Helion cost model on one GPU's Helion rows, and its Triton twins' rows read as Helion configs (unless
--twin-per-group 0; helion.model.twin_rows: they train, they are never scored): leave-one-kernel-out and
held-out-shape evaluation, and (with --out / --ship) a model trained on every group (CPU).

    python scripts/helion_model.py [--data data] [--gpu nvidia-h200] [--out DIR | --ship] [--fast] [--seed N] [--trees N]
        [--parallel-trees N] [--together helion:swiglu,helion:geglu ...] [--twin-per-group N] [--twin-kernels K1,K2]
        [--json]

Leave-one-kernel-out: for each Helion kernel of the data, a model fitted on every other kernel ranks the held-out
kernel's groups; per kernel and over all, the geomean top-1 / top-8 score (best latency of the group / best
latency among the model's top k) beside the expected best of k random configs. Held-out shapes (JSON key
"held_out_shapes"): what the tuner meets, kernels it saw and shapes it did not; each shape (every dtype of it) in
one of 3 folds by its hash, each fold ranked by a model fitted on the other folds. --together K1,K2 (JSON
"held_out_together"): those kernels held out at once, ranked by a model fitted on the rest. --seed: the boosting seed of
every fit (the evaluations' spread across seeds is large on this little data: compare runs over several). --ship writes
costmodel/models/<gpu>/helion/ (ship only a model trained on real rows of enough kernels). Prints a table on
stderr, and with --json one JSON object on stdout. Bad input: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel import dataset, model  # noqa: E402
from costmodel.errors import CostModelError  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402


def run(args) -> dict:
    params = dataclasses.replace(model.FAST if args.fast else helion_model.PARAMS, seed=args.seed)
    if args.trees:
        params = dataclasses.replace(params, n_estimators=args.trees, valid_fraction=0.0)
    if args.parallel_trees is not None:
        if args.parallel_trees < 1:
            raise CostModelError(f"--parallel-trees must be 1 or more, not {args.parallel_trees}")
        params = dataclasses.replace(params, num_parallel_tree=args.parallel_trees)
    table, gpu = helion_model.training_table(args.data, args.gpu, args.twin_per_group, args.twin_kernels.split(","))
    out = {"gpu": gpu, "rows": table.num_rows, "twin_rows": int(helion_model.is_twin(table).sum()),
           "twin_per_group": args.twin_per_group, "twin_kernels": args.twin_kernels, "seed": args.seed,
           **helion_model.leave_one_kernel_out(table, params),
           "held_out_shapes": helion_model.held_out_shapes(table, params),
           "held_out_together": [helion_model.leave_kernels_out(table, ks.split(","), params) for ks in args.together]}
    where = helion_model.model_dir(gpu) if args.ship else args.out
    if where:
        hw = dataset.hw_from_row(table.slice(0, 1).to_pylist()[0]).as_dict()
        booster, meta = helion_model.train(table, gpu, hw, params, evaluate=False)
        meta["metrics"] = {k: v for k, v in out.items() if k not in ("gpu", "rows", "per_group")}
        meta["metrics"]["held_out_shapes"] = {k: v for k, v in out["held_out_shapes"].items() if k != "per_group"}
        meta["metrics"]["held_out_together"] = [{k: v for k, v in res.items() if k != "per_group"}
                                                for res in out["held_out_together"]]
        meta["runs"] = {"file": helion_model.RUNS_FILE, "floor": helion_model.RUN_FLOOR,
                        "rounds": helion_model.RUN_ROUNDS}
        out["model"] = str(model.save(where, booster, meta))
        out["runs"] = str(helion_model.save_runs(where, helion_model.fit_runs(table, args.seed)))
    return out


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def _table(title: str, res: dict) -> None:
    cols = ("groups", "top1_score", "top8_score", "random1_score", "random8_score", "min_top8_score")
    print(f"{title} ({res['split']})", file=sys.stderr)
    print("kernel".ljust(18) + "".join(c.rjust(15) for c in cols), file=sys.stderr)
    for k, m in [*res["per_kernel"].items(), ("all", res)]:
        print(k.ljust(18) + "".join(_fmt(m[c]).rjust(15) for c in cols), file=sys.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data")
    p.add_argument("--gpu", default=None, help="GPU slug (default: the data's only GPU)")
    dest = p.add_mutually_exclusive_group()
    dest.add_argument("--out", default=None, help="also train on every group and write the model here")
    dest.add_argument("--ship", action="store_true", help="also train and write costmodel/models/<gpu>/helion/")
    p.add_argument("--fast", action="store_true", help="evaluate and train with model.FAST's parameters (early stopping "
                   "on 15%% of the groups) instead of the Helion model's (helion.model.PARAMS)")
    p.add_argument("--seed", type=int, default=0, help="boosting seed of every fit (default 0)")
    p.add_argument("--trees", type=int, default=None, help="this many trees, no early stopping (the recipe's count)")
    p.add_argument("--parallel-trees", type=int, default=None, metavar="N",
                   help="N trees a boosting round, each on its own row and column sample, averaged (the recipe's count)")
    p.add_argument("--together", action="append", default=[], metavar="K1,K2",
                   help="also hold these kernels out together (e.g. helion:swiglu,helion:geglu); repeatable")
    p.add_argument("--twin-per-group", type=int, default=helion_model.TWIN_PER_GROUP, metavar="N",
                   help="at most N configs of each Triton twin group (helion.model.twin_rows) train too; 0: none "
                   "(default %(default)s)")
    p.add_argument("--twin-kernels", default=",".join(helion_model.TWIN_KERNELS), metavar="K1,K2",
                   help="the Helion kernels whose twins' rows train (default %(default)s)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        out = run(args)
    except CostModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for title, res in (("leave one kernel out", out), ("held-out shapes", out["held_out_shapes"]),
                       *(("held out together", res) for res in out["held_out_together"])):
        _table(title, res)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
