"""H200, issue 17: Nsight Compute on the matmul space's best config and on cuBLAS, shape by shape, to see where the
time goes before changing the kernel. Reads the rows of `bench_matmul_gap.py` (each shape's best config), runs
`ncu` on a child process of this script that calls one side a few times inside an NVTX range, and keeps, per
kernel the range launched: its name, grid and block, and the metrics of the sections asked for. Clocks are left
alone (`--clock-control none`, the device library's METHOD.md). Usage on a GPU host:

    PYTHONPATH=. python3 scripts/ncu_matmul.py --rows bench_matmul_gap.jsonl [--only 0,5] [--out ncu_matmul.json]
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import click

RANGE = "profiled"
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis",
            "WarpStateStats", "SchedulerStats")


def run_side(problem: dict, dtype: str, config: dict | None, calls: int) -> None:
    """The profiled child: one side's calls, after a warm-up outside the range (compiles and cuBLAS's choice)."""
    import torch

    from costmodel import hardware
    from costmodel.kernels import get_family

    fam = get_family("matmul")
    a, b = fam.make_inputs(problem, dtype, "cuda")
    c = fam.make_output(problem, dtype, "cuda")
    fn = (lambda: torch.matmul(a, b)) if config is None else fam.bind(problem, (a, b), c, config, hardware.current())
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


def kernels_of(csv_text: str) -> list[dict]:
    """ncu's `--csv --page details` rows, one dict per profiled kernel: name, grid, block, {section: {metric:
    [value, unit]}}."""
    start = csv_text.find('"ID"')
    out: dict[str, dict] = {}
    for r in csv.DictReader(io.StringIO(csv_text[start:] if start >= 0 else "")):
        k = out.setdefault(r["ID"], {"kernel": r["Kernel Name"], "grid": r["Grid Size"], "block": r["Block Size"],
                                     "sections": {}})
        k["sections"].setdefault(r["Section Name"], {})[r["Metric Name"]] = [r["Metric Value"], r["Metric Unit"]]
    return list(out.values())


def profile(problem: dict, dtype: str, config: dict | None, calls: int) -> dict:
    side = ["--config", json.dumps(config)] if config is not None else []
    cmd = ["ncu", "--clock-control", "none", "--csv", "--page", "details", "--nvtx", "--nvtx-include", f"{RANGE}/",
           *(a for s in SECTIONS for a in ("--section", s)),
           sys.executable, os.path.abspath(__file__), "--run", "--problem", json.dumps(problem), "--dtype", dtype,
           "--calls", str(calls), *side]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return {"side": "torch" if config is None else "ours", "rc": proc.returncode, "kernels": kernels_of(proc.stdout),
            "stderr_tail": proc.stderr[-1500:]}


@click.command()
@click.option("--rows", default="bench_matmul_gap.jsonl", show_default=True, help="bench_matmul_gap.py's rows")
@click.option("--only", default="", help="comma-separated indices into the rows (default: all)")
@click.option("--calls", default=2, show_default=True, help="calls of each side inside the profiled range")
@click.option("--out", default="ncu_matmul.json", show_default=True)
@click.option("--run", "child", is_flag=True, hidden=True)
@click.option("--problem", default=None, hidden=True)
@click.option("--dtype", default=None, hidden=True)
@click.option("--config", default=None, hidden=True)
def main(rows: str, only: str, calls: int, out: str, child: bool, problem: str | None, dtype: str | None,
         config: str | None) -> None:
    if child:
        return run_side(json.loads(problem), dtype, json.loads(config) if config else None, calls)
    table = [r for line in open(rows) if line.strip() and (r := json.loads(line)).get("best_config")]
    chosen = [table[int(i)] for i in only.split(",")] if only else table
    results = []
    for r in chosen:
        for config in (r["best_config"], None):
            results.append({"problem": r["problem"], "dtype": r["dtype"], **profile(r["problem"], r["dtype"], config,
                                                                                     calls)})
            print(json.dumps({k: results[-1][k] for k in ("problem", "dtype", "side", "rc")}
                             | {"kernels": [k["kernel"][:60] for k in results[-1]["kernels"]]}), flush=True)
            with open(out, "w") as f:  # rewritten whole after each profile: a call cut short keeps what it did
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
