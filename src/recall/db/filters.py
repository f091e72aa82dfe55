"""A BaseStore search filter as SQL over an item's `value` (jsonb), with typed comparisons.

The filter is a mapping of field to condition, all of which must hold:

- a key reaches nested fields with dots: `{"author.name": "Ada"}`;
- a plain value means equality (`None` matches null or a missing field; a list must be equal
  element by element);
- a dict without operators matches a nested object field by field (`{"author": {"name":
  "Ada"}}`), as LangGraph's `InMemoryStore` does;
- a dict of operators (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`) compares by type: numbers as
  numbers (10 > 9), booleans as booleans, texts in code-point order, and dates or times
  (`datetime`/`date` values, or ISO 8601 texts) as times, a time without an offset being UTC.
  A range never matches a field of another type. `$ne` matches an item that lacks the field.

Every value becomes a parameter; an unknown operator or an unusable value raises
`InvalidInputError` naming the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from psycopg import sql

from recall.errors import InvalidInputError

__all__ = ["OPERATORS", "CompiledFilter", "compile_filter", "json_text"]

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_RANGE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
# an ISO 8601 date, optionally with a time: what `store_timestamp` (migration 0011) parses
_ISO = re.compile(
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*([Zz]|[+-]\d{2}(:?\d{2})?)?)?$"
)


class CompiledFilter:
    """A filter's SQL condition over `i.value` and the parameters it names."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.parts: list[sql.Composable] = []

    def param(self, value: Any) -> sql.Placeholder:
        """A new named parameter holding `value`."""
        name = f"f{len(self.params)}"
        self.params[name] = value
        return sql.Placeholder(name)

    @property
    def condition(self) -> sql.Composable:
        """The conjunction of every part (TRUE when there is none)."""
        if not self.parts:
            return sql.SQL("TRUE")
        return sql.SQL("(") + sql.SQL(" AND ").join(self.parts) + sql.SQL(")")


def compile_filter(filter: Mapping[str, Any] | None, column: str = "value") -> CompiledFilter:
    """Compile `filter` into a condition over the jsonb `column` of `recall.store_items`.

    Raises:
        InvalidInputError: a key is not text, an operator is unknown, or a value cannot be
            compared (a range over a list, a dict or None).
    """
    out = CompiledFilter()
    if not filter:
        return out
    if not isinstance(filter, Mapping):
        raise InvalidInputError(f"filter must be a dict of field to condition, not {filter!r}")
    target = sql.SQL("i.") + sql.Identifier(column)
    for key, condition in filter.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"filter keys must be non-empty field names, not {key!r}")
        _field(out, target, key.split("."), condition, key)
    return out


def _field(
    out: CompiledFilter, target: sql.Composable, path: list[str], condition: Any, name: str
) -> None:
    if isinstance(condition, Mapping):
        keys = list(condition)
        if any(isinstance(k, str) and k.startswith("$") for k in keys):
            for op in keys:
                _operator(out, target, path, op, condition[op], name)
            return
        if not keys:  # {} matches any object
            out.parts.append(
                sql.SQL("jsonb_typeof({} #> {}) = 'object'").format(target, out.param(path))
            )
            return
        for sub, value in condition.items():
            if not isinstance(sub, str) or not sub:
                raise InvalidInputError(f"filter field {name!r}: nested keys must be text")
            _field(out, target, [*path, sub], value, f"{name}.{sub}")
        return
    _operator(out, target, path, "$eq", condition, name)


