"""How the worker groups the records it produces into aiokafka record batches (logic only: the Kafka
tests run the same function against the real broker)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from streams.app import Send, send_batched


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
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.sent: list[tuple[str, int, list]] = []
        self.ends: dict[tuple[str, int], int] = {}  # the broker's log end per partition

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.capacity)

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int):
        self.sent.append((topic, partition, batch.records))
        base = self.ends.get((topic, partition), 100)
        self.ends[(topic, partition)] = base + len(batch.records)
        done = asyncio.get_running_loop().create_future()
        done.set_result(SimpleNamespace(topic=topic, partition=partition, offset=base))
        return done


class FakeApp:
    def __init__(self, capacity: int) -> None:
        self.producer = self
        self.aiokafka = FakeProducer(capacity)

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
