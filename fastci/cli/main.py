"""The ``fastci`` command line: the parser, the global options and the dispatch; each command group
lives in a module of its own and adds its subcommands through ``register(commands)``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fastci.cli import (
    demo,
    evidence,
    kafka,
    pipeline,
    plan,
    pool,
    producer,
    qualify,
    regression,
    release,
    reproduce,
    selection,
    simulate,
    views,
)
from fastci.cli.base import UsageError, console, kafka_settings
from fastci.core import config

# How ``fastci --help`` groups the commands; a command no group names is listed under "other commands".
HELP_GROUPS = (
    ("getting started", ("demo",)),
    ("the CI job (beside pytest --fastci-select)", ("plan", "changes", "collect", "policy", "spool")),
    (
        "data: the embedded log, its processing and views",
        ("publish", "import", "run", "views", "sql", "compact", "schemas"),
    ),
    ("regressions and reports", ("report", "regressions", "tickets", "owners")),
    ("fleet and release", ("qualify", "pool", "rerun", "runner", "release", "simulate")),
    ("Kafka", ("worker", "lag", "kafka")),
)

EPILOG = """\
the pytest plugin (installed with fastci; see pytest --help):
  pytest --fastci-select     run the tests the change needs, riskiest first; all of them,
                             saying why, when fastci cannot decide
  pytest --fastci-results    publish one result per test
  pytest --fastci-evidence   record what each test executes: the evidence selection needs

exit codes: 0 done; 1 done, with the refusals or failures it names; 2 a usage error
(one line on stderr); 3 run everything (plan) or still behind (lag).

docs: docs/README.md in the source tree (every command: its CLI section), docs/ci.md
(the CI loop), docs/events.md (topics and example events); 'fastci COMMAND --help'."""

# In the order ``fastci --help`` lists them. A module adds parsers and sets ``func`` on them; handlers get
# the parsed args (``data_dir`` resolved) and return an exit code. Heavy imports stay inside handlers, so
# ``fastci --help`` and the pytest plugin stay fast.
COMMAND_GROUPS = (
    pipeline,
    views,
    demo,
    producer,
    qualify,
    regression,
    selection,
    plan,
    evidence,
    release,
    reproduce,
    pool,
    kafka,
    simulate,
)


class Parser(argparse.ArgumentParser):
    """argparse's parser, answering a mistake in one line (it would print the whole usage first)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _global_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=default,
        help=f"embedded runtime data (log, state, views); default $FASTCI_DATA_DIR or {config.DEFAULT_DATA_DIR}; "
        "a command refuses one that does not exist, except the default",
    )
    parser.add_argument(
        "--create",
        action="store_true",
        default=default,
        help="make the data dir if it does not exist (the first demo, import or pytest --fastci-results "
        "make it anyway)",
    )
    parser.add_argument(
        "--bootstrap",
        default=default,
        help=f"Kafka bootstrap servers; default $FASTCI_KAFKA_BOOTSTRAP or {config.DEFAULT_BOOTSTRAP}",
    )
    parser.add_argument(
        "--namespace", default=default, help="prefix of every Kafka topic and group; default $FASTCI_KAFKA_NAMESPACE"
    )


def _finish(parser: argparse.ArgumentParser) -> None:
    """Every subcommand's ``--help`` opens with its one-line help as a description, and accepts the global
    options after the subcommand too (``fastci sql --data-dir X ...``)."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            if sub.description is None and helps.get(name):
                sub.description = helps[name]
            if not any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                _global_options(sub, argparse.SUPPRESS)  # given after the subcommand, it wins
            _finish(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="fastci",
        description="The CI brain for GPU-heavy test suites: an event-sourced stream processor.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fastci {version()}")
    _global_options(parser, None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(commands)
    _group_help(parser, commands)
    _finish(parser)
    return parser


def _group_help(parser: argparse.ArgumentParser, commands: argparse._SubParsersAction) -> None:
    """List the commands in ``HELP_GROUPS``' sections of ``fastci --help``, not as one flat list."""
    listed = {action.dest: action for action in commands._choices_actions}
    parser._positionals._group_actions.remove(commands)
    named = [name for _, names in HELP_GROUPS for name in names]
    sections = [*HELP_GROUPS, ("other commands", tuple(name for name in listed if name not in named))]
    for title, names in sections:
        if any(name in listed for name in names):
            section = parser.add_argument_group(title)
            section._group_actions.extend(listed[name] for name in names if name in listed)


