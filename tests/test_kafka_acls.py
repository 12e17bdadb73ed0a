"""Least privilege on a real broker with the authorizer on (``kafka.sh start --scram --acl``):
the super user applies each role's ACLs, the operator makes the topics, the producer writes inputs
and nothing else, the analyst reads and writes nothing, and the worker runs the whole pipeline with
only its own ACLs, processing exactly what the broker accepted."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from conftest import ACL_USERS
from factories import BUNDLE, result
from kafka_helpers import read_events, stop_worker, wait_until_consumed

from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.regression_alerts import Endpoint, RegressionAlert
from fastci.core.config import KafkaSettings
from fastci.core.events import Event
from fastci.core.provenance import Signer
from fastci.demo.history import Workload
from fastci.producer.client import Producer, RetryPolicy
from fastci.producer.context import RunContext
from fastci.producer.spool import Spool
from fastci.producer.targets import KafkaTarget
from fastci.regression import webhook
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.kafka.acls import describe_acls
from fastci.runtime.kafka.broker import AccessDenied, ensure_topics, publish, read_to_end
from fastci.runtime.kafka.roles import all_acls
from fastci.runtime.publish import publish_embedded
from fastci.selection.events import Selection, SelectionMetrics
from fastci.topology import ALL_PROCESSORS, DEAD_LETTERS, INPUT_TOPICS, SYSTEM, TOPICS, decode
from fastci.views.refresh import refresh_embedded
from fastci.views.store import Views

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

NAMESPACE = "acl-"
# SCRAM without TLS: what is authorised is the SCRAM principal either way, and TLS (tested with SCRAM in
# test_kafka_security.py) cost this module a minute here, in a handshake per client.
PROTOCOL = "SASL_PLAINTEXT"


def settings(broker, user: str) -> KafkaSettings:
    return KafkaSettings(
        bootstrap=broker.bootstrap,
        namespace=NAMESPACE,
        security_protocol=PROTOCOL,
        sasl_mechanism="SCRAM-SHA-256",
        username=user,
        password=ACL_USERS[user],
    )


def role_env(broker, user: str) -> dict[str, str]:
    """A process environment holding one role's credentials, as a deployment would give it."""
    return {
        **os.environ,
        "FASTCI_KAFKA_BOOTSTRAP": broker.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": NAMESPACE,
        "FASTCI_KAFKA_SECURITY_PROTOCOL": PROTOCOL,
        "FASTCI_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "FASTCI_KAFKA_USERNAME": user,
        "FASTCI_KAFKA_PASSWORD": ACL_USERS[user],
    }


