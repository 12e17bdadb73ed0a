"""The JSON Schema of every event: the contract for producers in any language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from fastci.topology import TOPICS


def schema_documents() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema, one per topic (what a producer may send to it)."""
    documents = {}
    for topic, model in sorted(TOPICS.items()):
        schema = model.model_json_schema(mode="validation")
        schema["$id"] = f"https://fastci.dev/schemas/{topic}.schema.json"
        schema["x-topic"] = topic
        schema["x-key"] = model.KEY
        schema["x-identity"] = list(model.IDENTITY)
        documents[f"{topic}.schema.json"] = schema
    return documents


def render(document: dict[str, Any]) -> bytes:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def write_schemas(folder: Path, check: bool = False) -> list[str]:
    """Write (or with ``check`` only compare) the schema files; return the names that differ."""
    folder = Path(folder)
    differing = []
    for name, document in schema_documents().items():
        path = folder / name
        text = render(document)
        if not path.exists() or path.read_bytes() != text:
            differing.append(name)
            if not check:
                folder.mkdir(parents=True, exist_ok=True)
                path.write_bytes(text)
    return differing
