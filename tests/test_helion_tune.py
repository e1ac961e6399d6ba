"""The Helion cost model and the autotuner_fn that drives Helion with it, on a CPU, from the recorded H200 rows.

(a) features of the recorded configs against the real ConfigSpec of each group's kernel; (b) the autotuner_fn
replaying a recorded group: it times only the model's top-k and Helion's default, returns the fastest, and stores it
in Helion's own cache, where a second tuner finds it without timing anything; (c) where the model does not fit (a
Helion version it was not trained on, a GPU without a model) it warns once and hands over to Helion's search
(mocked here: nothing runs on a GPU) with the model's top configs as seeds. Skipped where helion does not import."""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

helion = pytest.importorskip("helion")

import torch  # noqa: E402
from helion.autotuner import cache_classes, local_cache, search_algorithms  # noqa: E402
from helion.autotuner.logger import AutotuningLogger  # noqa: E402

from costmodel import dataset, model  # noqa: E402
from costmodel.helion import configs, families, features  # noqa: E402
from costmodel.helion import model as helion_model  # noqa: E402
from tuner import helion as htune  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GPU = "nvidia-h200"
K = 4


class CpuCache(local_cache.LocalAutotuneCache):
    """Helion's LocalAutotuneCache, keyed as if the CPU were a device (its key asserts a GPU runtime name)."""

    def _generate_key(self):
        orig = local_cache.extract_device, local_cache.get_device_name
        local_cache.extract_device, local_cache.get_device_name = (lambda a: torch.device("mps")), (lambda d: "cpu")
        try:
            return super()._generate_key()
        finally:
            local_cache.extract_device, local_cache.get_device_name = orig


class NoTimer:
    """A timer where nothing may be timed (the default one would compile on this CPU)."""

    def measure(self, *a):
        raise AssertionError("timed where nothing should be")


@pytest.fixture(scope="module")
def rows():
    table, gpu = model.training_table(ROOT / "data", GPU, helion_model.FEATURES)
    assert gpu == GPU and table.num_rows
    return table


def _groups(table):
    for gid in sorted(set(table["group_id"].to_pylist())):
        g = table.filter(pc.equal(table["group_id"], gid))
        r = g.slice(0, 1).to_pylist()[0]
        yield g, r["kernel"], json.loads(r["problem_json"]), r["dtype"]


@pytest.fixture(scope="module")
def trained(rows, tmp_path_factory):
    """A Helion model fitted on the recorded rows (the code path a shipped model takes; not one to ship)."""
    hw = dataset.hw_from_row(rows.slice(0, 1).to_pylist()[0]).as_dict()
    booster, meta = helion_model.train(rows, GPU, hw, model.FAST, evaluate=False)
    return model.save(tmp_path_factory.mktemp("models") / GPU / "helion", booster, meta)


def _bound(kernel, problem, dtype, **settings):
    fam = families.get(kernel)
    args = fam.args(problem, fam.make_inputs(problem, dtype, "cpu"))
    return fam.with_settings(autotune_cache="CpuCache", **settings).bind(args), args


@pytest.fixture(autouse=True)
def cpu_cache(monkeypatch, tmp_path):
    monkeypatch.setitem(cache_classes, "CpuCache", CpuCache)
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path / "helion-cache"))


# --- (a) features ----------------------------------------------------------------------------------------

