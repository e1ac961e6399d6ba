"""Issue 17: do 2-CTA clusters (Triton's ``num_ctas``) pay for the matmul family on the H200's large shapes?

cuBLAS runs 3000x5000x1000 bf16 as 2-CTA clusters (session 9's profile: `nvjet_sm90_tst_128x232_64x4_2x1`), where
the family's best config (128x256x64, persistent, TMA) reaches 0.77 of it. The family's kernel compiles at
``num_ctas=2`` for sm_90 (an explicit cluster of two in its PTX; checked on the CPU, ``--compile-only``). Per shape,
the family's best config from ``--previous`` (bench_matmul_gap.py rows) is launched through the family's own
launches with ``num_ctas`` 2 added, bound as the benchmarker binds the family (``Bound``): a persistent config
with its programs as they are and halved (each program is then a cluster of two CTAs). Each variant's first call
runs under a watchdog (a hang prints the stacks and ends the process; rows before it are kept), its result is
checked against torch, then do_bench (L2 flushed) times it in alternating rounds against the config at one CTA and
torch.matmul, in this one call. Rows are appended to --out.

    PYTHONPATH=. python3 scripts/experiments/cluster_probe.py --previous rows.jsonl [--out cluster_probe.jsonl]
    .venv/bin/python scripts/experiments/cluster_probe.py --previous rows.jsonl --compile-only   # CPU, sm_90
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import statistics
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))  # benchlib
from benchlib import alternating, best_by_shape, log, shape_key  # noqa: E402

# issue 17's large shapes (costmodel/benchmarks.py names them; they never train)
SHAPES = (({"M": 3000, "N": 5000, "K": 1000}, "bfloat16"), ({"M": 6000, "N": 6000, "K": 6000}, "float16"),
          ({"M": 4095, "N": 4095, "K": 4095}, "bfloat16"), ({"M": 10000, "N": 2000, "K": 3000}, "float16"),
          ({"M": 8192, "N": 3072, "K": 1000}, "bfloat16"))


def variants(fam, problem: dict, inputs: tuple, out, config: dict, hw) -> dict[str, list]:
    """name -> the family's launches of ``config`` at one CTA, at two, and (persistent) at two with half the
    programs."""
    steps = fam.launches(problem, inputs, out, config, hw)
    first = steps[0]
    two = dataclasses.replace(first, kwargs={**first.kwargs, "num_ctas": 2})
    out_ = {"ctas1": steps, "ctas2": [two, *steps[1:]]}
    if config["PERSISTENT"]:
        half = max(1, first.grid[0] // 2)  # the persistent loop strides by its last argument, the program count
        out_["ctas2_half"] = [dataclasses.replace(two, grid=(half,), args=(*first.args[:-1], half)), *steps[1:]]
    return out_


@click.command()
@click.option("--previous", required=True, type=click.Path(exists=True, dir_okay=False),
              help="bench_matmul_gap.py rows: each shape's best config of the family")
@click.option("--compile-only", is_flag=True, help="compile every variant for sm_90 on this machine, time nothing")
@click.option("--watchdog", default=60, show_default=True, help="seconds one variant's first call may take")
@click.option("--rounds", default=6, show_default=True)
@click.option("--out", default="cluster_probe.jsonl", show_default=True)
def main(previous: str, compile_only: bool, watchdog: int, rounds: int, out: str) -> None:
    from costmodel import hardware
    from costmodel.kernels import get_family

    fam, former = get_family("matmul"), best_by_shape(previous)
    if compile_only:
        from triton.runtime import driver

        from costmodel.benchmark import meta_inputs, target_only_driver

        driver.set_active(target_only_driver())
        hw = hardware.KNOWN["nvidia-h200"]
        for problem, dtype in SHAPES:
            best = former.get(shape_key(problem, dtype), {}).get("best_config")
            if best is None:
                continue
            inputs, o = meta_inputs(fam, problem, dtype)
            for name, steps in variants(fam, problem, inputs, o, best, hw).items():
                try:
                    k = steps[0].kernel.warmup(*steps[0].args, grid=steps[0].grid, **steps[0].kwargs)
                    ptx = k.asm["ptx"]
                    said = {"cluster": ".reqnctapercluster" in ptx, "multicast": ".multicast" in ptx}
                except Exception as e:  # noqa: BLE001 - Triton refusing a variant: recorded, the rest go on
                    said = {"failed": f"{type(e).__name__}: {str(e)[:200]}"}
                print(json.dumps({"problem": problem, "dtype": dtype, "variant": name, **said}), flush=True)
        return
    import torch
    from triton.testing import do_bench

    from costmodel.kernels.bound import Bound

    hw = hardware.current()
    with open(out, "a") as sink:
        for problem, dtype in SHAPES:
            best = former.get(shape_key(problem, dtype), {}).get("best_config")
            if best is None:
                log(f"{problem} {dtype}: no best config in --previous")
                continue
            inputs = fam.make_inputs(problem, dtype, "cuda")
            ref = fam.reference(problem, inputs)
            timed = {"torch": lambda: torch.matmul(*inputs)}
            row = {"problem": problem, "dtype": dtype, "config": best, "rel_err": {}}
            o = fam.make_output(problem, dtype, "cuda")
            for name, steps in variants(fam, problem, inputs, o, best, hw).items():
                o.fill_(float("nan"))
                faulthandler.dump_traceback_later(watchdog, exit=True)
                try:
                    fn = Bound.of(steps)  # as the benchmarker times the family: compiled once, launched directly
                    fn()
                    torch.cuda.synchronize()
                except Exception as e:  # noqa: BLE001 - refused by Triton or the driver: recorded, the rest go on
                    row["rel_err"][name] = f"{type(e).__name__}: {str(e)[:200]}"
                    continue
                finally:
                    faulthandler.cancel_dump_traceback_later()
                err = float((o.float() - ref).norm() / ref.norm())
                row["rel_err"][name] = err
                if err <= fam.tolerance[dtype]:
                    timed[name] = fn
            ms = {k: statistics.median(v) for k, v in
                  alternating(timed, rounds, lambda f: do_bench(f, return_mode="median")).items()}
            row |= {"ms": ms, **{f"{k}_vs_torch": ms["torch"] / v for k, v in ms.items() if k != "torch"}}
            log(json.dumps(row))
            sink.write(json.dumps(row) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
