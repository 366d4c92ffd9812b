"""The memory commands' quick start: plain ``recall``, ``remember`` and ``search`` without click.

Importing click (and what it imports: ``inspect``'s callers, ``uuid``, ``tempfile``, ``locale``,
``gettext``) and building the commands' options took about a fifth of these commands' start-up
(README, Performance: start-up; measured with ``memkeeper bench --startup`` and instruction
counts). An agent's script calls them once per process, so that fifth is paid on every call.

:func:`run_quick` takes a command line only when it is one of these three commands in its plain
form, whose meaning is beyond doubt: ``--db PATH`` before the command, the command's own
positional arguments, and its documented options, each spelled out and each value valid by the
click command's own rules. Anything else (``--help``, ``--version``, ``--now`` or
``MEMKEEPER_NOW``, ``--config``, ``-v``, ``--``, an unknown or malformed option, a missing,
extra, blank or dash-led argument, an out-of-range number, shell completion) returns ``None``,
and the click command line parses it and gives its usual answer or message. A command line the
quick start takes runs the same code as on click (:mod:`memkeeper.cli.memory_actions`), prints
through the same functions (:mod:`memkeeper.cli.output`) and fails through the same edge
(:mod:`memkeeper.cli.failures`); ``tests/test_cli_quick.py`` runs a corpus of command lines
both ways and compares output, exit code and the database.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from memkeeper.records import KEYED_KINDS, KINDS

EXIT_INTERRUPTED = 130
_WHOLE = re.compile(r"[1-9][0-9]{0,6}")
_UNIT_FRACTION = re.compile(r"(?:0|1)(?:\.[0-9]{1,12})?|\.[0-9]{1,12}")


class _NotQuick(Exception):
    """This command line is click's to parse."""


def _text(value: str) -> str:
    return value


def _identifier(value: str) -> str:
    """USER, KEY or QUERY: blank is click's usage error (``required_text``)."""
    if not value.strip():
        raise _NotQuick
    return value


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in choices:
            raise _NotQuick
        return value

    return check


def _confidence(value: str) -> float:
    """``--confidence``: click's FloatRange(0, 1), for the plain spellings only."""
    if not _UNIT_FRACTION.fullmatch(value) or float(value) > 1:
        raise _NotQuick
    return float(value)


def _whole(low: int, high: int | None) -> Callable[[str], int]:
    """A click IntRange, for the plain spellings only (no sign, space or underscore)."""

    def check(value: str) -> int:
        if not _WHOLE.fullmatch(value):
            raise _NotQuick
        number = int(value)
        if number < low or (high is not None and number > high):
            raise _NotQuick
        return number

    return check


class _Option:
    """One option of a command: where it goes and how its value is checked (None: a flag).

    (Plain classes, not dataclasses: building a dataclass costs more start-up than the whole
    of this module's other work.)
    """

    __slots__ = ("check", "dest", "flag_value", "multiple")

    def __init__(
        self,
        dest: str,
        check: Callable[[str], Any] | None = None,
        *,
        flag_value: Any = True,
        multiple: bool = False,
    ) -> None:
        self.dest = dest
        self.check = check
        self.flag_value = flag_value
        self.multiple = multiple


class _Command:
    """A command's positionals (name, check), its options by spelling, and its defaults."""

    __slots__ = ("action", "arguments", "defaults", "options")

    def __init__(
        self,
        *,
        arguments: tuple[tuple[str, Callable[[str], str]], ...],
        options: dict[str, _Option],
        defaults: dict[str, Any],
        action: str,
    ) -> None:
        self.arguments = arguments
        self.options = options
        self.defaults = defaults
        self.action = action


_NAMESPACE = _Option("namespace", _text)
_COMMON = {
    "-n": _NAMESPACE,
    "--namespace": _NAMESPACE,
    "--yes": _Option("yes"),
    "--json": _Option("as_json"),
}
_COMMON_DEFAULTS = {"namespace": "", "yes": False, "as_json": False}


def _commands() -> dict[str, _Command]:
    """The three commands as their click definitions declare them (memory_cmd, search_cmd)."""
    from memkeeper.store.entries import DEFAULT_CONFIDENCE
    from memkeeper.validation import MAX_LIMIT

    return {
        "recall": _Command(
            arguments=(("user", _identifier), ("key", _identifier)),
            options={**_COMMON, "--kind": _Option("kind", _choice(KEYED_KINDS))},
            defaults={**_COMMON_DEFAULTS, "kind": None},
            action="recall",
        ),
        "remember": _Command(
            arguments=(("user", _identifier), ("key", _identifier), ("value", _text)),
            options={
                **_COMMON,
                "--kind": _Option("kind", _choice(KEYED_KINDS)),
                "--confidence": _Option("confidence", _confidence),
                "--source": _Option("source", _text),
                "--pin": _Option("pin", flag_value=True),
                "--no-pin": _Option("pin", flag_value=False),
                "--ttl-days": _Option("ttl_days", _whole(1, None)),
            },
            defaults={
                **_COMMON_DEFAULTS,
                "kind": "fact",
                "confidence": DEFAULT_CONFIDENCE,
                "source": "cli",
                "pin": None,
                "ttl_days": None,
            },
            action="remember",
        ),
        "search": _Command(
            arguments=(("user", _identifier), ("query", _identifier)),
            options={
                **_COMMON,
                "--limit": _Option("limit", _whole(1, MAX_LIMIT)),
                "--kind": _Option("kinds", _choice(KINDS), multiple=True),
                "--include-cold": _Option("include_cold"),
            },
            defaults={**_COMMON_DEFAULTS, "limit": None, "kinds": (), "include_cold": False},
            action="search",
        ),
    }


