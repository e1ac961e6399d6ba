"""Helion kernels as families, on a CPU: candidates from a real ConfigSpec, one canonical config JSON across Helion
versions, each kernel against its torch reference under HELION_INTERPRET=1, and the config features.

Skipped where helion does not import. The cross-version test also needs another Helion's site directory in
COSTMODEL_HELION_OTHER_SITE (e.g. ``pip install --target DIR helion==1.4.0 filecheck --no-deps``)."""

import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

helion = pytest.importorskip("helion")

from costmodel.helion import configs, families, features  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "helion_scripts"
# tiny problems, none a multiple of 16 where it can be avoided: the spec's block limits and the tails both show
TINY = {"matmul": {"M": 37, "N": 50, "K": 96}, "softmax": {"M": 37, "N": 96}, "layer_norm": {"M": 37, "N": 96},
        "rms_norm": {"M": 37, "N": 96}, "attention": {"B": 2, "H": 3, "S": 40, "D": 32, "CAUSAL": 1},
        "swiglu": {"M": 37, "N": 96}, "geglu": {"M": 37, "N": 96}, "cross_entropy": {"M": 37, "N": 200},
        "add_rms_norm": {"M": 37, "N": 96}}
N_CANDIDATES = 24


@pytest.fixture(scope="module")
def bound():
    return {name: families.get(name).bind(p, "float16")[0] for name, p in TINY.items()}


def _run(script: str, *args: str, site: str | None = None, **env) -> dict:
    helion_site = site or str(Path(helion.__file__).resolve().parents[1])
    e = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    e.update(env, PYTHONPATH=os.pathsep.join([str(ROOT), helion_site]))
    r = subprocess.run([sys.executable, str(SCRIPTS / script), *args], env=e, capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(TINY))
def test_candidates_come_from_the_spec(bound, name):
    spec = bound[name].config_spec
    counts = families.op_counts(spec)
    cands = families.candidates(bound[name], N_CANDIDATES, seed=3)
    assert cands[0] == configs.normalise(spec.default_config(), counts)  # Helion's default first
    as_json = [configs.config_json(c) for c in cands]
    assert len(cands) == N_CANDIDATES and len(set(as_json)) == N_CANDIDATES  # distinct
    assert [configs.config_json(c) for c in families.candidates(bound[name], N_CANDIDATES, seed=3)] == as_json
    assert [configs.config_json(c) for c in families.candidates(bound[name], N_CANDIDATES, seed=4)] != as_json
    state = random.getstate()
    families.candidates(bound[name], 4, seed=5)
    assert random.getstate() == state  # the caller's random stream is left as it was
    for c in cands:  # the spec accepts each as it is, and its own normalisation changes nothing canonical
        d = copy.deepcopy(c)
        spec.normalize(d)
        assert configs.normalise(d, counts) == c


def test_seed_configs_follow_the_default(bound):
    spec = bound["matmul"].config_spec
    seed = configs.normalise(spec.default_config())
    seed.update(block_sizes=[32, 64, 32], num_warps=8, num_stages=3)
    cands = families.candidates(bound["matmul"], 8, seed=0, seed_configs=(helion.Config(**seed),))
    assert cands[1] == configs.normalise(seed)


@pytest.mark.parametrize("name", sorted(TINY))
def test_family_extents_are_the_specs(bound, name):
    fam, spec = families.get(name), bound[name].config_spec
    assert [b.size_hint for b in spec.block_sizes] == fam.tiles(TINY[name])
    assert [r.size_hint for r in spec.reduction_loops] == fam.reductions(TINY[name])
    assert 1 <= fam.grid <= len(spec.block_sizes)
    shape = features.spec_shape(bound[name])  # what a kernel that is no family here is read by
    assert (shape["grid"], shape["memory_ops"]) == (fam.grid, [list(ops) for ops in fam.memory_ops])


def _ops(code: str) -> list[str]:
    """The generated kernel's memory ops in order: "load" or "store", "+" where through a block pointer."""
    import re

    return [("load" if "tl.load(" in ln else "store") + ("+" * ("block_ptr" in ln))
            for ln in code.splitlines() if re.search(r"\btl\.(load|store)\(", ln)]


