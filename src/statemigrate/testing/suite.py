"""The engine suites as pytest test classes, for any engine, built-in or a plugin's.

An engine's own tests get the suites by assigning the classes to module names that
pytest collects (as singer-sdk's ``get_target_test_class``)::

    from statemigrate.testing import conformance_suite, contract_suite

    TestMyEngineConformance = conformance_suite("myengine")
    TestMyEngineContract = contract_suite("myengine")

:func:`conformance_suite` runs every case of :mod:`.conformance` against the engine, a
case it declares in ``Engine.known_limits`` as a strict xfail; :func:`contract_suite`
checks the facts it declares and that it reads through the base's plumbing. The host's
``tests/test_conformance.py`` and ``tests/test_engine_contract.py`` run the same
classes for every built-in engine.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..engines.access import Reader, StoreAccess
from ..engines.base import Engine, check_options
from ..engines.options import EngineOptions
from ..errors import StateMigrateError
from ..model import Record, TableInfo, TableKind
from ..registry import engine_for_suffix, get_engine
from ..stores.opening import resolve_destination
from .conformance import CASES, SUITE_LIMITS
from .stores import store_path, write_store

# How a declared limit shows: the engine refuses in the contract's words, or a case's
# assertion fails. Anything else (a crash) is not the limit and fails the test.
LIMIT_ERRORS = (StateMigrateError, AssertionError)


def _engine(engine: str | type[Engine]) -> type[Engine]:
    return get_engine(engine) if isinstance(engine, str) else engine


def _cases(engine: type[Engine]) -> list[Any]:
    """Every case, named ``<engine>-<case>``; the engine's declared limits as strict xfails."""
    import pytest  # the test extra's: imported where a suite is built, not with the package

    params = []
    for name in CASES:
        marks = []
        if name in engine.known_limits:
            reason = engine.known_limits[name]
            marks.append(pytest.mark.xfail(strict=True, raises=LIMIT_ERRORS, reason=reason))
        params.append(pytest.param(name, id=f"{engine.name}-{name}", marks=marks))
    return params


def conformance_suite(engine: str | type[Engine]) -> type:
    """The conformance suite for ``engine`` as a pytest test class.

    Args:
        engine: a registered engine's name, or the engine class itself.

    Returns:
        A class to assign to a module name starting with ``Test``: one test per case of
        :data:`.conformance.CASES` (a declared ``known_limits`` entry runs as a strict
        xfail), and a check that every declared limit names a real case.
    """
    import pytest

    eng = _engine(engine)

    class ConformanceSuite:
        __doc__ = f"The conformance suite against the {eng.name} engine."
        engine = eng

        @pytest.mark.parametrize("case_name", _cases(eng))
        def test_conformance(self, case_name: str, tmp_path: Path) -> None:
            self.engine.require_driver()  # a missing driver fails, never hides the engine
            CASES[case_name](self.engine, tmp_path)

        def test_declared_limits_name_real_cases(self) -> None:
            limits = self.engine.known_limits
            known = set(CASES) | set(SUITE_LIMITS)
            assert set(limits) <= known, sorted(set(limits) - known)
            assert all(reason.strip() for reason in limits.values())

    return ConformanceSuite


def contract_suite(engine: str | type[Engine]) -> type:
    """The engine contract for ``engine`` as a pytest test class: what it declares
    (registered name, suffixes, typed options) holds, and it reads through the base.

    Args:
        engine: a registered engine's name, or the engine class itself.

    Returns:
        A class to assign to a module name starting with ``Test``.
    """
    eng = _engine(engine)

    class ContractSuite:
        __doc__ = f"The engine contract of the {eng.name} engine."
        engine = eng

        def test_is_registered_under_its_name(self) -> None:
            assert get_engine(self.engine.name) is self.engine

        def test_reads_through_the_base_with_bounded_batches(self, tmp_path: Path) -> None:
            engine = self.engine
            engine.require_driver()
            plain: list[Record] = [(i.to_bytes(4, "big"), bytes(100)) for i in range(1, 50)]
            versioned: list[Record] = [
                (i.to_bytes(2, "big"), b"v%d" % i, 2**64 - i) for i in range(1, 30)
            ]
            content = {TableInfo("p"): plain, TableInfo("v", TableKind.VERSIONED): versioned}
            path = write_store(
                engine, store_path(engine, tmp_path), content, {"app": b"1"}, batch=5
            )
            with engine.open_reader(path) as reader:
                assert isinstance(reader, Reader)
                engine_classes = [c for c in type(reader).__mro__ if c not in (Reader, StoreAccess)]
                for name in ("read_batches", "iter_records", "metadata"):
                    assert [c.__name__ for c in engine_classes if name in vars(c)] == [], name
                tables = {t.name: t for t in reader.tables()}
                by_count = list(reader.read_batches(tables["p"], max_records=7, max_bytes=1 << 30))
                by_bytes = list(reader.read_batches(tables["p"], max_records=10_000, max_bytes=350))
                after = list(reader.iter_records(tables["v"], versioned[9][0]))
                meta = reader.metadata()
            assert [r for b in by_count for r in b] == plain
            assert [r for b in by_bytes for r in b] == plain
            assert max(len(b) for b in by_count) <= 7 and all(by_count)
            assert max(len(b) for b in by_bytes) <= 4 and all(by_bytes)  # 104 bytes a record
            assert after == versioned[10:]
            assert meta.get("app") == b"1"
            assert not [k for k in meta if k.startswith(("kind:", "sql.name:", "helixdb.table:"))]

        def test_declares_the_suffixes_that_name_its_stores(self) -> None:
            engine = self.engine
            assert engine.suffixes, f"{engine.name} declares no suffix"
            for suffix in engine.suffixes:
                assert suffix.startswith(".") and suffix == suffix.lower(), suffix
                assert engine_for_suffix(Path(f"x{suffix.upper()}")) is engine

        def test_a_destination_named_by_its_suffix_needs_no_engine(self, tmp_path: Path) -> None:
            for suffix in self.engine.suffixes:
                path = tmp_path / f"new{suffix}"
                assert resolve_destination(str(path), None) == (self.engine, path)

        def test_declares_its_options(self) -> None:
            options = self.engine.options
            assert issubclass(options, EngineOptions) and dataclasses.is_dataclass(options)
            assert options.__dataclass_params__.frozen  # type: ignore[attr-defined]
            defaults = {}
            for spec in options.specs():
                assert spec.help and spec.applies in ("source", "dest", "both"), spec
                assert spec.type in ("bool", "int", "text", "list of text"), spec
                if spec.default is not None:
                    defaults[spec.name] = spec.default
            # Each default is a value of its own type: parsing the defaults gives them back.
            assert check_options(self.engine, defaults, None) == dataclasses.asdict(options())

    return ContractSuite
