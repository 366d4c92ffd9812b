"""One database, one configuration, for every caller (issue 8, items 6 and 7).

The library (``MemoryStore()``), the command line, ``run-once`` and the service resolve the
database and every setting through :mod:`memkeeper.settings`: argument, then ``MEMKEEPER_DB``
(path only), then ``MEMKEEPER_CONFIG`` / the per-user config file, then defaults. And
``service install`` names the database its unit maintains and refuses one that differs from
the database this account's agents use.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.cli import main, service_cmd
from memkeeper.config import Config
from memkeeper.errors import EXIT_CONFIG, EXIT_DATA, EXIT_USAGE, ConfigError, InvalidInput
from memkeeper.service import unit_files as service_files
from memkeeper.service.daemon import Daemon
from memkeeper.settings import resolve

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def user_config(home: Path) -> Path:
    """The per-user config file (``$XDG_CONFIG_HOME/memkeeper/config.toml``)."""
    path = home / "config" / "memkeeper" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_shared_config(path: Path, root: Path) -> tuple[Path, Path]:
    hot, cold = root / "shared" / "memory.db", root / "archive" / "memory-cold.db"
    path.write_text(
        f"[database]\npath = '{hot}'\ncold_path = '{cold}'\n\n"
        "[limits]\nmax_value_bytes = 64\nmax_key_chars = 16\n\n"
        "[jobs.prune]\nmax_facts = 2\n",
        encoding="utf-8",
    )
    return hot, cold


@pytest.fixture
def system_dirs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Unit files go to a temporary directory, never /etc, even when the tests run as root."""
    system = tmp_path / "system-dirs"
    real = service_files.systemd_unit_dir
    monkeypatch.setattr(
        service_files,
        "systemd_unit_dir",
        lambda scope: system / "systemd" if scope == "system" else real("user"),
    )
    monkeypatch.delenv("SUDO_USER", raising=False)
    return system


