"""Issue 18: what the tuner's candidates gain on an unaligned matmul when the twin's configs refused only for TMA's
row alignment join them (``tuner.helion`` recipe knob ``twin_unaligned``; CPU, nothing timed).

Per matmul race row (``bench_helion.py`` output): the twin's candidates without and with the knob (how many, how many
with tensor-descriptor indexing), the candidates ranked, and the tuner's first k with the model's scores, beside the
model's score of Helion quick's pick. Whether the new ones are faster is for the H200 to say.

    PYTHONPATH=.:tests/helion_scripts .venv-helion140/bin/python scripts/experiments/helion_twin_unaligned.py \\
        scripts/results/bench_helion-retimed-h200-2026-12-03-s26a.jsonl [--model nvidia-h200] [--h200] [--json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))
from costmodel.helion import configs, families  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402
from helion_steps import H200, brief, model_and_rows  # noqa: E402


def one(row: dict, cm, knob: int) -> dict:
    from tuner.helion import Call, CostModelAutotuner

    bound, args = families.get("matmul").bind(row["problem"], row["dtype"])
    call, tuner = Call.of(bound, args), CostModelAutotuner(gpu=cm.gpu, twin_unaligned=knob)
    twins = families.twin_candidates(bound, call.kernel, call.problem, call.dtype, cm.hardware, unaligned=bool(knob))
    ranked, _ = tuner.ranked(cm, bound, args)
    top = ranked[: tuner.k]
    keys = [configs.config_json(c) for c in (*top, *twins, row["quick"]["config"])]
    s = [float(x) for x in helion_model.score(cm, call.kernel, call.problem, call.dtype, keys, call.shape)]
    return {"kernel": row["kernel"], "problem": row["problem"], "dtype": row["dtype"], "index": row.get("index"),
            "twin_unaligned": knob, "twin_candidates": len(twins),
            "twin_tensor_descriptor": sum("tensor_descriptor" in c["indexing"] for c in twins),
            "candidates": len(ranked), "best_twin_score": max(s[len(top): len(top) + len(twins)], default=None),
            "quick": brief(row["quick"]["config"]), "quick_score": s[-1],
            "top_k": [{"config": brief(c), "score": sc} for c, sc in zip(top, s)]}


@click.command()
@click.argument("rows_files", nargs=-1, required=True)
@click.option("--model", default="nvidia-h200", help="Helion model directory or GPU slug")
@click.option("--json", "as_json", is_flag=True, help="one JSON line per row and knob value on stdout")
@H200
def main(rows_files, model, as_json, h200) -> None:
    cm, rows = model_and_rows(model, rows_files, h200)
    for row in rows:
        if row["kernel"] != "helion:matmul" or not row.get("quick", {}).get("config"):
            continue
        for knob in (0, 1):
            out = one(row, cm, knob)
            if as_json:
                print(json.dumps(out))
                continue
            print(f"{out['problem']} {out['dtype']} twin_unaligned={knob}: twin {out['twin_candidates']} "
                  f"({out['twin_tensor_descriptor']} tensor descriptors), best twin {out['best_twin_score']:.3f}, "
                  f"quick {out['quick_score']:.3f}", file=sys.stderr)
            for t in out["top_k"]:
                print(f"    {t['score']:.3f} {t['config']}", file=sys.stderr)


if __name__ == "__main__":
    main()
