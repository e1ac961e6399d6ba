"""Every family's kernel matches its torch reference under TRITON_INTERPRET=1 on tiny shapes."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from costmodel import space
from costmodel.errors import CostModelError
from costmodel.hardware import KNOWN
from costmodel.benchmark import meta_inputs
from costmodel.kernels import family_names, get_family

HW = KNOWN["nvidia-h200"]

# tiny shapes the interpreter runs in well under a second, odd sizes included
TINY = {
    "matmul": [{"M": 40, "N": 48, "K": 72}, {"M": 1, "N": 64, "K": 64}],
    "attention": [{"B": 1, "H": 2, "S": 80, "D": 64, "CAUSAL": 0}, {"B": 1, "H": 1, "S": 72, "D": 64, "CAUSAL": 1}],
    "softmax": [{"M": 5, "N": 200}, {"M": 3, "N": 1000}],
    "layernorm": [{"M": 5, "N": 200}, {"M": 3, "N": 1000}],
    "rmsnorm": [{"M": 5, "N": 200}, {"M": 3, "N": 1000}],
}

# Triton 3.6's interpreter computes tl.dot on bfloat16 wrongly (it multiplies the raw bits), so bf16 is
# checked for dot-based families on the GPU only (tests/test_kernels_gpu.py).
DOT_FAMILIES = {"matmul", "attention"}


def cases():
    for name in family_names():
        fam = get_family(name)
        for dtype in fam.dtypes:
            if dtype == "bfloat16" and name in DOT_FAMILIES:
                continue
            for problem in TINY[name]:
                yield pytest.param(name, dtype, problem, id=f"{name}-{dtype}-" + "x".join(map(str, problem.values())))


def run(fam, problem, dtype, config):
    inputs = fam.make_inputs(problem, dtype, "cpu", seed=1)
    out = fam.make_output(problem, dtype, "cpu")
    out.fill_(float("nan"))
    fam.launch(problem, inputs, out, config, HW)
    ref = fam.reference(problem, inputs)
    assert not torch.isnan(out).any(), "output has unwritten (NaN-poisoned) elements"
    return ((out.float() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("name,dtype,problem", list(cases()))
def test_family_matches_reference(name, dtype, problem):
    fam = get_family(name)
    problem = fam.check_problem(problem)
    rng = np.random.default_rng(0)
    configs = [fam.default_config(problem, dtype, HW)] + space.sample(fam, problem, dtype, HW, 3, rng)
    for config in configs:
        assert fam.is_valid(problem, dtype, config, HW)
        err = run(fam, problem, dtype, config)
        assert err < fam.tolerance[dtype], f"{config}: rel err {err}"


@pytest.mark.parametrize("name", family_names())
def test_sample_is_valid_default_first_and_distinct(name):
    fam = get_family(name)
    problem = fam.problems(np.random.default_rng(3), 1)[0]
    dtype = fam.dtypes[0]
    valid = space.enumerate_valid(fam, problem, dtype, HW)
    assert valid, "no valid config"
    sample = space.sample(fam, problem, dtype, HW, 20, np.random.default_rng(1))
    assert sample[0] == fam.default_config(problem, dtype, HW)
    assert all(c in valid for c in sample)
    assert len({tuple(sorted(c.items())) for c in sample}) == len(sample), "sample has duplicates"


def test_matmul_space_keeps_one_group_m_where_the_grid_is_one_row_or_one_column():
    """GROUP_M=1 leaves the space where the grid of tiles is one row (every decode shape) or one column: there its
    twin of GROUP_M=8 runs the same tiles. Elsewhere both values stay, and a config of either reads as a valid twin."""
    from costmodel.kernels.matmul import one_row_or_column

    fam = get_family("matmul")
    for problem in ({"M": 8, "N": 8192, "K": 8192}, {"M": 4096, "N": 128, "K": 4096},
                    {"M": 4096, "N": 4096, "K": 4096}):
        valid = space.enumerate_valid(fam, problem, "float16", HW)
        alone = [c for c in valid if one_row_or_column(problem, c)]
        assert {c["GROUP_M"] for c in alone} == ({8} if problem["N"] < 4096 or problem["M"] < 64 else set()), problem
        assert {c["GROUP_M"] for c in valid if c not in alone} == (set() if problem["M"] < 64 else {1, 8}), problem
        either = [c for c in fam.all_configs() if fam.is_valid(problem, "float16", dict(c, GROUP_M=8), HW)]
        assert len(either) == len(valid) + len(alone) and all(fam.twin(problem, c) in valid for c in either)


@pytest.mark.parametrize("name", family_names())
def test_problem_generator_is_valid_and_varied(name):
    fam = get_family(name)
    problems = fam.problems(np.random.default_rng(7), 200)
    for p in problems:
        assert fam.check_problem(p) == p
    assert len({tuple(p.values()) for p in problems}) > 50, "generator repeats itself"
    assert any(any(v % 16 for k, v in p.items() if k in ("M", "N", "K", "S")) for p in problems), "no odd sizes"


def test_matmul_split_tail_matches_reference():
    """SPLIT_TAIL on a GPU of 7 SMs: 8 tiles are one whole wave and one tile split over K into parts (uneven: K
    is 17 steps of 32), summed by the last part to arrive (1) or by the second kernel (2); with and without TMA.
    The GPU's 20 KiB of shared memory per block fit the TMA configs only with C stored in halves."""
    import dataclasses

    from costmodel.kernels.matmul import tail_split

    fam, hw = get_family("matmul"), dataclasses.replace(HW, sm_count=7, smem_per_block=20 * 1024)
    problem = {"M": 128, "N": 256, "K": 520}
    configs = _small_split_configs(fam, problem, hw)
    assert {(c["TMA"], c["SPLIT_TAIL"], c["EPILOGUE_SUBTILE"]) for c in configs} == {
        (0, 1, 0), (0, 2, 0), (1, 1, 1), (1, 2, 1), (2, 1, 0), (2, 2, 0)}  # K 520: rows 16 bytes apart, TMA=2 hints
    assert all(tail_split(problem, c, hw) == (1, 4) for c in configs)
    _launch_and_bind_match(fam, problem, configs, hw, seed=1)


