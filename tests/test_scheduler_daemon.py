"""The service process object, without starting its scheduler: reload and start-up refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from memkeeper.config import Config, load_config
from memkeeper.errors import ConfigError
from memkeeper.service.daemon import Daemon


def make_daemon(tmp_path: Path, text: str) -> tuple[Daemon, Path]:
    config_path = tmp_path / "config.toml"
    config_path.write_text(text, encoding="utf-8")
    daemon = Daemon(
        db=tmp_path / "memory.db",
        config=load_config(config_path, explicit=True),
        config_path=config_path,
        config_explicit=True,
        handle_signals=False,
    )
    return daemon, config_path


def test_reload_keeps_the_running_config_when_the_new_one_is_invalid(tmp_path: Path) -> None:
    daemon, path = make_daemon(tmp_path, '[service]\ntimezone = "Asia/Shanghai"\n')
    before = daemon.config
    for broken in ("[service\n", '[jobs.expire]\nschedule = "0 3 * * 8"\n', "[nonsense]\nx = 1\n"):
        path.write_text(broken, encoding="utf-8")
        assert daemon.reload() is False
        assert daemon.config is before
    path.unlink()  # an explicit config file that vanished is an error too
    assert daemon.reload() is False
    assert daemon.config is before


def test_reload_takes_a_valid_new_config(tmp_path: Path) -> None:
    daemon, path = make_daemon(tmp_path, "")
    path.write_text('[service]\ntimezone = "Europe/Berlin"\n', encoding="utf-8")
    assert daemon.reload() is True
    assert daemon.config.service.timezone == "Europe/Berlin"


def test_start_refuses_an_unreadable_schedule_before_touching_the_database(
    tmp_path: Path,
) -> None:
    expire = Config().jobs.expire.model_copy(update={"schedule": "0 3 * * * *"})
    config = Config().model_copy(
        update={"jobs": Config().jobs.model_copy(update={"expire": expire})}
    )
    daemon = Daemon(
        db=tmp_path / "memory.db", config=config, config_path=None, handle_signals=False
    )
    with pytest.raises(ConfigError, match=r"jobs\.expire\.schedule"):
        daemon.run()
    assert not (tmp_path / "memory.db").exists()
