"""The default configuration, read without pydantic: what a run with no config file gets.

Building the schema's models (:mod:`memkeeper.config`) costs more start-up time than a memory
command's whole work (pydantic's import and its schema build, ~150 ms; README, Performance:
start-up). With no config file there is nothing to validate, so :func:`defaults` gives a
:class:`DefaultConfig` over :data:`memkeeper.config.defaults.DEFAULTS`, the defaults generated
from the schema (a test checks they match it): the same values under the same attribute names
(``config.limits.max_key_chars``, ``config.jobs.expire.ttl_days.fact``).

Anything beyond reading a value (``model_dump()``, ``model_copy()``, iterating a section,
comparing with a :class:`~memkeeper.config.Config`) is answered by the real model, built on
first such use, so a caller never needs to know which of the two it holds. A config file is
always validated by the schema itself (:func:`memkeeper.config.file.load_config`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from memkeeper.config.defaults import DEFAULTS

if TYPE_CHECKING:
    from memkeeper.config.schema import Config


class DefaultConfig:
    """A read-only view of the default configuration, or of one of its sections.

    Attribute reads come from the plain defaults; everything else goes to the matching part
    of ``Config()`` (see the module's docstring).
    """

    __slots__ = ("_data", "_model", "_where")

    def __init__(
        self,
        data: Mapping[str, Any] = DEFAULTS,
        where: tuple[str, ...] = (),
        model: list[Any] | None = None,
    ) -> None:
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_where", where)
        # ``Config()`` once built, shared by the whole tree of views (empty until then).
        object.__setattr__(self, "_model", [] if model is None else model)

    def plain(self) -> Mapping[str, Any]:
        """The plain values this view reads (a section's: its keys and nested mappings)."""
        return self._data

    def real(self) -> Any:
        """The pydantic model this view stands for (``Config()``, or its section)."""
        if not self._model:
            from memkeeper.config.schema import Config

            self._model.append(Config())
        model = self._model[0]
        for name in self._where:
            model = getattr(model, name)
        return model

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: a setting, or something only the model has.
        data = self._data
        if name in data:
            value = data[name]
            if isinstance(value, Mapping):
                return DefaultConfig(value, (*self._where, name), self._model)
            return value
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.real(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"the configuration is read-only (cannot set {name!r})")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DefaultConfig):
            return self._data == other.plain()
        return bool(self.real() == other)

    def __hash__(self) -> int:
        return hash(self.real())

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self.real())

    def __repr__(self) -> str:
        return repr(self.real())

    def __reduce__(self) -> tuple[Any, tuple[tuple[str, ...]]]:
        return (view_at, (self._where,))  # pickled as where it is in the defaults

    def __copy__(self) -> DefaultConfig:
        return self  # read-only: a copy would be the same

    def __deepcopy__(self, memo: dict[int, Any]) -> DefaultConfig:
        return self

    def __dir__(self) -> list[str]:
        return sorted(set(self._data) | set(dir(self.real())))


def view_at(where: tuple[str, ...]) -> DefaultConfig:
    """The view of the section at ``where`` (``("jobs", "expire")``; ``()``: the whole)."""
    view: Any = DefaultConfig()
    for name in where:
        view = getattr(view, name)
    return view


def as_model(config: Any) -> Any:
    """``config`` as the pydantic model itself: for code that walks the schema (its fields,
    their descriptions), which a view does not have."""
    return config.real() if isinstance(config, DefaultConfig) else config


def defaults() -> Config:
    """The default configuration (a :class:`DefaultConfig`, read like a Config)."""
    return DefaultConfig()  # type: ignore[return-value]  # it reads like a Config
