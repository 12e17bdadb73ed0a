"""Tickets: one per regression, never two, a webhook post only once it was accepted, each post signed
so that a real receiver refuses a wrong signature and a stale (replayed) one."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from fastci.cli.main import main
from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.notify.tickets import open_tickets
from fastci.regression.synthetic import REPO, Scenario
from fastci.regression.webhook import verify
from fastci.runtime.memory import MemoryRuntime
from fastci.runtime.publish import publish_embedded
from fastci.shared.owners import parse_owner_file
from fastci.topology import SYSTEM


@pytest.fixture(scope="module")
def alerts():
    scenario = Scenario(culprit=5, changes=20, seed=21, repeats=120)
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    pipeline.publish([parse_owner_file("* @framework-team\n", repo=REPO), *scenario.commits()])
    pipeline.publish(scenario.nightly_results())
    return pipeline.of_topic(RegressionAlert.TOPIC)


SECRET = b"webhook-secret-5a7c1e09"
WINDOW_S = 300


def receiver_check(secret: bytes, headers, body: bytes, now: float) -> str | None:
    """The receiver's own check, written from the documented recipe (not fastci's code)."""
    stamp, given = headers.get("X-Fastci-Timestamp", ""), headers.get("X-Fastci-Signature", "")
    expected = "v1=" + hmac.new(secret, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    if not stamp.isdigit() or not hmac.compare_digest(expected, given):
        return "bad signature"
    if abs(now - int(stamp)) > WINDOW_S:
        return "stale timestamp"
    return None


class Webhook:
    """A local HTTP endpoint that checks each post's signature and age, records the posts it accepts
    (with their raw headers and body, to replay), and can be told to fail."""

    def __init__(self, secret: bytes = SECRET) -> None:
        self.posts: list[dict] = []
        self.raw: list[tuple[dict[str, str], bytes]] = []
        self.rejected: list[str] = []
        self.secret = secret
        self.now = time.time  # the receiver's clock
        self.status = 201
        self.location = ""  # sent with a 3xx status
        self.requests = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                hook.requests += 1
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                problem = receiver_check(hook.secret, self.headers, body, hook.now())
                if problem:
                    hook.rejected.append(problem)
                    self.send_response(401)
                    self.end_headers()
                    return
                if hook.status < 300:
                    hook.posts.append({"key": self.headers["Idempotency-Key"], **json.loads(body)})
                    hook.raw.append((dict(self.headers), body))
                self.send_response(hook.status)
                if hook.location:
                    self.send_header("Location", hook.location)
                self.end_headers()

            do_GET = do_POST  # noqa: N815 (a redirect followed as a GET would land here)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/tickets"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


def test_one_ticket_per_regression_with_owner_and_evidence(tmp_path, alerts):
    assert [a.stage for a in alerts] == ["detected", "culprit"]
    run = open_tickets([*alerts, *alerts], tmp_path)  # a replayed topic
    (path,) = run.written
    ticket = json.loads(path.read_text())
    assert ticket["team"] == "framework-team" and ticket["ticket_id"] == alerts[1].regression_id
    assert ticket["alert"]["culprit"]["commit"] == alerts[1].culprit.commit
    assert ticket["alert"]["trail"] and ticket["alert"]["perf"]["baseline_samples"]
    again = open_tickets(alerts, tmp_path)
    assert again.written == [] and again.already == 1


def test_webhook_gets_each_ticket_once_and_a_failed_post_is_retried(tmp_path, alerts, webhook):
    webhook.status = 503
    failed = open_tickets(alerts, tmp_path, webhook.url, secret=SECRET)
    assert failed.failed and webhook.posts == [] and failed.written  # the file is written anyway
    webhook.status = 201
    assert open_tickets(alerts, tmp_path, webhook.url, secret=SECRET).posted == [alerts[1].regression_id]
    assert open_tickets(alerts, tmp_path, webhook.url, secret=SECRET).posted == []
    assert [p["key"] for p in webhook.posts] == [alerts[1].regression_id]


def test_a_receiver_refuses_a_wrong_signature_and_a_stale_post_and_accepts_the_real_one(tmp_path, alerts, webhook):
    ticket = alerts[1].regression_id
    wrong = open_tickets(alerts, tmp_path / "wrong", webhook.url, secret=b"not-the-shared-secret-00")
    assert webhook.rejected == ["bad signature"] and "401" in wrong.failed[0] and not wrong.posted
    stale = open_tickets(alerts, tmp_path / "stale", webhook.url, secret=SECRET, clock=lambda: time.time() - 600)
    assert webhook.rejected[-1] == "stale timestamp" and stale.failed and not stale.posted

    real = open_tickets(alerts, tmp_path / "real", webhook.url, secret=SECRET)
    assert real.posted == [ticket] and [p["key"] for p in webhook.posts] == [ticket]
    headers, body = webhook.raw[0]
    assert verify(SECRET, headers, body, time.time()) is None  # fastci's own check agrees
    assert "signature does not match" in verify(SECRET, headers, body.replace(b"culprit", b"culprat"), time.time())

    # The same post, captured and replayed once the window has passed, is refused.
    webhook.now = lambda: time.time() + WINDOW_S + 60
    replay = urllib.request.Request(webhook.url, data=body, method="POST", headers=headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(replay, timeout=10)
    assert refused.value.code == 401 and webhook.rejected[-1] == "stale timestamp" and len(webhook.posts) == 1
    assert "outside the 300 s window" in verify(SECRET, headers, body, webhook.now())


def test_a_webhook_needs_the_shared_secret(tmp_path, alerts, webhook, capsys, monkeypatch):
    with pytest.raises(ValueError, match="FASTCI_WEBHOOK_SECRET"):
        open_tickets(alerts, tmp_path, webhook.url)
    publish_embedded(tmp_path, alerts)
    monkeypatch.delenv("FASTCI_WEBHOOK_SECRET", raising=False)
    assert main(["--data-dir", str(tmp_path), "tickets", "--webhook", webhook.url]) == 2
    assert "FASTCI_WEBHOOK_SECRET is not set" in capsys.readouterr().err and webhook.requests == 0
    monkeypatch.setenv("FASTCI_WEBHOOK_SECRET", "tiny-7q")
    assert main(["--data-dir", str(tmp_path), "tickets", "--webhook", webhook.url]) == 2
    err = capsys.readouterr().err
    assert "FASTCI_WEBHOOK_SECRET must be at least 16 characters" in err and "tiny-7q" not in err
    monkeypatch.setenv("FASTCI_WEBHOOK_SECRET", SECRET.decode())
    assert main(["--data-dir", str(tmp_path), "tickets", "--webhook", webhook.url]) == 0
    assert "1 posted" in capsys.readouterr().err and len(webhook.posts) == 1


def test_a_webhook_redirect_is_not_followed(tmp_path, alerts, monkeypatch):
    configured, elsewhere = Webhook(), Webhook()
    try:
        for code in (302, 307):
            configured.status, configured.location = code, elsewhere.url
            run = open_tickets(alerts, tmp_path / str(code), configured.url, secret=SECRET)
            assert run.failed and "only to the configured URL" in str(run.failed)
        monkeypatch.setenv("http_proxy", elsewhere.url)  # nor through a proxy from the environment
        configured.status, configured.location = 201, ""
        assert open_tickets(alerts, tmp_path / "proxy", configured.url, secret=SECRET).posted
        assert elsewhere.requests == 0 and configured.requests == 3
    finally:
        configured.close()
        elsewhere.close()


def test_an_alert_whose_id_is_not_a_regression_id_cannot_name_a_file(tmp_path, alerts):
    forged = RegressionAlert.model_validate({**alerts[1].model_dump(exclude={"id"}), "regression_id": "../../etc/x"})
    run = open_tickets([forged], tmp_path / "t")
    assert run.written == [] and run.failed and not (tmp_path / "etc").exists()


def test_tickets_command_on_the_embedded_log(tmp_path, alerts, capsys):
    publish_embedded(tmp_path, alerts)
    assert main(["--data-dir", str(tmp_path), "tickets"]) == 0
    assert "1 new" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "tickets"]) == 0
    assert "0 new, 0 posted, 1 already open" in capsys.readouterr().err


def test_owners_publish_command_reports_bad_lines(tmp_path, capsys):
    owners = tmp_path / "OWNERS"
    owners.write_text("/src/ @a\n/docs/\n")
    assert main(["--data-dir", str(tmp_path), "owners", "publish", str(owners), "--repo", "r"]) == 2
    assert "line 2: '/docs/' names no owner" in capsys.readouterr().err
    owners.write_text("/src/ @a\nlayer:driver @drivers\n")
    assert main(["--data-dir", str(tmp_path), "owners", "publish", str(owners), "--repo", "r"]) == 0
    assert "1 path rule(s), 1 layer(s)" in capsys.readouterr().err
