"""The nightly report: built from the views, every event string escaped, plots present."""

from __future__ import annotations

import re

import numpy as np
import pytest
from factories import result
from regression_factories import golden, nightly

from fastci.cli.main import main
from fastci.contracts.runs import RunRequested
from fastci.inputs import CommitEvent
from fastci.regression.synthetic import REPO, Scenario, sha
from fastci.runtime.memory import MemoryRuntime
from fastci.runtime.publish import publish_embedded
from fastci.shared.owners import parse_owner_file
from fastci.topology import SYSTEM

MOE = "tests/models/test_moe_tiny.py::test_throughput"

# Markup in a commit title, as an attacker would write it: each part would mark the page if it ran.
EVIL = (
    "<script>document.documentElement.dataset.pwned='script'</script>"
    '<img src=x onerror="document.documentElement.dataset.pwned=\'img\'"> & "quotes"'
)
TRAIN = "tests/models/test_llama_tiny.py::test_train"


def curve(rng, steps=200, drift_from=None):
    t = np.arange(steps)
    c = 2.0 * np.exp(-t / 50) + 0.5 + 0.01 * rng.standard_normal(steps)
    if drift_from is not None:
        c[drift_from:] += 0.004 * (t[drift_from:] - drift_from)
    return tuple(c.tolist())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    scenario = Scenario(culprit=9, changes=30, seed=31, repeats=120)
    commits = [
        CommitEvent.model_validate({**c.model_dump(exclude={"id"}), "title": EVIL}) if c.sha == sha(19) else c
        for c in scenario.commits()
    ]
    rng = np.random.default_rng(0)
    inputs = [
        parse_owner_file("* @framework-team\n", repo=REPO),
        *commits,
        golden(TRAIN, loss_curves=tuple(curve(rng) for _ in range(4)), eval_score=0.8),
        *scenario.nightly_results(),
        result(
            TRAIN,
            run_id="nightly-train",
            trigger="nightly",
            loss_curve=curve(rng, drift_from=120),
            eval_score=0.79,
            commit=sha(39),
        ),
        # a sustained 2.5% drop too small for 5 repeats a night: found as a change point, commits unknown
        *[
            nightly(n, 1000 * (0.975 if n >= 20 else 1) * (1 + 0.02 * rng.standard_normal(5)), test_id=MOE)
            for n in range(28)
        ],
    ]
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    outputs = pipeline.publish(inputs)
    publish_embedded(root, [*inputs, *pipeline.responses, *outputs])
    assert main(["--data-dir", str(root), "views", "refresh"]) == 0
    return root


def test_report_escapes_every_event_string_and_has_its_plots(data_dir, capsys):
    assert main(["--data-dir", str(data_dir), "report", "nightly"]) == 0
    page = (data_dir / "nightly.html").read_text()
    assert "<script" not in page.lower()
    assert "&lt;script&gt;document.documentElement.dataset.pwned=&#x27;script&#x27;&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;" in page  # (the table shortens long titles)
    assert page.count("<svg") >= 4  # regression trend, bisect trail, nightly trends, loss curve
    assert "Nightly performance trends" in page and "change point before" in page
    assert "change point" in page or "nightly medians" in page
    assert "diverges at step" in page and "reference band" in page
    assert "framework-team" in page and "culprit" in page
    out = capsys.readouterr()
    assert "2 open regression(s)" in out.out and "0 run request(s) unanswered" in out.out
    assert f"change point: {MOE} throughput_tokens_per_s on rev-a" in out.out
    assert "never seen on &#x27;commits&#x27;" in page  # the unresolved bisect says why
    assert "<script>" in out.out  # the terminal shows event text as text, not as markup
    assert "gate failing: " + TRAIN in out.out


def test_report_without_views_is_a_usage_error(tmp_path, capsys):
    assert main(["--data-dir", str(tmp_path), "report", "nightly"]) == 2
    assert "views refresh" in capsys.readouterr().err


def test_page_loads_nothing_from_outside(data_dir):
    main(["--data-dir", str(data_dir), "report", "nightly", "--out", str(data_dir / "r.html")])
    page = (data_dir / "r.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)
    assert "Content-Security-Policy" in page


def test_regressions_demo_finds_all_three_culprits(tmp_path, capsys):
    demo = tmp_path / "demo"
    assert main(["--data-dir", str(demo), "regressions", "demo"]) == 0
    out = capsys.readouterr().out
    assert "opened 3 tickets" in out and "3 open regression(s)" in out
    import json

    tickets = [json.loads(p.read_text()) for p in (demo / "tickets").glob("*.json")]
    culprits = {t["team"]: t["alert"]["culprit"] for t in tickets}
    assert culprits["models-team"]["title"] == "change 87" and culprits["framework-team"]["title"] == "change 40"
    assert (culprits["driver-team"]["from_version"], culprits["driver-team"]["to_version"]) == ("dr-535", "dr-545")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit, match="not made by"):
        main(["--data-dir", str(tmp_path / "other"), "regressions", "demo"])
    assert (tmp_path / "other" / "keep.txt").exists()


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_a_browser_renders_event_markup_as_text(data_dir, tmp_path):
    """Open the report in headless Chromium (Debian's package; .ci/run installs it): the title's
    script and image handler must not run, and the title must be on the page as text."""
    import shutil
    import subprocess

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is needed for this test (apt-get install chromium; .ci/run does it)"
    assert main(["--data-dir", str(data_dir), "report", "nightly"]) == 0
    page = data_dir / "nightly.html"
    dump = subprocess.run(
        [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dump.returncode == 0, dump.stderr[-2000:]
    dom = dump.stdout
    assert "<html" in dom and "Nightly" in dom
    assert "data-pwned" not in dom
    assert "&lt;script&gt;document.documentElement.dataset.pwned" in dom  # shown, as text
    assert '<img src="x"' not in dom and "<img src=x" not in dom