@pytest.mark.parametrize("name", sorted(TINY))
def test_memory_ops_lead_the_indexing_list(bound, name):
    """``HelionFamily.memory_ops`` as the features read it: with block_ptr on one ``indexing`` entry at a time, the
    entries before the live loads' count change a load, the next ones (as many as the stores) a store, and the rest
    no code; reductions unrolled and rolled. (An indirect load, cross_entropy's gather, takes no block pointer:
    its entry changes nothing.)"""
    fam, b = families.get(name), bound[name]
    base = configs.as_dict(b.config_spec.default_config())
    n = len(base["indexing"])
    for rolled in (False, True):
        if rolled and not base.get("reduction_loops"):
            continue
        d = dict(base, indexing=["pointer"] * n)
        if d.get("reduction_loops"):
            d["reduction_loops"] = [16 if rolled else None] * len(d["reduction_loops"])
        ops = _ops(b.to_triton_code(helion.Config(**d)))
        loads, stores = fam.memory_ops[int(rolled)]
        assert ops == ["load"] * loads + ["store"] * stores, (name, rolled, ops)
        for i in range(n):
            one = _ops(b.to_triton_code(helion.Config(**dict(d, indexing=["pointer"] * i + ["block_ptr"]
                                                               + ["pointer"] * (n - i - 1)))))
            changed = {op for op, was in zip(one, ops) if op != was}
            want = {"load+"} if i < loads else {"store+"} if i < loads + stores else set()
            assert changed == want or (changed == set() and i < loads), (name, rolled, i, changed)


def test_normalise_is_stable_and_idempotent(bound):
    for name, b in bound.items():
        counts = families.op_counts(b.config_spec)
        for c in families.candidates(b, 8, seed=1):
            raw = helion.Config(**c)
            once = configs.config_json(raw, counts)
            assert configs.config_json(json.loads(once), counts) == once
            shuffled = dict(random.Random(0).sample(list(c.items()), len(c)))
            assert configs.config_json(shuffled, counts) == once


def test_normalise_maps_version_forms_to_one():
    base = {"block_sizes": [64], "num_warps": 4, "indexing": ["pointer"] * 3, "load_eviction_policies": ["last"] * 2,
            "reduction_loops": [None], "pid_type": "flat"}
    want = configs.config_json(base)
    # what 1.5.1 emits for a kernel with two reductions over one operand, what 1.4.0 emits without the key
    assert configs.config_json({**base, "reduction_fusion": False}) == want
    assert configs.config_json({**base, "host_tensor_descriptors": False, "cross_loop_pipeline": "barrier"}) == want
    assert configs.config_json({**base, "maxnreg": None}) == want
    # 1.5.1's one-for-all scalar, with the kernel's load count
    one = {**base, "load_eviction_policies": "last"}
    assert configs.config_json(one, {"load_eviction_policies": 2, "indexing": 3}) == want
    with pytest.raises(Exception, match="count is needed"):
        configs.normalise(one)
    alias = {k: v for k, v in base.items() if k != "block_sizes"} | {"block_size": 64}
    assert configs.config_json(alias) == want
    fused = configs.normalise({**base, "reduction_fusion": True})
    assert configs.later_keys(fused) == ["reduction_fusion"] and configs.later_keys(configs.normalise(base)) == []


def test_installed_helion_field_differences(bound):
    """The field differences measured between 1.4.0 and 1.5.1, as the installed Helion emits them."""
    raw = dict(bound["softmax"].config_spec.default_config().config)
    canonical = configs.normalise(raw, families.op_counts(bound["softmax"].config_spec))
    assert "reduction_fusion" not in canonical
    if configs_version() >= (1, 5):
        assert raw["reduction_fusion"] is False  # 1.5.1 emits it; 1.4.0 cannot take it (Config(**d) TypeError)
    else:
        assert "reduction_fusion" not in raw


def configs_version() -> tuple[int, int]:
    from costmodel.helion import helion_version

    return tuple(int(x) for x in helion_version().split(".")[:2])


@pytest.mark.slow
def test_other_helion_reads_the_same_configs(bound, tmp_path):
    other = os.environ.get("COSTMODEL_HELION_OTHER_SITE")
    if not other:
        pytest.skip("COSTMODEL_HELION_OTHER_SITE (another Helion's --target dir) not set")
    given = {}
    for name, b in bound.items():
        cands = families.candidates(b, 16, seed=2)
        given[name] = [c for c in cands if not configs.later_keys(c)]  # 1.5-only configs are not for 1.4
    path = tmp_path / "given.json"
    path.write_text(json.dumps(given))
    res = _run("version_check.py", json.dumps(TINY), str(path), site=other)
    from costmodel.helion import helion_version

    assert res["version"] != helion_version()
    for name, b in bound.items():
        r = res["kernels"][name]
        assert r["default"] == configs.config_json(b.config_spec.default_config(), families.op_counts(b.config_spec))
        assert r["given"] == [True] * len(given[name]), name
        raw_here = dict(b.config_spec.default_config().config)
        # the raw emitted defaults differ only in keys the canonical form drops
        diff = {k for k in set(raw_here) ^ set(r["raw_default"])} | {
            k for k in set(raw_here) & set(r["raw_default"]) if raw_here[k] != r["raw_default"][k]}
        assert diff <= set(configs.LATER_KEYS), (name, diff)


