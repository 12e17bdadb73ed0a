"""Where a producer's results come from: the stack bundle, the node, and the code under test.

Read once per process from a bundle file (TOML) and the environment, so a caller never repeats
them. The environment overrides the file:

```toml
# bundle.toml: what this node runs (FASTCI_BUNDLE_FILE points at it)
node_id = "node-07"                 # FASTCI_NODE_ID (default: the host name)
hardware_revision = "rev-b"         # FASTCI_HARDWARE_REVISION

[bundle]                            # FASTCI_BUNDLE_COMPILER, _KERNELS, _RUNTIME, _DRIVER, _FIRMWARE
compiler = "1.2.1"
kernels = "2.3.1"
runtime = "3.1.0"
driver = "550.54.15"
firmware = "96.00.5e.00.01"
```

A plain repository (no accelerator) needs none of it: without a bundle and a hardware revision,
results carry neither. A bundle, when given, must name every layer.

The code under test: ``FASTCI_REPO`` (default: the ``origin`` remote's whole path, ``owner/name`` or
``group/sub/name``, else the work tree's directory name), ``FASTCI_COMMIT`` (default: ``git rev-parse
HEAD``), ``FASTCI_TRIGGER`` (default ``dev``).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import sysconfig
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fastci.core.events import Name, Record, Sha
from fastci.inputs import BUNDLE_LAYERS, Bundle, Environment, Trigger
from fastci.selection.repos import git_line, repo_name_of

_TOP_LEVEL = ("node_id", "hardware_revision", "bundle")


class ContextError(ValueError):
    """The bundle file or environment is incomplete or wrong; the message names each field."""


class RunContext(Record):
    """What every result of this process carries without the caller repeating it. A plain
    repository gives no bundle and no hardware revision: its results carry none."""

    bundle: Bundle | None = None
    node_id: Name
    hardware_revision: Name | None = None
    repo: Name
    commit: Sha
    trigger: Trigger
    environment: Environment | None = None  # the matrix cell this process runs tests in, when it does


def this_environment(name: str | None = None) -> Environment:
    """The cell this interpreter runs in: its version, implementation and platform, and ``name``
    (the job's own name for its cell: ``--fastci-env``, else ``$FASTCI_ENV``)."""
    return Environment(
        python=platform.python_version(),
        implementation=sys.implementation.name,
        platform=sysconfig.get_platform(),
        name=name or os.environ.get("FASTCI_ENV") or None,
    )


def load_context(
    bundle_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
    **overrides: Any,
) -> RunContext:
    """The run context from ``bundle_file`` (or ``$FASTCI_BUNDLE_FILE``), the environment, then
    ``overrides`` (non-None values win). ``defaults`` fill what none of them gives (e.g. a bundle)."""
    env = os.environ if env is None else env
    fields: dict[str, Any] = {"bundle": {}}
    for key, value in (defaults or {}).items():
        if key == "bundle":
            fields["bundle"].update(_as_dict(value))
        else:
            fields[key] = value
    path = bundle_file or env.get("FASTCI_BUNDLE_FILE")
    if path:
        _merge(fields, _read_bundle_file(Path(path)))
    for layer in BUNDLE_LAYERS:
        if env.get(f"FASTCI_BUNDLE_{layer.upper()}"):
            fields["bundle"][layer] = env[f"FASTCI_BUNDLE_{layer.upper()}"]
    for key, variable in (
        ("node_id", "FASTCI_NODE_ID"),
        ("hardware_revision", "FASTCI_HARDWARE_REVISION"),
        ("repo", "FASTCI_REPO"),
        ("commit", "FASTCI_COMMIT"),
        ("trigger", "FASTCI_TRIGGER"),
    ):
        if env.get(variable):
            fields[key] = env[variable]
    for key, value in overrides.items():
        if value is not None:
            fields[key] = value
    fields.setdefault("node_id", socket.gethostname())
    fields.setdefault("trigger", "dev")
    if "commit" not in fields:
        fields["commit"] = git_line(cwd, "rev-parse", "HEAD")
    if "repo" not in fields:
        fields["repo"] = repo_name_of(cwd)
    # A bundle is all of its layers or none (a plain repository's results name no stack).
    missing = [f"bundle.{layer}" for layer in BUNDLE_LAYERS if fields["bundle"] and layer not in fields["bundle"]]
    if not fields["bundle"]:
        fields["bundle"] = None
    problems = [f"field '{name}': not given ({_where(name)})" for name in missing]
    if fields["commit"] is None:
        problems.append("field 'commit': not given (set FASTCI_COMMIT, or run inside a git work tree)")
    if problems:
        raise ContextError("run context: " + "; ".join(problems))
    try:
        return RunContext.model_validate(fields)
    except ValidationError as error:
        reasons = "; ".join(
            f"field '{'.'.join(str(p) for p in e['loc'])}': {e['msg']} (got {e.get('input')!r})" for e in error.errors()
        )
        raise ContextError(f"run context: {reasons}") from None


def load_bundle(path: str | Path) -> Bundle:
    """Only the ``[bundle]`` versions of a bundle file (e.g. a baseline to compare against)."""
    versions = _read_bundle_file(Path(path)).get("bundle", {})
    missing = [layer for layer in BUNDLE_LAYERS if layer not in versions]
    if missing:
        raise ContextError(f"bundle file {path}: " + "; ".join(f"field 'bundle.{m}': not given" for m in missing))
    try:
        return Bundle.model_validate(versions)
    except ValidationError as error:
        reasons = "; ".join(f"field 'bundle.{e['loc'][0]}': {e['msg']}" for e in error.errors())
        raise ContextError(f"bundle file {path}: {reasons}") from None


def bundle_toml(context: RunContext) -> str:
    """A bundle file describing ``context`` (the inverse of reading one)."""
    lines = [f'node_id = "{context.node_id}"']
    if context.hardware_revision is not None:
        lines.append(f'hardware_revision = "{context.hardware_revision}"')
    if context.bundle is not None:
        lines += ["", "[bundle]", *(f'{layer} = "{getattr(context.bundle, layer)}"' for layer in BUNDLE_LAYERS)]
    return "\n".join(lines) + "\n"


def _read_bundle_file(path: Path) -> dict[str, Any]:
    try:
        document = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ContextError(f"bundle file {path}: does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ContextError(f"bundle file {path}: not valid TOML ({error})") from None
    unknown = sorted(set(document) - set(_TOP_LEVEL))
    if unknown:
        raise ContextError(
            f"bundle file {path}: unknown field(s) {', '.join(unknown)} (known: {', '.join(_TOP_LEVEL)})"
        )
    bundle = document.get("bundle", {})
    if not isinstance(bundle, dict):
        raise ContextError(f"bundle file {path}: field 'bundle' must be a table ([bundle])")
    extra = sorted(set(bundle) - set(BUNDLE_LAYERS))
    if extra:
        raise ContextError(
            f"bundle file {path}: unknown field(s) {', '.join('bundle.' + e for e in extra)} "
            f"(layers: {', '.join(BUNDLE_LAYERS)})"
        )
    return document


def _merge(fields: dict[str, Any], document: dict[str, Any]) -> None:
    for key, value in document.items():
        if key == "bundle":
            fields["bundle"].update(value)
        else:
            fields[key] = value


def _as_dict(value: Any) -> dict[str, Any]:
    return value.model_dump() if isinstance(value, Bundle) else dict(value)


def _where(name: str) -> str:
    if name.startswith("bundle."):
        layer = name.split(".", 1)[1]
        return f"set FASTCI_BUNDLE_{layer.upper()}, or '{layer}' under [bundle] in the bundle file (FASTCI_BUNDLE_FILE)"
    return f"set FASTCI_{name.upper()}, or '{name}' in the bundle file (FASTCI_BUNDLE_FILE)"
