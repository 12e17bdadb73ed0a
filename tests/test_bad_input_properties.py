"""Bad input at volume (property tests): malformed and adversarial events never crash anything,
are dead-lettered with their reason, and leave the state exactly as the good events alone make it."""

from __future__ import annotations

import random

import orjson
from factories import result_doc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastci.core.codec import MAX_EVENT_BYTES, InvalidEvent, encode
from fastci.producer.lines import check_lines
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, TOPICS, decode

JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20)
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
NAMES = st.text(min_size=1, max_size=40)  # any unicode, control characters included
STATUSES = st.sampled_from(["passed", "failed", "error", "skipped", "flaky"])


@settings(max_examples=300, deadline=None)
@given(topic=st.sampled_from(sorted(TOPICS)), raw=st.binary(max_size=300) | JSON.map(orjson.dumps))
def test_decoding_anything_either_succeeds_or_says_why(topic, raw):
    try:
        event = decode(topic, raw)
    except InvalidEvent as error:
        assert error.errors and all(e.reason for e in error.errors)
        letter = error.dead_letter("publish")
        assert letter.topic == topic and letter.raw_size == len(raw)
    else:
        assert decode(topic, encode(event)) == event


def sabotage(doc: dict, how: str, rng: random.Random) -> bytes:
    """One bad event of a kind producers really send."""
    if how == "wrong type":
        return orjson.dumps({**doc, rng.choice(["duration_s", "chips", "status", "bundle"]): [1, 2]})
    if how == "missing field":
        dropped = rng.choice(["status", "commit", "test_id"])
        return orjson.dumps({k: v for k, v in doc.items() if k != dropped})
    if how == "control characters":
        return orjson.dumps({**doc, "test_id": doc["test_id"] + "\x1b[2J\x00"})
    if how == "not finite":
        return orjson.dumps({**doc, "metrics": {"tput": [1.0]}}).replace(
            b"[1.0]", rng.choice([b"[NaN]", b"[1e999]", b"[-Infinity]"])
        )
    if how == "deep nesting":
        return orjson.dumps({**doc, "config": {"x": 1}}).replace(
            b'{"x":1}', b'{"x":' + b"[" * 2000 + b"]" * 2000 + b"}"
        )
    if how == "oversized":
        return orjson.dumps({**doc, "loss_curve": [0.5] * (MAX_EVENT_BYTES // 3)})
    if how == "unknown field":
        return orjson.dumps({**doc, "__proto__": {"admin": True}})
    if how == "wrong id":
        return orjson.dumps({**doc, "id": "f" * 32})
    return b"\xff\xfe not even utf-8 {"


BAD_KINDS = [
    "wrong type",
    "missing field",
    "control characters",
    "not finite",
    "deep nesting",
    "oversized",
    "unknown field",
    "wrong id",
    "garbage",
]


def state_of(data_dir) -> dict[tuple[str, str], dict]:
    """Every processor's state, by (processor, key)."""
    checkpoint = DataDir(data_dir).checkpoint()
    try:
        rows = checkpoint.db.execute("SELECT processor, key, value FROM state")
        return {(p, k): orjson.loads(v)["state"] for p, k, v in rows}
    finally:
        checkpoint.close()


def run(data_dir) -> None:
    runtime = EmbeddedRuntime(data_dir, SYSTEM)
    try:
        runtime.run()
    finally:
        runtime.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    good=st.lists(st.tuples(NAMES, STATUSES), min_size=1, max_size=30),
    bad=st.lists(st.sampled_from(BAD_KINDS), min_size=1, max_size=12),
    duplicates=st.integers(min_value=0, max_value=5),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_stream_mixing_bad_events_leaves_the_state_of_the_good_ones(tmp_path_factory, good, bad, duplicates, seed):
    rng = random.Random(seed)
    docs = [
        result_doc(f"tests/{name}.py::t" if name.isprintable() else "tests/x.py::t", run_id=f"r{n}", status=status)
        for n, (name, status) in enumerate(good)
    ]
    good_lines = [orjson.dumps(d) for d in docs]
    good_lines += [rng.choice(good_lines) for _ in range(duplicates)]  # redelivered: same ids
    bad_lines = [sabotage(rng.choice(docs), how, rng) for how in bad]
    mixed = good_lines + bad_lines
    rng.shuffle(mixed)  # out of order, interleaved

    checked = check_lines(mixed, topic="results")
    assert len(checked.refused) == len(bad_lines)
    assert all(r.error.errors and str(r.error) for r in checked.refused)

    dirty = tmp_path_factory.mktemp("dirty")
    publish_embedded(dirty, [*checked.accepted, *checked.dead_letters()])
    # The same bad bytes written straight into the log (a producer that skipped validation).
    DataDir(dirty).log.topic("results").append(bad_lines, 0)
    run(dirty)

    clean = tmp_path_factory.mktemp("clean")
    publish_embedded(clean, list(checked.accepted))
    run(clean)

    assert state_of(dirty) == state_of(clean)
    letters = [decode("dead-letters", r.payload) for r in DataDir(dirty).log.topic("dead-letters").read()]
    assert sum(d.source == "publish" for d in letters) == len(bad_lines)
    # each undecodable record lands on dead-letters once, whichever of the processors reading results reads it
    assert sum(d.source == "decode" for d in letters) == len(bad_lines)
    assert all(d.error for d in letters)
    runs = sum(v["runs"] for (processor, _), v in state_of(clean).items() if v and processor == "test-history")
    assert runs == len({orjson.loads(line)["run_id"] + orjson.loads(line)["test_id"] for line in good_lines})