def _operator(
    out: CompiledFilter, target: sql.Composable, path: list[str], op: Any, value: Any, name: str
) -> None:
    at = sql.SQL("({} #> {})").format(target, out.param(path))
    if op in ("$eq", "$ne") and (moment := _moment_or_none(value)) is not None:
        # the same moment written another way (another offset, a datetime) is equal
        text_at = sql.SQL("({} #>> {})").format(target, out.param(path))
        same = sql.SQL(
            "coalesce({0} = {1}::jsonb OR recall.store_timestamp({2}) = {3}, false)"
        ).format(at, out.param(_jsonb(value, name)), text_at, out.param(moment))
        out.parts.append(same if op == "$eq" else sql.SQL("NOT ") + same)
        return
    if op == "$eq":
        if value is None:
            out.parts.append(sql.SQL("({0} IS NULL OR {0} = 'null'::jsonb)").format(at))
        else:
            out.parts.append(sql.SQL("{} = {}::jsonb").format(at, out.param(_jsonb(value, name))))
    elif op == "$ne":
        if value is None:
            out.parts.append(sql.SQL("({0} IS NOT NULL AND {0} <> 'null'::jsonb)").format(at))
        else:
            out.parts.append(
                sql.SQL("({0} IS NULL OR {0} <> {1}::jsonb)").format(
                    at, out.param(_jsonb(value, name))
                )
            )
    elif op in _RANGE:
        out.parts.append(_range(out, at, target, path, sql.SQL(_RANGE[op]), value, name))
    else:
        raise InvalidInputError(
            f"filter field {name!r}: unknown operator {op!r}; use one of {', '.join(OPERATORS)}"
        )


def _range(
    out: CompiledFilter,
    at: sql.Composable,
    target: sql.Composable,
    path: list[str],
    cmp: sql.SQL,
    value: Any,
    name: str,
) -> sql.Composable:
    if isinstance(value, bool):
        return sql.SQL("(jsonb_typeof({0}) = 'boolean' AND {0} {1} {2}::jsonb)").format(
            at, cmp, out.param(json_text(value))
        )
    if isinstance(value, int | float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidInputError(f"filter field {name!r}: {value!r} cannot be compared")
        return sql.SQL("(jsonb_typeof({0}) = 'number' AND {0} {1} {2}::jsonb)").format(
            at, cmp, out.param(json_text(value))
        )
    if _is_moment(value):
        moment = _moment(value)
        text_at = sql.SQL("({} #>> {})").format(target, out.param(path))
        return sql.SQL("recall.store_timestamp({}) {} {}::timestamptz").format(
            text_at, cmp, out.param(moment)
        )
    if isinstance(value, str):
        text_at = sql.SQL("({} #>> {})").format(target, out.param(path))
        return sql.SQL("(jsonb_typeof({0}) = 'string' AND {1} COLLATE \"C\" {2} {3})").format(
            at, text_at, cmp, out.param(value)
        )
    raise InvalidInputError(
        f"filter field {name!r}: a range compares a number, a text, a date or a boolean, "
        f"not {type(value).__name__}"
    )


def _is_moment(value: object) -> bool:
    """A `datetime`, a `date`, or an ISO 8601 text: compared as a moment in time."""
    return isinstance(value, datetime | date) or (
        isinstance(value, str) and bool(_ISO.match(value))
    )


def _moment_or_none(value: object) -> datetime | None:
    """`value` as a moment when it is one (equality falls back to the text otherwise)."""
    if not isinstance(value, datetime | date | str) or not _is_moment(value):
        return None
    try:
        return _moment(value)
    except InvalidInputError:
        return None


def _moment(value: datetime | date | str) -> datetime:
    """A filter's date or time as an aware datetime (naive and date-only values are UTC)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("z", "Z"))
        except ValueError as exc:
            raise InvalidInputError(f"{value!r} is not an ISO 8601 date or time") from exc
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _jsonb(value: Any, name: str) -> str:
    """`value` as JSON text for a `::jsonb` parameter; dates become ISO texts, as stored."""
    try:
        return json_text(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"filter field {name!r}: {exc}") from exc


def json_text(value: Any) -> str:
    """`value` as JSON text, as items are stored: dates and times as ISO 8601 texts.

    Raises:
        TypeError: a value JSON cannot hold.
        ValueError: NaN or an infinity, which JSON cannot hold either.
    """
    return json.dumps(value, default=_default, ensure_ascii=False, allow_nan=False)


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
