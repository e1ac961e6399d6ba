"""Which of a Triton twin's configs, read as a costmodel Helion kernel's (``families.twin_candidates``), Triton
compiles for sm_90, on this machine (no GPU): each through Helion's ``compile_config`` and a first call with
``warmup=True`` (helion_compile_times.compile_one), in its own process under a wall limit. Session 21's question:
in the attention race, Helion reported the twin's 128x32 and 128x64 tiles at 2 stages as compile failures.

  .venv/bin/python scripts/experiments/helion_twin_compiles.py --kernel helion:attention \
      --problem B=3,H=16,S=3681,D=128,CAUSAL=0 --dtype float16 [--jobs 2] [--out FILE.jsonl]

One JSON line per config (its block sizes, warps, stages, indexing, and "ok" or the compiler's last words), then a
summary line: the outcome by (last block size, stages). ``--stages N``: the same configs at N stages instead."""

import collections
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _one(kernel: str, problem: dict, dtype: str, config: dict, limit: int) -> dict:
    arg = json.dumps({"kernel": kernel, "problem": problem, "dtype": dtype, "config": config})
    try:
        p = subprocess.run([sys.executable, __file__, "--child", arg], capture_output=True, text=True, timeout=limit,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        return {"outcome": f"still compiling after {limit} s"}
    if p.returncode == 0:
        return {"outcome": "ok", **json.loads(p.stdout.strip().splitlines()[-1])}  # compile_s, shared
    said = [ln for ln in p.stderr.splitlines() if "Assertion" in ln or "error:" in ln or "Error" in ln]
    return {"outcome": "failed", "why": [ln.strip()[:240] for ln in said[-3:]]}


@click.command()
@click.option("--kernel", default="helion:attention", show_default=True)
@click.option("--problem", default="B=3,H=16,S=3681,D=128,CAUSAL=0", show_default=True)
@click.option("--dtype", default="float16", show_default=True)
@click.option("--jobs", default=2, show_default=True, help="compiles at once")
@click.option("--limit", default=300, show_default=True, help="seconds a compile may take")
@click.option("--stages", type=int, default=None, help="read every config at this many stages instead of its own")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="also write the lines here")
@click.option("--child", default=None, hidden=True)
def main(kernel, problem, dtype, jobs, limit, stages, out, child) -> None:
    if child:
        from helion_compile_times import compile_one

        a = json.loads(child)
        print(json.dumps(compile_one(a["kernel"], a["problem"], a["dtype"], a["config"])))
        return
    from costmodel import hardware
    from costmodel.helion import families, helion_version

    prob = {k: int(v) for k, v in (kv.split("=") for kv in problem.split(","))}
    fam = families.get(kernel)
    bound, _ = fam.bind(prob, dtype)
    cands = families.twin_candidates(bound, fam.kernel, prob, dtype, hardware.for_gpu("nvidia-h200"))
    if stages is not None:  # the same configs at one stage count, each once
        cands = list({json.dumps(c, sort_keys=True): c for c in ({**c, "num_stages": stages} for c in cands)}.values())
    lines, tally = [], collections.defaultdict(collections.Counter)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        done = pool.map(lambda c: _one(fam.kernel, prob, dtype, c, limit), cands)
        for c, r in zip(cands, done):
            line = {"block_sizes": c["block_sizes"], "num_warps": c["num_warps"], "num_stages": c["num_stages"],
                    "indexing": c["indexing"][0], **r}
            lines.append(line)
            tally[f"block {c['block_sizes'][-1]}, {c['num_stages']} stages"][r["outcome"]] += 1
            print(json.dumps(line), flush=True)
    lines.append({"kernel": fam.kernel, "problem": prob, "dtype": dtype, "helion_version": helion_version(),
                  "target": "sm_90", "stages": stages, "configs": len(cands),
                  "outcomes": {k: dict(v) for k, v in sorted(tally.items())}})
    print(json.dumps(lines[-1]))
    if out:
        Path(out).write_text("".join(json.dumps(ln) + "\n" for ln in lines))


if __name__ == "__main__":
    main()
