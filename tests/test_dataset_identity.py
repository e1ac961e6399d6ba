"""A group's identity and a pair's one measurement: the kernel hash hashes what compiles (not the module text),
rows recorded under an older hash of today's kernel go on in their group, and each (group, config) pair reads
once, however many times it was measured."""

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from collect.plan import GroupPlan
from collect.runner import plan_work, run_plan
from costmodel import dataset, model, space
from costmodel.benchmark import IsolatedBenchmarker, Measurement
from costmodel.hardware import KNOWN
from costmodel.kernels import family_names, get_family
from tuner.tune import TuneResult, record

HW = KNOWN["nvidia-h200"]
MATMUL = Path(__file__).resolve().parents[1] / "costmodel" / "kernels" / "matmul.py"


def _raw(root) -> pa.Table:
    """Every row on disk, read by pyarrow alone (no costmodel rule applied)."""
    return ds.dataset(root, format="parquet", partitioning="hive").to_table(
        columns=["group_id", "config_json", "ts", "run_id"])


def _pairs(t) -> list[tuple[str, str]]:
    return list(zip(t["group_id"].to_pylist(), t["config_json"].to_pylist()))


# --- one measurement per pair ---------------------------------------------------------------------------

def test_committed_data_reads_each_pair_once_its_first_measurement_or_its_whole_runs(data_root):
    raw = _raw(data_root)
    t = dataset.read(data_root, ["group_id", "config_json", "ts", "run_id"])
    pairs = _pairs(t)
    assert len(pairs) == len(set(pairs)) == len(set(_pairs(raw))), "each (group, config) pair once"
    assert set(t["group_id"].to_pylist()) == set(raw["group_id"].to_pylist()), "no group lost"
    every = dataset.read(data_root, ["group_id", "config_json", "ts", "run_id"], every_measurement=True)
    assert every.num_rows == raw.num_rows, "every measurement stays on disk and readable"
    # each pair's first measurement, or in a group one run measured whole, the earliest such run's
    first: dict = {}  # config_json as the reader speaks it (knobs added later filled in)
    configs, runs = collections.defaultdict(set), collections.defaultdict(set)
    run_start: dict = {}
    rows = list(zip(_pairs(every), every["ts"].to_pylist(), every["run_id"].to_pylist()))
    for (group, config), ts, run in rows:
        first[(group, config)] = min(first.get((group, config), (ts, run)), (ts, run))
        configs[group].add(config)
        runs[(group, run)].add(config)
        run_start[(group, run)] = min(run_start.get((group, run), ts), ts)
    whole = {}
    for (group, run), cs in runs.items():
        if cs == configs[group]:
            whole[group] = min(whole.get(group, (run_start[(group, run)], run)), (run_start[(group, run)], run))
    in_run: dict = {}
    for (group, config), ts, run in rows:
        if group in whole and whole[group][1] == run:
            in_run[(group, config)] = min(in_run.get((group, config), (ts, run)), (ts, run))
    assert [in_run.get(key, first[key]) for key in pairs] == list(zip(t["ts"].to_pylist(), t["run_id"].to_pylist()))
    # pairs move only in groups whose first measurements mix runs (a sample, then a sweep of the rest)
    first_runs = collections.defaultdict(set)
    for (group, config) in pairs:
        first_runs[group].add(first[(group, config)][1])
    moved = {group for key in pairs for group in [key[0]] if in_run.get(key, first[key]) != first[key]}
    assert moved and all(len(first_runs[group]) > 1 for group in moved), "only mixed groups move"
    # every pair trains one kind's model: the Triton model's, or the Helion model's (helion:<name> kernels)
    tables = [model.training_table(data_root, None, model.feature_set(kind))[0] for kind in ("triton", "helion")]
    assert sum(t.num_rows for t in tables) == len(set(_pairs(raw)))
    assert sum(len(pc.unique(t["group_id"])) for t in tables) == len(pc.unique(raw["group_id"])), \
        "training sees every group"


def test_collecting_twice_into_one_dir_measures_each_pair_once(tmp_path, cli):
    args = ["collect", "--kernel", "softmax", "--groups", "1", "--configs-per-group", "2", "--exhaustive-share", "0",
            "--where", "M<=8", "--where", "N<=4096", "--out", str(tmp_path), "--json"]
    code, out, _ = cli(*args)
    assert code == 0 and json.loads(out)["measured"] == 2
    code, out, err = cli(*args)
    assert code == 0 and json.loads(out)["measured"] == 0 and "skipped 2" in err and "--remeasure" in err
    raw = _raw(tmp_path)
    assert raw.num_rows == 2 and len(set(_pairs(raw))) == 2, "collected twice"


