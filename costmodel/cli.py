"""`costmodel` command line. With --json, stdout carries one JSON object; progress and tables go to stderr."""

from __future__ import annotations

import functools
import json
import sys

import click
from rich.console import Console
from rich.table import Table

from costmodel.errors import CostModelError

err_console = Console(stderr=True)


def _emit(obj: dict, as_json: bool, table: Table | None = None) -> None:
    if as_json:
        click.echo(json.dumps(obj, indent=1, default=str))
    elif table is not None:
        err_console.print(table)


def handle_errors(fn):
    """Bad input and missing or corrupt data: one line on stderr and exit status 2, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CostModelError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)

    return wrapper


def parse_shape(text: str) -> dict[str, int]:
    """'M=4096,N=4096,K=4096' -> {'M': 4096, ...} (values validated by the family)."""
    out = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise CostModelError(f"bad shape {text!r}: expected NAME=VALUE[,NAME=VALUE...]")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@click.group()
def main() -> None:
    """costmodel: learned cost-model tuning for Triton kernels."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="print JSON on stdout")
@handle_errors
def kernels(as_json: bool) -> None:
    """List kernel families, their knobs and the valid configs for a sample problem."""
    import numpy as np

    from costmodel import space
    from costmodel.hardware import KNOWN
    from costmodel.kernels import family_names, get_family

    hw = KNOWN["nvidia-h200"]
    rows = []
    for name in family_names():
        fam = get_family(name)
        problem = fam.problems(np.random.default_rng(0), 1)[0]
        dtype = fam.dtypes[0]
        rows.append({"family": name, "dims": list(fam.dims), "dtypes": list(fam.dtypes),
                     "knobs": {k.name: list(k.values) for k in fam.knobs}, "space_size": sum(1 for _ in fam.all_configs()),
                     "sample_problem": problem, "sample_dtype": dtype,
                     "valid_configs": len(space.enumerate_valid(fam, problem, dtype, hw)),
                     "default_config": fam.default_config(problem, dtype, hw), "source_hash": fam.source_hash})
    table = Table("family", "dims", "knobs", "valid / space", "sample problem", title=f"kernel families ({hw.gpu})")
    for r in rows:
        table.add_row(r["family"], ",".join(r["dims"]), ", ".join(r["knobs"]),
                      f"{r['valid_configs']} / {r['space_size']}", json.dumps(r["sample_problem"]))
    _emit({"gpu": hw.gpu, "families": rows}, as_json, table)


@main.command()
@click.option("--kernel", "kernels_", default="all", show_default=True, help="families, comma-separated, or all")
@click.option("--groups", default=50, show_default=True, help="groups (family, problem, dtype) to measure")
@click.option("--configs-per-group", default=100, show_default=True)
@click.option("--exhaustive-share", default=0.1, show_default=True, help="share of groups measured over the whole space")
@click.option("--dtype", "dtypes", default=None, help="dtypes, comma-separated (default: each family's)")
@click.option("--out", default="data", show_default=True, type=click.Path())
@click.option("--seed", default=0, show_default=True)
@click.option("--resume", is_flag=True, help="skip (group, config) pairs already in --out")
@click.option("--timeout", default=30.0, show_default=True, help="seconds a config may take before its worker is killed")
@click.option("--time-budget", default=None, type=float, help="start no group after this many seconds")
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def collect(kernels_, groups, configs_per_group, exhaustive_share, dtypes, out, seed, resume, timeout, time_budget,
            as_json):
    """Benchmark sampled configs of many problems on this GPU into the Parquet dataset."""
    from collect.plan import make_plan
    from collect.runner import new_run_id, run_plan
    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker, interpreting
    from costmodel.kernels import family_names, get_family

    names = family_names() if kernels_ == "all" else [k.strip() for k in kernels_.split(",")]
    for n in names:
        get_family(n)
    if groups < 1 or configs_per_group < 1:
        raise CostModelError("--groups and --configs-per-group must be positive")
    device = "cpu" if interpreting() else "cuda"
    hw = hardware.KNOWN["nvidia-h200"] if device == "cpu" else hardware.current()
    plan = make_plan(names, groups, configs_per_group, dtypes.split(",") if dtypes else None, seed, hw,
                     exhaustive_share)
    with IsolatedBenchmarker(hw, device=device, timeout_s=timeout, seed=seed) as bench:
        summary = run_plan(plan, out, bench, hw, run_id=new_run_id(), resume=resume, seed=seed, console=err_console,
                           time_budget_s=time_budget)
    summary.pop("plan")
    table = Table("run", "groups", "measured", "ok", "failed", "ok/s", "wall s")
    table.add_row(summary["run_id"], str(summary["groups"]), str(summary["measured"]), str(summary["counts"]["ok"]),
                  str(summary["measured"] - summary["counts"]["ok"]), str(summary["ok_per_s"]), str(summary["wall_s"]))
    _emit(summary, as_json, table)


if __name__ == "__main__":
    main()