@dataclass
class Cluster:
    broker: object
    outputs: list[str] = field(default_factory=list)  # every CLI run's stdout and stderr (secrets are searched)

    def fastci(self, user: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "-m", "fastci.cli", *args],
            env={**role_env(self.broker, user), **(env or {}), "COLUMNS": "200"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.outputs.append(done.stdout + done.stderr)
        return done


@pytest.fixture(scope="module")
def cluster(acl_broker) -> Cluster:
    """ACLs applied by the super user, topics made by the operator: both through the CLI."""
    cluster = Cluster(acl_broker)
    applied = cluster.fastci("admin", "kafka", "acls", "--apply")
    assert applied.returncode == 0, applied.stderr
    made = cluster.fastci("operator", "kafka", "topics", "--apply")
    assert made.returncode == 0, made.stderr
    return cluster


def refusal(broker, user: str, events: list[Event]) -> str:
    with pytest.raises(AccessDenied) as denied:
        asyncio.run(publish(settings(broker, user), events))
    return str(denied.value)


def forged_events() -> dict[str, Event]:
    """What a stolen producer credential would write if the broker let it: a commit's selection that
    runs nothing, a regression declared recovered (so a release gate would pass) and a sick node
    declared healthy."""
    zero = dict.fromkeys(("tests_known", "selected", "kept", "pruned", "skipped", "changed_units"), 0)
    nothing = SelectionMetrics(
        **zero,
        **dict.fromkeys(("estimated_s_all", "estimated_s_kept", "saved_s", "saved_gpu_s"), 0.0),
        selection_ratio=0.0,
        pairs_covered_by_all=0,
        pairs_covered_by_kept=0,
        coverage_retention=1.0,
    )
    selection = Selection(commit_id="f" * 32, repo="acme/llm-framework", sha="abcdef1", run_all=False, metrics=nothing)
    end = Endpoint(result_id="e" * 32, run_id="nightly-9", commit="abcdef1", bundle=BUNDLE, node_id="node-01")
    alert = RegressionAlert(
        cause_id="c" * 32,
        stage="recovered",
        subject="throughput on rev-a",
        regression_id="r" * 32,
        kind="performance",
        test_id="qualify/dlrm-small/bf16/throughput",
        repo="acme/llm-framework",
        hardware_revision="rev-a",
        good=end,
        bad=end,
        summary="forged: recovered",
    )
    node = NodeStateChanged(node_id="node-08", state="healthy", reason="forged", time="2026-11-02T00:00:00Z")
    return {"selection": selection, "regression-alert": alert, "node-state-changed": node}


def test_the_super_user_applies_the_acls_and_no_role_can(cluster):
    broker = cluster.broker
    wanted = all_acls(
        {role: [role] for role in ("producer", "worker", "analyst", "operator")},
        settings(broker, "admin"),
        ALL_PROCESSORS,
    )
    present = asyncio.run(describe_acls(settings(broker, "admin")))
    assert {acl for acls in wanted.values() for acl in acls} <= present
    check = cluster.fastci("admin", "kafka", "acls")
    assert check.returncode == 0 and "missing" not in check.stdout  # applied once, checked again
    for role in ("operator", "worker", "producer", "analyst"):
        denied = cluster.fastci(role, "kafka", "acls", "--apply")
        assert denied.returncode == 2, denied.stdout
        assert "DescribeAcls refused: ClusterAuthorizationFailedError" in denied.stderr
        assert f"as User:{role}; ACLs are read and applied by a super user" in denied.stderr


def test_the_producer_writes_no_decision_reads_nothing_and_creates_no_topic(cluster, pipeline, report_figure):
    broker = cluster.broker  # after the pipeline: the topics hold records to be refused
    for topic, event in forged_events().items():
        message = refusal(broker, "producer", [event])
        assert (
            f"User:producer may not WRITE topic acl-{topic}: no ACL allows User:producer WRITE on TOPIC acl-{topic}"
        ) in message
        report_figure(f"ACL broker, producer writes {topic}: {message}")

    async def read() -> list:
        return [r async for r in read_to_end(settings(broker, "producer"), "results")]

    with pytest.raises(
        AccessDenied, match="User:producer may not READ topic acl-results: no ACL allows"
    ) as read_refused:
        asyncio.run(read())
    report_figure(f"ACL broker, producer reads results: {read_refused.value}")
    with pytest.raises(AccessDenied, match="topic acl-surprise does not exist, and User:producer may not CREATE"):
        asyncio.run(ensure_topics(settings(broker, "producer"), ["surprise"]))
    views = cluster.fastci("producer", "--data-dir", str(broker.data / "producer-views"), "views", "refresh", "--kafka")
    assert views.returncode == 2 and "error: User:producer may not READ topic acl-" in views.stderr, views.stderr
    assert "Traceback" not in views.stderr


def test_the_analyst_cannot_write_anything(cluster, report_figure):
    events = [result(run_id="analyst-run"), *forged_events().values()]
    for event in events:
        message = refusal(cluster.broker, "analyst", [event])
        assert f"User:analyst may not WRITE topic acl-{event.TOPIC}" in message
    report_figure(f"ACL broker, analyst writes {', '.join(e.TOPIC for e in events)}: each refused, e.g. {message}")


@dataclass
class Pipeline:
    accepted: list[Event]
    refusals: list[str]
    worker_log: Path
    views: Path


@pytest.fixture(scope="module")
def pipeline(cluster, tmp_path_factory) -> Pipeline:
    """The producer publishes a CI history; forged decisions and an analyst's result are refused;
    the worker, as itself, processes everything; the analyst refreshes the views."""
    broker, work = cluster.broker, tmp_path_factory.mktemp("acl-pipeline")
    accepted = Workload(commits=20, seed=5).events()
    asyncio.run(publish(settings(broker, "producer"), accepted))
    refusals = [refusal(broker, "producer", [e]) for e in forged_events().values()]
    refusals.append(refusal(broker, "analyst", [result(run_id="analyst-run")]))
    log = work / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "fastci.cli", "worker"],
        env=role_env(broker, "worker"),
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_consumed(settings(broker, "analyst"), worker, log)
    finally:
        stop_worker(worker)
    views = work / "views.duckdb"
    refreshed = cluster.fastci("analyst", "--data-dir", str(work), "views", "refresh", "--kafka")
    assert refreshed.returncode == 0, refreshed.stderr
    return Pipeline(accepted, refusals, log, views)


def by_key(events: list[Event]) -> dict[str, list[str]]:
    ordered: dict[str, list[str]] = defaultdict(list)
    for event in events:
        ordered[event.key].append(event.id)
    return dict(ordered)


