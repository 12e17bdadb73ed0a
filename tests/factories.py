"""Small builders for valid events, so each test states only what matters to it."""

from __future__ import annotations

from typing import Any

from fastci.inputs import ResultEvent

BUNDLE = {"compiler": "cc-1.0", "kernels": "kn-1.0", "runtime": "rt-1.0", "driver": "dr-535", "firmware": "fw-7"}


def result_doc(test_id: str = "tests/test_a.py::test_x", run_id: str = "run-1", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "test_id": test_id,
        "run_id": run_id,
        "repo": "acme/llm-framework",
        "commit": "abcdef1",
        "bundle": dict(BUNDLE),
        "node_id": "node-01",
        "hardware_revision": "rev-a",
        "trigger": "nightly",
        "status": "passed",
        "duration_s": 12.5,
    }
    doc.update(fields)
    return doc


def result(test_id: str = "tests/test_a.py::test_x", run_id: str = "run-1", **fields: Any) -> ResultEvent:
    return ResultEvent.model_validate(result_doc(test_id, run_id, **fields))
