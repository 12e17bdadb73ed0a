"""How far each route of a running worker is behind the end of what it consumes.

faust's committed offsets are not the answer: faust can commit past records it
skipped (see ``fastci.runtime.kafka.positions``). The positions every route stores next
to its state are, so this reads them back from the Table changelogs.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer

from fastci.core.config import KafkaSettings
from fastci.core.processor import Processor
from fastci.runtime.kafka.broker import read_to_end, topic_partitions
from fastci.runtime.kafka.positions import position_key, position_partition
from fastci.runtime.kafka.routes import route_names


async def unapplied(settings: KafkaSettings, processors: list[Processor]) -> dict[str, int]:
    """Route -> records of its input not applied yet (summed over partitions)."""
    # A forwarder shared by several processors is one route, its positions in the forwarders' Table.
    routes = sorted(
        {(route, topic, table) for processor in processors for route, topic, table in route_names(settings, processor)}
    )
    stored: dict[str, int] = {}
    for table in sorted({table for _, _, table in routes}):
        async for record in read_to_end(settings, settings.changelog_topic(table), namespaced=False):
            key = None if record.key is None else record.key.decode()
            if key is not None and record.value is not None and position_partition(key) is not None:
                stored[key] = int(record.value)
    # End offsets are read after the positions: a forwarder at its end has already produced what it forwarded.
    tps = await topic_partitions(settings, sorted({topic for _, topic, _ in routes}))
    consumer = AIOKafkaConsumer(**settings.client_options())
    await consumer.start()
    try:
        ends = await consumer.end_offsets(tps) if tps else {}
    finally:
        await consumer.stop()
    behind: dict[str, int] = {}
    for route, topic, _ in routes:
        behind[route] = sum(
            end - stored.get(position_key(route, topic, tp.partition), 0)
            for tp, end in ends.items()
            if tp.topic == topic
        )
    return behind