def view_rows(path: Path, sql: str) -> list[tuple]:
    views = Views(path, read_only=True)
    try:
        return views.query(sql)[1]
    finally:
        views.close()


# Outputs equal in every runtime whatever the interleaving of topics (docs/topology.md, ordering guarantee).
SINGLE_STREAM = ("test-status-changed", "flaky-verdicts", "flaky-tests", DEAD_LETTERS)


def test_the_worker_processes_exactly_what_the_broker_accepted_with_only_its_acls(
    cluster, pipeline, tmp_path, report_figure
):
    analyst = settings(cluster.broker, "analyst")
    assert len(pipeline.refusals) == 4 and all("may not WRITE" in r for r in pipeline.refusals)
    # Nothing but the accepted events got in...
    for topic in INPUT_TOPICS:
        expected = sorted(e.id for e in pipeline.accepted if e.TOPIC == topic)
        assert sorted(e.id for e in read_events(analyst, topic)) == expected, topic
    assert not any(e.reason == "forged" for e in read_events(analyst, "node-state-changed"))
    assert not read_events(analyst, "regression-alert")  # the forged 'recovered' alert never got in
    assert "f" * 32 not in {s.commit_id for s in read_events(analyst, "selection")}
    # ...and all of it was processed: the embedded runtime on the same events is the reference.
    embedded = tmp_path / "embedded"
    publish_embedded(embedded, pipeline.accepted)
    runtime = EmbeddedRuntime(embedded, SYSTEM)
    runtime.run()
    runtime.close()
    reference = Views(embedded / "views.duckdb")
    refresh_embedded(embedded, reference)
    reference.close()
    flips = 0
    for topic in SINGLE_STREAM:
        on_kafka = read_events(analyst, topic)
        expected = [decode(topic, r.payload) for r in DataDir(embedded).log.topic(topic).read()]
        assert by_key(on_kafka) == by_key(expected), topic
        flips += len(on_kafka) if topic == "test-status-changed" else 0
    assert flips > 0
    history = "SELECT * FROM test_history ORDER BY test_id"
    assert view_rows(pipeline.views, history) == view_rows(embedded / "views.duckdb", history)
    assert "Authoriz" not in pipeline.worker_log.read_text()  # the worker needed nothing it was not given
    report_figure(
        f"ACL broker: {len(pipeline.accepted)} accepted input events processed by the worker with only its ACLs "
        f"({flips} test status flips, identical per key to the embedded runtime on the same events); "
        f"{len(pipeline.refusals)} forged writes refused, none on any topic"
    )


# ----- secrets stay secret

WEBHOOK_SECRET = "Webhook-secret-3e8b17c4d2"
PROVENANCE_KEYS = {"qualifier": "Qualifier-key-a91f02c7d5", "ci": "Ci-runner-key-5b20e8f1c3"}
SECRETS = {
    **{f"SCRAM password of {user}": password for user, password in ACL_USERS.items()},
    **{f"provenance key of {principal}": key for principal, key in PROVENANCE_KEYS.items()},
    "webhook secret": WEBHOOK_SECRET,
}


