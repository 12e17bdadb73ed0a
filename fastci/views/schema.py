"""DuckDB tables derived from the event and state models, so a new event type gets a table for free.

Scalars map to SQL types, a flat nested model (a bundle) to a STRUCT, lists of
numbers or names to arrays, and anything richer to JSON.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from fastci.core.processor import Processor
from fastci.topology import TOPICS

_SCALARS: dict[Any, str] = {str: "VARCHAR", bool: "BOOLEAN", int: "BIGINT", float: "DOUBLE", datetime: "TIMESTAMPTZ"}


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: dict[str, str]  # column -> DuckDB type, in model order
    key: str

    def ddl(self) -> str:
        columns = ", ".join(f"{quote(c)} {t}" for c, t in self.columns.items())
        return f"CREATE TABLE IF NOT EXISTS {quote(self.name)} ({columns}, PRIMARY KEY ({quote(self.key)}))"


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def table_name(name: str) -> str:
    return name.replace("-", "_")


def topic_table(topic: str) -> TableSpec:
    """One row per event, keyed by id; ``_offset`` and ``_partition`` say where it was read."""
    columns = model_columns(TOPICS[topic])
    return TableSpec(table_name(topic), {**columns, "_partition": "INTEGER", "_offset": "BIGINT"}, "id")


def state_tables(processor: type[Processor] | Processor) -> dict[str, TableSpec]:
    """Per kind of key, the table its rows go to: one table named after the processor when it keeps
    one record (kind ""), else one per key space (``test_planner_test``, ``test_planner_workload``...)."""
    key = processor.state_key
    if not processor.key_spaces:
        assert processor.state_model is not None
        return {
            "": TableSpec(table_name(processor.name), {key: "VARCHAR", **model_columns(processor.state_model)}, key)
        }
    return {
        space.kind: TableSpec(
            table_name(f"{processor.name}-{space.kind or 'owner'}"),
            {key: "VARCHAR", **model_columns(space.record)},
            key,
        )
        for space in processor.key_spaces
    }


def state_stream(processor: type[Processor] | Processor) -> str:
    """What the views' positions call a processor's state changes. Keyed state has a name of its own,
    so views made before a processor declared its key spaces load its state anew, into its spaces'
    tables."""
    return f"state:{processor.name}" + (":spaces" if processor.key_spaces else "")


def model_columns(model: type[BaseModel]) -> dict[str, str]:
    return {name: sql_type(field.annotation) for name, field in model.model_fields.items()}


def sql_type(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is typing.Annotated:
        return sql_type(args[0])
    if origin in (Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        return sql_type(present[0]) if len(present) == 1 else "JSON"
    if origin is Literal:
        return "VARCHAR"
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = sql_type(args[0])
        return f"{item}[]" if item in _SCALARS.values() else "JSON"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = model_columns(annotation)
        if all(t in _SCALARS.values() for t in fields.values()):
            return "STRUCT(" + ", ".join(f"{quote(n)} {t}" for n, t in fields.items()) + ")"
    return "JSON"
