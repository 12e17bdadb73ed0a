"""Evidence of one arbitrary command: run it under ``py-spy record --subprocesses`` and turn
what it sampled into the project's folded stacks.

py-spy prints its own messages on stdout and does not pass on the command's exit code, so the
command runs in a one-line wrapper: it gets this process's stdout back (a file descriptor py-spy
passes through) and writes the command's exit code to a file. The wrapper is ``python -c``
code, so its frames are ``<string>`` and never project code, and one line, so py-spy's process
line (which shows the command line) stays one line. The price: py-spy finds the command as a
subprocess, by polling, so its first fraction of a second may go unsampled.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from fastci.evidence import pyspy
from fastci.evidence.stacks import UnitsCache, merge, parse_raw, to_project_stack

_WRAPPER = (
    "import os,signal,subprocess,sys;"
    "signal.signal(signal.SIGINT,lambda *a:None);"  # a Ctrl-C is the command's to handle
    "os.dup2(int(sys.argv[2]),1);os.close(int(sys.argv[2]));"
    "r=subprocess.call(sys.argv[3:]);"
    "open(sys.argv[1],'w').write(str(128-r if r<0 else r))"  # killed by signal N: 128+N, as shells say
)


class CommandNotFound(ValueError):
    pass


@dataclass(frozen=True)
class Collected:
    exit_code: int
    stacks: list[tuple[str, int]]  # merged project stacks
    samples: int  # py-spy's count (empty stacks and errors included)
    samples_in_project: int  # samples with at least one project frame
    errors: int
    wall_s: float


def collect(
    command: list[str], root: Path, rate_hz: float = 200.0, cwd: Path | None = None, blocking: bool = False
) -> Collected:
    """Run ``command`` (and its subprocesses) under py-spy; its stdout and stderr are this
    process's. Raises CommandNotFound, or PySpyError when py-spy cannot sample."""
    if not command:
        raise CommandNotFound("no command given (put it after --)")
    if shutil.which(command[0]) is None:
        raise CommandNotFound(f"command not found: {command[0]}")
    cwd = cwd or Path.cwd()
    with tempfile.TemporaryDirectory(prefix="fastci-collect-") as scratch:
        output, exit_file = Path(scratch) / "raw.txt", Path(scratch) / "exit-code"
        sys.stdout.flush()  # what was printed before goes out before the command's output
        stdout = os.dup(1)
        wrapped = [sys.executable, "-I", "-S", "-c", _WRAPPER, str(exit_file), str(stdout), *command]
        sampling = pyspy.Sampling(rate_hz=rate_hz, nonblocking=not blocking, subprocesses=True)
        started = time.monotonic()
        previous = signal.signal(signal.SIGINT, lambda *_: None)  # wait for py-spy to write its output
        try:
            spy = subprocess.run(
                pyspy.command_line(sampling, output, command=wrapped),
                pass_fds=(stdout,),
                cwd=cwd,
                stdout=subprocess.PIPE,
                text=True,
            )
        finally:
            signal.signal(signal.SIGINT, previous)
            os.close(stdout)
        wall_s = time.monotonic() - started
        if not output.exists():
            raise pyspy.PySpyError(f"py-spy recorded nothing (exit code {spy.returncode}): {spy.stdout.strip()}")
        recorded = pyspy.summary(spy.stdout, output.read_text(errors="replace"))
        exit_code = int(exit_file.read_text()) if exit_file.exists() else 1  # unknown: py-spy stopped first
    cache = UnitsCache()
    converted = [(to_project_stack(frames, root, cache, cwd), count) for frames, count in parse_raw(recorded.raw)]
    in_project = sum(count for stack, count in converted if stack)
    return Collected(exit_code, merge(converted), recorded.samples, in_project, recorded.errors, wall_s)
