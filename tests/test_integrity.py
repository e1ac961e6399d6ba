"""What gets into the dataset and its manifests is what was measured (issue 14, items 1, 3 and 8): interpreter
timings never reach a GPU's partition or its model, a manifest counts what its run published, and a plan sweeps
the whole space of no more groups than asked."""

import collections
import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from collect.plan import GroupPlan, make_plan
from collect.runner import run_plan
from costmodel import dataset, model, space
from costmodel.benchmark import IsolatedBenchmarker, ReplayBenchmarker
from costmodel.errors import CostModelError
from costmodel.hardware import INTERPRETER, KNOWN
from costmodel.kernels import get_family

H200 = KNOWN["nvidia-h200"]
FAULTY = "faulty_family:Faulty"


# --- 1: interpreter timings stay out of a GPU's partition and model ------------------------------------------

def test_interpreter_collect_writes_its_own_partition_that_no_gpu_trains_on(cli, tmp_path, data_root):
    out = tmp_path / "data"
    code, stdout, err = cli("collect", "--kernel", FAULTY, "--groups", "1", "--configs-per-group", "2", "--seed", "1",
                            "--timeout", "2", "--out", str(out), "--json")
    assert code == 0, err
    s = json.loads(stdout)
    assert s["gpu"] == "interpreter" and s["hw_name"] == INTERPRETER.name
    assert [p.name for p in out.glob("gpu=*")] == ["gpu=interpreter"]
    t = dataset.read(out)
    assert set(t["gpu"].to_pylist()) == {"interpreter"} and set(t["hw_name"].to_pylist()) == {INTERPRETER.name}
    # item 8: 2 configs asked, 2 measured; the default share (0.1) of one group rounds down to no sweep
    assert s["exhaustive_groups"] == 0 and s["exhaustive_configs"] == 0 and s["measured"] == t.num_rows == 2

    for gpu in ([], ["--gpu", "interpreter"]):
        code, _, err = cli("train", "--data", str(out), *gpu, "--out", str(tmp_path / "m"), "--no-track",
                           "--no-extra-splits")
        assert code == 2 and "TRITON_INTERPRET=1" in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "m").exists()

    # interpreter rows written into a GPU's partition (not by the collector, which refuses) still stay out
    mixed = tmp_path / "mixed"
    real = next((data_root / "gpu=nvidia-h200" / "kernel=softmax").glob("part-*.parquet"))
    for src, kernel in ((real, "softmax"), (next(out.glob("gpu=*/kernel=*/*.parquet")), "faulty")):
        (mixed / "gpu=nvidia-h200" / f"kernel={kernel}").mkdir(parents=True)
        shutil.copy(src, mixed / "gpu=nvidia-h200" / f"kernel={kernel}" / src.name)
    table, gpu = model.training_table(mixed)
    assert gpu == "nvidia-h200" and table.num_rows == pq.read_metadata(real).num_rows
    assert set(table["hw_name"].to_pylist()) == {"NVIDIA H200"}


def test_collectors_refuse_interpreter_timings_for_a_gpu(tmp_path):
    from collect import parallel

    g = GroupPlan(FAULTY, {"N": 20}, "float32", ({"BLOCK": 16, "FAULT": 0},), False)
    with IsolatedBenchmarker(H200, device="cpu") as bench:
        with pytest.raises(CostModelError, match="gpu=interpreter"):
            run_plan([g], tmp_path / "data", bench, H200, run_id="r1")
    with pytest.raises(CostModelError, match="gpu=interpreter"):
        parallel.run_parallel([g], tmp_path / "data", H200, [None], run_id="r2")
    assert not (tmp_path / "data").exists(), "nothing written"


# --- 3: manifests count what their run published ---------------------------------------------------------------

def _run_rows(root: Path) -> dict[str, list[tuple]]:
    """(group_id, status, shard name) of every row of every shard under ``root``, by run id, read raw."""
    rows = collections.defaultdict(list)
    for path in sorted(root.glob("gpu=*/kernel=*/part-*.parquet")):
        t = pq.read_table(path, columns=["run_id", "group_id", "status"])
        for run, gid, status in zip(*(t[c].to_pylist() for c in t.column_names)):
            rows[run].append((gid, status, path.name))
    return rows


