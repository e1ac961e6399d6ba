"""What start-up costs a tune on this host: the figures behind the tuner's process set-up (benchmark.py's
forkserver, compile processes without CUDA, meta inputs without meta randn). Usage on a GPU host:

    PYTHONPATH=. python3 scripts/experiments/bench_startup.py [--out startup.json]

Each figure is new interpreters running a snippet: "wall_s" is timed from outside (interpreter start included),
"inside_s" is what the snippet printed about its own last step. Median of --repeats runs; concurrent ones once.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import click

_META = ("import time, torch; from costmodel.kernels import get_family; fam = get_family('matmul'); "
         "p = {'M': 4096, 'N': 4096, 'K': 4096}; t = time.perf_counter(); ")
SNIPPETS = {
    "import torch": ("import torch", 1),
    "import torch, CUDA context": ("import torch; torch.empty(1, device='cuda')", 1),
    "14 at once: import torch": ("import torch", 14),
    "14 at once: import torch, CUDA context": ("import torch; torch.empty(1, device='cuda')", 14),
    "first meta randn inputs (compile processes before)":
        (_META + "fam.make_inputs(p, 'float16', 'meta'); print(time.perf_counter() - t)", 1),
    "first meta_inputs (compile processes now)":
        (_META.replace("import time,", "import time, costmodel.benchmark as b,")
         + "b.meta_inputs(fam, p, 'float16'); print(time.perf_counter() - t)", 1),
    "forkserver: first child (server imports torch and kernels)":
        ("import os, time; from costmodel.benchmark import process_context; ctx = process_context(); "
         "t = time.perf_counter(); c = ctx.Process(target=os.getpid); c.start(); c.join(); "
         "print(time.perf_counter() - t)", 1),
}


def run(code: str, n: int) -> dict:
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(n)]
    outs = [p.communicate()[0].strip() for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"snippet failed: {code}")
    return {"wall_s": time.perf_counter() - t0, "inside_s": float(outs[0]) if outs[0] else None}


@click.command()
@click.option("--repeats", default=3, show_default=True)
@click.option("--out", default="startup.json")
def main(repeats: int, out: str) -> None:
    results = {}
    for name, (code, n) in SNIPPETS.items():
        runs = [run(code, n) for _ in range(1 if n > 1 else repeats)]
        results[name] = {k: statistics.median(r[k] for r in runs) if runs[0][k] is not None else None
                         for k in ("wall_s", "inside_s")}
        print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
