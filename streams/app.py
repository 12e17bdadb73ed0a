"""The faust app: its settings, and the Kafka runtime (``fastci.runtime.kafka``) installed in it.

Nothing here decides or moves anything: ``create_app`` configures faust (the broker, credentials,
buffers, producer batching) and hands the app to ``KafkaRuntime``, which wires every processor.
``streams.worker`` runs it.
"""

from __future__ import annotations

from typing import Any

import faust

from fastci.core.config import KafkaSettings, data_dir
from fastci.core.processor import Processor
from fastci.runtime.kafka.runtime import GaplessConsumer, KafkaRuntime
from fastci.runtime.kafka.sends import PRODUCE_BATCH_BYTES
from fastci.topology import build_processors

# faust hands records to a take() buffer one at a time and stops while the batch is processed; deeper
# buffers and bigger polls keep it fed (the figures: docs/benchmarks.md, "Throughput").
STREAM_BUFFER = 16_384
MAX_POLL_RECORDS = 10_000


def create_app(settings: KafkaSettings, processors: list[Processor] | None = None) -> faust.App:
    # faust's own directory (tables are in memory; it still makes one), under fastci's data dir
    # rather than beside wherever the worker was started. faust makes only its last level.
    faust_dir = data_dir() / "faust"
    faust_dir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{host}" for host in settings.bootstrap.split(",")],
        broker_credentials=_credentials(settings),
        store="memory://",
        datadir=str(faust_dir / "{conf.name}"),
        web_enabled=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        # A batch's outputs and changelog records go out together, then the batch waits for them:
        # bigger produce requests (faust's default is 16 KiB, no linger) cost less per record.
        # (docs/benchmarks.md, "Throughput": the CPU per event it saves)
        producer_max_batch_size=PRODUCE_BATCH_BYTES,
        producer_linger_ms=2,
        table_cleanup_interval=3600.0,
        stream_buffer_maxsize=STREAM_BUFFER,
        broker_max_poll_records=MAX_POLL_RECORDS,
    )
    app.transport.Consumer = GaplessConsumer  # before anything makes the app's consumer
    KafkaRuntime(app, settings, processors or build_processors()).install()
    return app


def _credentials(settings: KafkaSettings) -> Any:
    ssl_context = settings.client_options().get("ssl_context")
    if not settings.sasl_mechanism:
        return faust.SSLCredentials(ssl_context) if ssl_context else None
    return faust.SASLCredentials(
        username=settings.username,
        password=settings.password,
        mechanism=settings.sasl_mechanism,
        ssl_context=ssl_context,
    )
