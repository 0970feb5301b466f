"""A job's output schema: the Spark type of its output values, and why a value does not fit it.

The job runtime records the schema with the run (``record``: the struct the job's ``output()``
serialized, Spark's ``StructType.jsonValue()``), or a job declares it in its contract
(``ConsistencyContract.output_schema``). The oracle calls an output that does not fit it
malformed, whatever agreement the contract judges with: a missing or extra field, a value of
another type, a null where the schema says not null. No failure-free run writes such a value.

Spark's ``to_json`` leaves null fields out unless told otherwise; ``output()`` tells it to write
them (``nulls_written``), so a missing field there is never a null. A declared schema for a
value serialized elsewhere says whether its nulls are written.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recovery_lib.errors import OracleError

__all__ = [
    "OutputSchema",
    "array_of",
]

log = logging.getLogger(__name__)

# Spark's integral types and the range each holds.
INTEGRAL_BITS = {"byte": 8, "short": 16, "integer": 32, "long": 64}
FRACTIONAL = ("float", "double")
# Non-finite doubles as to_json writes them (quoted).
NON_FINITE = ("NaN", "Infinity", "-Infinity")
# Types whose JSON form is a string whose content matters.
TEXT_FORMATS = ("timestamp", "timestamp_ntz", "date", "binary")
_DECIMAL = re.compile(r"decimal\(\d+,\s*-?\d+\)")


class SchemaError(OracleError):
    """A schema that is not a Spark struct type's JSON (what to give instead is in the text)."""


