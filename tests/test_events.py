"""The event contract: stable ids, strict validation, errors that name the field."""

from __future__ import annotations

import orjson
import pytest
from factories import result, result_doc

from fastci.core.codec import MAX_EVENT_BYTES, InvalidEvent, encode
from fastci.core.events import derive_id
from fastci.inputs import CommitEvent, NodeHealthEvent, ResultEvent
from fastci.topology import decode


def refusal(topic: str, raw: bytes) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as caught:
        decode(topic, raw)
    return caught.value


def fields(error: InvalidEvent) -> set[str]:
    return {e.field for e in error.errors}


def test_id_is_derived_from_identity_fields_only():
    first = result(run_id="run-7", status="passed", duration_s=1.0)
    again = result(run_id="run-7", status="failed", duration_s=9.0)
    other_run = result(run_id="run-8")
    assert first.id == again.id == derive_id("results", first.test_id, "run-7")
    assert first.id != other_run.id
    assert len(first.id) == 32


def test_encode_decode_round_trip_keeps_the_event_and_its_id():
    event = result(metrics={"tokens_per_s": (1510.5, 1498.25)}, loss_curve=(2.3, 1.9), seed=3, config={"layers": 2})
    assert decode("results", encode(event)) == event


def test_given_id_must_match_the_derived_one():
    good = result()
    assert decode("results", orjson.dumps({**result_doc(), "id": good.id})) == good
    error = refusal("results", orjson.dumps({**result_doc(), "id": "0" * 32}))
    assert fields(error) == {"id"}
    assert "does not match the id derived from test_id, run_id" in str(error)


def test_timestamps_need_a_zone_and_are_stored_in_utc():
    event = NodeHealthEvent(node_id="n1", kind="temperature", value=70.0, time="2026-12-01T03:00:00+01:00")
    assert event.time.isoformat() == "2026-12-01T02:00:00+00:00"
    same = NodeHealthEvent(node_id="n1", kind="temperature", value=70.0, time="2026-12-01T02:00:00Z")
    assert same.id == event.id
    error = refusal("node-health", b'{"node_id": "n1", "kind": "ecc", "value": 1, "time": "2026-12-01T02:00:00"}')
    assert fields(error) == {"time"} and "timezone" in str(error)


def test_malformed_json_is_refused_with_the_reason():
    error = refusal("results", b'{"test_id": "t", ')
    assert fields(error) == {""} and "malformed JSON" in str(error)
    assert "a JSON object" in str(refusal("results", b"[1, 2]"))


def test_missing_fields_are_each_named():
    error = refusal("results", b'{"test_id": "t", "run_id": "r"}')
    assert {"commit", "node_id", "status", "duration_s"} <= fields(error) and "bundle" not in fields(error)
    assert "field 'status': Field required" in str(error)


def test_wrong_types_name_the_field_and_quote_the_value():
    error = refusal("results", orjson.dumps(result_doc(duration_s="fast")))
    assert fields(error) == {"duration_s"} and "'fast'" in str(error)
    error = refusal("results", orjson.dumps(result_doc(status="pased")))
    assert fields(error) == {"status"}
    error = refusal("results", orjson.dumps(result_doc(bundle={"compiler": "x"})))
    assert {"bundle.kernels", "bundle.firmware"} <= fields(error)


def test_unknown_fields_and_unknown_topics_are_refused():
    assert fields(refusal("results", orjson.dumps(result_doc(colour="red")))) == {"colour"}
    error = refusal("deploys", b"{}")
    assert fields(error) == {"topic"} and "unknown topic" in str(error)


def test_non_finite_metrics_are_refused_wherever_they_hide():
    doc = result_doc()
    event = ResultEvent.model_validate(doc)
    raw = encode(event).replace(b'"metrics":{}', b'"metrics":{"tput":[1.0,NaN]}')
    assert "malformed JSON" in str(refusal("results", raw))  # JSON has no NaN
    with pytest.raises(ValueError, match="finite"):
        ResultEvent.model_validate({**doc, "metrics": {"tput": [1.0, float("nan")]}})
    with pytest.raises(ValueError):
        ResultEvent.model_validate({**doc, "eval_score": float("inf")})


