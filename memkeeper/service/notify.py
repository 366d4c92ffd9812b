"""systemd's notification protocol (``sd_notify``), without a compiled dependency.

A service started with ``Type=notify`` tells systemd how it is doing by sending small
datagrams — ``READY=1``, ``WATCHDOG=1``, ``STOPPING=1``, ``STATUS=...`` — to the AF_UNIX
socket named in ``$NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace). Outside
systemd the variable is unset and every call here does nothing, so the service behaves the
same in a terminal, under launchd and in tests.

Sending never raises: a service must not die because its supervisor went away.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

from memkeeper import logs

log = logs.get_logger("memkeeper.notify")

ENV_SOCKET = "NOTIFY_SOCKET"
ENV_WATCHDOG_USEC = "WATCHDOG_USEC"
ENV_WATCHDOG_PID = "WATCHDOG_PID"


def socket_address(value: str | None) -> str | None:
    """The address to send to for a ``$NOTIFY_SOCKET`` value; None when unusable.

    ``/run/systemd/notify`` is a filesystem socket; ``@name`` is ``\\0name`` in Linux's
    abstract namespace. Other forms (``vsock:``) are not supported.
    """
    if not value:
        return None
    if value.startswith("@"):
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None


def watchdog_interval(env: Mapping[str, str] | None = None, pid: int | None = None) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings, or None when systemd wants none.

    systemd sets ``WATCHDOG_USEC`` (the timeout) and, usually, ``WATCHDOG_PID`` (the process
    meant); as ``sd_watchdog_enabled`` does, a ping every half timeout is asked for, and only
    by the process named.
    """
    env = os.environ if env is None else env
    try:
        usec = int(env.get(ENV_WATCHDOG_USEC, ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    wanted = env.get(ENV_WATCHDOG_PID)
    if wanted and wanted.isdigit() and int(wanted) != (os.getpid() if pid is None else pid):
        return None
    return usec / 1_000_000 / 2


class Notifier:
    """Sends notifications to systemd; a silent no-op when there is no ``$NOTIFY_SOCKET``."""

    def __init__(self, address: str | None = None) -> None:
        raw = os.environ.get(ENV_SOCKET) if address is None else address
        self.address = socket_address(raw)
        if raw and self.address is None:
            log.warning("unsupported NOTIFY_SOCKET address; not notifying", address=raw)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        """Send ``KEY=value`` fields as one datagram; True when it was delivered."""
        if self.address is None:
            return False
        message = "\n".join(fields).encode("utf-8")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(self.address)
                sock.sendall(message)
        except OSError as exc:
            log.debug("notification not delivered", error=str(exc), message=fields[0])
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """``READY=1``: start-up is finished (systemd considers the unit started)."""
        return self.send("READY=1", *_status(status))

    def reloading(self) -> bool:
        """``RELOADING=1``: re-reading the configuration; ``ready()`` follows."""
        return self.send("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1``: shutting down."""
        return self.send("STOPPING=1", *_status(status))

    def watchdog(self) -> bool:
        """``WATCHDOG=1``: still healthy."""
        return self.send("WATCHDOG=1")

    def status(self, text: str) -> bool:
        """``STATUS=...``: one line shown by ``systemctl status``."""
        return self.send(*_status(text))


def _status(text: str | None) -> list[str]:
    return [f"STATUS={' '.join(text.split())}"] if text else []