class Receiver:
    """A ticket webhook on loopback that accepts only posts signed with the shared secret."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append(str(self.headers).encode() + body)
                ok = webhook.verify(WEBHOOK_SECRET.encode(), self.headers, body, time.time()) is None
                self.send_response(201 if ok else 401)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/tickets"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


async def every_record(settings_: KafkaSettings) -> dict[str, bytes]:
    """Every key and value of every topic in the namespace (changelogs and internal topics too), read
    topic by topic with the reader ``views refresh --kafka`` uses: it seeks each partition to its first
    offset and stops at the end offset seen on entry, so transaction markers cannot keep it waiting."""
    admin = AIOKafkaAdminClient(**settings_.client_options())
    await admin.start()
    try:
        names = sorted(t for t in await admin.list_topics() if t.startswith(NAMESPACE))
    finally:
        await admin.close()
    found: dict[str, bytearray] = defaultdict(bytearray)
    read = 0
    for name in names:
        async for record in read_to_end(settings_, name, namespaced=False):
            read += 1
            found[name] += (record.key or b"") + b"\n" + (record.value or b"") + b"\n"
    # A search that read nothing would find no secret: it must have read records of the inputs, the
    # decisions and the changelogs.
    assert read > 0 and f"{NAMESPACE}results" in found, f"read {read} records of {len(names)} topics"
    assert any("changelog" in name for name in found), sorted(found)
    return {topic: bytes(data) for topic, data in found.items()}


def duckdb_text(path: Path) -> bytes:
    """Every row of every table of a views file, as text: DuckDB may compress strings on disk."""
    views = Views(path, read_only=True)
    try:
        tables = [row[0] for row in views.query("SELECT table_name FROM information_schema.tables")[1]]
        return "\n".join(repr(views.query(f'SELECT * FROM "{t}"')[1]) for t in tables).encode()
    finally:
        views.close()


def test_no_secret_reaches_a_log_an_event_a_view_a_report_or_a_ticket(cluster, pipeline, tmp_path, report_figure):
    broker, data = cluster.broker, tmp_path / "data"
    receiver = Receiver()
    every_secret = {
        "FASTCI_PROVENANCE_PRINCIPAL": "qualifier",
        "FASTCI_PROVENANCE_KEY": PROVENANCE_KEYS["qualifier"],
        "FASTCI_PROVENANCE_KEYS": ",".join(f"{p}:{k}" for p, k in PROVENANCE_KEYS.items()),
        "FASTCI_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    # A regression night end to end on the embedded runtime (results signed), its tickets posted to the
    # webhook, the nightly report of it and of the Kafka pipeline's views: as the analyst, every secret set.
    for args in (
        ["regressions", "demo"],
        ["tickets", "--webhook", receiver.url],
        ["report", "nightly", "--views", str(pipeline.views), "--out", str(data / "kafka-nightly.html")],
    ):
        done = cluster.fastci("analyst", "--data-dir", str(data), *args, env=every_secret)
        assert done.returncode == 0, done.stderr
    assert len(receiver.received) == 3  # three tickets, each accepted as signed with the shared secret
    # A producer whose results stay spooled: it holds the analyst's credential, which may not write.
    refused_target = KafkaTarget(settings(broker, "analyst"), timeout_s=20)
    signer = Signer("qualifier", PROVENANCE_KEYS["qualifier"].encode())
    context = RunContext(repo="acme/x", commit="abcdef1", node_id="node-01", trigger="nightly")
    producer = Producer(
        refused_target, Spool(data / "spool" / "kafka"), context, retry=RetryPolicy(1, 0.0), signer=signer
    )
    producer.result("tests/test_a.py::test_x", "spooled-run", status="passed", duration_s=1.0)
    report = producer.close()
    assert report.pending == 1 and "User:analyst may not WRITE topic acl-results" in report.error

    places: dict[str, bytes] = {
        "CLI output (stdout and stderr of every fastci command in this module)": "\n".join(cluster.outputs).encode(),
        "refusal messages (AccessDenied)": "\n".join(pipeline.refusals).encode(),
        "producer's last error": report.error.encode(),
        "worker log": pipeline.worker_log.read_bytes(),
        "broker log": (broker.data / "broker.log").read_bytes(),
        "webhook posts received (headers and bodies)": b"\n".join(receiver.received),
        "views of the Kafka pipeline (every table's rows)": duckdb_text(pipeline.views),
        "views of the embedded run (every table's rows)": duckdb_text(data / "views.duckdb"),
        "embedded log (every record of every topic)": b"\n".join(
            r.payload for t in TOPICS for r in DataDir(data).log.topic(t).read()
        ),
    }
    files = sorted(p for p in data.rglob("*") if p.is_file())
    places |= {f"file {p.relative_to(data)}": p.read_bytes() for p in files}
    places |= {
        f"Kafka topic {t}": v
        for t, v in asyncio.run(asyncio.wait_for(every_record(settings(broker, "admin")), 300)).items()
    }
    leaks = [
        f"{what} in {where}" for where, text in places.items() for what, s in SECRETS.items() if s.encode() in text
    ]
    assert leaks == []
    # The search sees content: signed results are in the views, tickets and spool, and the refusals.
    assert b'"principal":"qualifier"' in places["embedded log (every record of every topic)"]
    assert b"'qualifier'" in places["views of the embedded run (every table's rows)"]
    assert any("spool" in p and b"qualifier" in places[p] for p in places)
    assert any(p.startswith("file tickets/") for p in places) and any(p.endswith("nightly.html") for p in places)
    groups: dict[str, int] = defaultdict(int)
    for path in files:
        groups[path.relative_to(data).parts[0]] += 1
    kinds = [p for p in places if not p.startswith(("file ", "Kafka topic "))]
    report_figure(
        f"secrets: {len(SECRETS)} secrets ({', '.join(SECRETS)}) searched in {len(places)} places, none found: "
        + "; ".join(kinds)
        + f"; {len(files)} files of the data dir ({', '.join(f'{g}: {n}' for g, n in sorted(groups.items()))}); "
        + f"every record of {sum(p.startswith('Kafka topic ') for p in places)} Kafka topics (inputs, decisions, "
        "changelogs, internal)"
    )
