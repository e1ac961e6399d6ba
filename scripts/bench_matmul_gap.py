"""H200, issue 17: how far the matmul family's space is from cuBLAS on the shapes the issue names.

For each shape of ``costmodel.benchmarks.KERNEL_GAP`` (and 5120^3 fp16, the aligned control): every valid config
timed by the collector's benchmarker (checked against torch first), then the space's best config against
torch.matmul with ``benchlib.against_torch``: do_bench (L2 flushed), eager per call and CUDA-graph time, each in
alternating rounds, all in this one call. In a row, ``tune_config`` is the config raced (the space's best here).
Rows are appended to --out as each shape is done, so a call cut short keeps what it did.

With ``--knob K=V`` only the configs with that value are swept (a new knob's part of the space: its best against
torch.matmul is a lower bound of the whole space's best against it); ``--previous FILE`` races, in this call too, the
best config a former run's row found for the same shape (``previous_*`` keys), so both parts are set against torch
in one call.

``--no-sweep`` (with ``--previous``) sweeps nothing: each shape's best config is the one a former whole-space sweep
found (``best_from`` its date), set against torch.matmul in this call. That is what fits every shape in one device
call (a sweep takes 1-2 minutes a shape). ``--tune-k K`` also runs a cold ``costmodel tune -k K`` per shape in a new
process (an empty Triton cache) and races its pick against the best config (and the previous one) in alternating
rounds of the benchmarker (``tune_score_raced``: the best's median over the pick's); where the pick wins that race
the space's best is at least the pick, so the pick is set against torch.matmul too (``pick_*`` keys; session 19: on
6000^3 fp16 a cold tune's pick beat the former sweep's best by 3.5%). Usage on a GPU host:

    PYTHONPATH=. python3 scripts/bench_matmul_gap.py [--only 0,5] [--knob WARP_SPECIALIZE=1] [--previous rows.jsonl] \
        [--no-sweep] [--tune-k 8] [--out bench_matmul_gap.jsonl]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (against_torch, best_by_shape, cold_triton_cache, log, raced_score, shape_key,  # noqa: E402
                      time_all, triton_caches, tune_in_new_process)

from costmodel import benchmarks, space  # noqa: E402
from costmodel.benchmark import IsolatedBenchmarker  # noqa: E402
from costmodel.kernels import get_family  # noqa: E402

CONTROL = ("matmul", {"M": 5120, "N": 5120, "K": 5120}, "float16")  # issue 17: stays >= 0.98x torch.matmul
SHAPES = [*benchmarks.KERNEL_GAP, CONTROL]


def measure_shape(problem: dict, dtype: str, hw, bench: IsolatedBenchmarker, knobs: dict, previous: dict | None,
                  sweep: bool = True) -> dict:
    configs = [c for c in space.enumerate_valid(get_family("matmul"), problem, dtype, hw)
               if all(c.get(k) == v for k, v in knobs.items())]
    if not sweep:  # the former whole-space sweep's best, set against torch.matmul in this call
        return {"problem": problem, "dtype": dtype, "knobs": previous.get("knobs", {}), "valid": len(configs),
                "best_from": previous["date"], "best_config": previous["best_config"],
                **against_torch(problem, dtype, previous["best_config"], hw)}
    if not configs:
        return {"problem": problem, "dtype": dtype, "knobs": knobs, "valid": 0}
    ms = time_all("matmul", problem, dtype, configs, bench, "configs", compile_first=False)  # the best is raced below
    ok = [m for m in ms if m.ok]
    best = min(ok, key=lambda m: m.latency_ms)
    row = {"problem": problem, "dtype": dtype, "knobs": knobs, "valid": len(configs), "ok": len(ok),
           "best_ms": best.latency_ms, "best_config": best.config,
           "statuses": {s: sum(m.status == s for m in ms) for s in {m.status for m in ms}},
           **against_torch(problem, dtype, best.config, hw)}
    if previous:
        row |= {"previous_config": previous["best_config"], "previous_knobs": previous.get("knobs", {}),
                **{f"previous_{k}": v for k, v in against_torch(problem, dtype, previous["best_config"], hw).items()}}
    return row


def tune_against_best(problem: dict, dtype: str, row: dict, hw, bench: IsolatedBenchmarker, cache: str, k: int,
                      steps: int = 0) -> dict:
    """A cold `costmodel tune -k k [--steps steps]` of the shape, its pick raced against the row's best config (and
    the previous run's best, where the row has it)."""
    res, command_s = tune_in_new_process("matmul", problem, dtype, cache, k, steps)
    log(f"tuned (k {k}) in {res['wall_s']:.1f} s ({command_s:.1f} s the command): {res['best']['latency_ms']:.4f} ms")
    best = [row["best_config"], *([row["previous_config"]] if row.get("previous_config") else [])]
    pick = res["best"]["config"]
    out = {"tune_k": k, "tune_steps": res.get("steps", []), "tune_wall_s": res["wall_s"], "tune_command_s": command_s,
           "tune_pick": pick, "tune_pick_ms": res["best"]["latency_ms"],
           **raced_score("matmul", problem, dtype, pick, best, bench)}
    if len(out["raced_ms"]) > 1 and out["raced_ms"][0] < min(out["raced_ms"][1:]):
        # the pick beat the best known (a former sweep's, timed in another call): the space's best is at least
        # the pick, so it too is set against torch.matmul, the same way (pick_* keys)
        out |= {f"pick_{key}": v for key, v in against_torch(problem, dtype, pick, hw).items()}
        log(f"the pick beat the best known: against torch.matmul {out['pick_tune_vs_torch']:.3f}")
    return out


