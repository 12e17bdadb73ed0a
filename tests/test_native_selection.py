"""Native code under the build map: a change to a kernel's C source selects the tests whose imports
reach the extension module built from it, and marks the commit a hardware-path change. The extension
is compiled for real (gcc against this interpreter's headers)."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sysconfig

from ci_repo import collect_evidence, commit, edit, git, pytest_in

from fastci.selection.changes import analyze_commit

KERNEL = """#include <Python.h>

/* The scale kernel. */
static PyObject *scale(PyObject *self, PyObject *args) {
    double x;
    if (!PyArg_ParseTuple(args, "d", &x)) return NULL;
    return PyFloat_FromDouble(2.0 * x);
}

static PyMethodDef methods[] = {{"scale", scale, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kern", NULL, -1, methods};
PyMODINIT_FUNC PyInit__kern(void) { return PyModule_Create(&module); }
"""

FILES = {
    "pyproject.toml": '[tool.fastci]\nbuild = { "csrc/*.c" = "pkg/_kern*" }\n',
    ".gitignore": "*.so\n",
    "csrc/kern.c": KERNEL,
    "pkg/__init__.py": "",
    "pkg/ops.py": "from pkg import _kern\n\n\ndef double(x):\n    return _kern.scale(x)\n",
    "pkg/text.py": "def shout(word):\n    return word.upper()\n",
    "tests/test_ops.py": "from pkg.ops import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
    "tests/test_text.py": "from pkg.text import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A'\n",
}


def build(repo) -> None:
    target = repo / "pkg" / f"_kern{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", f"-I{include}", str(repo / "csrc" / "kern.c"), "-o", str(target)],
        check=True,
        capture_output=True,
    )


def test_a_kernel_change_runs_the_tests_that_import_its_extension_and_is_a_hardware_path_change(tmp_path):
    repo, data = tmp_path / "native", tmp_path / "data"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, FILES, "a C kernel")
    build(repo)
    collect_evidence(repo, data)
    sha = edit(repo, "csrc/kern.c", "/* The scale kernel. */", "/* The scale kernel: doubles. */", "kernel doc")
    change = analyze_commit(repo, sha, "native")
    (kernel,) = change.changed_files
    assert (kernel.effect, kernel.extensions) == ("extensions", ("pkg/_kern*",))
    assert change.hardware_path
    run = pytest_in(repo, data, "-q", "-rA", "--fastci-select")
    assert run.returncode == 0 and "1 passed, 1 deselected" in run.stdout, run.stdout + run.stderr
    assert "PASSED tests/test_ops.py::test_double" in run.stdout
