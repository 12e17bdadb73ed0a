"""Change analysis against real git repositories built in tmp_path, and the units it compares."""

from __future__ import annotations

import os
import subprocess
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from fastci.cli.main import main
from fastci.core.codec import encode
from fastci.runtime.embedded import DataDir
from fastci.selection.changes import ChangeAnalysisError, analyze_commit, layers_of
from fastci.selection.units import MODULE, Units
from fastci.topology import decode


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch):
    """Git sees only the test repositories: no user or system config, and no GIT_DIR inherited
    from a hook that runs the tests (which would point every command at the outer repository)."""
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_CEILING_DIRECTORIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Ada Lovelace")
        self.git("config", "user.email", "ada@example.com")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        run = subprocess.run(
            ["git", "-C", str(self.path), *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    def write(self, path: str, text: str | bytes) -> None:
        file = self.path / path
        file.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            file.write_bytes(text)
        else:
            file.write_text(textwrap.dedent(text).lstrip("\n"))

    def remove(self, path: str) -> None:
        (self.path / path).unlink()

    def commit(self, message: str = "change", date: str = "2026-03-01T10:00:00+02:00") -> str:
        self.git("add", "-A")
        self.git(
            "commit", "-q", "--allow-empty", "-m", message, env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        )
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path / "llm-framework")


def functions(event) -> set[tuple[str, str, str]]:
    return {(f.path, f.qualname, f.change) for f in event.changed_functions}


def files(event) -> set[tuple[str, str, str | None]]:
    return {(f.path, f.change, f.old_path) for f in event.changed_files}


MODEL = """
    import torch

    HIDDEN = 128


    class Model(torch.nn.Module):
        scale = 2

        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(HIDDEN, HIDDEN)

        def forward(self, x):
            return self.proj(x) * self.scale


    def build():
        def init(model):
            return model

        return init(Model())
    """


def two_commits(repo: Repo, before: str, after: str, path: str = "pkg/model.py") -> str:
    repo.write(path, before)
    repo.commit("before")
    repo.write(path, after)
    return repo.commit("after")


# ----- what changed inside Python files


def test_a_method_body_edit_modifies_only_that_method(repo):
    sha = two_commits(repo, MODEL, MODEL.replace("* self.scale", "* self.scale + 1"))
    event = analyze_commit(repo.path, sha)
    assert functions(event) == {("pkg/model.py", "Model.forward", "modified")}
    assert files(event) == {("pkg/model.py", "modified", None)}


def test_formatting_and_comments_modify_nothing(repo):
    reformatted = """
        import torch

        HIDDEN = 128  # width of every layer
        class Model(torch.nn.Module):
            scale = 2
            def __init__(self):
                super().__init__()
                self.proj = torch.nn.Linear(
                    HIDDEN,
                    HIDDEN,
                )
            def forward(self, x):
                # the projection, scaled
                return (self.proj(x) * self.scale)
        def build():
            def init(model): return model
            return init(Model())
        """
    event = analyze_commit(repo.path, two_commits(repo, MODEL, reformatted))
    assert functions(event) == set()
    assert files(event) == {("pkg/model.py", "modified", None)}


def test_a_decorator_change_modifies_the_decorated_function(repo):
    before = """
        import functools

        @functools.lru_cache(maxsize=1)
        def table():
            return {}

        def other():
            return 1
        """
    event = analyze_commit(repo.path, two_commits(repo, before, before.replace("maxsize=1", "maxsize=8")))
    assert functions(event) == {("pkg/model.py", "table", "modified")}


def test_a_nested_function_edit_modifies_the_inner_function_not_the_outer(repo):
    event = analyze_commit(repo.path, two_commits(repo, MODEL, MODEL.replace("return model", "return model.eval()")))
    assert functions(event) == {("pkg/model.py", "build.<locals>.init", "modified")}


def test_adding_a_method_changes_the_class_for_its_users_not_for_every_importer(repo):
    method = "def extra_repr(self):\n            return 'model'\n\n        def forward(self, x):"
    after = MODEL.replace("def forward(self, x):", method)  # MODEL is indented by 4 until dedented
    event = analyze_commit(repo.path, two_commits(repo, MODEL, after))
    # Code that uses the class runs one of its methods or names it (build); the class body is not
    # module code every importer runs.
    assert functions(event) == {
        ("pkg/model.py", "Model.extra_repr", "added"),
        ("pkg/model.py", "Model.__init__", "modified"),
        ("pkg/model.py", "Model.forward", "modified"),
        ("pkg/model.py", "build", "modified"),
    }


def test_a_class_whose_attributes_or_decorators_change_is_module_code_still(repo):
    attribute = analyze_commit(repo.path, two_commits(repo, MODEL, MODEL.replace("scale = 2", "scale = 3")))
    assert ("pkg/model.py", "Model.<body>", "modified") in functions(attribute)
    decorated = MODEL.replace("class Model", "@register\n    class Model").replace(
        "def forward(self, x):", "def extra_repr(self):\n            return 'model'\n\n        def forward(self, x):"
    )
    event = analyze_commit(
        repo.path, two_commits(repo, MODEL.replace("class Model", "@register\n    class Model"), decorated)
    )
    assert ("pkg/model.py", "Model.<body>", "modified") in functions(event)  # a registry may hold it unnamed


def test_a_function_added_beside_a_re_bound_name_is_added_only(repo):
    # HIDDEN changes and a new function reads it: the function is new, not also "modified" (a
    # modified unit no evidence knows would run every importer's tests).
    after = MODEL.replace("HIDDEN = 128", "HIDDEN = 256") + "\n\n    def width():\n        return HIDDEN\n"
    event = analyze_commit(repo.path, two_commits(repo, MODEL, after))
    assert functions(event) == {("pkg/model.py", "Model.__init__", "modified"), ("pkg/model.py", "width", "added")}


def test_a_deleted_class_changes_what_named_it_not_every_importer(repo):
    before = MODEL + "\n\n    class Head:\n        def forward(self, x):\n            return x\n"
    event = analyze_commit(repo.path, two_commits(repo, before, MODEL))
    assert functions(event) == {("pkg/model.py", "Head.forward", "deleted")}


def test_a_module_constant_change_modifies_the_units_that_read_it(repo):
    event = analyze_commit(repo.path, two_commits(repo, MODEL, MODEL.replace("HIDDEN = 128", "HIDDEN = 256")))
    assert functions(event) == {("pkg/model.py", "Model.__init__", "modified")}  # not every importer's test


def test_a_constant_another_module_imports_modifies_its_readers_there_too(repo):
    repo.write(
        "pkg/train.py", "from pkg.model import HIDDEN\n\nWIDTH = HIDDEN * 2\n\n\ndef steps():\n    return HIDDEN\n"
    )
    event = analyze_commit(repo.path, two_commits(repo, MODEL, MODEL.replace("HIDDEN = 128", "HIDDEN = 256")))
    assert functions(event) == {
        ("pkg/model.py", "Model.__init__", "modified"),
        ("pkg/train.py", "steps", "modified"),
        ("pkg/train.py", MODULE, "modified"),  # its own module code computes with it (WIDTH)
    }


def test_module_code_that_does_more_than_bind_names_is_module_code_as_before(repo):
    registered = MODEL + "\nregister(Model)\n"
    event = analyze_commit(
        repo.path, two_commits(repo, registered, registered.replace("register(Model)", "register(build)"))
    )
    assert functions(event) == {("pkg/model.py", MODULE, "modified")}
    computed = MODEL.replace("HIDDEN = 128", "HIDDEN = load()")
    event = analyze_commit(repo.path, two_commits(repo, MODEL, computed))
    assert functions(event) == {("pkg/model.py", MODULE, "modified")}  # a call at import may do anything


def test_editing_a_property_getter_is_seen_although_the_setter_shares_its_name(repo):
    before = """
        class Config:
            @property
            def lr(self):
                return self._lr

            @lr.setter
            def lr(self, value):
                self._lr = value
        """
    event = analyze_commit(
        repo.path, two_commits(repo, before, before.replace("return self._lr", "return self._lr * 2"))
    )
    assert functions(event) == {("pkg/model.py", "Config.lr", "modified")}


# ----- whole files


def test_a_renamed_file_with_an_edit_modifies_only_the_edited_function(repo):
    repo.write("pkg/model.py", MODEL)
    repo.commit("before")
    repo.git("mv", "pkg/model.py", "pkg/network.py")
    repo.write("pkg/network.py", MODEL.replace("HIDDEN, HIDDEN", "HIDDEN, HIDDEN, bias=False"))
    event = analyze_commit(repo.path, repo.commit("rename and edit"))
    assert files(event) == {("pkg/network.py", "renamed", "pkg/model.py")}
    assert functions(event) == {("pkg/network.py", "Model.__init__", "modified")}


def test_a_pure_rename_modifies_nothing(repo):
    repo.write("pkg/model.py", MODEL)
    repo.commit("before")
    repo.git("mv", "pkg/model.py", "pkg/network.py")
    event = analyze_commit(repo.path, repo.commit("rename"))
    assert files(event) == {("pkg/network.py", "renamed", "pkg/model.py")}
    assert functions(event) == set()


def test_a_deleted_file_deletes_every_unit(repo):
    repo.write("pkg/model.py", MODEL)
    repo.write("pkg/keep.py", "X = 1\n")
    repo.commit("before")
    repo.remove("pkg/model.py")
    event = analyze_commit(repo.path, repo.commit("delete"))
    assert files(event) == {("pkg/model.py", "deleted", None)}
    assert functions(event) == {
        ("pkg/model.py", name, "deleted")
        for name in (MODULE, "Model.<body>", "Model.__init__", "Model.forward", "build", "build.<locals>.init")
    }


def test_an_added_file_adds_every_unit(repo):
    repo.write("README.md", "hello\n")
    repo.commit("before")
    repo.write("pkg/model.py", MODEL)
    event = analyze_commit(repo.path, repo.commit("add"))
    assert files(event) == {("pkg/model.py", "added", None)}
    assert functions(event) == {
        ("pkg/model.py", name, "added")
        for name in (MODULE, "Model.<body>", "Model.__init__", "Model.forward", "build", "build.<locals>.init")
    }


@pytest.mark.parametrize(
    "before, after",
    [
        (MODEL, MODEL.replace("def build():", "def build(:")),  # breaks
        (MODEL.replace("def build():", "def build(:"), MODEL),  # is fixed
        (None, "def broken(:\n"),  # arrives broken
        (MODEL, "x = 1\n\0\n"),  # NUL bytes: ValueError, not SyntaxError, on 3.11
        (MODEL, b"\xff\xfe not utf-8 = 1\n"),  # undecodable
    ],
    ids=["breaks", "is-fixed", "added-broken", "nul-bytes", "undecodable"],
)
def test_a_file_that_does_not_parse_is_a_modified_module(repo, before, after):
    repo.write("other.py", "Y = 1\n")
    if before is not None:
        repo.write("pkg/model.py", before)
    repo.commit("before")
    repo.write("pkg/model.py", after)
    event = analyze_commit(repo.path, repo.commit("after"))
    assert {f.path for f in event.changed_files} == {"pkg/model.py"}
    assert functions(event) == {("pkg/model.py", MODULE, "modified")}


def test_non_python_files_are_changed_files_only(repo):
    repo.write("README.md", "v1\n")
    repo.write("kernels/attention.cu", "__global__ void k() {}\n")
    repo.commit("before")
    repo.write("README.md", "v2\n")
    repo.write("kernels/attention.cu", "__global__ void k() { return; }\n")
    repo.write("tools/model.py.txt", "def f(): pass\n")
    event = analyze_commit(repo.path, repo.commit("docs and a kernel"))
    assert files(event) == {
        ("README.md", "modified", None),
        ("kernels/attention.cu", "modified", None),
        ("tools/model.py.txt", "added", None),
    }
    assert functions(event) == set()
    assert event.layers == ("kernels",) and event.hardware_path


def test_a_root_commit_is_compared_with_the_empty_tree(repo):
    repo.write("pkg/model.py", "def f():\n    return 1\n")
    repo.write("setup.cfg", "[metadata]\n")
    sha = repo.commit("initial")
    event = analyze_commit(repo.path, sha)
    assert event.sha == sha and event.parents == ()
    assert files(event) == {("pkg/model.py", "added", None), ("setup.cfg", "added", None)}
    assert functions(event) == {("pkg/model.py", MODULE, "added"), ("pkg/model.py", "f", "added")}


def test_a_merge_commit_is_compared_with_its_first_parent(repo):
    repo.write("a.py", "def a():\n    return 1\n")
    repo.write("b.py", "def b():\n    return 1\n")
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "side")
    repo.write("b.py", "def b():\n    return 2\n")
    side = repo.commit("side edits b")
    repo.git("checkout", "-q", "main")
    repo.write("a.py", "def a():\n    return 2\n")
    main = repo.commit("main edits a")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    event = analyze_commit(repo.path, "HEAD")
    assert event.parents == (main, side)
    assert functions(event) == {("b.py", "b", "modified")}


