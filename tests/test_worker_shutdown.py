"""A stopping worker exits within a bound, whatever faust's teardown does (``streams.worker``)."""

from __future__ import annotations

import threading

import faust

import streams.worker as worker_module
from streams.worker import BoundedShutdownWorker


def test_a_worker_whose_shutdown_does_not_finish_exits_anyway(monkeypatch, capfd):
    monkeypatch.setattr(worker_module, "SHUTDOWN_S", 0.05)
    exited = threading.Event()
    codes: list[int] = []

    def record_exit(code: int) -> None:
        codes.append(code)
        exited.set()

    app = faust.App("fastci-shutdown-test", broker="kafka://127.0.0.1:1", store="memory://", web_enabled=False)
    worker = BoundedShutdownWorker(app, quiet=True, exit=record_exit)
    worker.on_worker_shutdown()  # what faust calls once it starts stopping; the teardown then hangs
    assert exited.wait(5), "the watchdog did not end the shutdown"
    assert codes == [0]
    assert "shutdown not finished after 0.05 s" in capfd.readouterr().err
