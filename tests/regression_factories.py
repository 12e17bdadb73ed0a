"""Builders for the regression-detection events, so each test states only what matters to it."""

from __future__ import annotations

from typing import Any

from fastci.events.golden import GoldenReference

from factories import BUNDLE


def golden(test_id: str = "tests/test_a.py::test_x", version: int = 1, **fields: Any) -> GoldenReference:
    doc: dict[str, Any] = {
        "test_id": test_id,
        "version": version,
        "repo": "acme/llm-framework",
        "commit": "abcdef1",
        "bundle": dict(BUNDLE),
        "hardware_revision": "cpu-fp32-reference",
    }
    doc.update(fields)
    return GoldenReference.model_validate(doc)