def _small_split_configs(fam, problem, hw):
    """The split-tail configs of 64x64x32 tiles, 2 stages and 4 warps (the interpreter runs them in seconds)."""
    return [c for c in space.enumerate_valid(fam, problem, "float16", hw)
            if c["SPLIT_TAIL"] and c["BLOCK_M"] == c["BLOCK_N"] == 64 and c["BLOCK_K"] == 32 and c["num_stages"] == 2
            and c["num_warps"] == 4]


def _launch_and_bind_match(fam, problem, configs, hw, seed):
    """Each config, launched and through its bound call (which reuses its workspace and counters, called twice),
    matches the reference."""
    for config in configs:
        inputs = fam.make_inputs(problem, "float16", "cpu", seed=seed)
        out = fam.make_output(problem, "float16", "cpu").fill_(float("nan"))
        fam.launch(problem, inputs, out, config, hw)
        ref = fam.reference(problem, inputs)
        assert ((out.float() - ref).norm() / ref.norm()).item() < fam.tolerance["float16"], config
        call = fam.bind(problem, inputs, out, config, hw)
        for _ in range(2):
            out.fill_(float("nan"))
            call()
        assert ((out.float() - ref).norm() / ref.norm()).item() < fam.tolerance["float16"], ("bound", config)


def test_matmul_split_tail_over_half_the_sms_matches_reference():
    """A tail over half the SMs splits into the parts that shorten it most: on 7 SMs, 12 tiles leave 5 after a
    whole wave; in 4 parts they are 20 units, 3 rounds on 7 SMs, 3/4 of a tile each (2 or 3 parts: a whole tile).
    Every program then runs several parts, each reduction still sums them right."""
    import dataclasses

    from costmodel.kernels.base import busiest_sm_steps
    from costmodel.kernels.matmul import split_of, tail_split, tiles_of

    fam, hw = get_family("matmul"), dataclasses.replace(HW, sm_count=7, smem_per_block=20 * 1024)
    problem = {"M": 128, "N": 384, "K": 520}
    configs = _small_split_configs(fam, problem, hw)
    assert {(c["TMA"], c["SPLIT_TAIL"]) for c in configs} == {(0, 1), (0, 2), (1, 1), (1, 2), (2, 1), (2, 2)}
    assert all(tail_split(problem, c, hw) == (5, 4) for c in configs)
    cols = {**problem, **configs[0], "sm_count": 7}
    tiles = tiles_of(cols)
    split_tiles, parts = split_of(cols, tiles)
    # one whole wave of 17 K steps, then 3 rounds of parts of 5 steps (17 / 4, rounded up), against 2 waves
    assert busiest_sm_steps(cols, tiles, 17.0, split_tiles, parts) == 17 + 3 * 5 < 2 * 17
    _launch_and_bind_match(fam, problem, configs, hw, seed=2)


