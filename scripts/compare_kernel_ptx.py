"""Does a family's kernel, at the absent value of knobs added since revision REV (and at the values its knobs had
then), compile to the same code as it did at REV? What lets measurements recorded at REV stand for those configs (Knob.absent). Compiles on the CPU:
Triton's CUDA backend targets the recorded GPU without a driver. PTX is compared instruction for instruction,
without parameter declarations (added knobs may add kernel arguments), debug locations and labels.

    .venv/bin/python scripts/compare_kernel_ptx.py --rev 193b0ba [--family matmul] [--samples 8] [--seed 0]
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import tempfile

import click
import numpy as np


def _compile_only() -> None:
    """Make Triton's active driver answer device queries for an sm_90 target without libcuda (benchmark.py's
    compile-only driver builds a launcher too, and so needs libcuda)."""
    from triton.runtime import driver

    from costmodel.benchmark import target_only_driver

    driver.set_active(target_only_driver())


def instructions(ptx: str) -> list[str]:
    ptx = re.sub(r"\w*_kernel\w*", "KERNEL", ptx.split(".section\t.debug")[0])
    return [ln for ln in ptx.splitlines() if not re.match(r"\s*(\.loc|\.file|\.param|//|\$L__tmp)", ln)]


@click.command()
@click.option("--rev", required=True, help="git revision holding the family's module before the knobs")
@click.option("--family", default="matmul")
@click.option("--samples", default=8, help="configs per (problem, dtype)")
@click.option("--seed", default=0)
def main(rev: str, family: str, samples: int, seed: int) -> None:
    _compile_only()
    from costmodel import space
    from costmodel.benchmark import meta_inputs
    from costmodel.hardware import KNOWN
    from costmodel.kernels import get_family

    hw, fam = KNOWN["nvidia-h200"], get_family(family)
    path = type(fam).__module__.replace(".", "/") + ".py"
    with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
        f.write(subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout)
        f.flush()
        spec = importlib.util.spec_from_file_location(f"{family}_at_{rev}", f.name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    old = getattr(module, type(fam).__name__)()
    added = {k.name: k.absent for k in fam.knobs if k.name not in {o.name for o in old.knobs}}
    rng = np.random.default_rng(seed)
    same, differ = 0, []
    for problem in fam.problems(rng, 4):
        for dtype in fam.dtypes:
            configs = [c for c in space.enumerate_valid(fam, problem, dtype, hw)
                       if all(c[k] == v for k, v in added.items()) and all(c[k.name] in k.values for k in old.knobs)]
            for i in rng.permutation(len(configs))[:samples]:
                new_cfg = configs[i]
                old_cfg = {k: v for k, v in new_cfg.items() if k not in added}
                a = old.launch(problem, *meta_inputs(old, problem, dtype), old_cfg, hw, warmup=True).asm["ptx"]
                b = fam.launch(problem, *meta_inputs(fam, problem, dtype), new_cfg, hw, warmup=True).asm["ptx"]
                if instructions(a) == instructions(b):
                    same += 1
                else:
                    differ.append({"problem": problem, "dtype": dtype, "config": new_cfg})
    print(json.dumps({"family": family, "rev": rev, "added_knobs": added, "compiled_pairs": same + len(differ),
                      "same_instructions": same, "differ": differ}, indent=1))


if __name__ == "__main__":
    main()