def test_names_with_control_characters_are_refused():
    error = refusal("results", orjson.dumps(result_doc(test_id="tests/a.py::t\x1b[31m")))
    assert fields(error) == {"test_id"} and "control characters" in str(error)
    assert "\x1b" not in str(error)  # the error line itself stays printable


def test_unicode_names_are_fine():
    assert decode("results", orjson.dumps(result_doc(test_id="tests/模型.py::test_ß"))).test_id.endswith("ß")


def test_oversized_events_are_refused_before_parsing():
    raw = b'{"pad": "' + b"x" * MAX_EVENT_BYTES + b'"}'
    assert "over the" in str(refusal("results", raw))


def test_dead_letter_keeps_the_reason_and_a_stable_id():
    error = refusal("results", b'{"test_id": 1}')
    first, second = error.dead_letter("publish"), refusal("results", b'{"test_id": 1}').dead_letter("publish")
    assert first.id == second.id
    assert first.topic == "results" and first.raw == '{"test_id": 1}' and first.errors == tuple(error.errors)
    assert "field 'test_id'" in first.error


def test_commit_events_carry_layers_and_changed_functions():
    commit = CommitEvent(
        repo="acme/fw",
        sha="a" * 40,
        author="ana",
        time="2026-12-01T00:00:00Z",
        title="kernels: fuse",
        changed_functions=[{"path": "k/ops.py", "qualname": "Fused.run", "change": "modified"}],
        layers=["kernels"],
        hardware_path=True,
    )
    assert commit.key == "acme/fw"
    with pytest.raises(ValueError):
        CommitEvent.model_validate({**commit.model_dump(), "id": "", "layers": ["quantum"]})


def test_a_trusted_record_equals_the_validated_one_and_stays_frozen():
    from pydantic import ValidationError

    from fastci.selection.processor import CatalogBucket, CatalogEntry, TestEvidence

    values = {  # trusted() is given every field, as the processor does
        "units": {"u1": ("c1",)},
        "files": ("a.py",),
        "reads": (),
        "fixtures": ("f1",),
    }
    trusted = TestEvidence.trusted(dict(values))
    validated = TestEvidence.model_validate(values)
    assert trusted == validated and trusted.model_dump() == validated.model_dump()
    assert trusted.model_dump_json() == validated.model_dump_json()
    with pytest.raises(ValidationError):
        trusted.files = ()  # frozen like any record
    bucket = {"tests": {"t1": CatalogEntry(test_id="tests/test_a.py::test_x", recent_s={"r": 1.5})}}
    trusted_bucket, validated_bucket = CatalogBucket.trusted(dict(bucket)), CatalogBucket.model_validate(bucket)
    assert trusted_bucket == validated_bucket and trusted_bucket.model_dump_json() == validated_bucket.model_dump_json()


def test_an_event_built_from_trusted_values_equals_the_validated_one():
    from datetime import UTC, datetime

    from fastci.scheduling.events import ScheduledTest, ScheduleEvent

    values = {
        "cause_id": "c" * 32,
        "pool": "default",
        "job_id": "j" * 32,
        "action": "queued",
        "time": datetime(2026, 12, 1, 2, tzinfo=UTC),
        "request_id": "r" * 32,
        "work_class": "presubmit",
        "repo": "acme/llm",
        "tests": (ScheduledTest(test_id="tests/test_a.py::test_a", estimated_s=1.5),),
        "chips": 8,
        "queued_at": datetime(2026, 12, 1, 1, tzinfo=UTC),
        "estimated_s": 1.5,
    }
    trusted = ScheduleEvent.trusted_event(values)
    validated = ScheduleEvent(**values)
    assert trusted == validated and encode(trusted) == encode(validated)  # defaults filled, id derived
    assert decode("schedule", encode(trusted)) == validated
    with pytest.raises(TypeError, match="'queued_at' is required"):
        ScheduleEvent.trusted_event({k: v for k, v in values.items() if k != "queued_at"})
