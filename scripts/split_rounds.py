"""CPU, issue 17: what a split tail in rounds (a tail over half the SMs, split into 2-4 parts: ``matmul.split_of``)
buys, from the whole-space matmul groups of the data. Per group holding such configs: how many, the group's best over
the best of them (1.0: one of them is the group's best), and each such config against its twin with ``SPLIT_TAIL=0``
(unsplit time / split time: the median, and the share where the split is faster).

    .venv/bin/python scripts/split_rounds.py [--data data] [--gpu nvidia-h200] [--json]

Prints a table on stderr, with --json one JSON object on stdout. Bad input: one line on stderr, exit status 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel import dataset, hardware  # noqa: E402
from costmodel.cli import handle_errors  # noqa: E402
from costmodel.errors import CostModelError  # noqa: E402
from costmodel.kernels.matmul import tail_split  # noqa: E402

COLS = ["kernel", "group_id", "problem_json", "dtype", "config_json", "status", "latency_ms", "exhaustive"]


def group_row(d, hw) -> dict | None:
    problem = json.loads(d["problem_json"].iloc[0])
    configs = [json.loads(c) for c in d["config_json"]]
    rounds = np.array([c["SPLIT_TAIL"] > 0 and 2 * tail_split(problem, c, hw)[0] > hw.sm_count for c in configs])
    if not rounds.any():
        return None
    twin_key = [dataset.twin_key(c, "SPLIT_TAIL") for c in configs]
    unsplit = {k: t for k, t, c in zip(twin_key, d["latency_ms"], configs) if c["SPLIT_TAIL"] == 0}
    split_ms = d["latency_ms"].to_numpy()[rounds]
    ratio = np.array([unsplit.get(k, np.nan) for k, r in zip(twin_key, rounds) if r]) / split_ms
    return {"problem": problem, "dtype": d["dtype"].iloc[0], "configs": len(d), "round_configs": int(rounds.sum()),
            "best_over_best_in_rounds": float(d["latency_ms"].min() / split_ms.min()),
            "median_unsplit_over_split": float(np.nanmedian(ratio)), "split_faster_share": float(np.nanmean(ratio > 1))}


def run(data: str, gpu: str) -> dict:
    import pyarrow.dataset as pads

    hw = hardware.KNOWN.get(gpu)
    if hw is None:
        raise CostModelError(f"unknown GPU {gpu!r}; known: {', '.join(sorted(hardware.KNOWN))}")
    t = dataset.read(data, COLS, (pads.field("gpu") == gpu) & (pads.field("kernel") == "matmul")).to_pandas()
    t = t[t["status"] == "ok"]
    whole = t.groupby("group_id")["exhaustive"].transform("any")
    rows = [r for _, d in t[whole].groupby("group_id") if (r := group_row(d, hw))]
    if not rows:
        raise CostModelError(f"no whole-space matmul group of {gpu} under {data} holds a split tail in rounds")
    return {"gpu": gpu, "groups": rows}


@click.command()
@click.option("--data", default="data", show_default=True)
@click.option("--gpu", default="nvidia-h200", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="one JSON object on stdout")
@handle_errors
def main(data: str, gpu: str, as_json: bool) -> None:
    out = run(data, gpu)
    for r in out["groups"]:
        click.echo(f"{json.dumps(r['problem'])} {r['dtype']:9} configs {r['configs']:5} in rounds "
                   f"{r['round_configs']:4}  best/best in rounds {r['best_over_best_in_rounds']:.3f}  unsplit/split "
                   f"median {r['median_unsplit_over_split']:.3f}, faster in {r['split_faster_share']:.0%}", err=True)
    if as_json:
        click.echo(json.dumps(out))


if __name__ == "__main__":
    main()