def unit_settings(text: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


# -- item 6: the library, the CLI, run-once and the service agree -----------------------------


def test_store_cli_runner_and_service_use_the_config_files_database_and_limits(
    isolated_user_dirs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hot, cold = write_shared_config(user_config(isolated_user_dirs), tmp_path)
    default_db = isolated_user_dirs / "data" / "memkeeper" / "memory.db"

    # The library, in this process and in another one (an agent).
    with MemoryStore() as agent:
        assert (agent.path, agent.cold_path) == (hot, cold)
        assert agent.config.limits.max_value_bytes == 64
        for key in ("k1", "k2", "k3"):
            agent.remember("alice", key, "v", confidence=0.5 if key == "k1" else 0.9)
        with pytest.raises(InvalidInput, match="64"):
            agent.remember("alice", "big", "x" * 65)
        with pytest.raises(InvalidInput):
            agent.remember("alice", "k" * 17, "v")
    script = (
        "from memkeeper import MemoryStore\nwith MemoryStore() as s: print(s.path, s.cold_path)"
    )
    other = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert other.stdout.split() == [str(hot), str(cold)]

    # The command line.
    code, out, err = run(capsys, "status", "--json")
    assert code == 0, err
    files = json.loads(out)["files"]
    assert (files["hot"]["path"], files["cold"]["path"]) == (str(hot), str(cold))
    code, _out, err = run(capsys, "remember", "alice", "big", "x" * 65)
    assert code == EXIT_DATA
    assert "64" in err

    # run-once: prune applies max_facts = 2 from the same file, into the configured cold file.
    code, out, err = run(capsys, "run-once", "--job", "prune", "--json")
    assert code == 0, err
    with MemoryStore() as agent:
        assert sorted(m.key for m in agent.list_memories("alice", state="active")) == [
            "k2",
            "k3",
        ]
    assert cold.is_file()

    # The service, started exactly as `memkeeper run` starts it.
    seen: dict[str, object] = {}

    def serve(self: Daemon, store: MemoryStore, *_lead: object) -> None:
        seen.update(path=store.path, cold=store.cold_path, limits=store.config.limits)

    monkeypatch.setattr(Daemon, "_serve", serve)
    code, _out, err = run(capsys, "run")
    assert code == 0, err
    with MemoryStore() as agent:
        assert seen == {"path": hot, "cold": cold, "limits": agent.config.limits}
    assert agent.config.limits.max_key_chars == 16

    assert not default_db.exists()  # nobody fell back to the per-user default


def test_memkeeper_config_names_the_file_for_the_library_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "elsewhere.toml"
    hot, cold = write_shared_config(config, tmp_path)
    monkeypatch.setenv("MEMKEEPER_CONFIG", str(config))
    with MemoryStore() as store:
        assert (store.path, store.cold_path) == (hot, cold)
        assert store.config.limits.max_key_chars == 16
    # A config file given by path, as the CLI's --config gives it.
    monkeypatch.delenv("MEMKEEPER_CONFIG")
    with MemoryStore(config=config) as store:
        assert store.path == hot
        assert store.config.limits.max_value_bytes == 64


def test_memkeeper_db_sets_the_path_only(
    isolated_user_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_shared_config(user_config(isolated_user_dirs), tmp_path)
    monkeypatch.setenv("MEMKEEPER_DB", str(tmp_path / "env.db"))
    with MemoryStore() as store:
        assert store.path == tmp_path / "env.db"
        assert store.config.limits.max_value_bytes == 64  # the config file still applies
    with MemoryStore(tmp_path / "arg.db") as store:  # the argument wins over the variable
        assert store.path == tmp_path / "arg.db"
        assert store.config.limits.max_value_bytes == 64


def test_a_database_named_elsewhere_keeps_its_own_cold_file(
    isolated_user_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --db scratch file must never pair with the configured database's cold file."""
    hot, cold = write_shared_config(user_config(isolated_user_dirs), tmp_path)
    scratch = tmp_path / "scratch" / "memory.db"
    with MemoryStore(scratch) as store:
        assert store.cold_path == scratch.with_name("memory-cold.db")
    with MemoryStore(hot) as store:  # the configured file named explicitly: its cold file
        assert store.cold_path == cold
    code, out, err = run(capsys, "--db", str(scratch), "status", "--json")
    assert code == 0, err
    assert json.loads(out)["files"]["cold"]["path"] == str(scratch.with_name("memory-cold.db"))
    # Without database.path, cold_path belongs to the default database only.
    only_cold = Config.model_validate({"database": {"cold_path": str(cold)}})
    assert resolve(config=only_cold).cold_path == cold
    assert resolve(scratch, only_cold).cold_path == scratch.with_name("memory-cold.db")


def test_the_library_refuses_a_named_missing_or_an_invalid_config(
    isolated_user_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        MemoryStore(tmp_path / "m.db", config=tmp_path / "absent.toml")
    monkeypatch.setenv("MEMKEEPER_CONFIG", str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match="does not exist"):
        MemoryStore(tmp_path / "m.db")
    monkeypatch.delenv("MEMKEEPER_CONFIG")
    user_config(isolated_user_dirs).write_text("[limits]\nmax_value_bytes = -1\n")
    with pytest.raises(ConfigError, match=r"limits\.max_value_bytes"):
        MemoryStore(tmp_path / "m.db")
    assert not (tmp_path / "m.db").exists()


def test_relative_database_paths_in_the_config_are_refused(
    isolated_user_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A relative path would be a different file in every working directory."""
    user_config(isolated_user_dirs).write_text("[database]\ncold_path = 'cold/c.db'\n")
    with pytest.raises(ConfigError, match=r"database\.cold_path: 'cold/c\.db' must be an absolute"):
        MemoryStore(tmp_path / "m.db")
    user_config(isolated_user_dirs).write_text("[database]\npath = 'memory.db'\n")
    code, _out, err = run(capsys, "status")
    assert code == EXIT_CONFIG
    assert "database.path" in err
    user_config(isolated_user_dirs).write_text("[database]\npath = '~/mk/memory.db'\n")
    assert resolve().hot_path == isolated_user_dirs / "mk" / "memory.db"


# -- item 7: service install names its database and refuses another one -------------------------


def test_system_install_without_a_database_is_refused(
    system_dirs_in_tmp: Path, isolated_user_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "service", "install", "--system", "--init-system", "systemd")
    assert code == EXIT_USAGE
    assert out == ""
    mine = isolated_user_dirs / "data" / "memkeeper" / "memory.db"
    assert "the system service would maintain /var/lib/memkeeper/memory.db" in err
    assert f"agents and `memkeeper status` use {mine}" in err
    assert "--allow-db-mismatch" in err
    assert not system_dirs_in_tmp.exists()  # nothing written


def test_install_names_the_database_every_command_uses(
    isolated_user_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hot, cold = write_shared_config(user_config(isolated_user_dirs), tmp_path)
    MemoryStore().close()  # the agents' database exists
    for scope in ("--user", "--system"):
        code, out, err = run(
            capsys, "service", "install", scope, "--print", "--init-system", "systemd"
        )
        assert code == 0, err
        assert f"the service maintains {hot} (cold storage: {cold})" in err
        assert f"# Database: {hot} (cold storage: {cold})." in out
        # The unit's own command line resolves to the same files as this account's commands.
        words = shlex.split(unit_settings(out)["ExecStart"][0])
        options = words[words.index("--db") : -1]
        code, status, err = run(capsys, *options, "status", "--json")
        assert code == 0, err
        files = json.loads(status)["files"]
        assert (files["hot"]["path"], files["cold"]["path"]) == (str(hot), str(cold))
        if scope == "--system":
            paths = unit_settings(out)["ReadWritePaths"][0].split()
            assert paths == [str(hot.parent), str(cold.parent)]


def test_system_install_creates_the_directories_its_sandbox_needs(
    system_dirs_in_tmp: Path,
    isolated_user_dirs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = pwd.getpwuid(os.getuid()).pw_name
    monkeypatch.setattr(service_cmd, "_system_user", lambda: account)
    db = tmp_path / "srv dir" / "mk" / "memory.db"
    cold = tmp_path / "archive" / "cold.db"
    user_config(isolated_user_dirs).write_text(
        f"[database]\npath = '{db}'\ncold_path = '{cold}'\n", encoding="utf-8"
    )

    code, out, err = run(capsys, "service", "install", "--system", "--print")
    assert code == 0, err
    assert f"install -d -m 0700 -o {account} '{db.parent}'" in err  # --print creates nothing
    assert not db.parent.exists()

    code, out, err = run(capsys, "service", "install", "--system", "--init-system", "systemd")
    assert code == 0, err
    assert f"the service maintains {db} (cold storage: {cold})" in out
    for directory in (db.parent, cold.parent):
        assert f"created {directory} (owner {account}, mode 0700)" in out
        info = directory.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700
        assert info.st_uid == os.getuid()
    unit = (system_dirs_in_tmp / "systemd" / "memkeeper.service").read_text()
    settings = unit_settings(unit)
    assert settings["User"] == [account]
    assert settings["ReadWritePaths"] == [f'"{db.parent}" {cold.parent}']
    assert "StateDirectory" not in settings


def test_install_into_a_state_subdirectory_is_created_not_state_managed(
    system_dirs_in_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only /var/lib/NAME is systemd's to create; deeper directories are install's job."""
    inst = service_files.Installation(
        command=("/usr/bin/memkeeper",),
        db_path=Path("/var/lib/memkeeper/team/memory.db"),
        config_path=None,
        scope="system",
    )
    assert service_files.directories_to_create(inst, "systemd") == [Path("/var/lib/memkeeper/team")]
    assert service_files.directories_to_create(service_files.PACKAGED, "systemd") == []
    assert service_files.directories_to_create(service_files.PACKAGED, "launchd") == [
        Path("/var/lib/memkeeper")
    ]
    settings = unit_settings(service_files.render_service(inst))
    assert settings["ReadWritePaths"] == ["/var/lib/memkeeper/team"]


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_accepts_a_unit_with_the_cold_file_elsewhere(
    isolated_user_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db dir" / "memory.db"
    cold = tmp_path / "cold dir" / "memory-cold.db"
    user_config(isolated_user_dirs).write_text(
        f"[database]\npath = '{db}'\ncold_path = '{cold}'\n", encoding="utf-8"
    )
    code, out, err = run(
        capsys, "service", "install", "--system", "--print", "--init-system", "systemd"
    )
    assert code == 0, err
    unit = tmp_path / "memkeeper.service"
    unit.write_text(out)
    assert SYSTEMD_ANALYZE is not None
    result = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.strip() == "", result.stderr