@pytest.mark.slow
def test_kernels_match_reference_under_interpreter():
    """Each kernel's default config and three random ones of its spec (other tiles, so other tails) against the
    family's float32 reference (every output of a kernel that returns several)."""
    res = _run("interpret_check.py", json.dumps(TINY), "3", HELION_INTERPRET="1")
    assert set(res) == {f"{n}/{d}/{i}" for n in TINY for d in ("float16", "bfloat16") for i in range(4)}
    for key, r in res.items():
        # a few roundings of the output, relative to its largest value (fp16: 11 mantissa bits, bf16: 8)
        tol = 4e-3 if "/float16/" in key else 2e-2
        assert r["shape_ok"] and r["err"] <= tol * r["scale"], (key, r)
    for name in TINY:  # the random configs tile otherwise than the default
        assert len({json.dumps(res[f"{name}/float16/{i}"]["block_sizes"]) for i in range(4)}) > 1, name


def _table(bound, n=6):
    kernels, problems, cfgs = [], [], []
    for name, b in bound.items():
        for c in families.candidates(b, n, seed=7):
            kernels.append(families.PREFIX + name)
            problems.append(TINY[name])
            cfgs.append(configs.config_json(c))
    return kernels, problems, cfgs


def _as_run(fam, problem: dict, c: dict) -> tuple[list, list]:
    """(tile extents, block sizes) of config ``c`` as its code runs them: a flattened loop over the grid's tiles is
    one block over the flattened extent, along the last dim where the loop order runs it last, else across."""
    ext, blocks = list(fam.tiles(problem)), list(c["block_sizes"])
    if c.get("flatten_loops") and all(c["flatten_loops"]) and fam.grid >= 2:
        order = c["loop_orders"][0]
        at = fam.grid - 1 if order[-1] == max(order) else 0
        for values in (ext, blocks):
            product = int(np.prod(values[: fam.grid]))
            values[: fam.grid] = [1] * fam.grid
            values[at] = product
    return ext, blocks


def test_features_finite_where_defined(bound):
    kernels, problems, cfgs = _table(bound)
    names, m = features.matrix(kernels, problems, cfgs)
    assert m.shape == (len(cfgs), len(names)) and len(set(names)) == len(names)
    assert not np.isinf(m).any()
    col = {n: m[:, i] for i, n in enumerate(names)}
    for i, (k, p, c) in enumerate(zip(kernels, problems, cfgs)):
        c = json.loads(c)
        fam = families.get(k)
        ext, blocks = _as_run(fam, p, c)
        for j in range(features.MAX_TILES):  # defined exactly for the kernel's tiled dims
            if j < len(ext):
                assert col[f"block_ratio_{j}"][i] == pytest.approx(blocks[j] / ext[j])
                assert col[f"log2_tiles_{j}"][i] == pytest.approx(np.log2(np.ceil(ext[j] / blocks[j])))
            else:
                assert np.isnan(col[f"log2_block_{j}"][i])
        assert col["log2_programs"][i] == pytest.approx(
            sum(np.log2(np.ceil(ext[j] / blocks[j])) for j in range(fam.grid)))
        assert col["log2_num_warps"][i] == np.log2(c["num_warps"])
        assert col[f"pid_{c['pid_type']}"][i] == 1 and sum(col[f"pid_{t}"][i] for t in features.PID_TYPES) == 1
        assert col["n_reductions"][i] == len(fam.reductions(p))
        for name in ("n_tiles", "log2_num_warps", "num_stages", "log2_programs", "indexing_pointer", "n_loads"):
            assert np.isfinite(col[name][i]), name