def test_a_measurement_taken_again_stays_on_disk_and_the_first_reads(tmp_path):
    """What --remeasure (resume=False) does: both rows are kept, the reader takes the first."""
    g = GroupPlan("softmax", {"M": 3, "N": 96}, "float16",
                  tuple(space.sample(get_family("softmax"), {"M": 3, "N": 96}, "float16", HW, 2,
                                     __import__("numpy").random.default_rng(0))), False)
    from costmodel.hardware import INTERPRETER  # interpreter timings are recorded as gpu=interpreter only

    with IsolatedBenchmarker(INTERPRETER, device="cpu", eager=False) as bench:  # what bench_tune.py's sweeps run
        run_plan([g], tmp_path, bench, INTERPRETER, run_id="a")
        run_plan([g], tmp_path, bench, INTERPRETER, run_id="b")
    assert _raw(tmp_path).num_rows == 4
    t = dataset.read(tmp_path, ["run_id", "config_json"])
    assert t.num_rows == 2 and set(t["run_id"].to_pylist()) == {"a"}


def test_a_group_one_run_measured_whole_reads_that_runs_times(tmp_path):
    """A group sampled in one call and measured whole in a later one (`collect --complete --remeasure`) reads the
    whole run's times for every config, the sampled pair included: a group's order then comes from one call. A
    group no run measured whole keeps each pair's first measurement."""
    fam, problem = get_family("softmax"), {"M": 3, "N": 96}
    configs = tuple(space.sample(fam, problem, "float16", HW, 3, __import__("numpy").random.default_rng(0)))
    whole, part, rest = (GroupPlan("softmax", problem, "float16", c, False) for c in (configs, configs[:1], configs[1:]))
    from costmodel.hardware import INTERPRETER

    with IsolatedBenchmarker(INTERPRETER, device="cpu") as bench:
        run_plan([part], tmp_path / "mixed", bench, INTERPRETER, run_id="a")
        run_plan([rest], tmp_path / "mixed", bench, INTERPRETER, run_id="b")
        run_plan([part], tmp_path / "remeasured", bench, INTERPRETER, run_id="c")
        run_plan([whole], tmp_path / "remeasured", bench, INTERPRETER, run_id="d", resume=False)
    mixed = dataset.read(tmp_path / "mixed", ["run_id", "config_json"])
    assert sorted(mixed["run_id"].to_pylist()) == ["a", "b", "b"]
    remeasured = dataset.read(tmp_path / "remeasured", ["run_id", "config_json"])
    assert _raw(tmp_path / "remeasured").num_rows == 4
    assert remeasured["run_id"].to_pylist() == ["d"] * 3


# --- the kernel hash --------------------------------------------------------------------------------------

def _family_from(tmp_path, name: str, text: str):
    (tmp_path / f"{name}.py").write_text(text)
    return get_family(f"{name}:Matmul")


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_kernel_hash_ignores_docstrings_comments_and_layout_not_kernel_edits(on_path):
    src = MATMUL.read_text()
    today = get_family("matmul")
    same = _family_from(on_path, "mm_same", src)
    assert same.kernel_hash == today.kernel_hash, "the module's name or place is no part of the kernel"

    body = "    num_pid_in_group = GROUP_M * num_pid_n\n"
    assert body in src
    edited = ('"""A new module docstring."""\n\n\n' + src.split('"""', 2)[2]).replace(
        body, '    """A new docstring."""\n    # a comment\n\n' + body)
    edited = edited.replace("Knob(\"TMA\", (0, 1)),", "Knob(\"TMA\", (0, 1)),  # a comment")
    docs = _family_from(on_path, "mm_docs", edited)
    assert docs.source_hash != today.source_hash, "the edit did change the module text"
    assert docs.kernel_hash == today.kernel_hash, "a docstring, comment or blank-line edit made a new kernel"

    assert "first_pid_m = group_id * GROUP_M" in src
    kernel = _family_from(on_path, "mm_kernel", src.replace("first_pid_m = group_id * GROUP_M",
                                                            "first_pid_m = GROUP_M * group_id"))
    assert 'Knob("GROUP_M", (1, 8)' in src
    knob = _family_from(on_path, "mm_knob", src.replace('Knob("GROUP_M", (1, 8)', 'Knob("GROUP_M", (1, 4, 8)'))
    assert len({today.kernel_hash, kernel.kernel_hash, knob.kernel_hash}) == 3, "a kernel or knob edit kept the hash"
    assert kernel.group_hashes[0] == kernel.kernel_hash and today.kernel_hash not in kernel.group_hashes
    assert not set(today.recorded_as[today.kernel_hash]) & set(kernel.group_hashes), \
        "module hashes of the old kernel must not alias an edited one"