def test_matmul_split_tail_only_where_it_splits():
    from costmodel.kernels.matmul import tail_split

    fam = get_family("matmul")
    base = dict(fam.default_config({}, "float16", HW), PERSISTENT=1, SPLIT_TAIL=1)
    assert fam.is_valid({"M": 5120, "N": 5120, "K": 5120}, "float16", base, HW)  # 800 tiles: 6 waves and 8 left
    assert not fam.is_valid({"M": 5120, "N": 5120, "K": 5120}, "float16", dict(base, PERSISTENT=0), HW)
    assert not fam.is_valid({"M": 5120, "N": 5120, "K": 256}, "float16", base, HW)  # 4 K steps: no room for 2 parts
    assert not fam.is_valid({"M": 128 * 12, "N": 256 * 11, "K": 5120}, "float16", base, HW)  # 132 tiles: no tail
    # 6000^3: 1,128 tiles leave 72 (over half of 132); 3 parts each take 2/3 of a tile on the busiest SM
    assert fam.is_valid({"M": 6000, "N": 6000, "K": 6000}, "float16", base, HW)
    assert tail_split({"M": 6000, "N": 6000, "K": 6000}, base, HW) == (72, 3)
    # 10000x2000x3000: 632 tiles leave 104; no split in up to 4 parts shortens them (each leaves a whole tile)
    assert not fam.is_valid({"M": 10000, "N": 2000, "K": 3000}, "float16", base, HW)


def test_matmul_epilogue_subtile_only_where_the_whole_tile_does_not_fit():
    fam, problem = get_family("matmul"), {"M": 5120, "N": 5120, "K": 5120}
    # 128x256x64 tiles, 4 stages: 192 KiB of operands, plus 64 KiB to stage C whole or 32 KiB in halves (227 KiB)
    base = dict(fam.default_config(problem, "float16", HW), TMA=1, PERSISTENT=1, num_stages=4)
    assert not fam.is_valid(problem, "float16", base, HW)
    assert fam.is_valid(problem, "float16", dict(base, EPILOGUE_SUBTILE=1), HW)
    assert not fam.is_valid(problem, "float16", dict(base, EPILOGUE_SUBTILE=1, num_stages=3), HW)  # fits whole
    assert not fam.is_valid(problem, "float16", dict(base, EPILOGUE_SUBTILE=1, TMA=0), HW)


def test_bad_input_errors():
    with pytest.raises(CostModelError, match="unknown kernel family"):
        get_family("conv9d")
    fam = get_family("matmul")
    with pytest.raises(CostModelError, match="missing K"):
        fam.check_problem({"M": 4, "N": 4})
    with pytest.raises(CostModelError, match="must be an integer"):
        fam.check_problem({"M": 4, "N": -4, "K": 8})
    with pytest.raises(CostModelError, match="does not support dtype"):
        fam.check_dtype("float64")
    p = fam.check_problem({"M": 64, "N": 64, "K": 64})
    bad = dict(fam.default_config(p, "float16", HW), BLOCK_M=256, BLOCK_N=256, num_warps=4)
    with pytest.raises(CostModelError, match="invalid"):
        fam.check_config(p, "float16", bad, HW)
    with pytest.raises(CostModelError, match="not in"):
        fam.check_config(p, "float16", dict(bad, BLOCK_M=3), HW)


@pytest.mark.parametrize("name", family_names())
def test_inputs_have_a_shape_only_form_for_the_compile_pool(name):
    fam = get_family(name)
    problem, dtype = fam.problems(np.random.default_rng(5), 1)[0], fam.dtypes[-1]
    meta, out = meta_inputs(fam, problem, dtype)
    real = fam.make_inputs(problem, dtype, "meta")  # meta randn: what the compile pool avoids, here the reference
    assert all(t.device.type == "meta" for t in (*meta, out)) and len(meta) == len(real)
    assert [(t.shape, t.stride(), t.dtype) for t in meta] == [(t.shape, t.stride(), t.dtype) for t in real]


