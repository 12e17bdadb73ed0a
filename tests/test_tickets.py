"""Tickets: one per regression, never two, a webhook post only once it was accepted."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from fastci.cli.main import main
from fastci.regression.events import RegressionAlert
from fastci.regression.owners import parse_owner_file
from fastci.regression.synthetic import REPO, Scenario
from fastci.regression.tickets import open_tickets
from fastci.runtime.memory import MemoryRuntime
from fastci.runtime.publish import publish_embedded
from fastci.scheduling.runs import RunRequested
from fastci.topology import SYSTEM


@pytest.fixture(scope="module")
def alerts():
    scenario = Scenario(culprit=5, changes=20, seed=21, repeats=120)
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    pipeline.publish([parse_owner_file("* @framework-team\n", repo=REPO), *scenario.commits()])
    pipeline.publish(scenario.nightly_results())
    return pipeline.of_topic(RegressionAlert.TOPIC)


class Webhook:
    """A local HTTP endpoint that records posts and can be told to fail."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.status = 201
        self.location = ""  # sent with a 3xx status
        self.requests = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                hook.requests += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if hook.status < 300:
                    hook.posts.append({"key": self.headers["Idempotency-Key"], **json.loads(body)})
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
    failed = open_tickets(alerts, tmp_path, webhook.url)
    assert failed.failed and webhook.posts == [] and failed.written  # the file is written anyway
    webhook.status = 201
    assert open_tickets(alerts, tmp_path, webhook.url).posted == [alerts[1].regression_id]
    assert open_tickets(alerts, tmp_path, webhook.url).posted == []
    assert [p["key"] for p in webhook.posts] == [alerts[1].regression_id]


def test_a_webhook_redirect_is_not_followed(tmp_path, alerts, monkeypatch):
    configured, elsewhere = Webhook(), Webhook()
    try:
        for code in (302, 307):
            configured.status, configured.location = code, elsewhere.url
            run = open_tickets(alerts, tmp_path / str(code), configured.url)
            assert run.failed and "only to the configured URL" in str(run.failed)
        monkeypatch.setenv("http_proxy", elsewhere.url)  # nor through a proxy from the environment
        configured.status, configured.location = 201, ""
        assert open_tickets(alerts, tmp_path / "proxy", configured.url).posted
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
