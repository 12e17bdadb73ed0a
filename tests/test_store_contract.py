"""One contract for the driver's raw store (``fastci.runtime.contract.Store``), run on every backend.

The driver reads a store only through ``get(key) -> bytes | None`` and never writes to it: it hands
its encoded entries to the runtime (``Driver.drain_writes``), which commits them to the store its
own way. What the driver relies on, read from driver.py:

- a key never written reads as ``None`` (``_entry`` and ``_was_marked`` test ``is None``: an empty
  value is a value, not a missing key);
- a committed value reads back byte for byte (``decode_entry`` parses it; ``APPLIED_MARK`` is
  compared by presence), and the last commit of a key wins;
- keys are compared exactly: compound keys, applied-event markers (which contain NUL) and position
  keys differ from their owner by a suffix only, and every processor has its own keys;
- on the durable backends, a restarted runtime reads what was committed and nothing of a commit
  that did not finish: a key's marks must never be read without the state they stand for.

The protocol has no delete (the driver never removes a key; ``ProcessorStore.wrote`` says rows
are never deleted), so the contract has none either.

Every case runs on every backend, as the eventsourcing library runs one suite per recorder:

- ``memory``: ``BytesStore`` as ``MemoryRuntime`` makes and fills it (``store.update`` in ``drain``);
- ``sqlite``: ``ProcessorStore`` of a ``Checkpoint`` file, committed by ``Checkpoint.commit``;
- ``sqlite-keys-held``: the same, once the store holds its processor's keys in memory (after
  ``READ_KEYS_AFTER`` misses), a second read path that must answer the same;
- ``faust``: ``TableStore`` over the Tables of the real app from ``streams.app.create_app`` (built,
  never started: no broker is contacted). A commit does what the worker's ``process`` does (it is
  inline there, so it is repeated here): the value goes into ``table.data`` and a changelog record
  to the partition ``table.partition_for_key`` picks. With no broker, the acknowledged changelog is
  a list, and a restart is a new app whose Tables are recovered from it through faust's own path
  (the changelog topic's codec, then ``Table.apply_changelog_batch``), as faust's Recovery does
  with what its consumer reads.

``memory`` keeps nothing across a restart (a run that can simply be repeated, memory.py says): the
restart cases skip it, saying so.
"""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from faust.types import Message

from fastci.core.config import KafkaSettings
from fastci.core.processor import compound_key
from fastci.runtime.checkpoint import READ_KEYS_AFTER, Checkpoint
from fastci.runtime.contract import Store
from fastci.runtime.driver import APPLIED_MARK, applied_key
from fastci.runtime.kafka.positions import position_key
from fastci.runtime.kafka.routes import TableStore
from fastci.runtime.memory import MemoryRuntime
from fastci.topology import SYSTEM
from streams.app import create_app

# Two real processors: every backend keys its stores by processor name.
FIRST, SECOND = "test-selection", "node-state"


class Interrupted(Exception):
    """A commit cut short before it finished (the process died mid-commit)."""


class MemoryBackend:
    durable = False

    def __init__(self) -> None:
        runtime = MemoryRuntime(SYSTEM)
        self.stores = {processor.name: store for processor, _, store in runtime.drivers}

    def store(self, processor: str) -> Store:
        return self.stores[processor]

    def commit(self, processor: str, writes: dict[str, bytes]) -> None:
        self.stores[processor].update(writes)  # what MemoryRuntime.drain does

    def close(self) -> None:
        pass


class _PositionsThatCrash(Mapping):
    """Positions whose reading fails: Checkpoint.commit reads them after it has written the state
    rows, inside the transaction, so the commit dies with its state writes done but not committed."""

    def __getitem__(self, key: object) -> Any:
        raise Interrupted

    def __iter__(self) -> Iterator[Any]:
        raise Interrupted

    def __len__(self) -> int:
        return 1

    def items(self) -> Any:
        raise Interrupted


