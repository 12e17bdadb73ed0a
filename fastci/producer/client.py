"""The producer client: typed, batched, acknowledged, retried, and spooled so nothing is dropped.

```python
with Producer(KafkaTarget(settings), Spool(".fastci/spool/kafka"), load_context()) as producer:
    producer.result("tests/test_x.py::test_y", run_id, status="passed", duration_s=1.2)
```

Every event goes to the spool first (``fastci.producer.spool``); every ``batch_size`` events the
batch is sealed and everything sealed is sent, oldest first, each batch retried with backoff and
deleted only once acknowledged. When the target stays down the producer stops trying for
``cooldown_s`` (a suite keeps its pace), and ``close`` tries once more; whatever is still
unacknowledged stays in the spool for the next producer or ``fastci spool drain``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastci.core.events import Event
from fastci.core.provenance import Signer
from fastci.inputs import ResultEvent
from fastci.producer.context import RunContext
from fastci.producer.spool import Spool
from fastci.producer.targets import Target, TargetUnavailable
from fastci.topology import INPUT_TOPICS

CLOSE_WAIT_S = 120.0  # how long a closing producer waits for another process draining its spool


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # per batch, per flush
    first_backoff_s: float = 0.5  # doubled after each failed attempt
    cooldown_s: float = 60.0  # after a flush failed, automatic flushes only seal for this long

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"retry: field 'attempts' must be at least 1 (got {self.attempts})")


@dataclass(frozen=True)
class FlushReport:
    sent: int  # events acknowledged by this flush (earlier sessions' spooled ones included)
    refused: int  # spooled lines that no longer decode; set aside in the spool's rejected/
    pending: int  # events still in the spool
    error: str | None  # why the target did not acknowledge, when it did not


class Producer:
    def __init__(
        self,
        target: Target,
        spool: Spool,
        context: RunContext | None = None,
        batch_size: int = 500,
        retry: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        signer: Signer | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"producer: field 'batch_size' must be at least 1 (got {batch_size})")
        self.target, self.spool, self.context = target, spool, context
        self.batch_size, self.retry = batch_size, retry
        self._sleep, self._clock = sleep, clock
        self._quiet_until = float("-inf")
        self.sent = 0
        self.last_error: str | None = None
        # Results are signed before they are spooled: the spool holds what the target will get.
        self.signer = signer if signer is not None else Signer.from_env()

    # ----- publishing

    def publish(self, event: Event) -> None:
        """Spool ``event`` (durably, before returning) and send when a batch is full."""
        if event.TOPIC not in INPUT_TOPICS:
            raise ValueError(
                f"producer: topic '{event.TOPIC}' is written by its processor; "
                f"producers publish to {', '.join(INPUT_TOPICS)}"
            )
        if self.signer is not None:
            event = self.signer.sign(event)
        if self.spool.append(event) >= self.batch_size:
            self.spool.seal()
            if self._clock() >= self._quiet_until:
                self._send_sealed()

    def result(self, test_id: str, run_id: str, status: str, duration_s: float, **fields: Any) -> ResultEvent:
        """Build a ``results`` event carrying the run context, publish it and return it."""
        if self.context is None:
            raise ValueError("producer: results need a run context (load_context())")
        c = self.context
        event = ResultEvent(
            test_id=test_id,
            run_id=run_id,
            status=status,
            duration_s=duration_s,
            repo=fields.pop("repo", c.repo),
            commit=fields.pop("commit", c.commit),
            bundle=fields.pop("bundle", c.bundle),
            node_id=fields.pop("node_id", c.node_id),
            hardware_revision=fields.pop("hardware_revision", c.hardware_revision),
            trigger=fields.pop("trigger", c.trigger),
            environment=fields.pop("environment", c.environment),
            time=fields.pop("time", datetime.now(UTC)),
            **fields,
        )
        if self.signer is not None:
            event = self.signer.sign(event)
        self.publish(event)
        return event

    # ----- sending

    def flush(self) -> FlushReport:
        """Seal the open batch and send every sealed batch (this session's and earlier ones')."""
        self.spool.seal()
        return self._send_sealed()

    def close(self) -> FlushReport:
        """The final flush: waits for another process draining the same spool (a parallel worker of
        the same session) rather than leave this process's batches behind."""
        self.spool.seal()
        return self._send_sealed(wait_s=CLOSE_WAIT_S)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send_sealed(self, wait_s: float = 0.0) -> FlushReport:
        sent = refused = 0
        error = None
        with self.spool.draining(wait_s) as holding:
            if holding:  # else another process is draining this spool right now
                for path in self.spool.sealed_batches():
                    batch = self.spool.read(path)
                    error = self._deliver([*batch.events, *(e.dead_letter("spool") for e in batch.refused)])
                    if error:
                        break
                    self.spool.done(batch)
                    sent += len(batch.events)
                    refused += len(batch.refused)
        self.sent += sent
        self.last_error = error
        if error:
            self._quiet_until = self._clock() + self.retry.cooldown_s
        return FlushReport(sent, refused, self.spool.pending(), error)

    def _deliver(self, events: list[Event]) -> str | None:
        """Send with retries; None once acknowledged, else the last error."""
        if not events:
            return None
        backoff = self.retry.first_backoff_s
        for attempt in range(1, self.retry.attempts + 1):
            try:
                self.target.send(events)
                return None
            except TargetUnavailable as failure:
                error = str(failure)
                if attempt < self.retry.attempts:
                    self._sleep(backoff)
                    backoff *= 2
        return error