def test_shape_only_inputs_import_no_decompositions():
    """Meta randn imports torch's decompositions (sympy among ~900 modules: 5 s a compile process on the H200 host)."""
    problems = {f: TINY[f][0] for f in family_names()}
    code = ("import sys; from costmodel.benchmark import meta_inputs; from costmodel.kernels import get_family\n"
            f"for f, p in {problems}.items(): meta_inputs(get_family(f), p, 'float16')\n"
            "print('sympy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_bound_call_sees_a_launch_hook_only_when_one_is_set():
    """Triton 3.6 keeps an empty HookChain as its launch hook: a bound call must not take that for a profiler's
    hook (and go through the JIT on every call), and must when a hook is added."""
    from triton import knobs

    from costmodel.kernels.bound import _hooked

    chain = knobs.runtime.launch_enter_hook
    assert not _hooked(chain) and not _hooked(None)
    hook = lambda metadata: None  # noqa: E731
    chain.add(hook)
    try:
        assert _hooked(chain)
    finally:
        chain.remove(hook)
    assert _hooked(hook)  # an older Triton's plain callable


def test_matmul_tma_2_hints_the_pointer_path_only_where_it_tells_the_compiler_something():
    """TMA=2, the pointer path told how far apart rows start: valid where K and N allow a vector wider than an element
    that Triton's specialisation (multiples of 16) does not see; it matches the reference on rows 8 and 16 bytes
    apart, in every schedule (the split tail's second kernel stores C with the hint too), launched and bound; a Helion
    matmul has no counterpart of it."""
    import dataclasses

    from costmodel.helion.families import _matmul_from_twin
    from costmodel.kernels.matmul import hint_helps, hint_width

    fam = get_family("matmul")
    assert hint_width(2, 1000, 5000) == 8 and hint_width(2, 1004, 5000) == 4 and hint_width(2, 4095, 64) == 1
    assert hint_width(4, 1002, 64) == 2 and hint_helps({"M": 1, "N": 5000, "K": 1000}, 2)
    assert not hint_helps({"M": 1, "N": 5120, "K": 4096}, 2) and not hint_helps({"M": 1, "N": 4095, "K": 64}, 2)
    base = dict(fam.default_config({}, "float16", HW), TMA=2)
    assert fam.is_valid({"M": 3000, "N": 5000, "K": 1000}, "float16", base, HW)
    assert fam.is_valid({"M": 3000, "N": 5002, "K": 1004}, "float16", base, HW)  # rows 4 bytes apart: TMA refused
    assert not fam.is_valid({"M": 3000, "N": 5002, "K": 1004}, "float16", dict(base, TMA=1), HW)
    assert not fam.is_valid({"M": 4096, "N": 4096, "K": 4096}, "float16", base, HW)  # Triton sees 16 already
    assert not fam.is_valid({"M": 4095, "N": 4095, "K": 4095}, "float16", base, HW)  # no vector fits
    assert not fam.is_valid({"M": 3000, "N": 5000, "K": 1000}, "float16", dict(base, EPILOGUE_SUBTILE=1), HW)
    assert fam.smem_bytes("float16", base) == fam.smem_bytes("float16", dict(base, TMA=0))  # no C staged
    hinted = {"M": 4096, "N": 5000, "K": 1000}
    assert fam.compile_key(hinted, "float16", base, HW) != fam.compile_key(dict(hinted, K=1004), "float16", base, HW)
    assert _matmul_from_twin(base) is None and _matmul_from_twin(dict(base, TMA=0))["indexing"] == ["pointer"] * 3
    hw = dataclasses.replace(HW, sm_count=7, smem_per_block=20 * 1024)
    for problem, vec in (({"M": 128, "N": 264, "K": 520}, 8), ({"M": 128, "N": 260, "K": 516}, 4)):
        configs = [c for c in space.enumerate_valid(fam, problem, "float16", hw) if c["TMA"] == 2
                   and c["BLOCK_M"] == c["BLOCK_N"] == 64 and c["BLOCK_K"] == 32 and c["num_stages"] == 2
                   and c["num_warps"] == 4 and c["GROUP_M"] == 8]
        assert {(c["PERSISTENT"], c["SPLIT_TAIL"]) for c in configs} == {(0, 0), (1, 0), (1, 1), (1, 2)}
        assert hint_width(2, problem["K"], problem["N"]) == vec
        _launch_and_bind_match(fam, problem, configs, hw, seed=3)
