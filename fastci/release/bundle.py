"""A release bundle: the tested tuple of stack versions plus the model serving configs, and the files
that hold an environment's desired state in the release repository.

A bundle manifest (what ``fastci release propose ENV FILE`` reads):

```toml
name = "2026.12-rc1"                # optional label

[bundle]                            # every layer's version, as results record them
compiler = "1.2.1"
kernels = "2.3.1"
runtime = "3.1.0"
driver = "550.54.15"
firmware = "96.00.5e.00.01"

[serving.lm-tiny]                   # one table per served (production) model
precision = "bf16"
max_batch = 16
```

An environment in the release repo is ``environments/<env>/bundle.toml`` (the name, id and versions)
and ``environments/<env>/serving/<model>.toml`` (one per served model). The files are written by
``render_environment`` only, in one fixed format (keys in a fixed order, one way to write each
value), so the same bundle always gives the same bytes and a rollback restores them exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from fastci.inputs import BUNDLE_LAYERS, Bundle

MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")  # also a file name
BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_MODELS = 256
MAX_KEYS = 256
HEADER = "# fastci release bundle: written by `fastci release propose`; change it with a new proposal.\n"


class BundleError(ValueError):
    """A manifest or environment file that cannot be a bundle; the message names the field."""


Scalar = str | int | float | bool


@dataclass(frozen=True)
class ReleaseBundle:
    versions: Bundle
    serving: Mapping[str, Mapping[str, Scalar | list[Scalar]]]  # model -> its serving config
    name: str = ""

    @property
    def id(self) -> str:
        """12 hex digits of the sha256 of the versions and serving configs (the name is only a label)."""
        document = {"bundle": self.versions.model_dump(), "serving": {m: dict(c) for m, c in self.serving.items()}}
        return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(self.serving))

    def label(self) -> str:
        return f"{self.id} ({self.name})" if self.name else self.id

    def versions_text(self) -> str:
        return ", ".join(f"{layer} {getattr(self.versions, layer)}" for layer in BUNDLE_LAYERS)


# ----- reading


def load_manifest(path: Path) -> ReleaseBundle:
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(f"bundle file {path}: does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BundleError(f"bundle file {path}: not valid TOML ({error})") from None
    return parse_manifest(document, str(path))


def parse_manifest(document: Mapping[str, Any], where: str) -> ReleaseBundle:
    unknown = sorted(set(document) - {"name", "bundle", "serving", "id"})
    if unknown:
        raise BundleError(f"{where}: unknown field(s) {', '.join(unknown)} (known: name, bundle, serving)")
    name = document.get("name", "")
    if not isinstance(name, str) or "\n" in name or len(name) > 200:
        raise BundleError(f"{where}: field 'name': must be one line of text (at most 200 characters)")
    versions = _versions(document.get("bundle"), where)
    serving = document.get("serving")
    if not isinstance(serving, dict) or not serving:
        raise BundleError(f"{where}: field 'serving': at least one served model is required ([serving.<model>] tables)")
    if len(serving) > MAX_MODELS:
        raise BundleError(f"{where}: field 'serving': at most {MAX_MODELS} models")
    configs = {
        model: _serving_config(model, config, f"{where}: field 'serving.{model}'") for model, config in serving.items()
    }
    bundle = ReleaseBundle(versions, configs, name)
    if "id" in document and document["id"] != bundle.id:
        raise BundleError(
            f"{where}: field 'id': {document['id']!r} is not the id of its contents ({bundle.id}); "
            "the files were edited by hand"
        )
    return bundle


def _versions(table: Any, where: str) -> Bundle:
    if not isinstance(table, dict):
        raise BundleError(f"{where}: field 'bundle': missing (a [bundle] table with {', '.join(BUNDLE_LAYERS)})")
    problems = [f"field 'bundle.{layer}': not given" for layer in BUNDLE_LAYERS if layer not in table]
    problems += [
        f"field 'bundle.{extra}': not a layer ({', '.join(BUNDLE_LAYERS)})"
        for extra in sorted(set(table) - set(BUNDLE_LAYERS))
    ]
    if problems:
        raise BundleError(f"{where}: " + "; ".join(problems))
    try:
        return Bundle.model_validate(table)
    except ValidationError as error:
        reasons = "; ".join(f"field 'bundle.{e['loc'][0]}': {e['msg']}" for e in error.errors())
        raise BundleError(f"{where}: {reasons}") from None


def _serving_config(model: str, config: Any, where: str) -> dict[str, Scalar | list[Scalar]]:
    if not MODEL_NAME.match(model):
        raise BundleError(f"{where}: the model name must be letters, digits, '.', '_' or '-' (it names a file)")
    if not isinstance(config, dict):
        raise BundleError(f"{where}: must be a table of settings")
    if len(config) > MAX_KEYS:
        raise BundleError(f"{where}: at most {MAX_KEYS} settings")
    for key, value in config.items():
        if key == "model":
            raise BundleError(f"{where}.model: reserved (the table's name is the model)")
        _check_value(value, f"{where}.{key}")
    return dict(config)


def _check_value(value: Any, where: str, in_list: bool = False) -> None:
    if isinstance(value, bool) or isinstance(value, int) or isinstance(value, str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BundleError(f"{where}: must be a finite number")
        return
    if isinstance(value, list) and not in_list:
        for item in value:
            _check_value(item, where, in_list=True)
        return
    raise BundleError(f"{where}: must be a string, number, boolean or a flat list of them (got {type(value).__name__})")


# ----- the environment's files


def environment_dir(env: str) -> str:
    return f"environments/{env}"


def render_environment(bundle: ReleaseBundle, env: str) -> dict[str, bytes]:
    """Every file of ``env``'s desired state, path -> bytes, in the one canonical format."""
    root = environment_dir(env)
    lines = [HEADER, f"id = {_toml(bundle.id)}\n"]
    if bundle.name:
        lines.append(f"name = {_toml(bundle.name)}\n")
    lines.append("\n[bundle]\n")
    lines += [f"{layer} = {_toml(getattr(bundle.versions, layer))}\n" for layer in BUNDLE_LAYERS]
    files = {f"{root}/bundle.toml": "".join(lines).encode()}
    for model in bundle.models:
        config = bundle.serving[model]
        body = [f"model = {_toml(model)}\n"] + [f"{_key(k)} = {_toml(config[k])}\n" for k in sorted(config)]
        files[f"{root}/serving/{model}.toml"] = "".join(body).encode()
    return files


def parse_environment(files: Mapping[str, bytes], env: str) -> ReleaseBundle | None:
    """The bundle an environment's files describe (None when the environment has no bundle yet)."""
    root = environment_dir(env)
    head = files.get(f"{root}/bundle.toml")
    if head is None:
        return None
    try:
        document = dict(tomllib.loads(head.decode()))
        serving = {}
        for path, data in files.items():
            if path.startswith(f"{root}/serving/") and path.endswith(".toml"):
                config = dict(tomllib.loads(data.decode()))
                serving[config.pop("model", Path(path).stem)] = config
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise BundleError(f"{root}: not valid TOML ({error})") from None
    document["serving"] = serving
    return parse_manifest(document, root)


def _key(key: str) -> str:
    return key if BARE_KEY.match(key) else _toml(key)


def _toml(value: Scalar | list[Scalar]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):  # a JSON string is a TOML basic string, once DEL is escaped too
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return "[" + ", ".join(_toml(item) for item in value) + "]"