@dataclass(frozen=True)
class OutputSchema:
    """The Spark struct type of a job's output values, as ``StructType.jsonValue()``.

    A job that serializes its values itself declares it in its contract
    (``ConsistencyContract(output_schema=OutputSchema.declared({...}))``).

    Args:
        struct: The type's JSON (``StructType.jsonValue()``).
        nulls_written: The writer writes null fields (``output()`` does), so a missing
            field is never a null.

    Raises:
        SchemaError: ``struct`` is not a Spark struct type's JSON.
    """

    struct: dict[str, Any]
    nulls_written: bool = True

    def __post_init__(self) -> None:
        _check_type(self.struct, "value")
        if not isinstance(self.struct, dict) or self.struct.get("type") != "struct":
            raise SchemaError(
                "an output schema is a struct (the value's fields): give StructType.jsonValue()"
            )

    @classmethod
    def from_spark(cls, struct_type: Any, nulls_written: bool = True) -> OutputSchema:
        """The schema of a pyspark ``StructType``.

        Args:
            struct_type: The ``StructType``.
            nulls_written: See the class.

        Returns:
            The schema.
        """
        return cls(struct_type.jsonValue(), nulls_written)

    @classmethod
    def declared(cls, fields: dict[str, Any], nullable: bool = False) -> OutputSchema:
        """A schema written by hand, for a job that serializes its values itself.

        Args:
            fields: Field name -> Spark type name (``"long"``) or a type's JSON
                (``array_of("long")``).
            nullable: Whether every field may be null.

        Returns:
            The schema.
        """
        return cls(
            {
                "type": "struct",
                "fields": [
                    {"name": name, "type": kind, "nullable": nullable, "metadata": {}}
                    for name, kind in fields.items()
                ],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> OutputSchema:
        """A schema from ``to_json``'s text, or from a ``StructType.json()`` file's.

        Args:
            text: The JSON.

        Returns:
            The schema.

        Raises:
            SchemaError: ``text`` is not JSON, or not a struct type's.
        """
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SchemaError(f"output schema is not JSON: {exc}") from exc
        if isinstance(data, dict) and "struct" in data:
            return cls(data["struct"], bool(data.get("nulls_written", True)))
        return cls(data)

    def to_json(self) -> str:
        """The schema as stored with a run.

        Returns:
            JSON text that ``from_json`` reads.
        """
        return json.dumps({"struct": self.struct, "nulls_written": self.nulls_written})

    @property
    def names(self) -> tuple[str, ...]:
        """The top-level field names."""
        return tuple(f["name"] for f in self.struct["fields"])

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not a value of this schema.

        Args:
            value: A decoded JSON value (an output's value).

        Returns:
            The reason (the first field that does not fit), or None when it is one.
        """
        return _problem(self.struct, value, "", self.nulls_written)

    def not_nullable(self) -> tuple[str, ...]:
        """The top-level fields the schema says are never null.

        Returns:
            Their names.
        """
        return tuple(f["name"] for f in self.struct["fields"] if not f.get("nullable", True))


def array_of(element: Any, contains_null: bool = False) -> dict[str, Any]:
    """Spark's JSON of an array type, for ``OutputSchema.declared``.

    Args:
        element: The element's Spark type name (``"long"``) or JSON.
        contains_null: Whether elements may be null.

    Returns:
        The array type's JSON.
    """
    return {"type": "array", "elementType": element, "containsNull": contains_null}


def _check_type(kind: Any, where: str) -> None:
    if isinstance(kind, str):
        known = (
            kind in INTEGRAL_BITS
            or kind in FRACTIONAL
            or kind in TEXT_FORMATS
            or kind in ("string", "boolean", "null", "variant")
            or _DECIMAL.fullmatch(kind)
            or kind.startswith(("char(", "varchar(", "interval"))
        )
        if not known:
            raise SchemaError(f"{where}: unknown Spark type {kind!r}")
        return
    if not isinstance(kind, dict) or kind.get("type") not in ("struct", "array", "map"):
        raise SchemaError(f"{where}: {kind!r} is not a Spark type's JSON")
    if kind["type"] == "struct":
        for f in kind.get("fields", ()):
            if not {"name", "type"} <= set(f):
                raise SchemaError(f"{where}: field {f!r} needs a name and a type")
            _check_type(f["type"], f"{where}.{f['name']}")
    elif kind["type"] == "array":
        _check_type(kind.get("elementType"), f"{where}[]")
    else:
        _check_type(kind.get("valueType"), f"{where}{{}}")


def _problem(kind: Any, value: Any, where: str, nulls_written: bool) -> str | None:
    """Why ``value`` is not of Spark type ``kind`` (nulls handled by the caller)."""
    at = where or "value"
    if isinstance(kind, dict):
        if kind["type"] == "struct":
            return _struct_problem(kind, value, where, nulls_written)
        if kind["type"] == "array":
            if not isinstance(value, list):
                return f"{at}: {_show(value)} is not an array"
            items = ((f"{at}[{i}]", item) for i, item in enumerate(value))
            return _items_problem(items, kind["elementType"], kind.get("containsNull", True),
                                  "an array", nulls_written)  # fmt: skip
        # a map: a JSON object of values
        if not isinstance(value, dict):
            return f"{at}: {_show(value)} is not a map (a JSON object)"
        items = ((f"{at}.{k}", item) for k, item in value.items())
        return _items_problem(items, kind["valueType"], kind.get("valueContainsNull", True),
                              "a map", nulls_written)  # fmt: skip
    return _leaf_problem(kind, value, at)


def _items_problem(
    items: Iterable[tuple[str, Any]],
    kind: Any,
    contains_null: bool,
    container: str,
    nulls_written: bool,
) -> str | None:
    """The first element of an array or value of a map (``(where, item)``) that is not of
    ``kind``, or a null where the container holds none."""
    for where, item in items:
        if item is None:
            if not contains_null:
                return f"{where}: null in {container} without nulls"
            continue
        found = _problem(kind, item, where, nulls_written)
        if found:
            return found
    return None


def _struct_problem(
    kind: dict[str, Any], value: Any, where: str, nulls_written: bool
) -> str | None:
    if not isinstance(value, dict):
        return f"{where or 'value'}: {_show(value)} is not a JSON object"
    fields = {f["name"]: f for f in kind["fields"]}
    extra = [k for k in value if k not in fields]
    if extra:
        return f"field {_joined(where, extra[0])}: not in the output schema"
    for name, f in fields.items():
        path = _joined(where, name)
        if name not in value:
            if nulls_written or not f.get("nullable", True):
                return f"field {path}: missing"
            continue
        if value[name] is None:
            if not f.get("nullable", True):
                return f"field {path}: null, and the schema says not null"
            continue
        found = _problem(f["type"], value[name], path, nulls_written)
        if found:
            return found
    return None


def _leaf_problem(kind: str, value: Any, at: str) -> str | None:
    if kind in INTEGRAL_BITS:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{at}: {_show(value)} is not a {kind}"
        limit = 2 ** (INTEGRAL_BITS[kind] - 1)
        if not -limit <= value < limit:
            return f"{at}: {value} is out of a {kind}'s range"
        return None
    if kind in FRACTIONAL or _DECIMAL.fullmatch(kind):
        if isinstance(value, str) and kind in FRACTIONAL and value in NON_FINITE:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{at}: {_show(value)} is not a {kind}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{at}: {value} is not finite"
        return None
    if kind == "boolean":
        return None if isinstance(value, bool) else f"{at}: {_show(value)} is not a boolean"
    if kind == "null":
        return f"{at}: {_show(value)} where the schema has only null"
    if kind in ("variant",):
        return None
    if not isinstance(value, str):
        return f"{at}: {_show(value)} is not a {kind} (a JSON string)"
    parse = {
        "timestamp": _timestamp,
        "timestamp_ntz": _timestamp,
        "date": dt.date.fromisoformat,
        "binary": _base64,
    }.get(kind)
    if parse is not None and not _parses(parse, value):
        return f"{at}: {_show(value)} is not a {kind}"
    return None  # string, char, varchar, interval


def _timestamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _base64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _parses(parse: Any, text: str) -> bool:
    try:
        parse(text)
    except (ValueError, binascii.Error):
        return False
    return True


def _joined(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _show(value: Any) -> str:
    return json.dumps(value)[:40]


# -- where a run's schema is kept ----------------------------------------------------------------


SCHEMA_DIR = "output-schemas"  # under the settings' home


class SchemaStore:
    """Output schemas recorded by job runs, one file per output topic under ``directory``
    (``<home>/output-schemas``): the runtime records, the oracle looks up."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def path(self, topic: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", topic)
        return self.directory / f"{safe}.json"

    def record(self, topic: str, schema: OutputSchema) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path(topic).with_suffix(".tmp")
        tmp.write_text(schema.to_json())
        tmp.replace(self.path(topic))

    def lookup(self, topic: str) -> OutputSchema | None:
        path = self.path(topic)
        if not path.exists():
            return None
        try:
            return OutputSchema.from_json(path.read_text())
        except SchemaError as exc:
            log.warning("output schema of %s at %s unreadable (%s): not checked", topic, path, exc)
            return None


def recorded_schema(home: Path, *targets: str | None) -> OutputSchema | None:
    """The output schema recorded for the first of ``targets`` (topics or tables) that has
    one, in the store under ``home`` (None: no run recorded one)."""
    store = SchemaStore(Path(home) / SCHEMA_DIR)
    for target in targets:
        if target:
            found = store.lookup(target)
            if found is not None:
                return found
    return None


def load_schema(path: str | Path) -> OutputSchema:
    """A schema file (``StructType.json()`` or what ``SchemaStore`` records)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SchemaError(f"cannot read output schema {path}: {exc}") from exc
    return OutputSchema.from_json(text)
