"""CPU: what one knob value buys, from the whole-space groups of the data that hold it. Per group: the best without
the value over the best with it (above 1: a config of that value is the group's best, by that much), and each config
of the value against its twin at ``--twin`` (the same config but for that knob; twin time / its time: the median,
and the share where the value is faster). Rows of a value added later come from later device calls than their
twins', so these are the data's figures, not a race.

    .venv/bin/python scripts/knob_value.py --knob TMA --value 2 [--twin 0] [--kernel matmul] [--data data] [--json]

Prints a table on stderr, with --json one JSON object on stdout. Bad input: one line on stderr, exit status 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from costmodel import dataset  # noqa: E402
from costmodel.cli import handle_errors  # noqa: E402
from costmodel.errors import CostModelError  # noqa: E402

COLS = ["kernel", "group_id", "problem_json", "dtype", "config_json", "status", "latency_ms", "exhaustive"]


def group_row(d, knob: str, value: int, twin: int) -> dict | None:
    configs = [json.loads(c) for c in d["config_json"]]
    ms = d["latency_ms"].to_numpy()
    has = np.array([c.get(knob) == value for c in configs])
    if not has.any() or has.all():
        return None
    key = [dataset.twin_key(c, knob) for c in configs]
    twins = {k: t for k, t, c in zip(key, ms, configs) if c.get(knob) == twin}
    ratio = np.array([twins.get(k, np.nan) for k, h in zip(key, has) if h]) / ms[has]
    paired = ratio[np.isfinite(ratio)]  # configs of the value whose twin the group holds
    return {"problem": json.loads(d["problem_json"].iloc[0]), "dtype": d["dtype"].iloc[0], "configs": len(d),
            "value_configs": int(has.sum()), "best_without_over_best_with": float(ms[~has].min() / ms[has].min()),
            "twins": int(paired.size),
            "median_twin_over_value": float(np.median(paired)) if paired.size else None,
            "value_faster_share": float(np.mean(paired > 1)) if paired.size else None}


def run(data: str, gpu: str, kernel: str, knob: str, value: int, twin: int) -> dict:
    import pyarrow.dataset as pads

    t = dataset.read(data, COLS, (pads.field("gpu") == gpu) & (pads.field("kernel") == kernel)).to_pandas()
    t = t[t["status"] == "ok"]
    whole = t.groupby("group_id")["exhaustive"].transform("any")
    rows = [r for _, d in t[whole].groupby("group_id") if (r := group_row(d, knob, value, twin))]
    if not rows:
        raise CostModelError(f"no whole-space {kernel} group of {gpu} under {data} holds {knob}={value} beside other "
                             "values")
    gain = np.array([r["best_without_over_best_with"] for r in rows])
    return {"gpu": gpu, "kernel": kernel, "knob": knob, "value": value, "twin": twin, "groups": len(rows),
            "value_best_in": int((gain > 1).sum()),
            "geomean_best_without_over_best_with": float(np.exp(np.log(gain).mean())),
            "geomean_space_gain": float(np.exp(np.log(np.maximum(gain, 1)).mean())),
            "rows": sorted(rows, key=lambda r: r["best_without_over_best_with"])}


@click.command()
@click.option("--knob", required=True, help="a config knob, e.g. TMA")
@click.option("--value", required=True, type=int, help="the knob value whose configs are measured")
@click.option("--twin", default=0, show_default=True, type=int, help="the value each config is set against")
@click.option("--kernel", default="matmul", show_default=True)
@click.option("--data", default="data", show_default=True)
@click.option("--gpu", default="nvidia-h200", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
@handle_errors
def main(knob: str, value: int, twin: int, kernel: str, data: str, gpu: str, as_json: bool) -> None:
    out = run(data, gpu, kernel, knob, value, twin)
    for r in out["rows"]:
        med = r["median_twin_over_value"]
        click.echo(f"{r['best_without_over_best_with']:6.3f}  {r['dtype']:9} {json.dumps(r['problem']):40} "
                   f"{r['value_configs']:5}/{r['configs']:<5} twin/value median "
                   f"{'-' if med is None else f'{med:.3f}'} ({r['twins']} pairs)", err=True)
    click.echo(f"{out['groups']} groups; {knob}={value} is the best in {out['value_best_in']}; best without / best "
               f"with: geomean {out['geomean_best_without_over_best_with']:.3f}; the space's best gains "
               f"{out['geomean_space_gain']:.3f} (geomean)", err=True)
    if as_json:
        click.echo(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
