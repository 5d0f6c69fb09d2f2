"""The ``[sql]`` section: how an app lays its state out in SQL tables.

Modes (README, "Your app's own layout"):

- ``one-table``: every state table's records in one SQL table, told apart by a name
  column (``table``, ``name_column``);
- ``table-per-table``: one SQL table per state table, named by an explicit map
  (``tables = { state = "sqltable" }``) or a template (``template = "state_{name}"``);
- ``single-table``: one SQL table as one state table (``table``; ``name``, the state
  table's name, defaults to the SQL table's).

Every mode names the ``key``, ``value`` and optional ``version`` columns. Codecs say how
a column's SQL value is a state model's bytes, per column (one storage class per
column: a row of another class is refused, exit 4, naming the table and the key):

- ``key_codec``: ``blob`` (the bytes), ``text`` (the UTF-8 bytes of the text; SQLite's
  BINARY collation orders UTF-8 text as its bytes, so key order is kept) or
  ``integer`` (a signed 64-bit INTEGER as 8 bytes, big-endian, with the sign bit
  flipped: ``(n + 2**63).to_bytes(8, "big")``, so that byte order is numeric order);
- ``value_codec``: ``blob``, ``text`` (UTF-8), ``integer`` (as the key) or ``real``
  (IEEE 754 binary64, 8 bytes big-endian). The value comes back in that storage class
  whatever the column's declared type: a TEXT value in a column declared BLOB is
  ``value_codec = "text"``. For a column whose rows mix classes, ``any`` carries each
  value's class in its bytes: one tag byte (``b`` BLOB, ``t`` TEXT, ``i`` INTEGER,
  ``r`` REAL, each followed by the bytes of that codec; ``n`` NULL, alone), so that a
  value whose class changed is a different value.

What the writer creates: the app's own ``create`` statement (and ``extra_sql``:
indexes, triggers and views, run after the records are in), else a plain table from
the columns and codecs (``rowid`` says a rowid table with the key ``PRIMARY KEY``,
else ``WITHOUT ROWID``); ``user_version`` and ``application_id`` are set on the file.
The reader accepts a rowid table whose key is ``PRIMARY KEY`` or ``UNIQUE`` and a
``WITHOUT ROWID`` one alike.

``keep_rowid = true`` carries each row's rowid (an app that iterates ``ORDER BY rowid``,
as sqlitedict's ``keys()`` does, reads its rows in the order it wrote them): the state
value is the rowid as 8 bytes (the integer codec's encoding) followed by the value's
bytes, so it travels through every engine and comes back as the row's rowid.

``columns = ["expires", …]`` names the app's columns beside the value (an expiry, a
flags column), which come back as they were: the state value is then the value's
bytes (its codec) preceded by their length as 4 bytes big-endian, then per column one
tag byte and its bytes as in ``any`` (``n`` for NULL), each preceded by its length as 4
bytes big-endian (after keep_rowid's 8 bytes, when both are given).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import fail, string, table_map, unknown_fields

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIELDS = {
    "mode",
    "table",
    "name_column",
    "name",
    "tables",
    "template",
    "key",
    "value",
    "version",
    "without_rowid",
    "rowid",
    "key_codec",
    "value_codec",
    "create",
    "extra_sql",
    "user_version",
    "application_id",
    "keep_rowid",
    "columns",
}
_MODE_FIELDS = {
    "one-table": {"table", "name_column"},
    "table-per-table": {"tables", "template"},
    "single-table": {"table", "name"},
}
MODES = tuple(_MODE_FIELDS)
KEY_CODECS = ("blob", "text", "integer")
VALUE_CODECS = ("blob", "text", "integer", "real", "any")
# SQL declared types a plain created table gives each codec's column ("any": none, so
# SQLite keeps each value in the class it is given).
CODEC_TYPES = {"blob": "BLOB", "text": "TEXT", "integer": "INTEGER", "real": "REAL", "any": ""}
_KEPT = ("__statemigrate__", "alembic_version")
_EXTRA = re.compile(r"\s*CREATE\s+(UNIQUE\s+)?(INDEX|TRIGGER|VIEW)\s", re.IGNORECASE)
_CREATE = re.compile(r"\s*CREATE\s+TABLE\s", re.IGNORECASE)


@dataclass(frozen=True)
class SqlSpec:
    """A ``[sql]`` section, validated (see the module notes for the fields)."""

    mode: str
    key: str
    value: str
    version: str | None = None
    table: str | None = None  # one-table, single-table
    name_column: str | None = None  # one-table
    name: str | None = None  # single-table: the state table's name
    tables: tuple[tuple[str, str], ...] = ()  # table-per-table: (state table, SQL table)
    template: str | None = None  # table-per-table: the SQL name with {name}
    key_codec: str = "blob"
    value_codec: str = "blob"
    rowid: bool = False
    create: str | tuple[tuple[str, str], ...] | None = None
    extra_sql: tuple[str, ...] | tuple[tuple[str, tuple[str, ...]], ...] = ()
    user_version: int | None = None
    application_id: int | None = None
    keep_rowid: bool = False
    extra_columns: tuple[str, ...] = ()  # ``columns``: the app's columns beside the value

    @property
    def without_rowid(self) -> bool:
        """Whether a table the writer creates from the columns is ``WITHOUT ROWID``."""
        return not self.rowid

    def columns(self) -> list[str]:
        """The SQL columns the layout names, in its order."""
        head = [self.name_column] if self.name_column else []
        tail = list(self.extra_columns) + ([self.version] if self.version else [])
        return head + [self.key, self.value] + tail

    def sql_table(self, name: str) -> str | None:
        """The SQL table of state table ``name`` (None: the layout has no such table)."""
        if self.mode == "one-table":
            return self.table
        if self.mode == "single-table":
            return self.table if name == self.name else None
        if self.template is not None:
            return self.template.replace("{name}", name)
        return dict(self.tables).get(name)

    def state_table(self, sql: str) -> str | None:
        """The state table SQL table ``sql`` holds in table-per-table or single-table
        mode (compared as SQLite compares names, ASCII case ignored), or None."""
        folded = sql.lower()
        if self.mode == "single-table":
            return self.name if self.table and folded == self.table.lower() else None
        if self.mode != "table-per-table":
            return None
        if self.template is not None:
            head, tail = self.template.split("{name}")
            fits = len(sql) > len(head) + len(tail)
            if fits and folded.startswith(head.lower()) and folded.endswith(tail.lower()):
                return sql[len(head) : len(sql) - len(tail)]
            return None
        return next((t for t, s in self.tables if s.lower() == folded), None)

    def create_sql(self, name: str) -> str | None:
        """The app's CREATE TABLE statement for state table ``name``, or None."""
        if self.create is None:
            return None
        if isinstance(self.create, str):
            table = self.sql_table(name) or ""
            return self.create.replace("{table}", _quote(table))
        return dict(self.create).get(name)

    def extra_sql_for(self, name: str) -> tuple[str, ...]:
        """The app's indexes, triggers and views of state table ``name``'s SQL table."""
        if self.extra_sql and isinstance(self.extra_sql[0], tuple):
            return dict(self.extra_sql).get(name, ())  # type: ignore[arg-type]
        table = _quote(self.sql_table(name) or "")
        return tuple(s.replace("{table}", table) for s in self.extra_sql)  # type: ignore[union-attr]

    def describe(self) -> str:
        """What the section lays out, for messages."""
        cols = ", ".join(self.columns())
        if self.mode == "one-table":
            return f"one-table {self.table}({cols})"
        if self.mode == "single-table":
            return f"single-table {self.table}({cols}) as table {self.name!r}"
        if self.template is not None:
            return f"table-per-table {self.template}({cols})"
        return f"table-per-table ({', '.join(s for _, s in self.tables)})({cols})"


