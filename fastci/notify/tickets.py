"""Tickets for owning teams: a consumer of ``regression-alert`` (not a processor: it does I/O).

One ticket per regression, opened when its bisect ends (stage 'culprit' or 'unresolved'), never
twice: the ticket's name is the regression id, a ticket file that exists is not written again, and
a webhook post is recorded in a ledger (``<out>/.posted/<id>``) only once the endpoint accepted it,
so a failed post is retried on the next run and a successful one is never repeated. Alerts are
read from the start of the topic every time (there are few), so replays change nothing.

Webhook posts go only to the URL given by configuration, never to anything named in an event, and
each is signed with the secret shared with the receiver (``fastci.regression.webhook``), so the
receiver can refuse anything else posted to its URL, and a replay.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastci.contracts.regression_alerts import RegressionAlert
from fastci.core.codec import InvalidEvent, decode_as
from fastci.regression.webhook import SECRET_ENV, signed_headers
from fastci.runtime.embedded import DataDir
from fastci.runtime.kafka.broker import read_to_end

FINAL_STAGES = ("culprit", "unresolved")
TRIAGE_TEAM = "ci-triage"  # who gets a regression nobody owns
_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class TicketRun:
    written: list[Path] = field(default_factory=list)
    posted: list[str] = field(default_factory=list)
    already: int = 0
    failed: list[str] = field(default_factory=list)


def ticket_document(alert: RegressionAlert) -> dict[str, Any]:
    """The ticket: who, what, the evidence (statistics, plot data, bisect trail), and the alert itself."""
    team = alert.owners[0] if alert.owners else TRIAGE_TEAM
    culprit = alert.culprit
    if culprit is None:
        title = f"[regression] {alert.test_id} {alert.subject}: no culprit found"
    elif culprit.kind == "commit":
        title = f"[regression] {alert.test_id} {alert.subject}: {culprit.commit[:10]} {culprit.title[:80]}"  # type: ignore[index]
    else:
        title = (
            f"[regression] {alert.test_id} {alert.subject}: "
            f"{culprit.component} {culprit.from_version} -> {culprit.to_version}"
        )
    return {
        "ticket_id": alert.regression_id,
        "title": title,
        "team": team,
        "teams": list(alert.owners) or [TRIAGE_TEAM],
        "kind": alert.kind,
        "stage": alert.stage,
        "test_id": alert.test_id,
        "hardware_revision": alert.hardware_revision,
        "summary": alert.summary,
        "alert": alert.model_dump(mode="json"),
    }


def final_alerts(alerts: Iterable[RegressionAlert]) -> list[RegressionAlert]:
    """The alerts that open tickets, first one per regression."""
    seen: set[str] = set()
    chosen = []
    for alert in alerts:
        if alert.stage in FINAL_STAGES and alert.regression_id not in seen:
            seen.add(alert.regression_id)
            chosen.append(alert)
    return chosen


def open_tickets(
    alerts: Iterable[RegressionAlert],
    out_dir: Path,
    webhook: str | None = None,
    timeout_s: float = 10.0,
    secret: bytes | None = None,
    clock: Callable[[], float] = time.time,
) -> TicketRun:
    """Write (and post, signed with ``secret``) a ticket for every final alert that has none yet."""
    if webhook and not secret:
        raise ValueError(f"webhook posts are signed: give the secret shared with the receiver ({SECRET_ENV})")
    out_dir = Path(out_dir)
    ledger = out_dir / ".posted"
    ledger.mkdir(parents=True, exist_ok=True)
    run = TicketRun()
    for alert in final_alerts(alerts):
        ticket_id = alert.regression_id
        if not _ID.match(ticket_id):  # ids name files: anything else could escape the folder
            run.failed.append(f"{ticket_id!r}: not a regression id")
            continue
        document = ticket_document(alert)
        path = out_dir / f"{ticket_id}.json"
        fresh = not path.exists()
        if fresh:
            _write_atomically(path, json.dumps(document, indent=2, sort_keys=True).encode())
            run.written.append(path)
        if webhook:
            if (ledger / ticket_id).exists():
                run.already += not fresh
                continue
            try:
                _post(webhook, document, timeout_s, secret, clock())  # type: ignore[arg-type]
            except (urllib.error.URLError, OSError, ValueError) as error:
                run.failed.append(f"{ticket_id}: {error}")
                continue
            (ledger / ticket_id).touch()
            run.posted.append(ticket_id)
        elif not fresh:
            run.already += 1
    return run


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_suffix(".tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        raise ValueError(f"webhook answered {code} redirecting to {newurl!r}; tickets go only to the configured URL")


# Tickets go to the configured URL and nowhere else: no redirects followed, no proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def _post(url: str, document: dict[str, Any], timeout_s: float, secret: bytes, now: float) -> None:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"webhook must be an http(s) URL (got {url!r})")
    body = json.dumps(document).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Idempotency-Key": document["ticket_id"],
            **signed_headers(secret, body, now),  # signed per attempt: a retry carries a fresh timestamp
        },
    )
    with _OPENER.open(request, timeout=timeout_s) as response:  # noqa: S310 (configured URL only)
        if not 200 <= response.status < 300:
            raise ValueError(f"webhook answered {response.status}")


def read_alerts_embedded(data_dir: Path) -> list[RegressionAlert]:

    alerts = []
    for record in DataDir(data_dir).log.topic(RegressionAlert.TOPIC).read():
        try:
            alerts.append(decode_as(RegressionAlert, record.payload))
        except InvalidEvent:
            continue
    return alerts  # type: ignore[return-value]


def read_alerts_kafka(settings: Any) -> list[RegressionAlert]:

    async def collect() -> list[RegressionAlert]:
        records = [r async for r in read_to_end(settings, RegressionAlert.TOPIC)]
        records.sort(key=lambda r: (r.partition, r.offset))
        alerts = []
        for record in records:
            try:
                alerts.append(decode_as(RegressionAlert, record.value or b""))
            except InvalidEvent:
                continue
        return alerts  # type: ignore[return-value]

    return asyncio.run(collect())
