"""Typed key spaces (``fastci.core.processor.KeySpace``): each kind of key decodes as its own record,
and state stored before a processor declared its spaces (one union record) still reads."""

from __future__ import annotations

import orjson
import pytest
from factories import result

from fastci.core.events import Record
from fastci.core.processor import KeySpace, MarksOnly, compound_key, from_union
from fastci.planning.processor import CATALOG, TESTS, WORKLOADS, CatalogBucket, TestPlanProcessor, TestRecord
from fastci.runtime.checkpoint import Checkpoint
from fastci.runtime.driver import Driver, decode_entry
from fastci.views.refresh import refresh_embedded
from fastci.views.store import Views

REPO = "example/repo"


class Held(Record):
    count: int = 0


class Named(Record):
    name: str = ""


def test_a_key_decodes_as_the_record_of_its_kind():
    assert TestPlanProcessor.record_for(TESTS.key(REPO, "t.py::a")) is TestRecord
    assert TestPlanProcessor.record_for(CATALOG.key(REPO, "7")) is CatalogBucket
    assert TestPlanProcessor.record_for(REPO) is MarksOnly  # the partition key: marks, no state
    with pytest.raises(KeyError, match="no declared key space"):
        TestPlanProcessor.record_for(compound_key(REPO, "nonsense", "x"))


def test_a_key_spaces_key_is_owner_kind_and_parts():
    space = KeySpace("held", Held, ("test_id",))
    assert space.key("o", "t") == compound_key("o", "held", "t")
    assert KeySpace("", Held).key("o") == "o"


@pytest.mark.parametrize(
    ("record", "stored", "read"),
    [
        (Held, {"held": {"count": 3}, "other": None}, {"count": 3}),  # a kind's record inside a union
        (Held, {"count": 3, "name": None, "other": None}, {"count": 3}),  # a flat union's fields
        (Held, {"count": 3, "others": [], "more": {}}, {"count": 3}),  # other kinds' fields empty
        (Named, {"was_called": "x", "other": None}, {"name": "x"}),  # a kind's one field, under another name
        (Held, {"count": 3}, {"count": 3}),  # already its own shape
    ],
)
def test_state_stored_as_a_union_reads_as_its_kinds_record(record, stored, read):
    assert from_union(record, stored) == read


def test_a_state_that_is_no_union_is_left_for_validation_to_refuse():
    stored = {"count": "three", "name": "x"}
    assert from_union(Held, stored) == stored
    with pytest.raises(ValueError, match="count"):
        decode_entry(Held, orjson.dumps({"state": stored, "seen": []}))


def test_the_planners_state_from_before_its_key_spaces_is_read_and_rewritten_in_its_kinds_shape():
    # As test-planner stored it with one record for every kind: PlanState(record=..., workload=None, tests=None).
    test_id = "tests/test_a.py::test_x"
    record = {"test_id": test_id, "runs": {"r0": ["passed", 2.0]}, "traced": [], "chips": 0}
    union = {"record": record, "workload": None, "tests": None}
    key = TESTS.key(REPO, test_id)
    store = {key: orjson.dumps({"state": union, "seen": [], "marks": {}})}
    driver = Driver(TestPlanProcessor(), store)
    held = driver.get(key)
    assert isinstance(held, TestRecord) and held.runs == {"r0": ("passed", 2.0)}
    driver.handle(result(test_id, "r1", repo=REPO, duration_s=4.0))
    writes = driver.drain_writes()
    rewritten = orjson.loads(writes[key])["state"]
    assert set(rewritten) == set(TestRecord.model_fields) and set(rewritten["runs"]) == {"r0", "r1"}
    assert WORKLOADS.key(REPO, test_id) not in writes


def test_views_load_state_stored_as_a_union_into_its_kinds_table(tmp_path):
    test_id = "tests/test_a.py::test_x"
    union = {"record": {"test_id": test_id, "runs": {"r0": ["passed", 2.0]}, "traced": [], "chips": 0}}
    bucket = {"record": None, "workload": None, "tests": {"abcd": test_id}}
    checkpoint = Checkpoint(tmp_path / "state.sqlite")
    writes = {
        TESTS.key(REPO, test_id): orjson.dumps({"state": {**union, "workload": None, "tests": None}, "seen": []}),
        CATALOG.key(REPO, "3"): orjson.dumps({"state": bucket, "seen": []}),
    }
    checkpoint.commit(TestPlanProcessor.name, writes, {})
    checkpoint.close()
    views = Views(tmp_path / "views.duckdb")
    try:
        refresh_embedded(tmp_path, views)
        assert views.query("SELECT test_id, chips FROM test_planner_test")[1] == [(test_id, 0)]
        [(tests,)] = views.query("SELECT tests FROM test_planner_catalog")[1]
        assert orjson.loads(tests) == {"abcd": test_id}
    finally:
        views.close()