QUICK_COMMANDS = ("recall", "remember", "search")


def _split_value(token: str, rest: list[str]) -> tuple[str, str]:
    """An option token and its value: ``--x=V`` or ``--x V`` (a dash-led value is click's)."""
    name, equals, value = token.partition("=")
    if not equals:
        if not rest:
            raise _NotQuick
        value = rest.pop(0)
    if value.startswith("-"):
        raise _NotQuick
    return name, value


def parse(args: list[str]) -> tuple[str | None, str, dict[str, Any]] | None:
    """``(db, command, parameters)`` of a plain memory command line, else None."""
    rest = list(args)
    db: str | None = None
    try:
        while rest and rest[0].startswith("--db"):
            name, value = _split_value(rest.pop(0), rest)
            if name != "--db" or not value or os.path.isdir(value):
                raise _NotQuick
            if os.path.exists(value) and not os.access(value, os.R_OK):
                raise _NotQuick  # click's Path says it is unreadable
            db = value
        if not rest or rest[0] not in QUICK_COMMANDS:
            return None
        command_name = rest.pop(0)
        command = _commands()[command_name]
        values = dict(command.defaults)
        positional: list[str] = []
        while rest:
            token = rest.pop(0)
            if not token.startswith("-"):
                positional.append(token)
                continue
            name = token.partition("=")[0] if token.startswith("--") else token
            option = command.options.get(name)
            if option is None:
                raise _NotQuick
            if option.check is None:
                if name != token:  # --json=1 and the like: click's to refuse
                    raise _NotQuick
                values[option.dest] = option.flag_value
                continue
            _, value = _split_value(token, rest)
            checked = option.check(value)
            if option.multiple:
                values[option.dest] = (*values[option.dest], checked)
            else:
                values[option.dest] = checked
        if len(positional) != len(command.arguments):
            raise _NotQuick
        for (dest, check), value in zip(command.arguments, positional, strict=True):
            values[dest] = check(value)
    except _NotQuick:
        return None
    return db, command.action, values


def _click_would_step_in() -> bool:
    """What the environment asks of click: a pretend clock or shell completion."""
    return "MEMKEEPER_NOW" in os.environ or "_MEMKEEPER_COMPLETE" in os.environ


def run_quick(args: list[str]) -> int | None:
    """Run ``args`` if it is a plain memory command line and return its exit code; None when
    the click command line must take it (see the module's docstring)."""
    if _click_would_step_in():
        return None
    parsed = parse(args)
    if parsed is None:
        return None
    db, action, values = parsed
    from memkeeper import logs, settings
    from memkeeper.cli import memory_actions
    from memkeeper.cli.failures import exit_code_of
    from memkeeper.cli.invocation import App
    from memkeeper.cli.output import echo

    try:
        # As the click group's callback does: the config file, the app, warnings-only logs
        # (set up at the first warning: a plain recall logs nothing and imports no logging).
        config_file, explicit = settings.config_file(None)
        app = App(db=db, config_path=config_file, config_explicit=explicit)
        logs.configure_at_first_record("warning")
        try:
            user = values.pop("user")
            if action == "remember":
                memory_actions.remember(app, user, values.pop("key"), values.pop("value"), **values)
            elif action == "recall":
                memory_actions.recall(app, user, values.pop("key"), **values)
            else:
                memory_actions.search(app, user, values.pop("query"), **values)
        finally:
            app.close()
    except (EOFError, KeyboardInterrupt):
        echo("", err=True)  # as click does: the blank line closes the terminal's ^C echo
        echo("memkeeper: aborted", err=True)
        code = EXIT_INTERRUPTED
    except OSError as exc:
        if exc.errno == errno.EPIPE:  # click's answer to a closed pipe (``| head -1``)
            _pacify_pipes()
            sys.exit(1)
        code = exit_code_of(exc)
    except Exception as exc:
        code = exit_code_of(exc)
    else:
        code = 0
    sys.stdout.flush()
    return code


def _pacify_pipes() -> None:
    """Stop the interpreter's last flush from failing on the closed pipe, as click does."""
    from click.core import _PacifyFlushWrapper

    sys.stdout = _PacifyFlushWrapper(sys.stdout)  # type: ignore[assignment]
    sys.stderr = _PacifyFlushWrapper(sys.stderr)  # type: ignore[assignment]