class SqliteBackend:
    durable = True

    def __init__(self, path: Path, keys_held: bool) -> None:
        self.path = path
        self.keys_held = keys_held
        self.checkpoint = Checkpoint(path)
        self.primed: set[str] = set()

    def store(self, processor: str) -> Store:
        store = self.checkpoint.store(processor)
        if self.keys_held and processor not in self.primed:
            # As the embedded runtime does on reload; then enough misses that the store reads its keys.
            store.refresh()
            for i in range(READ_KEYS_AFTER):
                store.get(f"never written {i}")
            assert store.keys is not None, "the store should now answer from the keys it holds"
            self.primed.add(processor)
        return store

    def commit(self, processor: str, writes: dict[str, bytes]) -> None:
        self.store(processor)  # so a store with keys held is told of the commit, as a runtime's is
        self.checkpoint.commit(processor, writes, {})

    def interrupted_commit(self, processor: str, writes: dict[str, bytes]) -> None:
        self.store(processor)
        with pytest.raises(Interrupted):
            self.checkpoint.commit(processor, writes, _PositionsThatCrash())

    def restart(self, owning: str | None = None) -> None:
        """``owning``: ignored, one file holds every partition's keys."""
        self.checkpoint.close()
        self.checkpoint = Checkpoint(self.path)
        self.primed.clear()

    def close(self) -> None:
        self.checkpoint.close()


class FaustBackend:
    durable = True

    def __init__(self) -> None:
        self.settings = KafkaSettings(bootstrap="127.0.0.1:1")  # never contacted: the app is not started
        self.app = create_app(self.settings)
        self.acknowledged: list[tuple[str, int, bytes, bytes]] = []  # (changelog topic, partition, key, value)

    def store(self, processor: str) -> Store:
        return TableStore(self.app.tables[processor])

    def _write(self, processor: str, writes: dict[str, bytes]) -> list[tuple[str, int, bytes, bytes]]:
        """As the worker's ``process`` writes a batch: the Table's store, and one changelog record per key."""
        table = self.app.tables[processor]
        topic = table.changelog_topic.get_topic_name()
        records = []
        for key, value in writes.items():
            raw_key = key.encode()
            table.data[raw_key] = value
            records.append((topic, table.partition_for_key(raw_key), raw_key, value))
        return records

    def commit(self, processor: str, writes: dict[str, bytes]) -> None:
        self.acknowledged += self._write(processor, writes)

    def interrupted_commit(self, processor: str, writes: dict[str, bytes]) -> None:
        self._write(processor, writes)  # the worker dies before the broker acknowledges the changelog batch

    def restart(self, owning: str | None = None) -> None:
        """``owning``: a partition key; the new worker is assigned only its partition, and recovers
        only that changelog partition of each Table (faust co-partitions changelogs with inputs)."""
        self.app = create_app(self.settings)
        tables = {table.changelog_topic.get_topic_name(): table for table in self.app.tables.values()}
        assigned = None if owning is None else self.app.tables[FIRST].partition_for_key(owning.encode())

        async def recover() -> None:
            for offset, (topic, partition, key, value) in enumerate(self.acknowledged):
                if assigned is not None and partition != assigned:
                    continue
                table = tables[topic]
                message = Message(topic, partition, offset, 0.0, 0, [], key, value, None)
                table.apply_changelog_batch([await table.changelog_topic.decode(message)])

        asyncio.run(recover())

    def close(self) -> None:
        pass


