"""What every layout section shares: the reserved names and the field checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError

METADATA_NAMESPACE = "__statemigrate__"  # statemigrate's own table / namespace / prefix name
# Where statemigrate's metadata lives (the layout file's ``metadata``).
METADATA_LOCATIONS = ("store", "inline", "none")


def fail(path: Path, what: str) -> UsageError:
    """The one-line refusal of a layout file (exit 2)."""
    return UsageError(f"layout {path}: {what}")


def string(path: Path, section: dict[str, Any], name: str, where: str) -> str:
    """A field that must be a non-empty string."""
    value = section.get(name)
    if not isinstance(value, str) or not value:
        raise fail(path, f"{where}{name} must be a non-empty string, not {value!r}")
    return value


def names_list(path: Path, value: Any, where: str) -> list[str]:
    """A field that must be a list of table names."""
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise fail(path, f"{where} must be a list of table names, not {value!r}")
    return value


def unknown_fields(path: Path, section: dict[str, Any], known: set[str], where: str) -> None:
    """Refuse a field the section does not have."""
    unknown = sorted(set(section) - known)
    if unknown:
        raise fail(path, f"unknown field {where}.{unknown[0]} (known: {', '.join(sorted(known))})")


def table_map(path: Path, value: Any, where: str) -> dict[str, str]:
    """A ``{state table = physical name}`` table (the physical name may be empty where
    the engine has a main namespace)."""
    if not isinstance(value, dict) or not value:
        raise fail(path, f"{where} must be a table of state table = name, not {value!r}")
    for k, v in value.items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise fail(path, f"{where}.{k} must be a string, not {v!r}")
    if len(set(value.values())) != len(value):
        raise fail(path, f"{where}: two state tables name the same place")
    return dict(value)
