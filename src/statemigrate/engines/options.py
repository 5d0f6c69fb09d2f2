"""Typed engine options: a frozen dataclass each engine declares.

An engine's options are the fields of its :class:`EngineOptions` subclass
(``Engine.options``), each with a default and, in its metadata, a ``help`` line and
the side it ``applies`` to (``source``, ``dest`` or ``both``). :meth:`EngineOptions.parse`
turns what a caller gives (a mapping of Python values, or the text of the command
line's ``KEY=VALUE`` pairs) into an instance, converting each value to its field's
type and refusing unknown names and bad values with a :class:`UsageError` (exit 2)
that names the engine, the option and what it takes.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..errors import UsageError

__all__ = ["EngineOptions", "OptionSpec", "Shorthand", "Side", "option", "shorthands"]

Side = Literal["source", "dest"]
_SIDE_WORDS = {"source": "source", "dest": "destination"}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def option(
    default: Any,
    help: str,
    *,
    applies: Literal["source", "dest", "both"] = "both",
    expects: str | None = None,
    choices: Sequence[Any] | None = None,
    flag: str | None = None,
) -> Any:
    """A field of an options dataclass: its default, help line and side.

    Args:
        default: the value when the option is not given.
        help: one line for ``--help``-like listings (``statemigrate engines``).
        applies: ``source`` (the reader's), ``dest`` (the writer's) or ``both``.
        expects: what a value must be, in words, for the refusal (derived from the type
            when not given).
        choices: the values accepted (after conversion), when fewer than the type allows.
        flag: a shorthand on ``convert``'s command line (``--redb-format 2`` for
            ``--dest-option redb_format=2``); engines declaring the same flag share it.

    Returns:
        A :func:`dataclasses.field`.
    """
    meta = {"help": help, "applies": applies, "expects": expects, "choices": choices, "flag": flag}
    return field(default=default, metadata=meta)


def skip_foreign_tables_option(
    help: str = "leave out tables not in statemigrate's layout instead of refusing",
) -> Any:
    """The reader's ``skip_foreign_tables`` flag (``--skip-foreign-tables``), off by default."""
    return option(False, help, applies="source", flag="--skip-foreign-tables")


def layout_option(where: str) -> Any:
    """The ``layout`` option: the path of a layout file saying how the app lays its state
    out ``where`` ("in LMDB, such as ..."), None for statemigrate's own layout."""
    return option(
        None,
        f"a layout file (TOML) saying how the app lays its state out {where} "
        "(README: Your app's own layout)",
        expects="the path of a layout file",
    )


@dataclass(frozen=True)
class Shorthand:
    """A command-line shorthand an engine declares for one of its options (``flag=``).

    Attributes:
        flag: ``--redb-format``.
        name: the option it sets (``redb_format``).
        applies: ``source``, ``dest`` or ``both``.
        kind: ``bool`` (a flag), ``int``, ``text`` or ``list of text`` (repeatable).
        help: the option's help line.
        engine: the engine declaring it.
    """

    flag: str
    name: str
    applies: str
    kind: str
    help: str
    engine: str


def shorthands(engine: type[Any]) -> list[Shorthand]:
    """The shorthand flags ``engine``'s options declare, in declaration order."""
    cls = engine.options
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        flag = f.metadata.get("flag")
        if flag:
            out.append(
                Shorthand(
                    flag,
                    f.name,
                    f.metadata.get("applies", "both"),
                    _type_word(hints[f.name]),
                    f.metadata.get("help", ""),
                    engine.name,
                )
            )
    return out


@dataclass(frozen=True)
class OptionSpec:
    """One option as ``statemigrate engines`` lists it."""

    name: str
    type: str
    default: Any
    help: str
    applies: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly form (a tuple default becomes a list)."""
        default = list(self.default) if isinstance(self.default, tuple) else self.default
        return {**dataclasses.asdict(self), "default": default}


def _base_type(hint: Any) -> tuple[Any, bool]:
    """The field's type without ``None``, and whether ``None`` is allowed."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def _type_word(hint: Any) -> str:
    """The type in the words of a listing: bool, int, text, list of text."""
    base, _ = _base_type(hint)
    if typing.get_origin(base) is tuple:
        return "list of text"
    return {bool: "bool", int: "int", str: "text"}.get(base, str(base))


def _expected(hint: Any) -> str:
    base, _ = _base_type(hint)
    if typing.get_origin(base) is tuple:
        return "a name or a list of names"
    return {
        bool: "true or false",
        int: "a whole number",
        str: "text",
    }.get(base, str(base))


