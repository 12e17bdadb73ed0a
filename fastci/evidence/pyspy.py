"""Running ``py-spy record --format raw``: on a command it starts, or attached to a process.

py-spy prints its own messages on stdout (not stderr) and does not pass on the exit code of a
command it runs; callers that need either handle it (see ``fastci.evidence.collect``).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

_SUMMARY = re.compile(r"Samples: (\d+) Errors: (\d+)")
_STARTED = "Sampling process"


class PySpyError(RuntimeError):
    """py-spy is missing, could not attach, or failed; the message says which and why."""


@dataclass(frozen=True)
class Sampling:
    rate_hz: float = 200.0
    # Read the stacks without pausing the process: measured (bench/evidence_overhead.py) cheaper at
    # every rate, with the same recall and precision; a read may rarely tear a stack (mix two moments).
    nonblocking: bool = True
    # Waiting threads too: a test blocked on a device, a lock or a subprocess is still running
    # the code that waits, and evidence is about what ran, not about CPU time.
    idle: bool = True
    subprocesses: bool = False

    def arguments(self) -> list[str]:
        args = ["--format", "raw", "--full-filenames", "--rate", f"{self.rate_hz:g}"]
        args += ["--nonblocking"] * self.nonblocking + ["--idle"] * self.idle + ["--subprocesses"] * self.subprocesses
        return args


@dataclass(frozen=True)
class Recorded:
    raw: str  # py-spy's raw output: "frame;frame;... COUNT" lines
    samples: int  # as py-spy counted them (empty stacks included)
    errors: int  # samples py-spy could not read


def executable() -> str:
    """``$FASTCI_PY_SPY``, else the py-spy next to this interpreter (a virtualenv's), else PATH's."""
    given = os.environ.get("FASTCI_PY_SPY")
    if given:
        return given
    beside = Path(sys.executable).with_name("py-spy")
    if beside.exists():
        return str(beside)
    found = shutil.which("py-spy")
    if found is None:
        raise PySpyError("py-spy not found (pip install py-spy, or set FASTCI_PY_SPY to its path)")
    return found


def command_line(
    sampling: Sampling, output: Path, *, pid: int | None = None, command: list[str] | None = None
) -> list[str]:
    target = ["--pid", str(pid)] if pid is not None else ["--", *(command or [])]
    return [executable(), "record", *sampling.arguments(), "--output", str(output), *target]


def summary(stdout: str, raw: str) -> Recorded:
    match = _SUMMARY.search(stdout)
    samples, errors = (int(match[1]), int(match[2])) if match else (0, 0)
    return Recorded(raw, samples, errors)


class Attached:
    """``py-spy record --pid`` on a running process (this one, typically) until ``stop``."""

    def __init__(self, pid: int, sampling: Sampling, output: Path) -> None:
        self.pid, self.sampling, self.output = pid, sampling, output
        self._process: subprocess.Popen[str] | None = None
        self._stdout: list[str] = []
        self._started = threading.Event()
        self._sampling = False  # py-spy said it samples (not merely: its output ended)

    def start(self, timeout_s: float = 20.0) -> None:
        """Attach, and return once py-spy samples (raises PySpyError when it cannot)."""
        self._process = subprocess.Popen(
            command_line(self.sampling, self.output, pid=self.pid),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a Ctrl-C is for the tests, not for py-spy
        )
        if self.pid == os.getpid():
            _allow_tracing_by(self._process.pid)
        threading.Thread(target=self._read, name="fastci-py-spy-output", daemon=True).start()
        if not self._started.wait(timeout_s) or not self._sampling:
            # Its output can end before its exit status is reaped: wait briefly for the status.
            try:
                exited: int | None = self._process.wait(1.0 if self._started.is_set() else 0)
            except subprocess.TimeoutExpired:
                exited = None
            self._process.kill()
            self._process.wait()
            why = f"exited with code {exited}" if exited is not None else f"did not start within {timeout_s:g} s"
            said = "".join(self._stdout).strip()
            raise PySpyError(f"py-spy could not sample process {self.pid} ({why})" + (f": {said}" if said else ""))

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._stdout.append(line)
            if _STARTED in line:
                self._sampling = True
                self._started.set()
        self._started.set()  # py-spy exited: start() looks at why

    def stop(self, timeout_s: float = 30.0) -> Recorded:
        """Stop sampling (SIGINT: py-spy then writes its output) and return what it recorded."""
        process = self._process
        if process is None:
            raise PySpyError("py-spy was not started")
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise PySpyError(f"py-spy did not stop within {timeout_s:g} s") from None
        try:
            raw = self.output.read_text(errors="replace")
        except FileNotFoundError:
            said = "".join(self._stdout).strip()
            raise PySpyError(f"py-spy wrote no output (exit code {process.returncode}): {said}") from None
        return summary("".join(self._stdout), raw)


def _allow_tracing_by(pid: int) -> None:
    """Let ``pid`` (py-spy, our child) read this process where Yama's ptrace_scope=1 allows
    tracing descendants only (most CI runners): the tracee consents with PR_SET_PTRACER."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(0x59616D61, ctypes.c_ulong(pid), 0, 0, 0)  # PR_SET_PTRACER ("Yama")
    except (OSError, AttributeError):
        pass  # no Yama, or no prctl: nothing to consent to
