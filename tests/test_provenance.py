"""Provenance: a result signed by its producer's principal keeps its id, survives every encoding, and
is refused at the door when changed after signing; a verifier tells the principal's own signature
from another's, from a forgery and from none; keys never appear in an error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from factories import BUNDLE, result

from fastci.core.codec import InvalidEvent, decode_as, encode
from fastci.core.provenance import ProvenanceError, Signer, content_digest, load_keyring, verify
from fastci.inputs import ResultEvent
from fastci.producer.client import Producer
from fastci.producer.context import RunContext
from fastci.producer.spool import Spool
from fastci.producer.targets import EmbeddedTarget
from fastci.runtime.embedded import DataDir

KEY = "qualifier-key-0123456789"
QUALIFIER = Signer("qualifier", KEY.encode())
KEYS = {"qualifier": KEY.encode(), "ci": b"ci-runner-key-0123456789"}

SHAPES = [
    result(),
    result(run_id="n1", bundle=dict(BUNDLE), hardware_revision="rev-a", trigger="nightly", seed=7),
    result(
        metrics={"throughput": (1.0, 2.5e-7, 123456789.125)},
        loss_curve=(0.5, 1e-300, 3.0),
        config={"layers": 2, "lr": 0.1, "fused": True, "shape": [1, "x", None, 2.0]},
        time=datetime(2026, 12, 1, 4, 0, tzinfo=timezone(timedelta(hours=2))),  # stored as UTC
        eval_score=0.84,
        output_digest="ab" * 32,
        selected=False,
    ),
]


@pytest.mark.parametrize("event", SHAPES, ids=["plain", "stack", "rich"])
def test_a_signed_result_keeps_its_id_and_decodes_to_itself_with_a_signature_that_verifies(event):
    signed = QUALIFIER.sign(event)
    assert signed.id == event.id and signed.provenance.principal == "qualifier"
    decoded = decode_as(ResultEvent, encode(signed))
    assert decoded == signed and content_digest(decoded) == signed.provenance.digest
    assert verify(KEYS, decoded.id, decoded.run_id, decoded.provenance.model_dump()).problem is None
    assert QUALIFIER.sign(signed) is signed  # a signed result is not signed again


def test_a_result_changed_after_signing_is_refused_naming_the_field():
    document = orjson.loads(encode(QUALIFIER.sign(result(status="failed"))))
    document["status"] = "passed"
    with pytest.raises(InvalidEvent) as refused:
        decode_as(ResultEvent, orjson.dumps(document))
    assert refused.value.errors[0].field == "provenance.digest"
    assert "the result was changed after 'qualifier' signed it" in str(refused.value)


def test_the_verifier_tells_who_signed_and_refuses_what_it_cannot_trust():
    event = result(run_id="nightly-7")

    def check(signer: Signer | None, **changes: str):
        signed = event if signer is None else signer.sign(event)
        provenance = None if signed.provenance is None else {**signed.provenance.model_dump(), **changes}
        return verify(KEYS, signed.id, changes.pop("run_id", signed.run_id), provenance)

    assert check(QUALIFIER).principal == "qualifier" and check(QUALIFIER).problem is None
    assert check(Signer("ci", KEYS["ci"])).principal == "ci"  # valid: whether ci may qualify is the gate's call
    assert "no provenance" in check(None).problem
    unknown = check(Signer("mallory", b"mallory-key-0123456789"))
    assert "principal 'mallory', which has no key in FASTCI_PROVENANCE_KEYS" in unknown.problem and not unknown.forged
    impostor = check(Signer("qualifier", b"a-guessed-key-0123456789"))
    assert impostor.forged and "does not verify with the key of principal 'qualifier'" in impostor.problem
    # a genuine signature moved to another run (its id and run differ) does not verify either
    moved = QUALIFIER.sign(event).provenance.model_dump()
    assert verify(KEYS, result(run_id="nightly-8").id, "nightly-8", moved).forged


def test_configuration_errors_name_the_variable_never_the_key():
    with pytest.raises(ProvenanceError, match="FASTCI_PROVENANCE_KEY is not set"):
        Signer.from_env({"FASTCI_PROVENANCE_PRINCIPAL": "qualifier"})
    with pytest.raises(ProvenanceError) as short:
        Signer.from_env({"FASTCI_PROVENANCE_PRINCIPAL": "qualifier", "FASTCI_PROVENANCE_KEY": "tiny-secret"})
    assert "at least 16 characters" in str(short.value) and "tiny-secret" not in str(short.value)
    with pytest.raises(ProvenanceError) as bad:
        load_keyring({"FASTCI_PROVENANCE_KEYS": f"qualifier:{KEY},{KEY}"})
    assert "entry 2 is not principal:key" in str(bad.value) and KEY not in str(bad.value)
    assert Signer.from_env({}) is None and load_keyring({}) == {}
    assert load_keyring({"FASTCI_PROVENANCE_KEYS": f"qualifier:{KEY}, ci:{KEYS['ci'].decode()}"}) == KEYS
    assert KEY not in repr(QUALIFIER)


def test_the_producer_spools_signed_results(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTCI_PROVENANCE_PRINCIPAL", "qualifier")
    monkeypatch.setenv("FASTCI_PROVENANCE_KEY", KEY)
    context = RunContext(repo="acme/x", commit="abcdef1", node_id="node-01", trigger="nightly")
    with Producer(EmbeddedTarget(tmp_path), Spool(tmp_path / "spool"), context) as producer:
        returned = producer.result(
            "tests/test_a.py::test_x", "n1", status="passed", duration_s=1.0, time=datetime.now(UTC)
        )
    [record] = list(DataDir(tmp_path).log.topic("results").read())
    published = decode_as(ResultEvent, record.payload)
    assert published == returned and published.provenance.principal == "qualifier"
    assert KEY.encode() not in record.payload


def test_a_publisher_with_half_a_signing_configuration_stops_and_says_which_variable(tmp_path, monkeypatch, capsys):
    from fastci.cli.main import main

    lines = tmp_path / "results.jsonl"
    lines.write_text(result().model_dump_json() + "\n")
    monkeypatch.setenv("FASTCI_PROVENANCE_PRINCIPAL", "qualifier")
    monkeypatch.delenv("FASTCI_PROVENANCE_KEY", raising=False)
    assert main(["--data-dir", str(tmp_path), "publish", "--topic", "results", str(lines)]) == 2
    assert "FASTCI_PROVENANCE_KEY is not set" in capsys.readouterr().err
    assert not list(DataDir(tmp_path).log.topic("results").read())  # nothing published unsigned
    monkeypatch.setenv("FASTCI_PROVENANCE_KEY", KEY)
    assert main(["--data-dir", str(tmp_path), "publish", "--topic", "results", str(lines)]) == 0
    [record] = list(DataDir(tmp_path).log.topic("results").read())
    assert decode_as(ResultEvent, record.payload).provenance.principal == "qualifier"
