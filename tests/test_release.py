"""Release bundles in a real temporary git repo: propose, promote only through every gate, roll back
byte for byte, staging before production, only results whose provenance the release accepts, and the
command's errors."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from factories import BUNDLE, result

from fastci.cli.main import main
from fastci.contracts.regression_alerts import Endpoint, RegressionAlert
from fastci.release.bundle import ReleaseBundle, parse_environment, parse_manifest, render_environment
from fastci.release.git import Repo
from fastci.runtime.embedded import DataDir
from fastci.runtime.publish import publish_embedded

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
MODEL = "dlrm-small"
OTHER = {**BUNDLE, "kernels": "kn-2.0"}
KEYS = {"qualifier": "qualifier-key-0123456789", "ci": "ci-runner-key-0123456789"}


@pytest.fixture(autouse=True)
def signed_by_qualifier(monkeypatch):
    """Results published here are signed by the qualification principal, and the release holds every key."""
    monkeypatch.setenv("FASTCI_PROVENANCE_PRINCIPAL", "qualifier")
    monkeypatch.setenv("FASTCI_PROVENANCE_KEY", KEYS["qualifier"])
    monkeypatch.setenv("FASTCI_PROVENANCE_KEYS", ",".join(f"{p}:{k}" for p, k in KEYS.items()))


def manifest(tmp_path, name="b1", bundle=BUNDLE, precision="bf16", max_batch=64) -> str:
    path = tmp_path / f"{name}.toml"
    versions = "\n".join(f'{layer} = "{version}"' for layer, version in bundle.items())
    path.write_text(
        f'name = "{name}"\n[bundle]\n{versions}\n[serving.{MODEL}]\nprecision = "{precision}"\n'
        f"max_batch = {max_batch}\n"
    )
    return str(path)


def qualification(bundle=BUNDLE, revisions=("rev-a", "rev-b"), skip=(), eval_ratio=1.0, status=None, at=T0, run="n1"):
    """The nightly qualification results of MODEL (bf16) on ``bundle``: three checks per revision."""
    events = []
    for revision in revisions:
        for check in ("inference", "training", "throughput"):
            if (check, revision) in skip:
                continue
            fields = (
                dict(metrics={"eval_ratio": (eval_ratio,)}, eval_score=0.84 * eval_ratio) if check == "training" else {}
            )
            events.append(
                result(
                    f"qualify/{MODEL}/bf16/{check}",
                    run_id=f"{run}-{revision}",
                    bundle=dict(bundle),
                    trigger="nightly",
                    hardware_revision=revision,
                    node_id=f"node-{revision}",
                    status=(status or {}).get((check, revision), "passed"),
                    config={"model": MODEL, "precision": "bf16", "backend": "emulated-bf16"},
                    time=at,
                    **fields,
                )
            )
    return events


def cli(data_dir, repo, *args: str) -> int:
    return main(["--data-dir", str(data_dir), "release", *args, "--repo", str(repo)])


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def tree(repo, ref="main") -> dict[str, bytes]:
    """Every file of ``ref``, path -> bytes."""
    return Repo(repo).files(ref, ".")


def release_events(data_dir) -> list[dict]:
    return [orjson.loads(r.payload) for r in DataDir(data_dir).log.topic("release").read()]


@pytest.fixture
def setup(tmp_path):
    data, repo = tmp_path / "data", tmp_path / "release-repo"
    data.mkdir()  # a named data dir must exist (its results are what the gates read)
    assert main(["--data-dir", str(data), "release", "init", "--repo", str(repo)]) == 0
    return data, repo


def test_propose_is_a_branch_and_a_commit_with_the_review_record(setup, tmp_path, capsys):
    data, repo = setup
    publish_embedded(data, qualification())
    before = git(repo, "rev-parse", "main")
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    assert git(repo, "rev-parse", "main") == before  # a proposal changes nothing on main
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    branch = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/release/")
    bundle_id = branch.rsplit("/", 1)[1]
    assert branch == f"release/staging/{bundle_id}" and git(repo, "rev-parse", f"{branch}~1") == before
    changed = git(repo, "diff", "--name-only", "main", branch).splitlines()
    assert changed == [
        "environments/staging/bundle.toml",
        f"environments/staging/serving/{MODEL}.toml",
        f"reviews/staging/{bundle_id}.json",
    ]
    review = orjson.loads(Repo(repo).blob(branch, f"reviews/staging/{bundle_id}.json"))
    assert review["passed"] is True and [g["gate"] for g in review["gates"]] == [
        "correctness",
        "eval",
        "performance",
        "qualification",
        "provenance",
    ]
    assert review["hardware_revisions"] == ["rev-a", "rev-b"] and review["serving"] == {
        MODEL: {"precision": "bf16", "max_batch": 64}
    }
    message = git(repo, "log", "-1", "--format=%B", branch)
    assert f"Fastci-Action: propose\nFastci-Env: staging\nFastci-Bundle: {bundle_id}" in message
    assert "PASS qualification: 6 qualification result(s) passed on rev-a, rev-b" in message
    (event,) = release_events(data)
    assert (event["action"], event["environment"], event["bundle_id"], event["git_commit"]) == (
        "propose",
        "staging",
        bundle_id,
        git(repo, "rev-parse", branch),
    )
    assert event["bundle"] == BUNDLE and event["models"] == [MODEL]


def _alert(stage, bundle=BUNDLE, regression_id="r" * 32, cause="c"):
    end = Endpoint(result_id="e" * 32, run_id="nightly-9", commit="abcdef1", bundle=bundle, node_id="node-01")
    return RegressionAlert(
        cause_id=cause * 32,
        stage=stage,
        subject="throughput_samples_per_s on rev-a",
        regression_id=regression_id,
        kind="performance",
        test_id=f"qualify/{MODEL}/bf16/throughput",
        repo="acme/llm-framework",
        hardware_revision="rev-a",
        good=end,
        bad=end,
        summary="throughput 3.1% lower (p=1e-4)",
    )


FAILING = {
    # gate -> (what makes it fail, words its reason must have)
    "correctness": (
        [result("tests/ops/test_matmul.py::test_bf16", run_id="pre-1", trigger="presubmit", status="failed", time=T0)],
        "tests/ops/test_matmul.py::test_bf16 on rev-a (presubmit): failed",
    ),
    "eval": (
        qualification(eval_ratio=0.955, status={("training", "rev-b"): "failed"}, at=T0 + timedelta(hours=1), run="n2"),
        "dlrm-small on rev-a: eval 95.5% of reference < 99%",
    ),
    "performance": ([_alert("detected")], "open performance regression of qualify/dlrm-small/bf16/throughput"),
    "qualification": (
        qualification(
            revisions=("rev-b",),
            skip={("inference", "rev-b"), ("training", "rev-b")},
            status={("throughput", "rev-b"): "error"},
            at=T0 + timedelta(hours=1),
            run="n2",
        ),
        "qualify/dlrm-small/bf16/throughput on rev-b (nightly): error",
    ),
}


@pytest.mark.parametrize("gate", sorted(FAILING))
def test_a_bundle_failing_a_gate_cannot_be_promoted(setup, tmp_path, capsys, gate):
    data, repo = setup
    breaking, reason = FAILING[gate]
    publish_embedded(data, qualification())
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    publish_embedded(data, breaking)  # evidence arriving after the proposal: promotion re-evaluates
    main_before, files_before = git(repo, "rev-parse", "main"), tree(repo)
    capsys.readouterr()
    assert cli(data, repo, "promote", "staging") == 1
    err = capsys.readouterr().err
    assert "refused:" in err and f"  {gate}: " in err and reason in " ".join(err.split())
    assert git(repo, "rev-parse", "main") == main_before and tree(repo) == files_before
    assert len(git(repo, "for-each-ref", "refs/heads/release/").splitlines()) == 1  # the proposal stays open
    refused = release_events(data)[-1]
    assert refused["action"] == "refused" and any(g["gate"] == gate and not g["passed"] for g in refused["gates"])


def test_a_recovered_regression_no_longer_blocks_and_an_unrelated_bundle_never_did(setup, tmp_path):
    data, repo = setup
    publish_embedded(
        data,
        [*qualification(), _alert("detected", bundle=OTHER, regression_id="o" * 32, cause="a"), _alert("detected")],
    )
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    assert cli(data, repo, "promote", "staging") == 1
    publish_embedded(data, [_alert("recovered", cause="d")])
    assert cli(data, repo, "promote", "staging") == 0


def signed_as(monkeypatch, principal: str | None, key: str | None = None) -> None:
    """Publish what follows as ``principal`` with ``key`` (its own unless given); None: unsigned."""
    if principal is None:
        monkeypatch.delenv("FASTCI_PROVENANCE_PRINCIPAL")
        monkeypatch.delenv("FASTCI_PROVENANCE_KEY")
        return
    monkeypatch.setenv("FASTCI_PROVENANCE_PRINCIPAL", principal)
    monkeypatch.setenv("FASTCI_PROVENANCE_KEY", key or KEYS[principal])


NOT_ACCEPTED = {
    # how the bundle's only (passing) results were published -> the reason the refusal gives
    "unsigned": (None, None, "no provenance (published without FASTCI_PROVENANCE_PRINCIPAL and FASTCI_PROVENANCE_KEY)"),
    # a CI producer's credential claiming the nightly qualification run
    "ci": (
        "ci",
        None,
        "signed by 'ci', which may not qualify a release (release.toml qualifying_principals: qualifier)",
    ),
    "unknown": ("mallory", "mallory-key-0123456789", "signed by principal 'mallory', which has no key in"),
}


@pytest.mark.parametrize("case", sorted(NOT_ACCEPTED))
def test_a_result_without_accepted_provenance_passes_no_gate(setup, tmp_path, capsys, monkeypatch, case, report_figure):
    data, repo = setup
    principal, key, reason = NOT_ACCEPTED[case]
    signed_as(monkeypatch, principal, key)
    publish_embedded(data, qualification())
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    capsys.readouterr()
    assert cli(data, repo, "promote", "staging") == 1
    raw = capsys.readouterr().err
    err = " ".join(raw.split())
    assert "correctness: no result has run on this bundle" in err
    assert "qualification: 6 missing (no nightly or release result)" in err
    assert (
        "6 result(s) on this bundle not counted: qualify/dlrm-small/bf16/inference on rev-a (run n1-rev-a, passed)"
        in err
    )
    assert reason in err
    failing = [line.strip() for line in raw.splitlines() if line.strip().startswith("qualification:")]
    report_figure(
        f"release promote, {case} results: refused; {failing[0][:60]}... "
        + failing[0][failing[0].index("| 6 result(s)") :][:300]
    )
    refused = release_events(data)[-1]
    provenance = next(g for g in refused["gates"] if g["gate"] == "provenance")
    assert provenance["passed"] and "0 result(s) signed by qualifier counted; 6 not counted" in provenance["detail"]


def test_a_forged_signature_fails_the_provenance_gate(setup, tmp_path, capsys, monkeypatch, report_figure):
    data, repo = setup
    signed_as(monkeypatch, "qualifier", "not-the-qualifier-key-0000")  # claims qualifier without its key
    publish_embedded(data, qualification())
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    capsys.readouterr()
    assert cli(data, repo, "promote", "staging") == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "provenance: 6 result(s) on this bundle carry a signature that does not verify" in err
    assert "signature does not verify with the key of principal 'qualifier'" in err
    report_figure("release promote, forged qualifier signature: refused; " + err[err.index("provenance:") :][:300])


def test_another_principal_claiming_a_newer_run_cannot_flip_a_gate(setup, tmp_path, capsys, monkeypatch):
    data, repo = setup
    publish_embedded(data, qualification(status={("inference", "rev-a"): "failed"}))  # the qualifier's run
    signed_as(monkeypatch, "ci")
    publish_embedded(data, qualification(run="n2", at=T0 + timedelta(hours=1)))  # newer, passing, not counted
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    capsys.readouterr()
    assert cli(data, repo, "promote", "staging") == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "qualification: 1 failed: qualify/dlrm-small/bf16/inference on rev-a (nightly): failed" in err
    assert "(run n2-rev-a, passed): signed by 'ci', which may not qualify a release" in err

    signed_as(monkeypatch, "qualifier")
    publish_embedded(data, qualification(run="n3", at=T0 + timedelta(hours=2)))  # the qualifier runs it again
    capsys.readouterr()
    assert cli(data, repo, "promote", "staging") == 0
    provenance = next(g for g in release_events(data)[-1]["gates"] if g["gate"] == "provenance")
    assert provenance["passed"] and "12 result(s) signed by qualifier counted; 6 not counted" in provenance["detail"]


def test_a_views_file_from_before_provenance_counts_nothing(setup, tmp_path, capsys):
    import duckdb

    data, repo = setup
    publish_embedded(data, qualification())
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0  # refreshes the views
    with duckdb.connect(str(data / "views.duckdb")) as con:
        con.execute("ALTER TABLE results DROP COLUMN provenance")  # as a views file written before it
    capsys.readouterr()
    assert cli(data, repo, "promote", "staging", "--no-refresh") == 1
    assert "no provenance (published without" in " ".join(capsys.readouterr().err.split())


def test_promote_is_a_real_merge_commit_and_rollback_restores_the_files_byte_for_byte(setup, tmp_path, capsys):
    data, repo = setup
    publish_embedded(data, [*qualification(), *qualification(bundle=OTHER, run="n3")])
    empty = tree(repo)
    assert cli(data, repo, "propose", "staging", manifest(tmp_path, "b1")) == 0
    assert cli(data, repo, "promote", "staging") == 0
    merge = git(repo, "rev-parse", "main")
    parents = git(repo, "rev-list", "--parents", "-n", "1", merge).split()[1:]
    assert len(parents) == 2 and git(repo, "rev-parse", "release/staging/" + _bundle_id(repo, "staging")) == parents[1]
    assert "Fastci-Action: promote" in git(repo, "log", "-1", "--format=%B", merge)
    first = tree(repo)
    assert cli(data, repo, "propose", "staging", manifest(tmp_path, "b2", bundle=OTHER, max_batch=32)) == 0
    assert cli(data, repo, "promote", "staging") == 0
    assert tree(repo) != first and b'kernels = "kn-2.0"' in tree(repo)["environments/staging/bundle.toml"]
    capsys.readouterr()

    assert cli(data, repo, "rollback", "staging") == 0
    assert tree(repo) == first  # every file, byte for byte
    assert (repo / "environments/staging/bundle.toml").read_bytes() == first["environments/staging/bundle.toml"]
    assert git(repo, "status", "--porcelain") == ""
    message = git(repo, "log", "-1", "--format=%B")
    assert "Fastci-Action: rollback" in message and "git revert -m 1" in message
    assert "holds " in capsys.readouterr().err

    assert cli(data, repo, "rollback", "staging") == 0  # the promotion before: staging is empty again
    assert tree(repo) == empty
    assert cli(data, repo, "rollback", "staging") == 2
    assert "nothing to roll back" in capsys.readouterr().err
    actions = [(e["action"], e["environment"]) for e in release_events(data)]
    assert actions == [("propose", "staging"), ("promote", "staging")] * 2 + [("rollback", "staging")] * 2
    history = [
        line.split(" ", 1)[1] for line in git(repo, "log", "--first-parent", "--format=%h %s", "main").splitlines()
    ]
    assert [h.split(":")[0] for h in history] == ["release(staging)"] * 4 + ["release repo"]  # every change is a commit


def _bundle_id(repo, env) -> str:
    return Repo(repo).blob("main", f"environments/{env}/bundle.toml").split(b'id = "')[1].split(b'"')[0].decode()


def test_production_accepts_only_a_bundle_staging_promoted_and_kept(setup, tmp_path, capsys):
    data, repo = setup
    publish_embedded(data, qualification())
    path = manifest(tmp_path)
    assert cli(data, repo, "propose", "production", path) == 0  # the pull request may exist...
    capsys.readouterr()
    assert cli(data, repo, "promote", "production") == 1  # ...but it skipped staging
    assert "staging: this bundle was never promoted to staging" in " ".join(capsys.readouterr().err.split())
    assert "environments/production/bundle.toml" not in tree(repo)

    assert cli(data, repo, "propose", "staging", path) == 0
    assert cli(data, repo, "promote", "staging") == 0
    assert cli(data, repo, "rollback", "staging") == 0
    capsys.readouterr()
    assert cli(data, repo, "promote", "production") == 1  # staging promoted it, then rolled it back
    err = " ".join(capsys.readouterr().err.split())
    assert "staging: promoted to staging in" in err and "but rolled back in" in err

    assert cli(data, repo, "propose", "staging", path) == 0  # proposed again (the merged branch is reused)
    assert cli(data, repo, "promote", "staging") == 0
    assert cli(data, repo, "promote", "production") == 0  # the same proposal, now that staging holds the bundle
    files = tree(repo)
    assert files["environments/production/bundle.toml"] == files["environments/staging/bundle.toml"]
    assert files[f"environments/production/serving/{MODEL}.toml"] == files[f"environments/staging/serving/{MODEL}.toml"]


def test_production_can_take_staging_s_bundle_by_name(setup, tmp_path):
    data, repo = setup
    publish_embedded(data, qualification())
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    assert cli(data, repo, "promote", "staging") == 0
    assert cli(data, repo, "propose", "production", "staging") == 0
    assert cli(data, repo, "promote", "production") == 0
    assert _bundle_id(repo, "production") == _bundle_id(repo, "staging")


def test_a_stale_proposal_is_refused(setup, tmp_path, capsys):
    data, repo = setup
    publish_embedded(data, [*qualification(), *qualification(bundle=OTHER, run="n3")])
    assert cli(data, repo, "propose", "staging", manifest(tmp_path, "b1")) == 0
    assert cli(data, repo, "propose", "staging", manifest(tmp_path, "b2", bundle=OTHER)) == 0
    capsys.readouterr()
    assert cli(data, repo, "promote", "staging") == 2
    assert "2 open proposals for staging" in capsys.readouterr().err
    first, second = (
        b.rsplit("/", 1)[1]
        for b in git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/release/staging/").splitlines()
    )
    assert cli(data, repo, "promote", "staging", "--bundle", first) == 0
    main_before = git(repo, "rev-parse", "main")
    assert cli(data, repo, "promote", "staging", "--bundle", second) == 2
    assert "is stale: staging changed on main since it was proposed" in capsys.readouterr().err
    assert git(repo, "rev-parse", "main") == main_before


def test_command_errors_name_the_problem(setup, tmp_path, capsys, monkeypatch):
    data, repo = setup
    path = manifest(tmp_path)

    def error(*args: str, code: int = 2) -> str:
        capsys.readouterr()
        assert cli(data, repo, *args) == code
        return " ".join(capsys.readouterr().err.split())

    assert "unknown environment 'qa' (known: dev, staging, production)" in error("propose", "qa", path)
    assert "unknown environment 'prod'" in error("rollback", "prod")
    assert "no open proposal for staging" in error("promote", "staging")
    assert "nothing to roll back" in error("rollback", "dev")
    assert "does not exist" in error("propose", "staging", str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text('[bundle]\ncompiler = "1"\n[serving.m]\nx = 1\n')
    assert "field 'bundle.kernels': not given" in error("propose", "staging", str(bad))
    bad.write_text(open(path).read().replace("[serving.dlrm-small]", "[serving.'../etc']"))
    assert "the model name must be letters, digits" in error("propose", "staging", str(bad))

    (repo / "notes.txt").write_text("wip\n")  # a dirty release repo: nothing may change
    assert "has uncommitted changes (notes.txt)" in error("propose", "staging", path)
    (repo / "notes.txt").unlink()
    git(repo, "checkout", "-q", "-b", "elsewhere")
    assert "is on elsewhere, not on its main branch 'main'" in error("propose", "staging", path)
    git(repo, "checkout", "-q", "main")

    assert cli(data, repo, "propose", "staging", path) == 0
    assert "already proposed for staging" in error("propose", "staging", path)
    assert cli(data, repo, "promote", "staging") == 1  # no results at all: refused, not an error
    publish_embedded(data, qualification())
    assert cli(data, repo, "promote", "staging") == 0
    assert "already in force in staging" in error("propose", "staging", path)

    monkeypatch.delenv("FASTCI_RELEASE_REPO", raising=False)
    capsys.readouterr()
    assert main(["--data-dir", str(data), "release", "promote", "staging"]) == 2
    assert "give --repo PATH or set FASTCI_RELEASE_REPO" in capsys.readouterr().err
    assert "not the top of a git work tree" in " ".join(
        (main(["--data-dir", str(data), "release", "status", "--repo", str(tmp_path)]), capsys.readouterr().err)[
            1
        ].split()
    )
    assert main(["--data-dir", str(data), "release", "init", "--repo", str(repo)]) == 2
    assert "already has release.toml" in capsys.readouterr().err


def test_status_shows_each_environment_and_the_audit_log(setup, tmp_path, capsys):
    data, repo = setup
    publish_embedded(data, qualification())
    assert cli(data, repo, "propose", "staging", manifest(tmp_path)) == 0
    assert cli(data, repo, "promote", "staging") == 0
    assert cli(data, repo, "propose", "production", "staging") == 0
    capsys.readouterr()
    assert main(["--data-dir", str(data), "release", "status", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    bundle_id = _bundle_id(repo, "staging")
    assert f"staging: bundle {bundle_id} (b1), serves dlrm-small, since " in out and "production: no bundle" in out
    assert f"open proposal release/production/{bundle_id} (gates pass at proposal)" in out
    assert "promote  staging    release(staging): promote bundle" in out and "dev: no bundle" in out


def test_the_files_are_byte_stable_and_say_what_they_hold():
    doc = {
        "name": "rc",
        "bundle": dict(BUNDLE),
        "serving": {
            MODEL: {
                "precision": "bf16",
                "max_batch": 64,
                "ratio": 0.5,
                "quant": True,
                "shapes": [1, 2],
                "note": 'a "q" \\ \x7f',
            }
        },
    }
    bundle = parse_manifest(doc, "doc")
    shuffled = parse_manifest(
        {
            "serving": {MODEL: dict(reversed(list(doc["serving"][MODEL].items())))},
            "bundle": dict(reversed(list(BUNDLE.items()))),
            "name": "rc",
        },
        "doc",
    )
    files = render_environment(bundle, "dev")
    assert render_environment(shuffled, "dev") == files and shuffled.id == bundle.id
    assert parse_environment(files, "dev") == ReleaseBundle(bundle.versions, doc["serving"], "rc")
    assert parse_manifest({**doc, "name": "other label"}, "doc").id == bundle.id  # the name is only a label
    assert parse_manifest({**doc, "serving": {MODEL: {"precision": "fp8"}}}, "doc").id != bundle.id
    tampered = {**files, "environments/dev/serving/dlrm-small.toml": b'model = "dlrm-small"\nmax_batch = 65\n'}
    with pytest.raises(ValueError, match="is not the id of its contents"):
        parse_environment(tampered, "dev")


def test_only_the_last_paragraph_of_a_message_is_read_as_trailers(tmp_path):
    repo = Repo(tmp_path)
    repo.git("init", "-q", "-b", "main")
    repo.git(
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "subject\n\nFastci-Action: promote\nFastci-Env: production\n\nFastci-Action: propose\nFastci-Env: dev\n",
    )
    (commit,) = repo.first_parent_log("main")
    assert commit.trailers == {"Fastci-Action": "propose", "Fastci-Env": "dev"}
