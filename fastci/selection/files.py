"""What a changed file that is not Python source can do to the tests: nothing, something only the
tests that read it see, or anything.

- ``none``: it cannot change how a test runs (documentation, type stubs, licences, lint settings...);
- ``readers``: a data file (a table, a fixture, a config the code loads): the tests that read it, or
  whose imports read it, per the evidence (``EvidenceEvent.reads``);
- ``suite``: it may change anything (a build file, the test job's settings, a CI workflow, native
  source, a dependency pin): every test runs, and the selection says which file made it so.

Change analysis (``fastci.selection.changes``) reads config and CI files by section, job and target,
and says on the commit event what a change to one did (``ChangedFile.effect``, with the reason); a
file it did not judge falls back to the path rules below, which are safe by default: an unknown kind
of file is data only where evidence shows who reads it, and build- or CI-shaped files run everything.
"""

from __future__ import annotations

import fnmatch

from fastci.inputs import ChangedFile

INERT_SUFFIXES = (".md", ".rst", ".pyi")
INERT_DIRS = ("docs/", "doc/", ".github/ISSUE_TEMPLATE/")
INERT_NAMES = (
    "LICENSE",
    "LICENSE.txt",
    "LICENSE.md",
    "COPYING",
    "AUTHORS",
    "CHANGELOG",
    "CHANGES",
    "NEWS",
    ".gitignore",
    ".gitattributes",
    ".mailmap",
    ".readthedocs.yaml",
    ".readthedocs.yml",  # the docs build's config
    ".pre-commit-config.yaml",  # linters: they run no test
    ".flake8",
    ".pylintrc",
    ".editorconfig",
    "CODEOWNERS",
)
# Build, packaging, test-runner and CI files, and native source: any change may change every test.
SUITE_NAMES = (
    "setup.cfg",
    "tox.ini",
    "pyproject.toml",
    "pytest.ini",
    "noxfile.py",
    "Makefile",
    "CMakeLists.txt",
    "MANIFEST.in",
    "Pipfile",
    "Pipfile.lock",
    "poetry.lock",
    "uv.lock",
    "pdm.lock",
    "environment.yml",
    "Dockerfile",
    "Jenkinsfile",
    ".gitlab-ci.yml",
    ".coveragerc",
)
SUITE_PATTERNS = (
    "requirements*.txt",
    "requirements/*",
    "constraints*.txt",
    ".github/workflows/*",
    ".circleci/*",
    "*.mk",
    "*.cmake",
    "*.c",
    "*.cc",
    "*.cpp",
    "*.cxx",
    "*.cu",
    "*.cuh",
    "*.h",
    "*.hpp",
    "*.pyx",
    "*.pxd",
    "*.so",
    "*.pyd",
)


def effect_of(changed: ChangedFile) -> tuple[str, str]:
    """(``code`` | ``none`` | ``readers`` | ``dependencies`` | ``extensions`` | ``suite``, why) for one
    changed file."""
    path = changed.path
    if changed.effect is not None:  # change analysis judged it (by section, job or target)
        return changed.effect, changed.detail or path
    if path.endswith(".py"):
        return "code", path
    name = path.rsplit("/", 1)[-1]
    if path.endswith(INERT_SUFFIXES) or path.startswith(INERT_DIRS) or name in INERT_NAMES:
        return "none", path
    if name in SUITE_NAMES or any(fnmatch.fnmatchcase(path, pattern) for pattern in SUITE_PATTERNS):
        return "suite", f"non-Python file changed: {path}"
    return "readers", path
