"""A file's schema steps: registered without sqlite-utils, applied by its ``Migrations``.

:class:`Steps` is what :mod:`memkeeper.storage.sqlite.schema` registers its steps on. It has the
public face of ``sqlite_utils.migrations.Migrations`` (``name``, the decorator, ``pending``,
``applied``, ``apply``), and builds that class only when steps are to be listed or applied
through it, so that opening an up-to-date file reads the applied steps with one query
(:func:`applied_names`) and never imports sqlite-utils (README, Performance: start-up). The
record of applied steps is sqlite-utils' own ``_sqlite_migrations`` table, as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from memkeeper.storage.sqlite.connection import utils_database

if TYPE_CHECKING:
    from sqlite_utils.migrations import Migrations

MIGRATIONS_TABLE = "_sqlite_migrations"
"""Where sqlite-utils' ``Migrations`` records each applied step (migration_set, name)."""


class Step:
    """One registered step: its name, its function (given the file's sqlite-utils
    ``Database``) and whether it runs in a transaction. (A plain class: a dataclass would
    cost its build at every start.)"""

    __slots__ = ("fn", "name", "transactional")

    def __init__(self, name: str, fn: Callable[[Any], None], transactional: bool = True) -> None:
        self.name = name
        self.fn = fn
        self.transactional = transactional

    def __repr__(self) -> str:
        return f"Step({self.name!r}, transactional={self.transactional})"


def applied_names(conn: sqlite3.Connection, migration_set: str) -> list[str]:
    """The steps of ``migration_set`` recorded in the file, in the order they were applied."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [MIGRATIONS_TABLE]
    ).fetchone()
    if exists is None:
        return []
    rows = conn.execute(
        f"SELECT name FROM {MIGRATIONS_TABLE} WHERE migration_set = ? ORDER BY rowid",
        [migration_set],
    )
    return [name for (name,) in rows]


class Steps:
    """The ordered schema steps of one kind of file (see the module's docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._migrations: list[Step] = []

    def __call__(
        self, *, name: str | None = None, transactional: bool = True
    ) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
        """Register the decorated function as the next step (``name``: its own by default)."""

        def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
            step_name = name or fn.__name__
            if any(step.name == step_name for step in self._migrations):
                raise ValueError(f"step {step_name!r} is already registered in {self.name!r}")
            self._migrations.append(Step(step_name, fn, transactional))
            return fn

        return register

    @property
    def steps(self) -> list[Step]:
        """The registered steps, in order."""
        return list(self._migrations)

    def migrations(self) -> Migrations:
        """sqlite-utils' ``Migrations`` holding these steps (imports sqlite-utils)."""
        from sqlite_utils.migrations import Migrations

        built = Migrations(self.name)
        for step in self._migrations:
            built(name=step.name, transactional=step.transactional)(step.fn)
        return built

    def pending(self, db: Any) -> list[Any]:
        """The steps not yet applied to ``db`` (read-only)."""
        return self.migrations().pending(utils_database(db))

    def applied(self, db: Any) -> list[Any]:
        """The steps applied to ``db``, in order (read-only)."""
        return self.migrations().applied(utils_database(db))

    def apply(self, db: Any, *, stop_before: str | Iterable[str] | None = None) -> None:
        """Apply the pending steps, each with its record in one transaction."""
        self.migrations().apply(utils_database(db), stop_before=stop_before)

    def __repr__(self) -> str:
        return f"<Steps {self.name!r}: [{', '.join(s.name for s in self._migrations)}]>"