def version() -> str:
    """The installed package's version; the source tree's ``pyproject.toml`` when fastci runs uninstalled."""
    from importlib import metadata

    try:
        return metadata.version("fastci")
    except metadata.PackageNotFoundError:
        import tomllib

        try:
            with open(Path(__file__).parents[2] / "pyproject.toml", "rb") as file:
                return tomllib.load(file)["project"]["version"] + " (source, not installed)"
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a usage error argparse has printed in one line
        return done.code if isinstance(done.code, int) else 2
    try:
        _settle_data_dir(args)
        if args.data_dir_use == "kafka" or getattr(args, "kafka", False):
            kafka_settings(args)  # a bad $FASTCI_KAFKA_* value, in one line, before anything starts
        return args.func(args) or 0
    except (UsageError, config.ConfigError) as error:
        _error(str(error))
        return 2
    except BrokenPipeError:
        return 0
    except OSError as error:  # a file or folder the system refused, e.g. a full disk: one line, not a traceback
        if _access_denied(error):  # the cluster's refusal (a PermissionError too): a usage error, exit 2
            _error(str(error))
            return 2
        _error(f"{error.filename}: {error.strerror}" if error.filename and error.strerror else str(error))
        return 1
    except Exception as error:
        if _access_denied(error) or _views_unreadable(error):
            _error(str(error))
            return 2
        if not _broker_unreachable(error):
            raise
        console.print(
            f"[red]error:[/red] cannot reach Kafka at {args.bootstrap or config.KafkaSettings.from_env().bootstrap} "
            f"({error}): start a broker (docker/kafka/kafka.sh start) or point --bootstrap / "
            "$FASTCI_KAFKA_BOOTSTRAP at one",
            markup=True,
        )
        return 2


def _error(message: str) -> None:
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(message)}", markup=True)


def _settle_data_dir(args: argparse.Namespace) -> None:
    """Resolve ``args.data_dir`` and refuse one the command cannot use (``fastci.cli.base.DATA_DIR_USES``): a
    file, a folder inside another data dir's log, or a named folder that does not exist for a command that
    needs one (a typo would start an empty history, or answer from none)."""
    args.data_dir_use = getattr(args, "data_dir_use", "write")
    if any(getattr(args, flag, False) for flag in ("dry_run", "show_default", "list_defects")):
        args.data_dir_use = "none"  # these only print
    args.create = bool(args.create)
    args.data_dir_given = args.data_dir is not None
    if args.data_dir_given:
        named = f"--data-dir {args.data_dir}"
    elif "FASTCI_DATA_DIR" in os.environ:
        named = f"FASTCI_DATA_DIR={os.environ['FASTCI_DATA_DIR']}"
    else:
        named = f"the default data dir {config.DEFAULT_DATA_DIR}"
    args.data_dir = args.data_dir or config.data_dir()
    if args.data_dir_use in ("none", "kafka"):
        return
    chosen = args.data_dir_given or "FASTCI_DATA_DIR" in os.environ
    must_exist = (
        chosen
        and not args.create
        and not getattr(args, "kafka", False)  # on Kafka the data dir only keeps views and spools
        and args.data_dir_use in ("read", "write")
    )
    config.check_data_dir(args.data_dir, named, must_exist)


def _access_denied(error: BaseException) -> bool:
    """A refusal to report in one line: the cluster's (an ACL) or a signing misconfiguration."""
    from fastci.core.provenance import ProvenanceError
    from fastci.runtime.kafka.broker import AccessDenied  # only once something failed

    return isinstance(error, AccessDenied | ProvenanceError)


def _views_unreadable(error: BaseException) -> bool:
    """A views file DuckDB cannot open (not a DuckDB file, locked by another process)."""
    import duckdb  # only once something failed: --help stays fast

    return isinstance(error, duckdb.IOException)


def _broker_unreachable(error: BaseException) -> bool:
    from aiokafka.errors import KafkaConnectionError  # only once something failed: --help stays fast

    return isinstance(error, KafkaConnectionError)


if __name__ == "__main__":
    sys.exit(main())
