"""``fastci import --kafka``: a JUnit history lands on the real broker's results topic, each result
once, and importing it again publishes nothing."""

from __future__ import annotations

import pytest
from kafka_helpers import read_events
from test_import import junit  # noqa: F401 (the fixture: a real pytest run's JUnit XML)

from fastci.cli.main import main

pytestmark = pytest.mark.kafka


def test_a_junit_history_is_published_to_kafka_once(kafka, junit, tmp_path, capfd):  # noqa: F811
    project, report, node_ids = junit
    command = ["--data-dir", str(tmp_path / "data"), "--bootstrap", kafka.bootstrap, "--namespace", kafka.namespace]
    command += ["import", str(report), "--root", str(project), "--kafka", "--batch", "3"]
    assert main(command) == 0
    assert "8 result(s) published" in capfd.readouterr().err
    results = read_events(kafka, "results")
    assert sorted(r.test_id for r in results) == sorted(node_ids)
    assert main(command) == 0
    assert "imported before, skipped" in capfd.readouterr().err
    assert len(read_events(kafka, "results")) == len(node_ids)
