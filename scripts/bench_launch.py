"""Launch cost (issue 15): the host's time per call of every family's launcher and config kind, through Triton's JIT
(``fam.launch``, what every call paid before) and bound (``fam.bind``: the per-call host work done once); and for the
issue's four matmul configs, the eager per-call time against GPU time (CUDA-graph replay), ``do_bench`` here and in
fresh processes, torch.matmul timed the same ways. Usage on a GPU host:

    PYTHONPATH=. python3 scripts/bench_launch.py [--processes 3] [--out bench_launch.json]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import alternating, graph_ms, host_us_per_call, log  # noqa: E402

from costmodel import hardware, space  # noqa: E402
from costmodel.benchmark import time_eager  # noqa: E402
from costmodel.kernels import get_family  # noqa: E402

# (family, problem, dtype, knobs the config must have): every path a launcher takes
KINDS = {
    "matmul pointer": ("matmul", {"M": 16, "N": 7168, "K": 2048}, "bfloat16", {"TMA": 0, "PERSISTENT": 0, "SPLIT_TAIL": 0}),
    "matmul TMA": ("matmul", {"M": 16, "N": 7168, "K": 2048}, "bfloat16", {"TMA": 1, "PERSISTENT": 0, "SPLIT_TAIL": 0}),
    "matmul TMA persistent": ("matmul", {"M": 4096, "N": 4096, "K": 4096}, "float16", {"TMA": 1, "PERSISTENT": 1, "SPLIT_TAIL": 0}),
    "matmul split tail 1": ("matmul", {"M": 12288, "N": 768, "K": 2304}, "float16", {"TMA": 0, "PERSISTENT": 1, "SPLIT_TAIL": 1}),
    "matmul TMA split tail 1": ("matmul", {"M": 12288, "N": 768, "K": 2304}, "float16", {"TMA": 1, "PERSISTENT": 1, "SPLIT_TAIL": 1}),
    "matmul TMA split tail 2": ("matmul", {"M": 12288, "N": 768, "K": 2304}, "float16", {"TMA": 1, "PERSISTENT": 1, "SPLIT_TAIL": 2}),
    "attention pointer": ("attention", {"B": 1, "H": 8, "S": 512, "D": 64, "CAUSAL": 1}, "float16", {"TMA": 0}),
    "attention TMA": ("attention", {"B": 1, "H": 8, "S": 512, "D": 64, "CAUSAL": 1}, "float16", {"TMA": 1}),
    "softmax": ("softmax", {"M": 64, "N": 4096}, "float16", {}),
    "layernorm": ("layernorm", {"M": 64, "N": 4096}, "bfloat16", {}),
    "rmsnorm": ("rmsnorm", {"M": 3, "N": 8192}, "float16", {}),
}
# the issue's table: decode 16x7168x2048 bf16 (TMA 8 warps, TMA 4 warps, pointer loads 4 warps), a split tail
ISSUE = {
    "decode TMA 8 warps": ({"M": 16, "N": 7168, "K": 2048}, "bfloat16", {"TMA": 1, "num_warps": 8}),
    "decode TMA 4 warps": ({"M": 16, "N": 7168, "K": 2048}, "bfloat16", {"TMA": 1, "num_warps": 4}),
    "decode pointer 4 warps": ({"M": 16, "N": 7168, "K": 2048}, "bfloat16", {"TMA": 0, "num_warps": 4}),
    "12288x768x2304 TMA split tail 2": ({"M": 12288, "N": 768, "K": 2304}, "float16",
                                        {"TMA": 1, "PERSISTENT": 1, "SPLIT_TAIL": 2}),
}


def pick(family: str, problem: dict, dtype: str, want: dict, hw) -> dict:
    """The valid config with ``want`` closest to the family default (most knobs equal), split where asked."""
    from costmodel.kernels.matmul import tail_split

    fam = get_family(family)
    default = fam.default_config(problem, dtype, hw)
    valid = [c for c in space.enumerate_valid(fam, problem, dtype, hw) if all(c[k] == v for k, v in want.items())
             and (not want.get("SPLIT_TAIL") or tail_split(problem, c, hw)[0])]
    if not valid:
        raise SystemExit(f"no valid {family} config with {want} for {problem} {dtype}")
    return max(valid, key=lambda c: sum(c[k] == default[k] for k in c))


def setup(family: str, problem: dict, dtype: str, config: dict, hw) -> tuple:
    """(JIT call, bound call, rel err of the bound call's output)."""
    import torch

    fam = get_family(family)
    inputs, out = fam.make_inputs(problem, dtype, "cuda"), fam.make_output(problem, dtype, "cuda")
    jit = lambda: fam.launch(problem, inputs, out, config, hw)  # noqa: E731
    bound = fam.bind(problem, inputs, out, config, hw)
    out.fill_(float("nan"))
    bound()
    torch.cuda.synchronize()
    ref = fam.reference(problem, inputs)
    return jit, bound, float((out.float() - ref).norm() / ref.norm())


def launch_costs(hw) -> list[dict]:
    rows = []
    for kind, (family, problem, dtype, want) in KINDS.items():
        config = pick(family, problem, dtype, want, hw)
        jit, bound, err = setup(family, problem, dtype, config, hw)
        row = {"kind": kind, "family": family, "problem": problem, "dtype": dtype, "config": config,
               "direct": bound.direct, "rel_err": err, "jit_host_us": host_us_per_call(jit),
               "bound_host_us": host_us_per_call(bound), "jit_eager_ms": time_eager(jit, "cuda", 5.0),
               "bound_eager_ms": time_eager(bound, "cuda", 5.0), "graph_ms": graph_ms(bound)}
        rows.append(row)
        log(f"{kind:26} host us/call: JIT {row['jit_host_us']:6.1f}  bound {row['bound_host_us']:5.1f}   "
            f"eager ms: JIT {row['jit_eager_ms']:.4f} bound {row['bound_eager_ms']:.4f}  graph {row['graph_ms']:.4f}")
    return rows


def do_bench_all(hw, rounds: int) -> dict:
    """do_bench medians of each issue config (bound and JIT) and torch.matmul, alternating rounds."""
    import torch
    from triton.testing import do_bench

    out = {}
    for name, (problem, dtype, want) in ISSUE.items():
        config = pick("matmul", problem, dtype, want, hw)
        jit, bound, _ = setup("matmul", problem, dtype, config, hw)
        a, b = get_family("matmul").make_inputs(problem, dtype, "cuda")
        ms = alternating({"bound": bound, "jit": jit, "torch": lambda: torch.matmul(a, b)}, rounds,
                         lambda fn: do_bench(fn, return_mode="median"))
        out[name] = {k: statistics.median(v) for k, v in ms.items()}
    return out


def issue_configs(hw, rounds: int) -> list[dict]:
    import torch

    rows, benched = [], do_bench_all(hw, rounds)
    for name, (problem, dtype, want) in ISSUE.items():
        config = pick("matmul", problem, dtype, want, hw)
        _, bound, err = setup("matmul", problem, dtype, config, hw)
        a, b = get_family("matmul").make_inputs(problem, dtype, "cuda")
        mm = lambda: torch.matmul(a, b)  # noqa: E731
        ways = {"eager": lambda: time_eager(bound, "cuda", 5.0), "graph": lambda: graph_ms(bound)}
        ours = {k: statistics.median(v) for k, v in alternating(ways, rounds, lambda f: f()).items()}
        row = {"name": name, "problem": problem, "dtype": dtype, "config": config, "rel_err": err,
               "host_us": host_us_per_call(bound), "eager_ms": ours["eager"], "graph_ms": ours["graph"],
               "do_bench_ms": benched[name]["bound"], "jit_do_bench_ms": benched[name]["jit"],
               "torch_host_us": host_us_per_call(mm), "torch_eager_ms": time_eager(mm, "cuda", 5.0),
               "torch_graph_ms": graph_ms(mm), "torch_do_bench_ms": benched[name]["torch"]}
        row["eager_over_graph"] = row["eager_ms"] / row["graph_ms"]
        rows.append(row)
        log(f"{name:32} eager {row['eager_ms']:.4f} graph {row['graph_ms']:.4f} ({row['eager_over_graph']:.3f}) "
            f"do_bench {row['do_bench_ms']:.4f} (JIT {row['jit_do_bench_ms']:.4f}) | torch eager "
            f"{row['torch_eager_ms']:.4f} graph {row['torch_graph_ms']:.4f} do_bench {row['torch_do_bench_ms']:.4f}")
    return rows


@click.command()
@click.option("--processes", default=3, help="fresh processes that each time the issue configs with do_bench")
@click.option("--rounds", default=6, help="alternating do_bench rounds")
@click.option("--do-bench-only", is_flag=True, help="(a fresh process's part) print the do_bench medians as JSON")
@click.option("--out", default="bench_launch.json")
def main(processes: int, rounds: int, do_bench_only: bool, out: str) -> None:
    hw = hardware.current()
    if do_bench_only:
        print(json.dumps(do_bench_all(hw, rounds)))
        return
    report = {"gpu": hw.gpu, "date": time.strftime("%Y-%m-%d"), "launch": launch_costs(hw),
              "issue_configs": issue_configs(hw, rounds), "fresh_processes": []}
    for i in range(processes):
        r = subprocess.run([sys.executable, __file__, "--do-bench-only", "--rounds", str(rounds)],
                           capture_output=True, text=True, check=True)
        report["fresh_processes"].append(json.loads(r.stdout.strip().splitlines()[-1]))
        log(f"fresh process {i}: " + ", ".join(f"{k} {v['bound']:.4f}" for k, v in report["fresh_processes"][-1].items()))
    spread = {}
    for name in ISSUE:
        for who in ("bound", "jit", "torch"):
            xs = [p[name][who] for p in report["fresh_processes"]]
            spread.setdefault(name, {})[who] = max(xs) / min(xs) - 1 if xs else None
    report["do_bench_spread_across_processes"] = spread
    for name, s in spread.items():
        log(f"do_bench spread over {processes} processes, {name}: bound {s['bound']:.3f} JIT {s['jit']:.3f} "
            f"torch {s['torch']:.3f}")
    Path(out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