def assert_manifest_tells_the_truth(root: Path, m: dict) -> None:
    rows = _run_rows(root)[m["run_id"]]
    where = m["run_id"]
    assert m["groups_measured"] == len({gid for gid, _, _ in rows}), where
    assert m["measured"] == len(rows) == sum(m["counts"].values()), where
    assert {k: v for k, v in m["counts"].items() if v} == dict(collections.Counter(s for _, s, _ in rows)), where
    assert sorted(Path(p).name for p in m["shards"]) == sorted({name for _, _, name in rows}), where
    if m["state"] == "complete":
        assert m["groups_measured"] + m.get("groups_done_before", 0) == m["groups"], where


def test_committed_manifests_count_what_their_shards_hold(data_root):
    manifests = sorted((data_root / "_manifests").glob("*.json"))
    if not manifests:
        pytest.skip(f"no manifests under {data_root}")
    for path in manifests:
        assert_manifest_tells_the_truth(data_root, json.loads(path.read_text()))


def test_a_run_ended_by_an_error_says_failed_and_counts_only_what_it_published(tmp_path, data_root):
    """Replayed H200 measurements; the second group holds a config never recorded, so the benchmarker raises
    mid-run (as a broken GPU or a full disk would)."""
    t = dataset.read(data_root, filter=(pc.field("kernel") == "matmul") & ~pc.field("exhaustive"))
    gids = sorted(set(t["group_id"].to_pylist()))[:2]
    plan = []
    for gid in gids:
        g = t.filter(pc.equal(t["group_id"], gid))
        problem, dtype = json.loads(g["problem_json"][0].as_py()), g["dtype"][0].as_py()
        configs = tuple(json.loads(c) for c in g["config_json"].to_pylist()[:3])
        plan.append(GroupPlan("matmul", problem, dtype, configs, False))
    bench, second = ReplayBenchmarker(t), plan[1]
    recorded = {dataset.canonical_json(c) for c in bench.recorded_configs("matmul", second.problem, second.dtype)}
    never = next(c for c in space.enumerate_valid(get_family("matmul"), second.problem, second.dtype, H200)
                 if dataset.canonical_json(c) not in recorded)
    plan[1] = GroupPlan("matmul", second.problem, second.dtype, (*second.configs, never), False)
    out = tmp_path / "data"
    with pytest.raises(KeyError):
        run_plan(plan, out, bench, H200, run_id="r1")
    m = json.loads((out / "_manifests" / "r1.json").read_text())
    assert m["state"] == "failed" and m["groups"] == 2 and m["groups_measured"] == 1 and m["measured"] == 3
    assert_manifest_tells_the_truth(out, m)


def test_a_group_the_pace_says_would_end_past_the_budget_is_not_started(tmp_path, data_root, monkeypatch):
    """Replayed H200 groups of 4, 40 and 4 configs on a clock that advances 0.5 s a config: after the first
    group (2 s) the 40-config group would end at 22 s, past the 10 s budget, and is skipped; the last one fits.
    Before, a group started whenever the budget was not yet spent, and ran on past it."""
    import collect.runner

    t = dataset.read(data_root, filter=(pc.field("kernel") == "matmul") & ~pc.field("exhaustive"))
    gids = sorted(set(t["group_id"].to_pylist()))[:3]
    plan = []
    for gid, n in zip(gids, (4, 40, 4)):
        g = t.filter(pc.equal(t["group_id"], gid))
        configs = tuple(json.loads(c) for c in g["config_json"].to_pylist()[:n])
        plan.append(GroupPlan("matmul", json.loads(g["problem_json"][0].as_py()), g["dtype"][0].as_py(), configs,
                              False))
    clock = [1000.0]
    bench = ReplayBenchmarker(t)
    replay = bench.measure

    def measure(family, problem, dtype, configs):
        clock[0] += 0.5 * len(configs)
        return replay(family, problem, dtype, configs)

    monkeypatch.setattr(bench, "measure", measure)
    monkeypatch.setattr(collect.runner.time, "time", lambda: clock[0])
    out = tmp_path / "data"
    m = run_plan(plan, out, bench, H200, run_id="r1", time_budget_s=10.0)
    assert m["state"] == "budget" and m["groups_measured"] == 2 and m["measured"] == 8
    measured = set(dataset.read(out)["group_id"].to_pylist())
    assert len(measured) == 2 and clock[0] == 1004.0
    assert_manifest_tells_the_truth(out, m)


