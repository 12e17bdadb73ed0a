"""How the worker groups the records it produces into aiokafka record batches (logic only: the Kafka
tests run the same function against the real broker)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.errors import MessageSizeTooLargeError

from fastci.runtime.kafka.sends import BROKER_BATCH_BYTES, PRODUCE_BATCH_BYTES, Send, send_batched, whole_batch


class FakeBatch:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.records: list[tuple[bytes | None, bytes, list]] = []

    def append(self, *, timestamp, key, value, headers):
        if len(self.records) >= self.capacity:
            return None
        self.records.append((key, value, headers))
        return object()

    def record_count(self) -> int:
        return len(self.records)


class FakeProducer:
    def __init__(self, capacity: int, refuse_over: int | None = None) -> None:
        self.capacity = capacity
        self.refuse_over = refuse_over  # the broker's message.max.bytes, in records here
        self.sent: list[tuple[str, int, list]] = []
        self.ends: dict[tuple[str, int], int] = {}  # the broker's log end per partition

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.capacity)

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int):
        done = asyncio.get_running_loop().create_future()
        if self.refuse_over is not None and len(batch.records) > self.refuse_over:
            done.set_exception(MessageSizeTooLargeError())
            return done
        self.sent.append((topic, partition, batch.records))
        base = self.ends.get((topic, partition), 100)
        self.ends[(topic, partition)] = base + len(batch.records)
        done.set_result(SimpleNamespace(topic=topic, partition=partition, offset=base))
        return done


class FakeApp:
    def __init__(self, capacity: int, refuse_over: int | None = None) -> None:
        self.producer = self
        self.aiokafka = FakeProducer(capacity, refuse_over)
        self.log = SimpleNamespace(warning=lambda *args: self.warnings.append(args[0] % args[1:]))
        self.warnings: list[str] = []

    def _ensure_producer(self) -> FakeProducer:
        return self.aiokafka


def test_each_partition_keeps_the_order_of_its_records_across_full_batches():
    app = FakeApp(capacity=2)
    sends = [Send("t", n % 2, f"k{n}".encode(), f"v{n}".encode()) for n in range(7)]
    sends.append(Send("u", 0, None, b"keyless", [("fastci-origin", b"t/0/3")]))
    ends = asyncio.run(send_batched(app, sends))
    # the end of each partition after the last of its batches: what the worker's merge waits to read
    assert ends == {("t", 0): 104, ("t", 1): 103, ("u", 0): 101}

    per_partition: dict[tuple[str, int], list[bytes]] = {}
    for topic, partition, records in app.aiokafka.sent:
        assert 0 < len(records) <= 2
        per_partition.setdefault((topic, partition), []).extend(value for _, value, _ in records)
    assert per_partition == {
        ("t", 0): [b"v0", b"v2", b"v4", b"v6"],
        ("t", 1): [b"v1", b"v3", b"v5"],
        ("u", 0): [b"keyless"],
    }
    assert app.aiokafka.sent[-1][2] == [(None, b"keyless", [("fastci-origin", b"t/0/3")])]


def test_nothing_to_send_touches_no_producer():
    class NoProducer:
        @property
        def producer(self):
            raise AssertionError("no producer needed")

    asyncio.run(send_batched(NoProducer(), []))


def test_a_record_the_batch_refuses_is_an_error_not_a_loss():
    app = FakeApp(capacity=0)
    with pytest.raises(RuntimeError, match="refused a 3-byte record for t"):
        asyncio.run(send_batched(app, [Send("t", 0, b"k", b"big")]))


def test_whole_sends_put_each_partition_in_one_batch_the_broker_appends_entirely_or_not_at_all():
    app = FakeApp(capacity=1000)
    sends = [Send("changelog", n % 2, f"k{n}".encode(), f"v{n}".encode()) for n in range(7)]
    ends = asyncio.run(send_batched(app, sends, whole=True))
    assert [(topic, partition, len(records)) for topic, partition, records in app.aiokafka.sent] == [
        ("changelog", 0, 4),
        ("changelog", 1, 3),
    ]
    assert ends == {("changelog", 0): 104, ("changelog", 1): 103}


def test_a_partition_the_broker_refuses_whole_is_sent_in_several_batches_with_a_warning(monkeypatch):
    def unbounded(producer, sends):  # as many records as given, however big (the broker judges)
        batch = FakeBatch(len(sends))
        for send in sends:
            batch.append(timestamp=None, key=send.key, value=send.value, headers=send.headers or [])
        return batch

    monkeypatch.setattr("fastci.runtime.kafka.sends.whole_batch", unbounded)
    app = FakeApp(capacity=2, refuse_over=2)
    small = [Send("changelog", 1, b"a", b"1")]
    big = [Send("changelog", 0, f"k{n}".encode(), f"v{n}".encode()) for n in range(5)]
    ends = asyncio.run(send_batched(app, [*big, *small], whole=True))
    assert ends == {("changelog", 0): 105, ("changelog", 1): 101}
    sent = [(partition, [value for _, value, _ in records]) for _, partition, records in app.aiokafka.sent]
    assert sent == [(1, [b"1"]), (0, [b"v0", b"v1"]), (0, [b"v2", b"v3"]), (0, [b"v4"])]
    assert len(app.warnings) == 1 and "5 records for changelog[0]" in app.warnings[0]


class RealProducer:
    """Hands out aiokafka's own batches, as faust's producer does, at the worker's batch size."""

    def create_batch(self):
        from aiokafka.producer.message_accumulator import BatchBuilder

        return BatchBuilder(PRODUCE_BATCH_BYTES, 0)


def test_a_partition_bigger_than_a_produce_batch_still_goes_in_one_batch_compressed_past_the_brokers_limit():
    value = b'{"state": {"job": "tests/test_model.py::test_llama_tiny", "status": "queued"}}' * 8
    many = [Send("changelog", 0, f"job-{n}".encode(), value) for n in range(3_000)]
    assert sum(len(s.value) for s in many) > BROKER_BATCH_BYTES
    batch = whole_batch(RealProducer(), many)
    assert batch.record_count() == 3_000
    # gzip: the broker's limit is on what it receives (built here as aiokafka's sender builds it)
    assert len(batch._build()) < PRODUCE_BATCH_BYTES // 10
    some = whole_batch(RealProducer(), many[:1_000])  # past a produce batch, under the broker's limit
    assert some.record_count() == 1_000 and PRODUCE_BATCH_BYTES < len(some._build()) < BROKER_BATCH_BYTES
    few = whole_batch(RealProducer(), many[:3])
    assert few.record_count() == 3 and len(few._build()) > 3 * len(value)  # the producer's own