@pytest.fixture(params=["memory", "sqlite", "sqlite-keys-held", "faust"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("FASTCI_DATA_DIR", str(tmp_path / "data"))  # create_app makes faust's folder there
    if request.param == "memory":
        made: Any = MemoryBackend()
    elif request.param == "faust":
        made = FaustBackend()
    else:
        made = SqliteBackend(tmp_path / "checkpoint.sqlite", keys_held=request.param == "sqlite-keys-held")
    yield made
    made.close()


def durable(backend: Any) -> Any:
    if not backend.durable:
        pytest.skip("the memory store keeps nothing across a restart, by design (fastci/runtime/memory.py)")
    return backend


OWNER = "org/repo"
# Keys the driver and the Kafka positions write that differ from each other by a suffix, a byte,
# a case or a normalisation only: a store must keep every one apart.
NEAR_KEYS = [
    OWNER,
    OWNER + " ",
    OWNER.upper(),
    compound_key(OWNER, "fn"),
    compound_key(OWNER, "fn", "ctx"),
    applied_key(OWNER, "0123456789abcdef0123"),  # contains NUL
    applied_key(OWNER, "0123456789abcdeeffff"),
    position_key("test-selection:results", "fastci.results", 1),
    position_key("test-selection:results", "fastci.results", 11),
    unicodedata.normalize("NFC", "caf\u00e9/tests"),
    unicodedata.normalize("NFD", "caf\u00e9/tests"),
]

# Values as the driver encodes them, and the byte patterns a careless store would change.
VALUES = {
    "applied marker": APPLIED_MARK,
    "entry with non-ASCII": orjson.dumps(
        {"state": {"name": "\u00e9t\u00e9 \u2603 \U0001f680"}, "seen": [], "marks": {}}
    ),
    "empty": b"",
    "NUL bytes": b"\x00\x00",
    "not UTF-8": b"\xff\xfe\x80",
    "trailing spaces": b"x  ",
    "one MiB": bytes(range(256)) * 4096,
}


def test_a_key_never_written_reads_as_none(backend: Any) -> None:
    backend.commit(FIRST, {compound_key(OWNER, "fn"): b"1"})
    store = backend.store(FIRST)
    # a prefix and an extension of a written key are still keys never written
    for key in (OWNER, compound_key(OWNER, "fn", "ctx"), "never"):
        assert store.get(key) is None


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_a_committed_value_reads_back_byte_for_byte(backend: Any, value: bytes) -> None:
    backend.commit(FIRST, {OWNER: value})
    read = backend.store(FIRST).get(OWNER)
    assert type(read) is bytes
    assert read == value  # the empty value too: b"" is present, unlike None


def test_the_last_commit_of_a_key_wins(backend: Any) -> None:
    store = backend.store(FIRST)
    # longer, then shorter (no leftover tail), then empty, then a value again
    for value in (b"a long first value", b"short", b"", APPLIED_MARK):
        backend.commit(FIRST, {OWNER: value})
        assert store.get(OWNER) == value


def test_near_identical_keys_stay_apart(backend: Any) -> None:
    assert len(set(NEAR_KEYS)) == len(NEAR_KEYS)
    writes = {key: f"value of {key!r}".encode() for key in NEAR_KEYS}
    backend.commit(FIRST, writes)
    store = backend.store(FIRST)
    assert {key: store.get(key) for key in NEAR_KEYS} == writes


def test_each_processor_reads_only_its_own_keys(backend: Any) -> None:
    backend.commit(FIRST, {OWNER: b"first's", compound_key(OWNER, "fn"): b"first only"})
    backend.commit(SECOND, {OWNER: b"second's"})
    assert backend.store(FIRST).get(OWNER) == b"first's"
    assert backend.store(SECOND).get(OWNER) == b"second's"
    assert backend.store(SECOND).get(compound_key(OWNER, "fn")) is None


def test_committed_writes_survive_a_restart(backend: Any) -> None:
    backend = durable(backend)
    backend.commit(FIRST, {OWNER: b"overwritten", compound_key(OWNER, "fn"): b""})
    backend.commit(FIRST, {OWNER: VALUES["entry with non-ASCII"], applied_key(OWNER, "ab" * 8): APPLIED_MARK})
    backend.commit(SECOND, {OWNER: b"second's"})
    backend.restart()
    first = backend.store(FIRST)
    assert first.get(OWNER) == VALUES["entry with non-ASCII"]
    assert first.get(compound_key(OWNER, "fn")) == b""
    assert first.get(applied_key(OWNER, "ab" * 8)) == APPLIED_MARK
    assert first.get("never") is None
    assert backend.store(SECOND).get(OWNER) == b"second's"


def test_a_restarted_worker_reads_every_key_its_partition_key_owns(backend: Any) -> None:
    # A compound key or marker restored without its owner (or the owner without them) would let a
    # replayed event read state that no longer matches the owner's marks.
    backend = durable(backend)
    owned = [OWNER, *(compound_key(OWNER, f"fn{i}") for i in range(8)), applied_key(OWNER, "ef" * 8)]
    backend.commit(FIRST, {key: key.encode() for key in owned})
    backend.restart(owning=OWNER)
    store = backend.store(FIRST)
    assert {key: store.get(key) for key in owned} == {key: key.encode() for key in owned}


def test_a_commit_cut_short_leaves_nothing_after_a_restart(backend: Any) -> None:
    backend = durable(backend)
    backend.commit(FIRST, {OWNER: b"committed"})
    # a batch as drain_writes orders it: a compound key, its owner (the marks), an applied marker
    batch = {compound_key(OWNER, "fn"): b"new", OWNER: b"new marks", applied_key(OWNER, "cd" * 8): APPLIED_MARK}
    backend.interrupted_commit(FIRST, batch)
    backend.restart()
    store = backend.store(FIRST)
    assert store.get(OWNER) == b"committed"
    assert store.get(compound_key(OWNER, "fn")) is None
    assert store.get(applied_key(OWNER, "cd" * 8)) is None