def test_the_pace_expects_a_larger_problem_to_take_longer(tmp_path, data_root, monkeypatch):
    """Replayed H200 groups: a small problem, the largest, another small one, then 8 more of the largest's configs, on
    a clock that advances 0.5 s a config plus 1 s for the largest problem's work. After 10 s the run's rate says the
    last group takes 6.7 s and would end by the 20 s budget; it takes 12 s (session 17: a 16384x8192x8192 sweep,
    started because of that rate, was killed with its work). Fitted on work, the pace leaves it out."""
    import collect.runner

    t = dataset.read(data_root, filter=(pc.field("kernel") == "matmul") & ~pc.field("exhaustive"))
    by_gid = {}
    for gid, p, dtype, c in zip(*(t[k].to_pylist() for k in ("group_id", "problem_json", "dtype", "config_json"))):
        by_gid.setdefault(gid, (json.loads(p), dtype, []))[2].append(json.loads(c))
    work = {gid: collect.runner.group_work(GroupPlan("matmul", p, d, (), False), H200) for gid, (p, d, _) in
            by_gid.items()}
    order = sorted(work, key=work.get)
    small, small2, large = order[0], order[1], order[-1]
    plan = [GroupPlan("matmul", by_gid[g][0], by_gid[g][1], tuple(by_gid[g][2][:n]), False)
            for g, n in ((small, 4), (large, 4), (small2, 4))]
    plan.append(GroupPlan("matmul", plan[1].problem, plan[1].dtype, tuple(by_gid[large][2][4:12]), False))
    clock = [1000.0]
    bench = ReplayBenchmarker(t)
    replay = bench.measure

    def measure(family, problem, dtype, configs):
        w = collect.runner.group_work(GroupPlan(family, problem, dtype, (), False), H200)
        clock[0] += len(configs) * (0.5 + w / work[large])
        return replay(family, problem, dtype, configs)

    monkeypatch.setattr(bench, "measure", measure)
    monkeypatch.setattr(collect.runner.time, "time", lambda: clock[0])
    m = run_plan(plan, tmp_path / "data", bench, H200, run_id="r1", time_budget_s=20.0)
    assert m["state"] == "budget" and m["groups_measured"] == 3 and m["measured"] == 12
    assert 1010.0 <= clock[0] < 1010.1  # the small problem's work adds a little


# --- 8: a plan sweeps no more groups than asked -----------------------------------------------------------------

def test_exhaustive_groups_are_the_share_rounded_down():
    one = make_plan(["matmul"], 1, 2, None, seed=0, hw=H200)  # default share 0.1
    assert len(one) == 1 and not one[0].exhaustive and len(one[0].configs) == 2
    for families, groups, share, sweeps in ((["matmul"], 9, 0.1, 0), (["matmul"], 10, 0.1, 1),
                                            (["softmax", "rmsnorm"], 10, 0.25, 2), (["softmax"], 4, 0, 0),
                                            (["softmax", "rmsnorm", "layernorm"], 30, 0.1, 3)):
        plan = make_plan(families, groups, 5, None, seed=0, hw=H200, exhaustive_share=share)
        assert sum(g.exhaustive for g in plan) == sweeps, (families, groups, share)
        assert all(len(g.configs) <= 5 for g in plan if not g.exhaustive)
    spread = make_plan(["softmax", "rmsnorm", "layernorm"], 30, 5, None, seed=0, hw=H200, exhaustive_share=0.1)
    assert {g.family for g in spread if g.exhaustive} == {"softmax", "rmsnorm", "layernorm"}
    with pytest.raises(CostModelError, match="from 0 to 1"):
        make_plan(["matmul"], 10, 5, None, seed=0, hw=H200, exhaustive_share=1.5)


