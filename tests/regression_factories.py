"""Builders for the regression-detection events, so each test states only what matters to it."""

from __future__ import annotations

from typing import Any

from factories import BUNDLE

from fastci.regression.references import GoldenReference


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


def sha(n: int) -> str:
    return f"{n:07x}".rjust(40, "c")


def nightly(night: int, samples, test_id: str = "tests/test_a.py::test_x", **fields: Any):
    """The nightly result of ``night`` at commit sha(night) with throughput samples."""
    from factories import result

    doc: dict[str, Any] = dict(
        run_id=f"nightly-{night:03d}",
        commit=sha(night),
        trigger="nightly",
        metrics={"throughput_tokens_per_s": tuple(float(s) for s in samples)},
        seed=night,
        config={"model": "llama-tiny"},
        node_id=f"node-{night % 4:02d}",
    )
    doc.update(fields)
    return result(test_id, **doc)


def rerun(request, samples, n: int = 0, **fields: Any):
    """The result a runner would publish for a RunRequested."""
    from factories import result

    doc: dict[str, Any] = dict(
        run_id=f"{request.purpose}-{request.cause_id[:8]}-{n}",
        commit=request.commit,
        bundle=request.bundle.model_dump(),
        trigger=request.work_class,
        node_id="node-09",
        hardware_revision=request.hardware_revision,
        seed=request.seed,
        config=dict(request.config),
        metrics={"throughput_tokens_per_s": tuple(float(s) for s in samples)},
    )
    doc.update(fields)
    return result(request.test_id, **doc)
