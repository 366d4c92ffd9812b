"""What every part of the store shares: its files, settings, clock and actor, and input checks.

:class:`~memkeeper.store.MemoryStore` is a facade: each module beside this one does one
concern (:mod:`~memkeeper.store.writing`, :mod:`~memkeeper.store.recall`,
:mod:`~memkeeper.store.conversations`, ...) and receives the store's :class:`StoreCore`. The
core lives apart from the facade so that those modules need not import it, and is the one
place the store's state is kept, so a change to ``config`` or ``clock`` (the daemon reloads
its config; tests move the clock) is seen by every concern at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memkeeper import validation
from memkeeper.clock import Clock
from memkeeper.storage.base import Storage
from memkeeper.storage.transitions import Outcome, Transition, apply

if TYPE_CHECKING:
    from memkeeper.config import Config


class StoreCore:
    """The state behind one MemoryStore, and the input checks bound to its ``[limits]``."""

    def __init__(self, storage: Storage, config: Config, clock: Clock, actor: str) -> None:
        self.storage = storage
        self.config = config
        self.clock = clock
        self.actor = actor

    def now(self) -> datetime:
        """The store's current time (aware UTC)."""
        return self.clock()

    def apply(self, transitions: Sequence[Transition], verb: str) -> list[Outcome]:
        """Apply ``transitions`` now, logged with the actor ``<actor>:<verb>``."""
        return apply(self.storage, transitions, actor=f"{self.actor}:{verb}", now=self.now())

    # -- input checks -----------------------------------------------------------------------

    def owner(self, user_id: str, namespace: str) -> tuple[str, str]:
        """The checked user id and namespace."""
        return validation.owner(user_id, namespace, max_chars=self.config.limits.max_key_chars)

    def key(self, key: str) -> str:
        """The checked key."""
        return validation.identifier("key", key, max_chars=self.config.limits.max_key_chars)

    def value(self, field: str, value: str) -> str:
        """A checked value, note or message named ``field`` in errors."""
        return validation.text(field, value, max_bytes=self.config.limits.max_value_bytes)

    def source(self, source: str) -> str:
        """The checked source of a value (may be empty)."""
        return validation.text("source", source, max_bytes=1024, allow_empty=True)

    def lookup(self, *fields: tuple[str, str | None]) -> None:
        """Check ids and filters to look up are text SQLite can bind (None = no filter).

        Without this, a lone surrogate (a non-UTF-8 command-line argument) escaped as a raw
        UnicodeEncodeError from sqlite3 instead of InvalidInput.
        """
        for field, value in fields:
            if value is not None:
                validation.text(
                    field, value, max_bytes=self.config.limits.max_value_bytes, allow_empty=True
                )

    @staticmethod
    def limit(limit: int) -> int:
        """The checked number of rows a listing returns."""
        return validation.limit(limit)


class Concern:
    """One of the facade's modules, imported at its first call: ``memkeeper recall`` loads
    the recall module, not search's, context's or the change log's (start-up time)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        import importlib

        return getattr(importlib.import_module(f"memkeeper.store.{self._name}"), attribute)
