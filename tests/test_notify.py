"""systemd's notify protocol: datagrams to $NOTIFY_SOCKET, a no-op without it."""

from __future__ import annotations

import os
import secrets
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memkeeper.service.notify import Notifier, socket_address, watchdog_interval

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="abstract sockets are Linux-only"
)


@pytest.fixture
def path_socket() -> Iterator[tuple[socket.socket, str]]:
    # A short directory: AF_UNIX paths are limited to about 100 bytes.
    directory = Path(tempfile.mkdtemp(prefix="mk-"))
    path = directory / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2)
    yield sock, str(path)
    sock.close()
    path.unlink()
    directory.rmdir()


def test_socket_address_forms() -> None:
    assert socket_address(None) is None
    assert socket_address("") is None
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    assert socket_address("@memkeeper/notify") == "\0memkeeper/notify"
    assert socket_address("vsock:2:1234") is None
    assert socket_address("relative/path") is None


def test_without_notify_socket_everything_is_a_no_op() -> None:
    notifier = Notifier()
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.watchdog() is False
    assert notifier.stopping() is False


def test_messages_reach_a_path_socket(
    path_socket: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = path_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    notifier = Notifier()
    assert notifier.ready(status="5 jobs   scheduled\n(UTC)")
    assert sock.recv(4096).decode() == "READY=1\nSTATUS=5 jobs scheduled (UTC)"
    assert notifier.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    assert notifier.stopping()
    assert sock.recv(4096) == b"STOPPING=1"
    assert notifier.reloading()
    reloading = sock.recv(4096).decode().split("\n")
    assert reloading[0] == "RELOADING=1"
    assert reloading[1].startswith("MONOTONIC_USEC=")
    assert int(reloading[1].split("=")[1]) > 0


@linux_only
def test_messages_reach_an_abstract_socket() -> None:
    name = f"memkeeper-test-{secrets.token_hex(4)}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        assert Notifier(f"@{name}").ready()
        assert sock.recv(4096) == b"READY=1"


def test_a_vanished_socket_is_not_an_error(tmp_path: Path) -> None:
    notifier = Notifier(str(tmp_path / "gone"))
    assert notifier.enabled
    assert notifier.ready() is False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"WATCHDOG_USEC": "60000000"}, 30.0),
        ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}, 1.0),
        ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}, None),  # meant for another process
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
    ],
)
def test_watchdog_interval_is_half_the_timeout(env: dict[str, str], expected: float | None) -> None:
    assert watchdog_interval(env) == expected
