"""Why a test is kept: the reasons a selection gives for each test it keeps, which the test plan carries on."""

from __future__ import annotations

from typing import Literal

# Why a test is kept. 'executes-changed-code': evidence shows it ran a changed function;
# 'module-code': it ran code in a file whose module code or a class body changed (such code runs
# at import, before any test, so evidence cannot attribute it); 'no-evidence': fastci has never
# seen what it executes; 'changed-test': the commit adds or edits the test function itself (a new
# test is known to no one yet); 'non-python-change': a file that is not Python (and not docs) changed.
# 'widened': after an audited miss, every test of the files the missed change touched runs for a while.
# 'import-time': the change is to code that runs while a module is imported (a registration, a
# dispatch table); every test whose imports reach that module depends on it. 'reads-changed-file':
# the test (or a module it imports, while importing) read a data file the commit changed.
# 'uses-changed-fixture': a fixture in the test's closure changed (it may have run for another test).
# 'dependency-changed': the pin of a distribution the test's imports reach changed.
# 'native-code-changed': native source ([tool.fastci] build) of an extension module its imports reach.
Reason = Literal[
    "executes-changed-code",
    "module-code",
    "no-evidence",
    "changed-test",
    "non-python-change",
    "widened",
    "import-time",
    "reads-changed-file",
    "uses-changed-fixture",
    "dependency-changed",
    "native-code-changed",
    "runs-enclosing-code",
]