def _convert(hint: Any, value: Any) -> Any:
    """``value`` as the field's type; ValueError when it is not one."""
    base, optional = _base_type(hint)
    if value is None:
        if optional:
            return None
        raise ValueError
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError
    if base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = value.strip() if isinstance(value, str) else ""
        if text.lstrip("+-").isdigit():
            return int(text)
        raise ValueError
    if base is str:
        if isinstance(value, str):
            return value
        raise ValueError
    if typing.get_origin(base) is tuple:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, (list, tuple, set, frozenset)) and all(
            isinstance(i, str) for i in items
        ):
            return tuple(items)
        raise ValueError
    raise TypeError(f"an engine option cannot have the type {base!r}")  # a declaration bug


@dataclass(frozen=True)
class EngineOptions:
    """The options of an engine; this base has none (engines without options use it).

    An engine with options subclasses it as a frozen dataclass whose fields are made
    with :func:`option`; field types are ``bool``, ``int``, ``str``,
    ``tuple[str, ...]`` (repeatable) or one of them ``| None``.
    """

    _specs: ClassVar[dict[type, list[OptionSpec]]] = {}

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        return typing.get_type_hints(cls)

    @classmethod
    def specs(cls) -> list[OptionSpec]:
        """Every option with its type, default, help and side, in declaration order."""
        if cls not in EngineOptions._specs:
            hints = cls._hints()
            EngineOptions._specs[cls] = [
                OptionSpec(
                    f.name,
                    _type_word(hints[f.name]),
                    f.default,
                    str(f.metadata.get("help", "")),
                    str(f.metadata.get("applies", "both")),
                )
                for f in dataclasses.fields(cls)
            ]
        return EngineOptions._specs[cls]

    @classmethod
    def for_reading_back(cls, given: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Of a writer's options, those that say how to read the store too (``both``, such
        as a layout file), for reading a built store back; None when there are none."""
        if not given:
            return None
        both = {s.name for s in cls.specs() if s.applies == "both"}
        kept = {k: v for k, v in given.items() if k.replace("-", "_") in both}
        return kept or None

    @classmethod
    def known(cls) -> str:
        """The options in words, for a refusal: ``its options: a (source), b (destination)``."""
        specs = cls.specs()
        if not specs:
            return "it has no options"
        listed = ", ".join(
            f"{s.name} ({_SIDE_WORDS.get(s.applies, 'source or destination')})" for s in specs
        )
        return f"its options: {listed}"

    @classmethod
    def parse(
        cls, engine: str, options: Mapping[str, Any] | EngineOptions | None, side: Side | None
    ) -> EngineOptions:
        """The options given, typed and checked.

        Args:
            engine: the engine's name, for the messages.
            options: option name -> value (a Python value or its text), an instance of
                this class, or None.
            side: ``source`` (the reader) or ``dest`` (the writer): options declared for
                the other side only are refused; None accepts every option.

        Returns:
            An instance of this class, defaults for what was not given.

        Raises:
            UsageError: an unknown option, one for the other side, or a value that is
                not of the option's type (exit 2).
        """
        if isinstance(options, EngineOptions):
            if type(options) is not cls:
                raise UsageError(
                    f"the {engine} engine takes {cls.__name__}, not {type(options).__name__}"
                )
            return options
        given = dict(options or {})
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = cls._hints()
        values: dict[str, Any] = {}
        for name in sorted(given):
            f = fields.get(name)
            if f is None:
                raise UsageError(f"the {engine} engine has no option {name!r}; {cls.known()}")
            applies = f.metadata.get("applies", "both")
            if side is not None and applies not in ("both", side):
                raise UsageError(
                    f"the {engine} engine has no option {name!r} for a {_SIDE_WORDS[side]} "
                    f"({name} is a {_SIDE_WORDS[applies]} option); {cls.known()}"
                )
            expects = f.metadata.get("expects") or _expected(hints[name])
            value = given[name]
            try:
                converted = _convert(hints[name], value)
            except ValueError:
                raise UsageError(
                    f"the {engine} engine's option {name} must be {expects}, not {value!r}"
                ) from None
            choices = f.metadata.get("choices")
            if choices is not None and converted is not None and converted not in choices:
                raise UsageError(
                    f"the {engine} engine's option {name} must be {expects}, not {value!r}"
                )
            values[name] = converted
        return cls(**values)