def test_benchmark_problems_stay_out_of_data_plans_and_training(data_root, monkeypatch):
    """No committed row is of a problem a benchmark names (in any dtype); a plan never draws one, even when the
    family's generator offers it; training drops every dtype of a named problem's rows."""
    from costmodel import benchmarks

    t = dataset.read(data_root, ["kernel", "problem_json", "dtype"])
    rows = set(zip(t["kernel"].to_pylist(), t["problem_json"].to_pylist()))
    assert not rows & benchmarks.named_keys()
    assert len(benchmarks.named_keys()) == len(benchmarks.NAMED) == 39

    fam = get_family("matmul")
    named = [p for f, p, _ in benchmarks.NAMED if f == "matmul"]
    drawn = fam.problems
    monkeypatch.setattr(type(fam), "problems", lambda self, rng, n: named + drawn(rng, n))
    plan = make_plan(["matmul"], 12, 4, None, 0, KNOWN["nvidia-h200"], exhaustive_share=0)
    assert len(plan) == 12 and not any(benchmarks.is_named("matmul", g.problem) for g in plan)

    table, _ = model.training_table(data_root)
    kernel, problem = table["kernel"][0].as_py(), table["problem_json"][0].as_py()
    both = pc.and_(pc.equal(table["kernel"], kernel), pc.equal(table["problem_json"], problem))
    assert len(set(table.filter(both)["dtype"].to_pylist())) >= 1
    monkeypatch.setattr(benchmarks, "named_keys", lambda: frozenset({(kernel, problem)}))
    kept, _ = model.training_table(data_root)
    assert kept.num_rows == table.num_rows - pc.sum(both).as_py() > 0
    assert not pc.any(pc.and_(pc.equal(kept["kernel"], kernel), pc.equal(kept["problem_json"], problem))).as_py()


def test_the_triton_model_trains_on_triton_families_only(data_root):
    """data/ holds Helion rows (kernel "helion:<name>", features of their own) beside the Triton families': the
    Triton model's training table takes only the families costmodel/kernels registers, and reading it needs no
    Helion (whose import failing once stopped `train` on data with Helion rows)."""
    from costmodel.kernels import family_names

    every = dataset.read(data_root, ["kernel"])
    helion_rows = pc.sum(pc.starts_with(every["kernel"], "helion:")).as_py()
    if not helion_rows:
        pytest.skip("no Helion rows under the data root")
    table, _ = model.training_table(data_root)
    assert set(table["kernel"].to_pylist()) == set(family_names())
    assert table.num_rows > 0 and every.num_rows > table.num_rows


def test_every_whole_space_group_holds_its_whole_valid_space(data_root):
    """evaluate's headline figures count a group as whole-space when a sweep wrote any of its rows; a sweep cut short
    (a crash flushes what it measured) would then flatter them with a sample's best. Every whole-space group of
    today's kernels (the groups `collect --complete` would top up) holds every config of its valid space."""
    from collect.plan import complete_plan
    from costmodel.hardware import KNOWN
    from costmodel.kernels import family_names

    plan = complete_plan(str(data_root), family_names(), None, KNOWN["nvidia-h200"])
    t = dataset.read(data_root, ["kernel", "problem_json", "dtype", "config_json"])
    have = collections.defaultdict(set)
    for k, p, d, c in zip(*(t[n].to_pylist() for n in ("kernel", "problem_json", "dtype", "config_json"))):
        have[(k, p, d)].add(c)
    assert plan, "no whole-space groups under the data root"
    lacking = {(g.family, json.dumps(g.problem), g.dtype):
               sum(dataset.canonical_json(c) not in have[(g.family, dataset.canonical_json(g.problem), g.dtype)]
                   for c in g.configs) for g in plan}
    assert not {k: n for k, n in lacking.items() if n}