def test_features_of_recorded_rows_from_the_spec(rows):
    x = helion_model.table_matrix(rows)
    assert x.shape == (rows.num_rows, len(helion_model.NAMES)) and x.dtype == np.float32
    col = {n: x[:, i] for i, n in enumerate(helion_model.NAMES)}
    for g, kernel, problem, dtype in _groups(rows):
        bound, _ = _bound(kernel, problem, dtype)
        spec, fam = bound.config_spec, families.get(kernel)
        at = np.flatnonzero(pc.equal(rows["group_id"], g["group_id"][0]).to_numpy(zero_copy_only=False))
        n_t, n_r = len(spec.block_sizes), len(spec.reduction_loops)
        assert (col["n_tiles"][at] == n_t).all() and (col["n_reductions"][at] == n_r).all()
        assert (col["n_memory_ops"][at] == families.op_counts(spec)["indexing"]).all()
        applies = ["log2_programs", "log2_tile_elems", "log2_num_warps", "num_stages", "indexing_pointer",
                   "tile_fill", "live_loads", "indexing_load_pointer", "indexing_store_pointer", "evict_live_first",
                   *(f"{f}_{i}" for i in range(n_t) for f in ("log2_block", "block_ratio", "log2_tiles")),
                   *(f"{f}_{i}" for i in range(n_r) for f in ("reduction_rolled", "log2_reduction_block",
                                                               "reduction_ratio", "log2_reduction_trips")),
                   *(f"log2_{d}" for d in fam.dims if d != "CAUSAL"), f"dtype_{dtype}", "dtype_bytes"]
        for name in applies:
            assert np.isfinite(col[name][at]).all(), (kernel, name)
        for name in [*(f"log2_block_{i}" for i in range(n_t, features.MAX_TILES)),
                     *(f"reduction_ratio_{i}" for i in range(n_r, features.MAX_REDUCTIONS))]:
            assert np.isnan(col[name][at]).all(), (kernel, name)  # absent, not zero
        # a kernel that is no family here is read off its spec and its code: the same features as the family's
        assert features.live_memory_ops(bound) == [list(ops) for ops in fam.memory_ops], kernel
        cj = g["config_json"].to_pylist()
        via_spec = helion_model.matrix(["user:k"] * len(cj), [problem] * len(cj), [dtype] * len(cj), cj,
                                       features.spec_shape(bound))
        np.testing.assert_array_equal(via_spec, x[at])


def test_leave_one_kernel_out_on_recorded_rows(rows):
    out = helion_model.leave_one_kernel_out(rows, model.FAST)
    kernels = set(rows["kernel"].to_pylist())
    assert set(out["per_kernel"]) == kernels and out["groups"] == len(set(rows["group_id"].to_pylist()))
    for m in out["per_kernel"].values():
        assert 0 < m["top1_score"] <= m["top8_score"] <= 1 and m["train_groups"] >= 1


def test_held_out_shapes_on_recorded_rows(rows):
    """Every group ranked once, by a model that never saw its shape; a shape's fold is its (kernel, problem)'s,
    whatever its dtype or group."""
    out = helion_model.held_out_shapes(rows, model.FAST)
    ids = [g["group_id"] for g in out["per_group"]]
    assert sorted(ids) == sorted(set(rows["group_id"].to_pylist())) and out["groups"] == len(ids)
    assert set(out["per_kernel"]) == set(rows["kernel"].to_pylist())
    for m in out["per_kernel"].values():
        assert 0 < m["top1_score"] <= m["top8_score"] <= 1
    folds = helion_model.shape_folds(rows, 3)
    assert len(set(folds.tolist())) == 3
    relabelled = rows.set_column(rows.column_names.index("dtype"), "dtype", pa.array(["float32"] * rows.num_rows))
    relabelled = relabelled.set_column(rows.column_names.index("group_id"), "group_id",
                                       pa.array(["g"] * rows.num_rows))
    np.testing.assert_array_equal(helion_model.shape_folds(relabelled, 3), folds)


def test_helion_model_refuses_a_triton_model():
    from costmodel.errors import CostModelError

    with pytest.raises(CostModelError, match="not a Helion model"):
        helion_model.load(model.MODELS_DIR / GPU)


# --- (b) the replay --------------------------------------------------------------------------------------

def _matmul_group(rows):
    return next((g, p, d) for g, k, p, d in _groups(rows) if k == "helion:matmul")


