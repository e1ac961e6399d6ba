"""Session 9, issue 17: where a warp-specialised matmul (Triton 3.6's Hopper pass on the persistent TMA loop, 4 warps,
C stored through pointers) stops on the H200: compile, launch or run. It hung in the run (a 40 s watchdog printed
the stack: torch.cuda.synchronize). The kernel variant it measured is not in the family any more; check out commit
f241993 (the knob WARP_SPECIALIZE) to run it again. Usage on a GPU host:

    PYTHONPATH=. timeout 60 python3 scripts/experiments/ws_probe.py [--watchdog 40]
"""

from __future__ import annotations

import faulthandler
import time

import click


@click.command()
@click.option("--watchdog", default=40, show_default=True, help="seconds before the stacks are printed and it exits")
def main(watchdog: int) -> None:
    faulthandler.dump_traceback_later(watchdog, exit=True)
    import torch

    from costmodel import hardware
    from costmodel.kernels import get_family

    fam, hw = get_family("matmul"), hardware.current()
    p = {"M": 3000, "N": 5000, "K": 1000}
    cfg = dict(fam.default_config(p, "bfloat16", hw), TMA=1, PERSISTENT=1, num_warps=4, WARP_SPECIALIZE=1)
    a, b = fam.make_inputs(p, "bfloat16", "cuda")
    c = fam.make_output(p, "bfloat16", "cuda")
    t = time.time()
    print("compile...", flush=True)
    k = fam.launch(p, (a, b), c, cfg, hw, warmup=True)
    print(f"compiled {time.time() - t:.1f}s warps {k.metadata.num_warps} shared {k.metadata.shared}", flush=True)
    t = time.time()
    fam.launch(p, (a, b), c, cfg, hw)
    print("launched", flush=True)
    torch.cuda.synchronize()
    print(f"ran {time.time() - t:.3f}s", flush=True)
    ref = (a @ b).float()
    print("rel err", float((c.float() - ref).norm() / ref.norm()), flush=True)


if __name__ == "__main__":
    main()
