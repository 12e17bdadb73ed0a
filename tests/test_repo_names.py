"""A repository's name, as commits, results and evidence carry it: the origin remote's whole path, else
(a clone of a local path, no remote) the work tree's directory name; ``$FASTCI_REPO`` overrides both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from fastci.cli.main import main
from fastci.producer.context import load_context
from fastci.selection.repos import repo_name_of


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "lib.py").write_text("def f():\n    return 1\n")
    git(path, "add", ".")
    git(path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "first")
    return path


@pytest.mark.parametrize(
    ("remote", "name"),
    [
        ("https://gitlab.com/group/sub/lib.git", "group/sub/lib"),
        ("git@gitlab.com:group/sub/lib.git", "group/sub/lib"),
        ("ssh://git@gitlab.example.com:2222/group/sub/lib.git", "group/sub/lib"),
        ("https://ci-token@gitlab.com/other-group/lib/", "other-group/lib"),
        ("https://github.com/acme/llm-framework", "acme/llm-framework"),
        ("git@github.com:acme/llm-framework.git", "acme/llm-framework"),
    ],
)
def test_a_hosted_remote_names_the_repository_by_its_whole_path(tmp_path, remote, name):
    repo = make_repo(tmp_path / "checkout")
    git(repo, "remote", "add", "origin", remote)
    assert repo_name_of(repo) == name
    (repo / "pkg").mkdir()
    assert repo_name_of(repo / "pkg") == name  # from anywhere in the work tree


def test_two_groups_projects_of_one_name_do_not_collide(tmp_path):
    first, second = make_repo(tmp_path / "a" / "lib"), make_repo(tmp_path / "b" / "lib")
    git(first, "remote", "add", "origin", "git@gitlab.com:group-a/sub/lib.git")
    git(second, "remote", "add", "origin", "git@gitlab.com:group-b/sub/lib.git")
    assert {repo_name_of(first), repo_name_of(second)} == {"group-a/sub/lib", "group-b/sub/lib"}


def test_a_clone_of_a_local_path_or_of_nothing_is_named_by_its_directory(tmp_path):
    mirror = make_repo(tmp_path / ".mirror" / "owner+name" / "repo")
    clone = tmp_path / "work" / "my-lib"
    git(tmp_path, "clone", "-q", str(mirror), str(clone))
    assert git(clone, "remote", "get-url", "origin") == str(mirror)
    assert repo_name_of(clone) == "my-lib"  # not "owner+name/repo", where the copy happened to come from
    file_clone = tmp_path / "other"
    git(tmp_path, "clone", "-q", f"file://{mirror}", str(file_clone))
    assert repo_name_of(file_clone) == "other"
    assert repo_name_of(mirror) == "repo"  # no remote at all


def test_fastci_repo_and_repo_name_override_the_remote(tmp_path, monkeypatch, capsysbinary):
    repo = make_repo(tmp_path / "checkout")
    git(repo, "remote", "add", "origin", "git@gitlab.com:group/sub/lib.git")

    def changes(*args: str) -> str:
        assert main(["changes", "--repo", str(repo), "--dry-run", *args]) == 0
        return orjson.loads(capsysbinary.readouterr().out)["repo"]

    assert changes() == "group/sub/lib"
    assert load_context(env={}, cwd=repo).repo == "group/sub/lib"  # results carry the same name
    monkeypatch.setenv("FASTCI_REPO", "acme/lib")
    assert changes() == "acme/lib"
    assert load_context(cwd=repo).repo == "acme/lib"
    assert changes("--repo-name", "mine/lib") == "mine/lib"
