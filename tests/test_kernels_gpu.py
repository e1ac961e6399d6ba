"""On the GPU: every family, real shapes, both dtypes, default and sampled configs match the torch reference."""

import numpy as np
import pytest

from costmodel import space

pytestmark = pytest.mark.gpu

SHAPES = {
    "matmul": [{"M": 1000, "N": 2048, "K": 1536}, {"M": 64, "N": 4096, "K": 4096}, {"M": 777, "N": 1000, "K": 333}],
    "attention": [{"B": 2, "H": 8, "S": 1000, "D": 64, "CAUSAL": 1}, {"B": 1, "H": 16, "S": 2048, "D": 128, "CAUSAL": 0}],
    "softmax": [{"M": 1000, "N": 4096}, {"M": 64, "N": 50257}],
    "layernorm": [{"M": 1000, "N": 4096}, {"M": 33, "N": 5120}],
    "rmsnorm": [{"M": 1000, "N": 4096}, {"M": 33, "N": 5120}],
}


@pytest.mark.parametrize("family", list(SHAPES))
def test_family_on_gpu(family):
    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker

    hw = hardware.current()
    with IsolatedBenchmarker(hw, compile_workers=8) as bench:
        from costmodel.kernels import get_family

        fam = get_family(family)
        for problem in SHAPES[family]:
            for dtype in fam.dtypes:
                configs = space.sample(fam, problem, dtype, hw, 6, np.random.default_rng(0))
                ms = bench.measure(family, problem, dtype, configs)
                assert ms[0].ok, f"default config failed: {ms[0]}"
                wrong = [m for m in ms if m.status == "wrong_result"]
                assert not wrong, f"wrong results: {wrong}"
                assert sum(m.ok for m in ms) >= len(ms) - 1, [m for m in ms if not m.ok]


@pytest.mark.parametrize("problem", [{"M": 5120, "N": 5120, "K": 1024}, {"M": 1000, "N": 5120, "K": 4000},
                                     {"M": 64, "N": 3000, "K": 7168}])
def test_matmul_split_tail_on_gpu(problem):
    """Split-tail configs of both reductions (the last part to arrive writing the tile; a second kernel) are right
    on real shapes: whole waves and a split tail, an odd M, and a decode shape with no whole wave at all."""
    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker
    from costmodel.kernels import get_family

    hw, fam = hardware.current(), get_family("matmul")
    with IsolatedBenchmarker(hw, compile_workers=8) as bench:
        for dtype in fam.dtypes:
            valid = space.enumerate_valid(fam, problem, dtype, hw)
            picked = []
            for mode in (1, 2):
                split = [c for c in valid if c["SPLIT_TAIL"] == mode]
                picked += [split[i] for i in np.random.default_rng(mode).permutation(len(split))[:5]]
            ms = bench.measure("matmul", problem, dtype, picked)
            assert all(m.ok for m in ms), [m for m in ms if not m.ok]