def test_a_flattened_loop_reads_as_one_block_over_the_flattened_extent():
    """Swiglu 5634x16752 (a recorded 1,000-config group): a flattened 32x32 tile is one 1,024-element block over
    the M x N elements, along the rows' contiguous dim in loop order [0, 1] (padding only the last block), across it
    in [1, 0]; unflattened, it is a 32x32 tile, and a 1x1024 tile pads each row's 16,752 to 17,408."""
    base = {"num_warps": 4, "num_stages": 1, "pid_type": "flat"}
    cfgs = [{**base, "block_sizes": [32, 32], "flatten_loops": [True], "loop_orders": [[0, 1]]},
            {**base, "block_sizes": [32, 32], "flatten_loops": [True], "loop_orders": [[1, 0]]},
            {**base, "block_sizes": [32, 32], "flatten_loops": [False], "loop_orders": [[0, 1]]},
            {**base, "block_sizes": [1, 1024], "flatten_loops": [False], "loop_orders": [[0, 1]]}]
    m, n = 5634, 16752
    names, x = features.matrix(["helion:swiglu"] * 4, [{"M": m, "N": n}] * 4, [json.dumps(c) for c in cfgs])
    col = {k: x[:, names.index(k)] for k in names}
    blocks = np.ceil(m * n / 1024)
    assert list(col["log2_block_0"]) == [0, 10, 5, 0] and list(col["log2_block_1"]) == [10, 0, 5, 10]
    assert col["log2_tiles_1"][0] == col["log2_tiles_0"][1] == pytest.approx(np.log2(blocks))
    assert col["log2_programs"][:2] == pytest.approx([np.log2(blocks)] * 2)
    assert col["log2_programs"][2] == pytest.approx(np.log2(np.ceil(m / 32)) + np.log2(np.ceil(n / 32)))
    assert col["tile_fill"][:2] == pytest.approx([m * n / (blocks * 1024)] * 2)
    assert col["tile_fill"][3] == pytest.approx(n / 17408) and col["tile_fill"][0] > col["tile_fill"][3]
    assert list(col["log2_tile_elems"]) == [10] * 4


def test_features_ignore_key_order(bound):
    kernels, problems, cfgs = _table(bound, 4)
    rng = random.Random(1)
    shuffled = [json.dumps(dict(rng.sample(list(json.loads(c).items()), len(json.loads(c))))) for c in cfgs]
    _, a = features.matrix(kernels, problems, cfgs)
    _, b = features.matrix(kernels, problems, shuffled)
    np.testing.assert_array_equal(a, b)


def test_physical_features(bound):
    """The share of tiles and reduction blocks that covers the problem, and the indexing of the memory ops that
    run, against the same facts worked out one row at a time."""
    kernels, problems, cfgs = _table(bound, 12)
    names, m = features.matrix(kernels, problems, cfgs)
    col = {n: m[:, i] for i, n in enumerate(names)}
    rolled_seen = set()
    for i, (k, p, c) in enumerate(zip(kernels, problems, cfgs)):
        c, fam = json.loads(c), families.get(k)
        (ext, blocks), red = _as_run(fam, p, c), fam.reductions(p)
        rblocks = [r if r is not None else 2 ** int(np.ceil(np.log2(e)))
                   for r, e in zip(c.get("reduction_loops") or [], red)]
        assert col["tile_fill"][i] == pytest.approx(np.prod([e / (np.ceil(e / b) * b) for e, b in zip(ext, blocks)]))
        if red:
            assert col["reduction_fill"][i] == pytest.approx(red[0] / (np.ceil(red[0] / rblocks[0]) * rblocks[0]))
        else:
            assert np.isnan(col["reduction_fill"][i])
        rolled = any(r is not None for r in c.get("reduction_loops") or [])
        rolled_seen.add((k, rolled))
        loads, stores = fam.memory_ops[int(rolled)]
        assert (col["live_loads"][i], col["live_stores"][i]) == (loads, stores)
        for x in features.INDEXING:  # the stores follow the loads that run; entries past them change no code
            assert col[f"indexing_store_{x}"][i] == pytest.approx(
                np.mean([v == x for v in c["indexing"][loads:loads + stores]]))
            assert col[f"indexing_load_{x}"][i] == pytest.approx(np.mean([v == x for v in c["indexing"][:loads]]))
        for x in features.EVICTION:
            assert col[f"evict_live_{x}"][i] == pytest.approx(
                np.mean([v == x for v in c["load_eviction_policies"][:loads]]))
    assert {("helion:layer_norm", True), ("helion:layer_norm", False), ("helion:add_rms_norm", True)} <= rolled_seen