SqlOneTable = SqlSpec  # the older name


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _identifier(path: Path, section: dict[str, Any], name: str, where: str) -> str:
    """A SQL name the layout gives: plain identifiers only (no quoting games)."""
    value = string(path, section, name, where)
    if not _IDENTIFIER.fullmatch(value):
        raise fail(
            path,
            f"{where}{name} = {value!r} is not a plain SQL identifier "
            "(letters, digits and '_', not starting with a digit)",
        )
    return value


def _sql_table_name(path: Path, value: str, where: str) -> str:
    """A SQL table name: any text (it is quoted), but not one SQLite or statemigrate keeps."""
    if "\x00" in value:
        raise fail(path, f"{where} {value!r} holds a NUL")
    if value.lower() in _KEPT or value.lower().startswith("sqlite_"):
        raise fail(path, f"{where} {value!r} is a name SQLite or statemigrate keeps")
    return value


def _choice(path: Path, section: dict[str, Any], name: str, where: str, allowed: tuple[str, ...]):
    value = section.get(name, "blob")
    if value not in allowed:
        raise fail(path, f"{where}{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _int32(path: Path, section: dict[str, Any], name: str, where: str) -> int | None:
    value = section.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
        raise fail(path, f"{where}{name} must be a signed 32-bit integer, not {value!r}")
    return value


def _statement(path: Path, value: Any, where: str, shape: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not shape.match(value):
        raise fail(path, f"{where} must be {what}, not {value!r}")
    return value


def _create(path: Path, section: dict[str, Any], where: str, mode: str, names: set[str]) -> Any:
    value = section.get("create")
    if value is None:
        return None
    what = "a CREATE TABLE statement"
    if isinstance(value, dict) and mode == "table-per-table":
        extra = sorted(set(value) - names) if names else []
        if extra:
            raise fail(path, f"{where}create.{extra[0]}: no such table in the layout")
        return tuple(
            (k, _statement(path, v, f"{where}create.{k}", _CREATE, what)) for k, v in value.items()
        )
    text = _statement(path, value, f"{where}create", _CREATE, what)
    if mode == "table-per-table" and "{table}" not in text and len(names) != 1:
        raise fail(
            path,
            f"{where}create must name its table as {{table}} (one statement for every table), "
            "or be a table of state table = statement",
        )
    return text


def _extra_sql(path: Path, section: dict[str, Any], where: str, mode: str) -> Any:
    value = section.get("extra_sql", [])
    what = "a CREATE INDEX, TRIGGER or VIEW statement"

    def one_list(v: Any, at: str) -> tuple[str, ...]:
        if not isinstance(v, list):
            raise fail(path, f"{at} must be a list of statements, not {v!r}")
        return tuple(_statement(path, s, f"{at}[{i}]", _EXTRA, what) for i, s in enumerate(v))

    if isinstance(value, dict) and mode == "table-per-table":
        return tuple((k, one_list(v, f"{where}extra_sql.{k}")) for k, v in value.items())
    return one_list(value, f"{where}extra_sql")


def sql_section(
    path: Path, section: dict[str, Any], versioned: list[str], metadata: str, name: str
) -> SqlSpec:
    """The ``[sql]`` section (``name``: the section's name in the file), validated.

    Raises:
        UsageError: a field unknown, missing, of the wrong type or of another mode
            (exit 2).
    """
    where = name + "."
    unknown_fields(path, section, _FIELDS, name)
    mode = section.get("mode", "one-table")
    if mode not in _MODE_FIELDS:
        raise fail(path, f"{where}mode must be one of {', '.join(MODES)}, not {mode!r}")
    others = set().union(*(f for m, f in _MODE_FIELDS.items() if m != mode)) - _MODE_FIELDS[mode]
    wrong = sorted(set(section) & others)
    if wrong:
        raise fail(path, f"{where}{wrong[0]} is not a field of mode {mode!r}")
    if metadata == "inline":
        raise fail(path, "metadata 'inline' is for key-value layouts; SQL has 'store' or 'none'")
    if "rowid" in section and "without_rowid" in section:
        raise fail(path, f"give {where}rowid or {where}without_rowid, not both")
    rowid = section.get("rowid", not section.get("without_rowid", True))
    if not isinstance(rowid, bool):
        raise fail(path, f"{where}rowid / without_rowid must be true or false, not {rowid!r}")
    version = section.get("version")
    fields: dict[str, Any] = {
        "mode": mode,
        "key": _identifier(path, section, "key", where),
        "value": _identifier(path, section, "value", where),
        "version": _identifier(path, section, "version", where) if version is not None else None,
        "key_codec": _choice(path, section, "key_codec", where, KEY_CODECS),
        "value_codec": _choice(path, section, "value_codec", where, VALUE_CODECS),
        "rowid": rowid,
        "user_version": _int32(path, section, "user_version", where),
        "application_id": _int32(path, section, "application_id", where),
        "keep_rowid": section.get("keep_rowid", False),
    }
    if not isinstance(fields["keep_rowid"], bool):
        raise fail(path, f"{where}keep_rowid must be true or false, not {fields['keep_rowid']!r}")
    extra = section.get("columns", [])
    if not isinstance(extra, list) or not all(isinstance(c, str) for c in extra):
        raise fail(path, f"{where}columns must be a list of column names, not {extra!r}")
    fields["extra_columns"] = tuple(
        _identifier(path, {"columns": c}, "columns", where) for c in extra
    )
    if any(c.lower() == "rowid" for c in fields["extra_columns"]):
        raise fail(path, f"{where}columns: the rowid is keep_rowid = true, not a column")
    if fields["keep_rowid"] and not rowid:
        raise fail(path, f"{where}keep_rowid needs rowid tables ({where}rowid = true)")
    names: set[str] = set()
    if mode == "one-table":
        fields["table"] = _identifier(path, section, "table", where)
        fields["name_column"] = _identifier(path, section, "name_column", where)
        _sql_table_name(path, fields["table"], f"{where}table")
    elif mode == "single-table":
        fields["table"] = _sql_table_name(
            path, string(path, section, "table", where), f"{where}table"
        )
        state = section.get("name", fields["table"])
        if not isinstance(state, str) or not state:
            raise fail(path, f"{where}name must be a non-empty string, not {state!r}")
        fields["name"] = state
        names = {state}
    else:
        if ("tables" in section) == ("template" in section):
            raise fail(path, f"mode 'table-per-table' needs {where}tables or {where}template (one)")
        if "template" in section:
            template = string(path, section, "template", where)
            if template.count("{name}") != 1 or re.sub(r"\{name\}", "", template).count("{"):
                raise fail(
                    path,
                    f"{where}template = {template!r} must hold {{name}} exactly once "
                    "(and no other braces)",
                )
            _sql_table_name(path, template.replace("{name}", "x"), f"{where}template")
            fields["template"] = template
        else:
            mapped = table_map(path, section["tables"], f"{where}tables")
            folded = [s.lower() for s in mapped.values()]
            if len(set(folded)) != len(folded):
                raise fail(
                    path, f"{where}tables: two state tables name the same SQL table (case ignored)"
                )
            for state, sql in mapped.items():
                if not sql:
                    raise fail(path, f"{where}tables.{state} must be a non-empty string")
                _sql_table_name(path, sql, f"{where}tables.{state}")
            fields["tables"] = tuple(mapped.items())
            names = set(mapped)
        if versioned and names and not set(versioned) <= names:
            missing = min(set(versioned) - names)
            raise fail(path, f"versioned table {missing!r} is not in {where}tables")
    fields["create"] = _create(path, section, where, mode, names)
    fields["extra_sql"] = _extra_sql(path, section, where, mode)
    spec = SqlSpec(**fields)
    folded_cols = [c.lower() for c in spec.columns()]
    if len(set(folded_cols)) != len(folded_cols):
        raise fail(path, f"the columns {', '.join(spec.columns())} are not all different")
    if versioned and spec.version is None:
        raise fail(path, f"versioned tables need a version column ({where}version)")
    if mode == "single-table" and versioned and versioned != [spec.name]:
        raise fail(
            path, f"versioned lists {versioned[0]!r}; the layout's one table is {spec.name!r}"
        )
    return spec