def test_paths_with_spaces_unicode_and_control_characters_survive(repo):
    repo.write("README.md", "x\n")
    repo.commit("before")
    repo.write("src/données v2.py", "def f(): pass\n")
    repo.write("src/odd\nname.py", "def g(): pass\n")
    event = analyze_commit(repo.path, repo.commit("odd names"))
    assert {f.path for f in event.changed_files} == {"src/données v2.py", "src/odd\\x0aname.py"}
    assert ("src/odd\\x0aname.py", "g", "added") in functions(event)


# ----- commit metadata, layers, the event contract


def test_the_event_carries_the_commit_metadata(repo):
    repo.write("a.py", "A = 1\n")
    parent = repo.commit("first")
    repo.write("a.py", "A = 2\n")
    sha = repo.commit("Speed up attention\n\nA longer explanation.\n", date="2026-03-02T09:30:00+05:30")
    event = analyze_commit(repo.path, sha[:10])
    assert (event.repo, event.sha, event.parents) == ("llm-framework", sha, (parent,))
    assert event.author == "Ada Lovelace <ada@example.com>"
    assert event.title == "Speed up attention"
    assert event.time == datetime(2026, 3, 2, 9, 30, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    assert event.time.tzinfo is not None
    assert analyze_commit(repo.path, sha, repo_name="acme/llm").repo == "acme/llm"
    assert decode("commits", encode(event)) == event  # what the topic accepts
    assert analyze_commit(repo.path, sha).id == event.id  # deterministic


def test_layers_follow_directory_names_and_hardware_layers_set_the_hardware_path(repo):
    repo.write("a.py", "A = 1\n")
    repo.commit("first")
    repo.write("models/llama/attention.py", "def attend(): pass\n")
    repo.write("runtime/alloc.py", "def alloc(): pass\n")
    event = analyze_commit(repo.path, repo.commit("model and runtime"))
    assert event.layers == ("model", "runtime") and not event.hardware_path

    repo.write("compiler/passes/fuse.py", "def fuse(): pass\n")
    event = analyze_commit(repo.path, repo.commit("compiler"))
    assert event.layers == ("compiler",) and event.hardware_path


def test_layers_of_is_a_first_match_rule_on_directories_and_can_be_overridden():
    assert layers_of(["fastci/trainer.py", "docs/index.md"]) == ("framework",)
    assert layers_of(["runtime/kernels/gemm.py"]) == ("kernels",)  # the rule nearest the hardware wins
    assert layers_of(["src/firmware/boot.c", "pkg/driver/ioctl.py", "models/bert.py"]) == (
        "model",
        "driver",
        "firmware",
    )
    assert layers_of(["kernels.py"]) == ("framework",)  # a file name is not a directory
    rules = (("csrc", "kernels"), ("nn", "model"))
    assert layers_of(["csrc/ops.cpp", "torch/nn/linear.py", "kernels/x.py"], rules) == ("model", "framework", "kernels")


def test_a_bad_revision_is_an_error_naming_it(repo):
    repo.write("a.py", "A = 1\n")
    repo.commit("first")
    with pytest.raises(ChangeAnalysisError, match=r"unknown revision 'no-such-branch' in .*llm-framework"):
        analyze_commit(repo.path, "no-such-branch")
    with pytest.raises(ChangeAnalysisError, match="'--output=x' is not a revision"):
        analyze_commit(repo.path, "--output=x")
    tree = repo.git("rev-parse", "HEAD^{tree}")
    with pytest.raises(ChangeAnalysisError, match="unknown revision"):
        analyze_commit(repo.path, tree)  # a tree is not a commit


def test_a_path_that_is_not_a_repository_is_an_error_naming_it(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ChangeAnalysisError, match=rf"{plain} is not a git repository: .*not a git repository"):
        analyze_commit(plain, "HEAD")
    with pytest.raises(ChangeAnalysisError, match=rf"{tmp_path / 'missing'}: no such directory"):
        analyze_commit(tmp_path / "missing", "HEAD")


# ----- the command


@pytest.fixture
def cli():
    """The ``fastci`` command line, called in this process."""
    return main


def commits_in_log(data: Path) -> list:
    if not (data / "log" / "commits").exists():
        return []
    return [decode("commits", record.payload) for record in DataDir(data).log.topic("commits").read()]


def test_changes_publishes_to_the_embedded_log_and_summarises(repo, tmp_path, cli, capsys):
    sha = two_commits(
        repo, MODEL, MODEL.replace("* self.scale", "* self.scale + 1").replace("HIDDEN = 128", "HIDDEN = 64")
    )
    data = tmp_path / "data"
    assert cli(["--data-dir", str(data), "--create", "changes", "--repo", str(repo.path), "--rev", sha]) == 0
    assert commits_in_log(data) == [analyze_commit(repo.path, sha)]
    err = capsys.readouterr().err
    assert f"commit {sha[:12]} of llm-framework: after" in err
    assert "files: 1 modified" in err and "functions: 2 modified" in err and "layers: framework" in err


def test_changes_dry_run_prints_the_event_and_publishes_nothing(repo, tmp_path, cli, capsys):
    sha = two_commits(repo, MODEL, MODEL.replace("return model", "return model.eval()"))
    data = tmp_path / "data"
    assert (
        cli(
            [
                "--data-dir",
                str(data),
                "changes",
                "--repo",
                str(repo.path),
                "--rev",
                sha,
                "--repo-name",
                "acme/llm",
                "--dry-run",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert decode("commits", printed.strip().encode()) == analyze_commit(repo.path, sha, "acme/llm")
    assert orjson.loads(printed)["changed_functions"] == [
        {"path": "pkg/model.py", "qualname": "build.<locals>.init", "change": "modified"}
    ]
    assert commits_in_log(data) == []


def test_changes_reports_a_bad_revision_without_a_traceback(repo, tmp_path, cli, capsys):
    repo.write("a.py", "A = 1\n")
    repo.commit("first")
    assert cli(["--data-dir", str(tmp_path), "changes", "--repo", str(repo.path), "--rev", "nope"]) == 2
    assert "unknown revision 'nope'" in capsys.readouterr().err


# ----- Units.unit_at


UNITS_SOURCE = """\
import os

@decorator(
    option=1,
)
def decorated():
    return 1

class Model:
    scale = 2

    @staticmethod
    def make():
        def inner():
            return 3
        return inner

    bias = 0

def outer():
    pass

AFTER = outer()
"""


@pytest.mark.parametrize(
    "line, unit",
    [
        (1, MODULE),
        (3, "decorated"),  # the decorator line
        (4, "decorated"),  # inside the decorator's arguments
        (7, "decorated"),
        (8, MODULE),  # the blank line between two defs
        (9, "Model.<body>"),  # the class line
        (10, "Model.<body>"),  # a class attribute
        (12, "Model.make"),  # a method's decorator
        (14, "Model.make.<locals>.inner"),
        (15, "Model.make.<locals>.inner"),
        (16, "Model.make"),  # back in the method after the nested def
        (18, "Model.<body>"),  # back in the class body after the method
        (21, "outer"),
        (23, MODULE),  # module code after a def
        (99, MODULE),  # past the end
    ],
)
def test_unit_at_finds_the_innermost_unit(line, unit):
    assert Units.parse(UNITS_SOURCE).unit_at(line) == unit


def test_units_spans_and_names():
    units = Units.parse(UNITS_SOURCE)
    assert set(units.by_name) == {
        MODULE,
        "decorated",
        "Model.<body>",
        "Model.make",
        "Model.make.<locals>.inner",
        "outer",
    }
    assert (units.by_name["decorated"].first_line, units.by_name["decorated"].last_line) == (3, 7)
    assert (units.by_name["Model.<body>"].first_line, units.by_name["Model.<body>"].last_line) == (9, 18)


def test_a_name_defined_twice_is_one_unit_covering_both_definitions():
    source = "if FAST:\n    def f():\n        return 1\nelse:\n    def f():\n        return 2\n"
    units = Units.parse(source)
    assert (units.by_name["f"].first_line, units.by_name["f"].last_line) == (2, 6)
    assert units.unit_at(3) == units.unit_at(6) == "f" and units.unit_at(4) == MODULE
    assert (
        Units.parse(source.replace("return 2", "return 3")).by_name["f"].fingerprint != units.by_name["f"].fingerprint
    )


def test_defs_under_nested_blocks_are_collected_once():
    # Each nesting level used to visit its body twice: 2**depth copies of the inner def.
    depth = 6
    source = (
        "".join("    " * i + f"if x{i}:\n" for i in range(depth))
        + "    " * depth
        + "def deep():\n"
        + "    " * (depth + 1)
        + "pass\n"
    )
    units = Units.parse(source)
    assert [span[2] for span in units._spans] == ["deep"]
    assert units.unit_at(depth + 1) == "deep"


def test_changes_refuses_an_event_too_large_for_consumers(repo, tmp_path, cli, capsys, monkeypatch):
    import fastci.core.codec

    monkeypatch.setattr(fastci.core.codec, "MAX_EVENT_BYTES", 200)  # rather than a commit of ~12,000 functions
    sha = two_commits(repo, MODEL, MODEL.replace("return model", "return model.eval()"))
    data = tmp_path / "data"
    assert cli(["--data-dir", str(data), "--create", "changes", "--repo", str(repo.path), "--rev", sha]) == 2
    assert "over the 200-byte event limit" in capsys.readouterr().err
    assert commits_in_log(data) == []


def test_docstrings_and_names_joining_all_are_not_module_code_but_names_leaving_it_are():
    from fastci.selection.changes import compare_units
    from fastci.selection.units import Units

    old = Units.parse('"""Tools."""\n__all__ = ["a"]\nLIMIT = 3\n\ndef a():\n    return LIMIT\n')
    added = Units.parse(
        '"""Tools, more."""\n__all__ = ["a", "b"]\nLIMIT = 3\n\ndef a():\n    return LIMIT\n\ndef b():\n    pass\n'
    )
    assert compare_units(old, added) == [("b", "added")]
    removed = Units.parse('"""Tools."""\n__all__ = []\nLIMIT = 3\n\ndef a():\n    return LIMIT\n')
    assert compare_units(old, removed) == [("<module>", "modified")]
    constant = Units.parse('"""Tools."""\n__all__ = ["a"]\nLIMIT = 4\n\ndef a():\n    return LIMIT\n')
    assert compare_units(old, constant) == [("<module>", "modified")]


def test_adding_a_method_to_a_test_class_changes_only_that_method():
    from fastci.selection.changes import compare_units
    from fastci.selection.units import Units

    old = "class TestOps:\n    limit = 3\n\n    def test_a(self):\n        assert self.limit\n"
    new = old + "\n    def test_b(self):\n        assert self.limit\n"
    assert compare_units(Units.parse(old, "tests/test_ops.py"), Units.parse(new, "tests/test_ops.py")) == [
        ("TestOps.test_b", "added")
    ]
    assert ("Ops.<body>", "modified") in compare_units(  # library code: a new method changes the class
        Units.parse(old.replace("TestOps", "Ops"), "pkg/ops.py"),
        Units.parse(new.replace("TestOps", "Ops"), "pkg/ops.py"),
    )
    attribute = new.replace("limit = 3", "limit = 4")
    assert ("TestOps.<body>", "modified") in compare_units(
        Units.parse(new, "tests/test_ops.py"), Units.parse(attribute, "tests/test_ops.py")
    )


def test_a_name_leaving_all_stands_for_the_units_that_read_it_not_the_module(repo):
    tools = '__all__ = ["a", "b"]\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n'
    repo.write("pkg/__init__.py", "from pkg.tools import *  # noqa: F403\n")
    repo.write(
        "pkg/use.py", "import pkg\n\n\ndef twice():\n    return pkg.b() * 2\n\n\ndef once():\n    return pkg.a()\n"
    )
    sha = two_commits(repo, tools, tools.replace('"a", "b"', '"a"'), path="pkg/tools.py")
    assert functions(analyze_commit(repo.path, sha)) == {("pkg/use.py", "twice", "modified")}  # b left import *