@click.command()
@click.option("--only", default="", help="comma-separated indices into the shapes (default: all)")
@click.option("--knob", "knob_args", multiple=True, help="sweep only configs with this knob value, e.g. WARP_SPECIALIZE=1")
@click.option("--previous", default=None, type=click.Path(exists=True, dir_okay=False),
              help="rows of a former run: race each shape's best config from it too")
@click.option("--no-sweep", is_flag=True, help="sweep nothing: each shape's best is --previous's (shapes without "
              "a row there are skipped)")
@click.option("--tune-k", type=int, default=0, help="also a cold `costmodel tune -k K` per shape, raced against the best")
@click.option("--tune-steps", type=int, default=0, help="with --tune-k: the tune's --steps")
@click.option("--out", default="bench_matmul_gap.jsonl", show_default=True, help="rows are appended here")
def main(only: str, knob_args: tuple[str, ...], previous: str | None, no_sweep: bool, tune_k: int, tune_steps: int,
         out: str) -> None:
    chosen = [SHAPES[int(i)] for i in only.split(",")] if only else SHAPES
    knobs = {k: int(v) for k, v in (a.split("=") for a in knob_args)}
    if no_sweep and (knobs or not previous):
        raise click.UsageError("--no-sweep takes each shape's best from --previous, and sweeps no --knob")
    former = best_by_shape(previous, whole_space=no_sweep)
    with triton_caches() as (hw, base, scratch), IsolatedBenchmarker(hw) as bench, open(out, "a") as sink:
        for _, problem, dtype in chosen:
            log(f"matmul {problem} {dtype} {knobs or ''}")
            prev = former.get(shape_key(problem, dtype))
            if no_sweep and not prev:
                log("no former row for this shape: skipped")
                continue
            row = {"gpu": hw.gpu, "date": time.strftime("%Y-%m-%d"),
                   **measure_shape(problem, dtype, hw, bench, knobs, prev, sweep=not no_sweep)}
            if not row["valid"]:
                log("no valid config with these knob values")
            else:
                log(f"best {'of ' + row['best_from'] if no_sweep else 'of the part swept'}: against torch.matmul "
                    f"{row['tune_vs_torch']:.3f} (eager {row['tune_vs_torch_eager']:.3f}, graph "
                    f"{row['tune_vs_torch_graph']:.3f})"
                    + (f"; the previous best {row['previous_tune_vs_torch']:.3f}" if "previous_tune_vs_torch" in row else ""))
                if tune_k:
                    row |= tune_against_best(problem, dtype, row, hw, bench, cold_triton_cache(base, scratch), tune_k,
                                             tune_steps)
            sink.write(json.dumps(row, default=str) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
