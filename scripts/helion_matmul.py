"""Helion 1.4.0's matmul at autotune_effort="quick", for scripts/bench_tune.py --helion. A module of its own: Helion
refuses kernels that close over names (so torch and hl must be module globals), and bench_tune imports Helion only
when asked."""

import helion
import helion.language as hl
import torch


@helion.kernel(autotune_effort="quick")
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out
