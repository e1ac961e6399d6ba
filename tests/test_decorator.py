"""costmodel_autotune on a user's own kernels under TRITON_INTERPRET=1: the model's top-k is what Triton's autotuner
benchmarks, and without a usable model a seeded sample of min(len, 4k) configs is, with one warning."""

from __future__ import annotations

import dataclasses
import time
import warnings

import pytest
import torch
import triton
import triton.language as tl

from costmodel import features, model
from costmodel.errors import CostModelError
from costmodel.hardware import KNOWN
from costmodel.kernels import get_family
from tuner.decorator import CostModelFallbackWarning, costmodel_autotune, eager_bench, graph_bench, to_triton
from tuner.tune import rank_candidates

HW = KNOWN["nvidia-h200"]
FAM = get_family("matmul")


def cpu_bench(fn, quantiles=(0.5, 0.2, 0.8), **_):
    """Triton's autotuner needs a do_bench on a CPU (its default asks the GPU driver); times mean nothing here."""
    fn()
    t0 = time.perf_counter()
    fn()
    ms = (time.perf_counter() - t0) * 1e3
    return [ms] * len(quantiles)


@triton.jit
def user_matmul(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """A user's plain pointer matmul: no TMA, no persistent schedule (the model assumes the family defaults)."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        x = tl.load(a + rm[:, None] * stride_am + kk[None, :] * stride_ak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        y = tl.load(b + kk[:, None] * stride_bk + rn[None, :] * stride_bn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _cfg(bm, bn, bk, group_m, warps, stages):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m}, num_warps=warps,
                         num_stages=stages)


# 12 configs a user might list, all valid on the H200; the last is the family default (Triton tutorial 03)
CONFIGS = [_cfg(64, 64, 32, 8, 4, 3), _cfg(64, 64, 64, 1, 4, 4), _cfg(64, 128, 32, 8, 4, 3), _cfg(128, 64, 32, 8, 4, 4),
           _cfg(128, 128, 32, 8, 4, 3), _cfg(128, 128, 64, 8, 8, 3), _cfg(64, 128, 64, 1, 4, 5),
           _cfg(128, 64, 64, 8, 8, 2), _cfg(64, 256, 32, 8, 8, 3), _cfg(256, 64, 32, 8, 8, 4),
           _cfg(128, 128, 128, 8, 8, 2), _cfg(128, 256, 64, 8, 8, 3)]


def as_family(cfg: triton.Config, problem: dict) -> dict:
    """Independent of the decorator: the user's knobs over the family default."""
    default = FAM.default_config(problem, "float16", HW)
    return {**default, **cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def run_matmul(kernel, m, n, k_):
    g = torch.Generator().manual_seed(m * 1000 + n + k_)
    a = torch.randn(m, k_, generator=g).half()
    b = torch.randn(k_, n, generator=g).half()
    c = torch.empty(m, n, dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
    kernel[grid](a, b, c, m, n, k_, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    ref = a.float() @ b.float()
    return ((c.float() - ref).norm() / ref.norm()).item()


@pytest.fixture(scope="module")
def h200_model():
    try:
        return model.load_shipped("nvidia-h200")
    except CostModelError as e:
        pytest.skip(f"no loadable shipped H200 model ({e})")


def test_benchmarks_the_models_top_k(h200_model):
    k = 3
    kernel = costmodel_autotune("matmul", key=["M", "N", "K"], configs=CONFIGS, k=k, hw=HW, cost_model=h200_model,
                                do_bench=cpu_bench)(user_matmul)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelFallbackWarning)
        err = run_matmul(kernel, 32, 32, 32)
    assert err < 5e-3
    problem = {"M": 32, "N": 32, "K": 32}
    dicts = [as_family(c, problem) for c in CONFIGS]
    assert all(FAM.is_valid(problem, "float16", FAM.twin(problem, d), HW) for d in dicts)
    order = model.rank(h200_model, features.candidates_table("matmul", problem, "float16", dicts, HW))
    top = [CONFIGS[i] for i in order[:k]]
    assert len(kernel.configs_timings) == k
    assert set(kernel.configs_timings) == set(top)
    assert kernel.best_config in top


def test_shipped_model_loads_by_default(h200_model):
    """cost_model=None loads the shipped model for hw; the whole family space is ranked like tuner.tune does."""
    kernel = costmodel_autotune("matmul", key=["M", "N", "K"], k=4, hw=HW)(user_matmul)
    assert len(kernel.configs) == len(list(FAM.all_configs()))
    problem = {"M": 512, "N": 1024, "K": 256}
    a = torch.empty(1, 1, dtype=torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostModelFallbackWarning)
        picked = kernel.early_config_prune(kernel.configs, {"a": a, **problem})
    expected = [to_triton(c) for c in rank_candidates("matmul", problem, "float16", HW, h200_model)[:4]]
    assert picked == expected


def test_objective_sets_what_triton_times_the_top_k_by(h200_model):
    """Eager by default (back-to-back calls, the launch included), a CUDA graph for "graph"; a do_bench the user
    passes wins; an unknown objective is refused. Under the interpreter the eager bench times one run."""
    def made(**kwargs):
        return costmodel_autotune("matmul", key=["M", "N", "K"], configs=CONFIGS, k=2, hw=HW, cost_model=h200_model,
                                  **kwargs)(user_matmul)

    assert made().do_bench is eager_bench
    assert made(objective="graph").do_bench is graph_bench
    assert made(objective="graph", do_bench=cpu_bench).do_bench is cpu_bench
    with pytest.raises(CostModelError, match="objective"):
        made(objective="cold")
    kernel = made()  # eager: runs on the CPU under the interpreter, as the README example does
    assert run_matmul(kernel, 32, 32, 32) < 5e-3 and len(kernel.configs_timings) == 2


def test_falls_back_without_a_model():
    k = 1  # a sample of 4 of the 12 configs: seed 0 alone would draw neither the first nor the default
    unknown = dataclasses.replace(HW, gpu="nvidia-unknown")
    kernel = costmodel_autotune("matmul", key=["M", "N", "K"], configs=CONFIGS, k=k, hw=unknown,
                                do_bench=cpu_bench)(user_matmul)
    benchmarked = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for m, n, k_ in [(32, 32, 32), (48, 32, 32)]:
            assert run_matmul(kernel, m, n, k_) < 5e-3
            benchmarked.append(set(kernel.configs_timings))
    ours = [w for w in caught if issubclass(w.category, CostModelFallbackWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "nvidia-unknown" in str(ours[0].message)
    assert len(kernel.cache) == 2
    n_expected = min(len(CONFIGS), 4 * k)
    for picked in benchmarked:
        assert len(picked) == n_expected
        assert CONFIGS[0] in picked and CONFIGS[-1] in picked  # the first config and the family default
    assert benchmarked[0] == benchmarked[1]  # fixed seed


def test_falls_back_for_a_family_the_model_does_not_know(h200_model):
    from faulty_family import scale_kernel

    configs = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]
    kernel = costmodel_autotune("faulty_family:Faulty", key=["n"], configs=configs, k=1, hw=HW,
                                cost_model=h200_model, dims={"N": "n"}, do_bench=cpu_bench)(scale_kernel)
    x = torch.randn(50)
    y = torch.empty(50)
    with pytest.warns(CostModelFallbackWarning, match="not trained on kernel family"):
        kernel[lambda meta: (triton.cdiv(50, meta["BLOCK"]),)](x, y, 50, 2.0)
    torch.testing.assert_close(y, 2 * x)
    assert len(kernel.configs_timings) == 2  # min(len, 4k), never a single guess


def test_rejects_dims_the_kernel_lacks():
    with pytest.raises(CostModelError, match="no argument rows"):
        costmodel_autotune("matmul", key=["M"], configs=CONFIGS, hw=HW, dims={"M": "rows"})(user_matmul)


def test_fallback_without_a_gpu_says_to_pass_hw():
    """The warning used to repeat the CLI's hint (--predict-only), which means nothing to a decorator user."""
    kernel = costmodel_autotune("matmul", key=["M", "N", "K"], configs=CONFIGS, k=2)(user_matmul)
    a = torch.empty(1, 1, dtype=torch.float16)
    with pytest.warns(CostModelFallbackWarning) as caught:
        picked = kernel.early_config_prune(kernel.configs, {"a": a, "M": 64, "N": 64, "K": 64})
    message = str(caught[0].message)
    assert "no CUDA GPU is visible" in message and "hw=" in message and "--predict-only" not in message
    assert len(picked) == min(len(CONFIGS), 4 * 2)


def test_a_decode_shape_ranks_no_group_m_twin_of_the_space_and_reads_a_users_as_its_twin(h200_model):
    """On a decode shape (one row of tiles), the whole space's ranking holds no GROUP_M=1 config (its GROUP_M=8 twin
    runs the same tiles), while a user's own GROUP_M=1 configs rank as valid: before a config the family refuses."""
    from tuner.decorator import _Ranker, family_config, space_configs

    problem = {"M": 8, "N": 8192, "K": 8192}
    whole = _Ranker("f", "matmul", 8, HW, h200_model, {}, whole_space=True)
    ranked = whole.rank(space_configs(FAM), problem, "float16", HW, h200_model)
    assert ranked and all(c.kwargs["GROUP_M"] == 8 for c in ranked)
    users = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 1}, num_warps=4, num_stages=s)
             for s in (2, 3)]
    refused = triton.Config({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 1}, num_warps=4, num_stages=5)
    own = _Ranker("f", "matmul", 8, HW, h200_model, {}, whole_space=False)
    dicts = [family_config(FAM, c, FAM.default_config(problem, "float16", HW)) for c in (*users, refused)]
    assert [own.valid(problem, "float16", d, HW) for d in dicts] == [True, True, False]
    assert not any(whole.valid(problem, "float16", d, HW) for d in dicts)
    assert own.rank([refused, *users], problem, "float16", HW, h200_model)[-1] is refused
