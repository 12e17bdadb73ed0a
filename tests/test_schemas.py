"""schemas/ is the contract for producers in other languages: it must match the models."""

from __future__ import annotations

from pathlib import Path

import orjson

from fastci.schemas import schema_documents, write_schemas
from fastci.topology import TOPICS

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def test_committed_schemas_match_the_event_models():
    differing = write_schemas(SCHEMAS, check=True)
    assert differing == [], f"schemas out of date: {differing}; run 'fastci schemas'"


def test_every_topic_has_a_schema_naming_its_key_and_identity():
    documents = schema_documents()
    assert set(documents) == {f"{t}.schema.json" for t in TOPICS}
    results = documents["results.schema.json"]
    assert results["x-key"] == "test_id" and results["x-identity"] == ["test_id", "run_id"]
    assert results["additionalProperties"] is False


def test_check_reports_a_drifted_file(tmp_path):
    write_schemas(tmp_path)
    path = tmp_path / "results.schema.json"
    document = orjson.loads(path.read_bytes())
    document["properties"].pop("status")
    path.write_bytes(orjson.dumps(document))
    assert write_schemas(tmp_path, check=True) == ["results.schema.json"]