def test_replay_times_the_top_k_and_returns_the_fastest(rows, trained):
    group, problem, dtype = _matmul_group(rows)
    recorded = [json.loads(c) for c in group["config_json"].to_pylist()]
    replay = htune.HelionReplay(group)
    tuner = htune.CostModelAutotuner(trained, k=K, candidates=lambda b: recorded, timer=replay, gpu=GPU,
                                     helion_version="1.4.0")
    bound, args = _bound("helion:matmul", problem, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", htune.HelionFallbackWarning)  # the model fits: no fallback
        got = tuner(bound, args).autotune()
    ranked, default = tuner.ranked(helion_model.load(trained), bound, args)
    asked = [configs.config_json(c) for c in replay.asked[0]]
    assert len(replay.asked) == 1 and len(recorded) > K + 1
    top = [configs.config_json(c) for c in ranked[:K]]
    scores = helion_model.score(helion_model.load(trained), "helion:matmul", problem, dtype,
                                [configs.config_json(c) for c in recorded])
    by_score = [configs.config_json(recorded[i]) for i in np.argsort(-scores, kind="stable")[:K]]
    assert top == by_score  # the model's top k, not the candidates' order
    assert asked[:K] == top and set(asked) == set(top) | {configs.config_json(default)}  # top-k + default only
    ms = {c: replay.latency[c] for c in asked if c in replay.latency}
    assert configs.config_json(default) in ms  # the H200's default of this group is a recorded row
    best = min(ms, key=ms.get)
    assert configs.config_json(got) == best and ms[best] <= ms[configs.config_json(default)]
    assert tuner.last["best"]["ms"] == ms[best] and tuner.last["candidates"] == len(recorded)

    # stored where Helion's cache finds it: another tuner answers without timing anything
    again = htune.CostModelAutotuner(trained, timer=NoTimer(), gpu=GPU, helion_version="1.4.0")
    assert configs.config_json(again(*_bound("helion:matmul", problem, dtype)).autotune()) == best
    assert list(Path(local_cache.get_helion_cache_dir()).glob("*.best_config"))


def test_replay_never_returns_a_config_slower_than_the_default(rows, trained):
    """With the model's order reversed, its top-k is the slowest of the group: the default still wins."""
    group, problem, dtype = _matmul_group(rows)
    recorded = [json.loads(c) for c in group["config_json"].to_pylist()]
    replay = htune.HelionReplay(group)

    class Reversed(htune.CostModelAutotuner):
        def ranked(self, cm, bound, args):
            ranked, default = super().ranked(cm, bound, args)
            by_ms = sorted(ranked, key=lambda c: -replay.latency.get(configs.config_json(c), np.inf))
            return by_ms, default

    tuner = Reversed(trained, k=K, candidates=lambda b: recorded, timer=replay, gpu=GPU, helion_version="1.4.0")
    got = tuner(*_bound("helion:matmul", problem, dtype)).autotune()
    d = configs.config_json(configs.normalise(_bound("helion:matmul", problem, dtype)[0].config_spec.default_config()))
    assert replay.latency[configs.config_json(got)] <= replay.latency[d]
    assert tuner.last["default_ms"] == replay.latency[d]


# --- (c) the fallback ------------------------------------------------------------------------------------

class FakeSearch:
    """Stands for Helion's search (HELION_AUTOTUNER picks it): records the seeds it was given, times nothing."""

    seeds: list = []

    def __init__(self, kernel, args, **kwargs):
        self.kernel, self.args, self.settings, self.config_spec = kernel, args, kernel.settings, kernel.config_spec
        self.log, self.best_perf_so_far = AutotuningLogger(self.settings), 0.0

    @classmethod
    def get_kwargs_from_profile(cls, profile, settings):
        return {}

    def autotune(self, *, skip_cache=False):
        FakeSearch.seeds.append(list(self.settings.autotune_seed_configs or []))
        return self.config_spec.default_config()


@pytest.fixture
def fake_search(monkeypatch):
    monkeypatch.setitem(search_algorithms, "FakeSearch", FakeSearch)
    monkeypatch.setenv("HELION_AUTOTUNER", "FakeSearch")
    FakeSearch.seeds = []
    return FakeSearch


def _fallback(tuner, rows, cm_dir, kernel="helion:matmul", problem=None, dtype="float16"):
    if problem is None:
        _, problem, dtype = _matmul_group(rows)
    bound, args = _bound(kernel, problem, dtype)
    with pytest.warns(htune.HelionFallbackWarning) as w:
        tuner(bound, args).autotune()
    with warnings.catch_warnings():
        warnings.simplefilter("error", htune.HelionFallbackWarning)  # said once
        tuner(*_bound(kernel, problem, dtype)).autotune(skip_cache=True)
    ranked, _ = tuner.ranked(helion_model.load(cm_dir), bound, args)
    want = [configs.config_json(c) for c in ranked[: tuner.n_seeds]]
    return str(w[0].message), want


def test_version_mismatch_hands_over_to_helions_search_with_the_models_seeds(rows, trained, fake_search):
    recorded = [json.loads(c) for c in _matmul_group(rows)[0]["config_json"].to_pylist()]
    tuner = htune.CostModelAutotuner(trained, candidates=lambda b: recorded, gpu=GPU, helion_version="0.9.9",
                                     timer=NoTimer())
    message, want = _fallback(tuner, rows, trained)
    assert "Helion 0.9.9" in message and "1.4.0" in message
    assert len(fake_search.seeds) == 2  # Helion's search was asked, each time
    assert [configs.config_json(c) for c in fake_search.seeds[0]] == want and len(want) == tuner.n_seeds


def test_unknown_gpu_hands_over_with_another_gpus_model(rows, trained, fake_search, monkeypatch):
    monkeypatch.setattr(model, "MODELS_DIR", Path(trained).parents[1])  # the only Helion model: the H200's
    recorded = [json.loads(c) for c in _matmul_group(rows)[0]["config_json"].to_pylist()]
    tuner = htune.CostModelAutotuner(candidates=lambda b: recorded, gpu="nvidia-b300", helion_version="1.4.0",
                                     timer=NoTimer())
    message, want = _fallback(tuner, rows, trained)
    assert "nvidia-b300" in message
    assert [configs.config_json(c) for c in fake_search.seeds[0]] == want


def test_a_kernel_unlike_the_data_hands_over(rows, fake_search, tmp_path):
    """SwiGLU tiles two dims with no reduction; a model fitted without the rows of every kernel so made (GeGLU's too,
    once collected) saw kernels that tile one with a reduction, or more dims."""
    structure = {k: (len(families.get(k).tiles(json.loads(p))), len(families.get(k).reductions(json.loads(p))))
                 for k, p in set(zip(rows["kernel"].to_pylist(), rows["problem_json"].to_pylist()))}
    alike = [k for k, s in structure.items() if s == (2, 0)]
    assert "helion:swiglu" in alike
    others = rows.filter(pc.invert(pc.is_in(rows["kernel"], pa.array(alike))))
    hw = dataset.hw_from_row(rows.slice(0, 1).to_pylist()[0]).as_dict()
    booster, meta = helion_model.train(others, GPU, hw, model.FAST, evaluate=False)
    unlike = model.save(tmp_path / "models" / GPU / "helion", booster, meta)
    tuner = htune.CostModelAutotuner(unlike, candidates=40, gpu=GPU, helion_version="1.4.0", timer=NoTimer())
    message, want = _fallback(tuner, rows, unlike, "helion:swiglu", {"M": 37, "N": 96})
    assert "swiglu: 2 tiled dims and 0 reductions" in message
    assert [configs.config_json(c) for c in fake_search.seeds[0]] == want and len(want) == tuner.n_seeds


def test_the_top_k_compiles_within_the_collectors_bound(monkeypatch):
    """Helion's compile-and-benchmark path times the top-k with its compile timeout capped at the collector's
    bound (Helion allows 60 s, and its population holds configs that compile for minutes); the setting is the
    kernel's own again afterwards, and a lower one is kept."""
    from helion.autotuner.finite_search import FiniteSearch

    from costmodel.benchmark import HELION_COMPILE_LIMIT_S
    from tuner.helion import HelionBenchmark

    seen = []

    def autotune(self, skip_cache=False):  # where Helion's search starts: its baseline, then the batch
        seen.append(self.settings.autotune_compile_timeout)
        raise RuntimeError("no GPU here")

    monkeypatch.setattr(FiniteSearch, "autotune", autotune)
    for allowed, capped in ((60, int(HELION_COMPILE_LIMIT_S)), (10, 10)):
        bound, args = _bound("helion:softmax", {"M": 8, "N": 64}, "float16", autotune_compile_timeout=allowed)
        candidates = families.candidates(bound, 2, seed=0)
        with pytest.raises(RuntimeError, match="no GPU"):
            HelionBenchmark().measure(bound, args, candidates)
        assert seen[-1] == capped and bound.settings.autotune_compile_timeout == allowed


# --- on the GPU ------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_autotuner_fn_on_the_gpu(trained, tmp_path):
    """A kernel call tunes through Helion's compile-and-benchmark path (the top-k and the default timed, the result
    correct and never slower than the default), and a second process answers from Helion's cache."""
    env = {**os.environ, "HELION_CACHE_DIR": str(tmp_path / "helion"), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def run(mode):
        r = subprocess.run([sys.executable, str(ROOT / "tests/helion_scripts/tune_gpu.py"), str(trained), "300", mode],
                           env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    first = run("tune")
    last = first["last"]
    assert first["rel_err"] <= first["tolerance"]
    assert last["candidates"] == 300 and len(last["timed"]) <= 5
    assert last["default_ms"] is not None and last["best"]["ms"] <= last["default_ms"]
    cached = json.loads(next((tmp_path / "helion").glob("*.best_config")).read_text())["config"]
    assert configs.config_json(json.loads(cached)) == configs.config_json(last["best"]["config"])
    second = run("cached")  # NoTimer: any timing fails the call
    assert second["last"] == {} and second["rel_err"] <= second["tolerance"]
