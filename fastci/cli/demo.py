"""``fastci demo``: a synthetic CI history through every processor, embedded, and what fastci found, in seconds."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console

from fastci.cli.base import UsageError, out, uses_data_dir


def register(commands: Any) -> None:
    demo = commands.add_parser("demo", help="generate a small CI history, process it and show what fastci found")
    demo.add_argument("--commits", type=int, default=300, help="commits in the generated history (default 300)")
    demo.set_defaults(func=cmd_demo)
    uses_data_dir(demo, "create")


def cmd_demo(args: argparse.Namespace) -> int:
    if args.commits < 1:
        raise UsageError(f"--commits: must be at least 1 (got {args.commits})")
    run_demo(args.data_dir if args.data_dir_given else Path(".fastci/demo"), commits=args.commits, out=out)
    return 0


_MARKER = ".fastci-demo"


def run_demo(data_dir: Path, commits: int, out: Console) -> None:
    """A fresh demo in ``data_dir``: the demo world's history through every processor, and what they found."""
    from fastci.demo.run import demo

    _fresh(data_dir)
    demo(data_dir, commits, out)


def _fresh(data_dir: Path) -> None:
    """Start from an empty folder; only ever delete one that an earlier demo made."""
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / _MARKER).exists():
            raise UsageError(f"{data_dir} is not empty and was not made by 'fastci demo'; pick another --data-dir")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / _MARKER).touch()
