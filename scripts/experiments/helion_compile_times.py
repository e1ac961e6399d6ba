"""How long Triton takes to compile Helion configs for sm_90, on this machine (no GPU): the configs of a recorded
Helion group whose timing worker hung (status timeout) against some that ran, each compiled through Helion's
``compile_config`` and a first call with ``warmup=True`` (compile, no launch), in its own process under a wall
limit. Session 11's question: do the H200's hung Helion configs hang in the compiler?

  PYTHONPATH=/tmp/helion-wheels/h140:. python3 scripts/experiments/helion_compile_times.py SHARD --ok 5 --limit 120

Prints one JSON line per config: its recorded status, its recorded H200 compile_s, and the compile here.
"""

import json
import os
import subprocess
import sys
import time

import click


def compile_one(kernel: str, problem: dict, dtype: str, config: dict) -> dict:
    """Seconds to compile ``config`` for sm_90 here, and the most shared memory its Triton kernels ask for (bytes: a
    GPU whose block has less refuses the launch; no compile checks it)."""
    import helion
    import triton.runtime.jit as jit
    from triton.runtime import driver

    from costmodel import benchmark
    from costmodel.hardware import KNOWN
    from costmodel.helion.target import answer_as

    driver.set_active(benchmark.target_only_driver())
    answer_as(KNOWN["nvidia-h200"])
    run, compiled = jit.JITFunction.run, []

    def warmup(self, *a, **k):  # compiles, launches nothing, and keeps the compiled kernel
        compiled.append(run(self, *a, **{**k, "warmup": True}))
        return compiled[-1]

    jit.JITFunction.run = warmup
    _, _, args, bound = benchmark._helion_bound(kernel, problem, dtype, "cpu", 0)
    t0 = time.perf_counter()
    bound.compile_config(helion.Config(**config))(*args)
    seconds = time.perf_counter() - t0
    shared = [k.metadata.shared for k in compiled if hasattr(k, "metadata")]
    return {"compile_s": seconds, "shared": max(shared, default=None)}


@click.command()
@click.argument("shard", type=click.Path(exists=True))
@click.option("--ok", "n_ok", default=5, show_default=True, help="configs that ran, besides every one that hung")
@click.option("--limit", default=120, show_default=True, help="seconds a compile may take here")
@click.option("--child", default=None, hidden=True)
def main(shard: str, n_ok: int, limit: int, child: str | None) -> None:
    if child:
        a = json.loads(child)
        here = compile_one(a["kernel"], a["problem"], a["dtype"], a["config"])
        print(json.dumps({"compile_here_s": here["compile_s"]}))
        return
    import pyarrow.parquet as pq

    rows = pq.read_table(shard).to_pylist()
    kernel = "helion:" + shard.split("kernel=helion:")[1].split("/")[0]
    chosen = [r for r in rows if r["status"] == "timeout"] + [r for r in rows if r["status"] == "ok"][:n_ok]
    for r in chosen:
        arg = json.dumps({"kernel": kernel, "problem": json.loads(r["problem_json"]), "dtype": r["dtype"],
                          "config": json.loads(r["config_json"])})
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, __file__, shard, "--child", arg], capture_output=True, text=True,
                               timeout=limit, env=os.environ)
            here = json.loads(p.stdout.strip().splitlines()[-1])["compile_here_s"] if p.returncode == 0 else None
            outcome = "ok" if p.returncode == 0 else p.stderr.strip().splitlines()[-1][:200]
        except subprocess.TimeoutExpired:
            here, outcome = None, f"still compiling after {limit} s"
        print(json.dumps({"h200_status": r["status"], "h200_compile_s": r["compile_s"], "compile_here_s": here,
                          "process_s": round(time.perf_counter() - t0, 1), "outcome": outcome,
                          "config": json.loads(r["config_json"])}), flush=True)


if __name__ == "__main__":
    main()
