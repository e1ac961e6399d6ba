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
    _split_configs_right(problem, lambda c, hw: True)


def _split_configs_right(problem: dict, keep) -> None:
    """5 configs of each split-tail reduction that ``keep(config, hw)`` holds for, each dtype, all right."""
    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker
    from costmodel.kernels import get_family

    hw, fam = hardware.current(), get_family("matmul")
    with IsolatedBenchmarker(hw, compile_workers=8) as bench:
        for dtype in fam.dtypes:
            valid = space.enumerate_valid(fam, problem, dtype, hw)
            picked = []
            for mode in (1, 2):
                split = [c for c in valid if c["SPLIT_TAIL"] == mode and keep(c, hw)]
                assert split, (problem, mode)
                picked += [split[i] for i in np.random.default_rng(mode).permutation(len(split))[:5]]
            ms = bench.measure("matmul", problem, dtype, picked)
            assert all(m.ok for m in ms), [m for m in ms if not m.ok]


@pytest.mark.parametrize("problem", [{"M": 2944, "N": 4096, "K": 2048}, {"M": 2999, "N": 4001, "K": 1999}])
def test_matmul_balanced_tail_on_gpu(problem):
    """A tail over half the SMs split in rounds of parts (issue 17) is right with both reductions, aligned and not:
    2944x4096 leaves 76 tiles of 128x128 on 132 SMs (3 parts), 2999x4001 92 or 96 tiles (4 parts)."""
    from costmodel.kernels.matmul import tail_split

    _split_configs_right(problem, lambda c, hw: 2 * tail_split(problem, c, hw)[0] > hw.sm_count)


BOUND_KINDS = {  # (family, problem, config overrides): every launcher path a bound call takes
    "matmul pointer": ("matmul", {"M": 777, "N": 1000, "K": 2333}, {"TMA": 0, "PERSISTENT": 0, "SPLIT_TAIL": 0}),
    "matmul TMA": ("matmul", {"M": 1024, "N": 2048, "K": 1536}, {"TMA": 1, "PERSISTENT": 0, "SPLIT_TAIL": 0}),
    "matmul TMA persistent": ("matmul", {"M": 4096, "N": 4096, "K": 1024}, {"TMA": 1, "PERSISTENT": 1, "SPLIT_TAIL": 0}),
    "matmul split tail 1": ("matmul", {"M": 1000, "N": 5120, "K": 4000}, {"PERSISTENT": 1, "SPLIT_TAIL": 1}),
    "matmul split tail 2": ("matmul", {"M": 1000, "N": 5120, "K": 4000}, {"TMA": 1, "PERSISTENT": 1, "SPLIT_TAIL": 2}),
    "matmul split tail in rounds": ("matmul", {"M": 2944, "N": 4096, "K": 2048}, {"PERSISTENT": 1, "SPLIT_TAIL": 1}),
    # TMA=2: pointers told their rows are 8 bytes apart (fp16/bf16; 16 for fp32), then 16 with the split tail's kernel
    "matmul hinted pointers": ("matmul", {"M": 777, "N": 1000, "K": 2332}, {"TMA": 2, "PERSISTENT": 0,
                                                                             "SPLIT_TAIL": 0}),
    "matmul hinted split tail 2": ("matmul", {"M": 1000, "N": 5000, "K": 4000}, {"TMA": 2, "PERSISTENT": 1,
                                                                                 "SPLIT_TAIL": 2}),
    "attention TMA": ("attention", {"B": 2, "H": 8, "S": 1000, "D": 64, "CAUSAL": 1}, {"TMA": 1}),
    "attention": ("attention", {"B": 2, "H": 8, "S": 1000, "D": 64, "CAUSAL": 0}, {"TMA": 0}),
    "softmax": ("softmax", {"M": 1000, "N": 4096}, {}),
    "layernorm": ("layernorm", {"M": 33, "N": 5120}, {}),
    "rmsnorm": ("rmsnorm", {"M": 1000, "N": 4096}, {}),
}


@pytest.mark.parametrize("kind", list(BOUND_KINDS))
def test_bound_call_is_direct_and_right_when_called_again(kind):
    """A bound call goes straight to the compiled launcher (no JIT fallback on this Triton) and is still right on its
    third call on the same tensors: its TMA descriptors, workspaces and the split tail's counters are reused."""
    import torch

    from costmodel import hardware
    from costmodel.kernels import get_family
    from costmodel.kernels.matmul import tail_split

    family, problem, want = BOUND_KINDS[kind]
    hw, fam = hardware.current(), get_family(family)
    for dtype in fam.dtypes:
        valid = [c for c in space.enumerate_valid(fam, problem, dtype, hw) if all(c[k] == v for k, v in want.items())
                 and (not want.get("SPLIT_TAIL") or tail_split(problem, c, hw)[0])]  # a tail split happens
        assert valid, kind
        config = valid[np.random.default_rng(0).integers(len(valid))]
        inputs = fam.make_inputs(problem, dtype, "cuda")
        ref, out = fam.reference(problem, inputs), fam.make_output(problem, dtype, "cuda")
        call = fam.bind(problem, inputs, out, config, hw)
        assert call.direct, (kind, config)
        for _ in range(3):
            out.fill_(float("nan"))
            call()
        torch.cuda.synchronize()
        err = float((out.float() - ref).norm() / ref.norm())
        assert err <= fam.tolerance[dtype], (kind, dtype, config, err)


def test_eager_timing_is_left_out_when_asked():
    """IsolatedBenchmarker(eager=False) times a config's GPU time only (bench_tune.py's sweeps); by default it also
    times its eager per-call time."""
    from costmodel import hardware
    from costmodel.benchmark import IsolatedBenchmarker
    from costmodel.kernels import get_family

    hw, problem = hardware.current(), {"M": 1000, "N": 4096}
    config = get_family("rmsnorm").default_config(problem, "float16", hw)
    for eager in (True, False):
        with IsolatedBenchmarker(hw, compile_workers=2, eager=eager) as bench:
            m = bench.measure("rmsnorm", problem, "float16", [config])[0]
        assert m.ok and m.latency_ms > 0
        assert (m.eager_ms is not None and m.eager_ms > 0) if eager else m.eager_ms is None
