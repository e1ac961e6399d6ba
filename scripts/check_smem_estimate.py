"""Does the matmul's shared-memory estimate (``smem_bytes``, what ``is_valid`` and the features use) cover what Triton
allocates? Compiles the valid configs of one problem (those matching every --knob) on the CPU for sm_90, as
compare_kernel_ptx.py does, and sets each estimate beside the compiled kernel's ``metadata.shared``.

    .venv/bin/python scripts/check_smem_estimate.py [--shape M=5120,N=5120,K=5120] [--dtype float16] \
        [--knob EPILOGUE_SUBTILE=1 ...] [--sample N]

Each row also gives the warps the kernel launches and whether its PTX hands registers between warpgroups
(``setmaxnreg``: what Triton's warp specialisation does on sm_90).
"""

from __future__ import annotations

import json

import click
import numpy as np

from compare_kernel_ptx import _compile_only


@click.command()
@click.option("--shape", default="M=5120,N=5120,K=5120")
@click.option("--dtype", default="float16")
@click.option("--knob", "knobs", multiple=True, help="only configs with this knob value, e.g. EPILOGUE_SUBTILE=1")
@click.option("--sample", default=0, help="compile only this many of them, drawn at random (seed 0); 0: all")
def main(shape: str, dtype: str, knobs: tuple[str, ...], sample: int) -> None:
    _compile_only()
    from costmodel import space
    from costmodel.benchmark import meta_inputs
    from costmodel.hardware import KNOWN
    from costmodel.kernels import get_family

    hw, fam = KNOWN["nvidia-h200"], get_family("matmul")
    problem = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
    wanted = {k: int(v) for k, v in (kv.split("=") for kv in knobs)}
    configs = [c for c in space.enumerate_valid(fam, problem, dtype, hw) if all(c[k] == v for k, v in wanted.items())]
    if sample:
        configs = [configs[i] for i in sorted(np.random.default_rng(0).permutation(len(configs))[:sample])]
    rows = []
    for c in configs:
        kernel = fam.launch(problem, *meta_inputs(fam, problem, dtype), c, hw, warmup=True)
        rows.append({"config": c, "estimate": fam.smem_bytes(dtype, c), "shared": kernel.metadata.shared,
                     "num_warps": kernel.metadata.num_warps, "setmaxnreg": "setmaxnreg" in kernel.asm["ptx"]})
    under = [r for r in rows if r["shared"] > r["estimate"]]
    print(json.dumps({"problem": problem, "dtype": dtype, "knobs": wanted, "compiled": len(rows),
                      "smem_per_block": hw.smem_per_block, "under_estimated": len(under),
                      "over_the_limit": [r for r in rows if r["shared"] > hw.smem_per_block],
                      "largest_under_estimate_bytes": max((r["shared"] - r["estimate"] for r in under), default=0),
                      "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