def test_kernel_hash_is_the_same_compiled_and_interpreted():
    assert os.environ.get("TRITON_INTERPRET") == "1"
    code = ("import json; from costmodel.kernels import family_names, get_family; "
            "print(json.dumps({f: get_family(f).kernel_hash for f in family_names()}))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(MATMUL.parents[2])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {f: get_family(f).kernel_hash for f in family_names()}


# --- rows recorded under an older hash of today's kernel ---------------------------------------------------

def _legacy_group(data_root, family: str = "matmul"):
    """The smallest committed group of ``family`` recorded under a module-text hash of today's kernel that is not
    the current text's (so only the family's ``recorded_as`` makes it today's), with a valid config it lacks."""
    fam = get_family(family)
    legacy = [h for h in fam.group_hashes[1:] if h != fam.source_hash]
    t = dataset.read(data_root, ["group_id", "source_hash", "problem_json", "dtype", "config_json", "status",
                                 "latency_ms"],
                     (ds.field("kernel") == family) & ds.field("source_hash").isin(legacy))
    for c in sorted(pc.value_counts(t["group_id"]).to_pylist(), key=lambda c: (c["counts"], c["values"])):
        rows = t.filter(pc.equal(t["group_id"], c["values"])).sort_by("config_json")
        problem, dtype = json.loads(rows["problem_json"][0].as_py()), rows["dtype"][0].as_py()
        recorded = [json.loads(j) for j in rows["config_json"].to_pylist()]
        new = [cfg for cfg in space.enumerate_valid(fam, problem, dtype, HW) if cfg not in recorded]
        if new:
            return rows, problem, dtype, recorded, new[0]
    pytest.skip(f"no sampled {family} group under an older hash of today's kernel in the data")


@pytest.mark.parametrize("family", family_names())
def test_a_group_recorded_under_an_older_hash_goes_on_under_its_id(data_root, family):
    rows, problem, dtype, recorded, new = _legacy_group(data_root, family)
    gid, khash = rows["group_id"][0].as_py(), rows["source_hash"][0].as_py()
    g = GroupPlan(family, problem, dtype, (*recorded[:3], new), False)
    (item,) = plan_work([g], HW, lambda gids: dataset.measured_pairs(data_root, gids))
    assert (item.gid, item.kernel_hash, item.todo) == (gid, khash, [new])
    (fresh,) = plan_work([g], HW)  # nothing read: a new group under today's kernel hash
    assert fresh.kernel_hash == get_family(family).kernel_hash and fresh.gid != gid
    assert fresh.todo == list(g.configs)


def test_a_tune_record_joins_the_group_recorded_under_an_older_hash(data_root, tmp_path):
    rows = _legacy_group(data_root)[0]
    gid = rows["group_id"][0].as_py()
    full = dataset.read(data_root, filter=ds.field("group_id") == gid)
    dataset.write_shard(tmp_path, HW.gpu, "matmul", "old",
                        full.slice(1).drop_columns(list(dataset.PARTITIONS)).to_pylist())
    held_back, present = full.slice(0, 1).to_pylist()[0], full.slice(1, 1).to_pylist()[0]
    ms = [Measurement(json.loads(r["config_json"]), r["status"], latency_ms=r["latency_ms"]) for r in (held_back, present)]
    res = TuneResult(gpu=HW.gpu, kernel="matmul", problem=json.loads(held_back["problem_json"]),
                     dtype=held_back["dtype"], candidates=2, benchmarked=2, best={"config": None}, default_latency_ms=None,
                     wall_s=0.0, compile_s=0.0, measurements=ms)
    assert record(res, tmp_path, HW, "tune") == 1, "the pair already in the group was recorded again"
    t = dataset.read(tmp_path, ["group_id", "source_hash", "run_id"])
    assert set(t["group_id"].to_pylist()) == {gid} and t.num_rows == full.num_rows
    assert set(t["source_hash"].to_pylist()) == {rows["source_hash"][0].as_py()}


def test_twins_share_a_key_only_where_they_differ_in_that_knob_alone():
    """``dataset.twin_key`` pairs a config with its twin (knob_value, split_rounds): the same key whatever the knob's
    value and the keys' order, another where a second knob differs too."""
    config = {"BLOCK_M": 128, "TMA": 2, "num_stages": 3}
    twin = {"num_stages": 3, "TMA": 0, "BLOCK_M": 128}
    assert dataset.twin_key(config, "TMA") == dataset.twin_key(twin, "TMA")
    assert dataset.twin_key(config, "TMA") != dataset.twin_key({**twin, "num_stages": 4}, "TMA")
    assert dataset.twin_key(config, "num_stages") != dataset.twin_key(twin, "num_stages")
