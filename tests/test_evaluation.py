"""The splits every claim about a model is measured on, checked on the committed H200 data (data/, or
COSTMODEL_TEST_DATA): no shape on both sides of the held-out split, and the kind split holding out exactly its
kind. The figures evaluate reports over them are checked in test_model.py (they need a trained model)."""

from __future__ import annotations

import collections
import json

import pytest

from costmodel import evaluation, model
from costmodel.errors import CostModelError


@pytest.fixture(scope="module")
def groups(data_root) -> tuple[object, list[dict]]:
    """(training table, one dict per group: group_id, kernel, problem_json, dtype, source_hash, exhaustive)."""
    try:
        table, _ = model.training_table(data_root)
    except CostModelError as e:
        pytest.skip(f"no measurements under {data_root} ({e})")
    cols = ["group_id", "kernel", "problem_json", "dtype", "source_hash", "exhaustive"]
    return table, table.select(cols).take(model.group_bounds(table)[:-1]).to_pylist()


def test_heldout_split_holds_out_a_shape_in_every_dtype_and_kernel_hash(groups):
    """Today's data holds the same shape in both dtypes and under older kernel hashes; a split by group id put
    34 held-out groups beside a training twin."""
    table, info = groups
    split = evaluation.split_groups(table, "heldout")[0]
    side = {g: "test" for g in split.test} | {g: "train" for g in split.train}
    by_shape = collections.defaultdict(list)
    for g in info:
        by_shape[(g["kernel"], g["problem_json"])].append(g)
    straddling = [s for s, gs in by_shape.items() if len({side[g["group_id"]] for g in gs}) > 1]
    assert straddling == []
    # the data has twins of both kinds, and some are held out: the check above had something to catch
    held = [gs for gs in by_shape.values() if side[gs[0]["group_id"]] == "test"]
    assert any(len({g["dtype"] for g in gs}) > 1 for gs in held)
    assert any(len({g["source_hash"] for g in gs}) > len({g["dtype"] for g in gs}) for gs in held)
    # shapes with a group measured over the whole space are preferred: most of them are held out
    exhaustive = [gs for gs in by_shape.values() if any(g["exhaustive"] for g in gs)]
    held_exhaustive = sum(side[gs[0]["group_id"]] == "test" for gs in exhaustive)
    assert held_exhaustive > len(exhaustive) / 2 > 0
    assert len(split.test) < len(split.train)


def _is_kind(kind: str, kernel: str, problem: dict) -> bool:
    if kernel != "matmul":
        return False
    if kind == "unaligned":
        return any(problem[d] % 16 for d in ("M", "N", "K"))
    return problem["M"] <= 64


@pytest.mark.parametrize("kind", ["unaligned", "skinny"])
def test_kind_split_holds_out_exactly_the_problems_of_its_kind(groups, kind):
    table, info = groups
    (split,) = evaluation.split_groups(table, "kind", kind=kind)
    expected = {g["group_id"] for g in info if _is_kind(kind, g["kernel"], json.loads(g["problem_json"]))}
    assert 0 < len(expected) < len(info)
    assert set(split.test) == expected
    assert set(split.train) == {g["group_id"] for g in info} - expected
    assert split.name == f"kind:{kind}" and split.rule["kind"] == kind


def test_kind_split_refuses_an_unknown_kind(groups):
    table, _ = groups
    with pytest.raises(CostModelError, match="unknown kind 'square'"):
        evaluation.split_groups(table, "kind", kind="square")


def test_kind_without_the_kind_split_is_refused(cli, tmp_path):
    code, stdout, stderr = cli("evaluate", "--data", str(tmp_path), "--kind", "skinny", "--json")
    assert code == 2 and stdout == "" and stderr == "error: --kind skinny goes with --split kind, not --split heldout\n"


def test_cli_kinds_are_the_registry():
    from costmodel.cli import evaluate

    (kind,) = [p for p in evaluate.params if p.name == "kind"]
    assert list(kind.type.choices) == list(evaluation.KINDS)



def test_a_group_probed_then_swept_counts_as_measured_over_the_whole_space(data_root):
    """A group whose first rows came from a sampled probe and the rest from a whole-space sweep (collect --active)
    is a whole-space group, whichever of its rows sorts first."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table, _ = model.training_table(data_root)
    info = evaluation.group_info(table)
    gid = info.filter(info["exhaustive"])["group_id"][0].as_py()
    rows = table.filter(pc.equal(table["group_id"], gid))
    probed = np.arange(rows.num_rows) < rows.num_rows // 2  # the first half as a probe recorded them
    mixed = rows.set_column(rows.column_names.index("exhaustive"), "exhaustive", pa.array(~probed))
    assert not mixed["exhaustive"][0].as_py()
    assert evaluation.group_info(mixed)["exhaustive"].to_pylist() == [True]
    never = rows.set_column(rows.column_names.index("exhaustive"), "exhaustive", pa.array(np.zeros(rows.num_rows, bool)))
    assert evaluation.group_info(never)["exhaustive"].to_pylist() == [False]
