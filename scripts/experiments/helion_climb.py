"""Issue 18: what the tuner's climb (tuner.helion.climb) would time on the race's rows, beside Helion quick's pick
(CPU, nothing timed).

Per race row (``bench_helion.py`` output): the candidates ranked as the tuner ranks them (how many, how many the
runs classifier dropped, how many hold maxnreg; Helion's default config and the compiler's seed heuristics that
fired; ``as_recorded``: which of the default config, those counts, the top k and the climb are the row's H200
tune's), the model's score of the
best of them, of Helion quick's pick and that pick's rank among them (was it a candidate?), and the configs the climb
adds to the first batch: their scores, and how many knobs each is from quick's pick (flattened as Helion's
ConfigGeneration flattens). Whether they are fast is for the H200 to say.

    .venv/bin/python scripts/experiments/helion_climb.py scripts/results/bench_helion-h200-2026-12-03-s25c.jsonl \
        [--model nvidia-h200] [--h200] [--climb-rounds N] [--kernel K] [--spare N] [--compile SECONDS] [--json]

Under Helion 1.4.0 (the H200's; ``bash scripts/helion140_check.sh`` builds its venv) with --h200, the space is the
one the H200's tunes climb in. ``--compile SECONDS`` also compiles each climbed config for sm_90 here: whether it
compiles, the shared memory it asks for against the H200's block, and whether it ran in the row's H200 tune.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))
from costmodel.helion import configs, families  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402
from helion_steps import H200, brief, knobs_apart, model_and_rows  # noqa: E402


def as_recorded(row: dict, ranked: list[dict], dropped: int, default: dict, record: dict) -> dict:
    """What of this ranking and climb equals the row's H200 tune's record: the default config, the candidates and
    dropped counts, the first k (the row's first timed), the climb's record."""
    search, key = row.get("costmodel", {}).get("search", {}), configs.config_json
    timed = [key(t["config"]) for t in search.get("timed", [])]
    k = search.get("recipe", {}).get("k", 8)
    return {"default": key(default) == key(row["default"]["config"]),
            "candidates": (len(ranked), dropped) == (search.get("candidates"), search.get("dropped")),
            "top_k": [key(c) for c in ranked[:k]] == timed[:k], "climb": record == search.get("climb")}


def compiled(row: dict, kernel: str, config: dict, limit: int) -> dict:
    """``config`` compiled here for sm_90 (helion_twin_compiles: its own process, ``limit`` seconds): the outcome,
    the shared memory its kernels ask for and whether the H200's block holds it, and whether it ran in the row's H200
    tune where that tune timed it (None where it did not)."""
    from costmodel.hardware import KNOWN
    from helion_twin_compiles import _one

    got = _one(kernel, row["problem"], row["dtype"], config, limit)
    timed = {configs.config_json(t["config"]): t["ms"] is not None
             for t in row.get("costmodel", {}).get("search", {}).get("timed", [])}
    fits = got.get("shared") is not None and got["shared"] <= KNOWN["nvidia-h200"].smem_per_block
    return {**got, "fits": fits, "ran_on_h200": timed.get(configs.config_json(config))}


def one(row: dict, cm, climb_rounds: int | None = None, compile_limit: int = 0, spare: int = 0) -> dict:
    from tuner.helion import Call, CostModelAutotuner, climb, recipe_knobs

    fam = families.get(row["kernel"].removeprefix("helion:"))
    bound, args = fam.bind(row["problem"], row["dtype"])
    knobs = recipe_knobs(row.get("costmodel", {}).get("search", {}).get("recipe", {}))  # as the row's tune ran
    knobs["climb_rounds"] = climb_rounds or knobs["climb_rounds"]
    call, tuner = Call.of(bound, args), CostModelAutotuner(gpu=cm.gpu, **knobs)
    t0 = time.perf_counter()
    ranked, default = tuner.ranked(cm, bound, args)
    t1 = time.perf_counter()
    got, record = climb(tuner, cm, bound, call, ranked)
    t2 = time.perf_counter()
    wider = CostModelAutotuner(gpu=cm.gpu, **{**knobs, "climb": tuner.climb + spare})
    spares = climb(wider, cm, bound, call, ranked)[0][len(got):] if spare else []  # the same climb, handing over more
    keys = [configs.config_json(c) for c in ranked]
    quick = row["quick"]["config"]
    s = helion_model.score(cm, call.kernel, call.problem, call.dtype,
                           [*keys, configs.config_json(quick), *map(configs.config_json, spares)], call.shape)
    s_ranked, s_quick, s_spares = np.asarray(s[: len(keys)]), float(s[len(keys)]), s[len(keys) + 1:]

    def shown(cs: list[dict], scores) -> list[dict]:
        return [{"config": brief(c), "score": float(sc), "knobs_from_quick": len(knobs_apart(bound, c, quick)),
                 **({"compiled": compiled(row, fam.kernel, c, compile_limit)} if compile_limit else {})}
                for c, sc in zip(cs, scores)]

    return {"kernel": row["kernel"], "problem": row["problem"], "dtype": row["dtype"], "index": row.get("index"),
            "candidates": len(ranked), "dropped": tuner.dropped,
            "with_maxnreg": sum("maxnreg" in c for c in ranked), "default": configs.config_json(default),
            "seed_heuristics": list(getattr(bound.env.config_spec, "autotuner_heuristics", None) or []),
            "as_recorded": as_recorded(row, ranked, tuner.dropped, default, record),
            "best_candidate_score": float(s_ranked.max()), "quick_score": s_quick,
            "quick_is_candidate": configs.config_json(quick) in keys,
            "quick_rank": int((s_ranked > s_quick).sum()) + 1, "quick": brief(quick),
            "climbed": shown(got, record.get("scores", [])), **({"spares": shown(spares, s_spares)} if spare else {}),
            "climb": {k: v for k, v in record.items() if k != "scores"},
            "rank_s": t1 - t0, "climb_s": t2 - t1}


@click.command()
@click.argument("rows_files", nargs=-1, required=True)
@click.option("--model", default="nvidia-h200", help="Helion model directory or GPU slug")
@click.option("--json", "as_json", is_flag=True, help="one JSON line per row on stdout")
@click.option("--climb-rounds", type=click.IntRange(1), default=None,
              help="climb at most this many rounds (the recipe's climb_rounds; default the row's recipe's)")
@click.option("--kernel", default=None, help="only the rows of this kernel (e.g. helion:matmul)")
@click.option("--spare", default=0, type=click.IntRange(0),
              help="also the climb's next N configs (what a tune giving the climb more slots would time)")
@click.option("--compile", "compile_limit", type=click.IntRange(0), default=0, metavar="SECONDS",
              help="also compile each climbed config for sm_90 here, in at most SECONDS (0: not): whether it "
              "compiles and its shared memory fits the H200's block, beside whether it ran in the row's tune")
@H200
def main(rows_files, model, as_json, climb_rounds, kernel, spare, compile_limit, h200) -> None:
    cm, rows = model_and_rows(model, rows_files, h200)
    for row in rows:
        if not row.get("quick", {}).get("config") or kernel not in (None, row["kernel"]):
            continue
        out = one(row, cm, climb_rounds, compile_limit, spare)
        if as_json:
            print(json.dumps(out))
        else:
            print(f"{out['kernel']} {out['problem']} {out['dtype']}: best of {out['candidates']} candidates "
                  f"{out['best_candidate_score']:.3f}; quick {out['quick_score']:.3f} (rank {out['quick_rank']}, "
                  f"a candidate: {out['quick_is_candidate']}) {out['quick']}", file=sys.stderr)
            for c in out["climbed"]:
                print(f"    climbed {c['score']:.3f}, {c['knobs_from_quick']} knobs from quick: {c['config']}",
                      file=sys.stderr)


if __name__ == "__main__":
    main()
