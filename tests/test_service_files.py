"""Service definitions: rendered with this installation's paths, verified, never drifting."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memkeeper.cli import main
from memkeeper.service import unit_files as service_files
from memkeeper.service.unit_files import (
    PACKAGED,
    Installation,
    memkeeper_command,
    packaged_files,
    render_service,
    systemd_quote,
)

REPO = Path(__file__).resolve().parent.parent
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed"
)


@pytest.fixture(autouse=True)
def system_dirs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never write into /etc or /Library, even when the tests run as root."""
    system = tmp_path / "system-dirs"
    real_systemd, real_launchd = service_files.systemd_unit_dir, service_files.launchd_dir

    def systemd_unit_dir(scope: str) -> Path:
        return system / "systemd" if scope == "system" else real_systemd("user")

    def launchd_dir(scope: str) -> Path:
        return system / "launchd" if scope == "system" else real_launchd("user")

    monkeypatch.setattr(service_files, "systemd_unit_dir", systemd_unit_dir)
    monkeypatch.setattr(service_files, "launchd_dir", launchd_dir)
    return system


def unit_settings(text: str) -> dict[str, list[str]]:
    """``Key=value`` lines of a unit file, by key (comments and sections left out)."""
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def install_print(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


# -- the checked-in files ---------------------------------------------------------------------


@pytest.mark.parametrize("relative", sorted(packaged_files()))
def test_checked_in_files_match_the_templates(relative: str) -> None:
    expected = packaged_files()[relative]
    assert (REPO / relative).read_text(encoding="utf-8") == expected, (
        f"{relative} drifted from memkeeper/service_files.py; regenerate with: python -c "
        "\"from memkeeper.service.unit_files import write_packaged_files as w; w('.')\""
    )


def test_checked_in_service_has_the_required_settings() -> None:
    settings = unit_settings((REPO / "systemd/memkeeper.service").read_text())
    assert settings["Type"] == ["notify"]
    assert settings["Restart"] == ["on-failure"]
    assert settings["RestartPreventExitStatus"] == ["78"]
    assert settings["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert "WatchdogSec" in settings
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "StateDirectory": "memkeeper",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "SystemCallFilter": "@system-service",
        "Nice": "10",
        "IOSchedulingClass": "best-effort",
    }.items():
        assert settings[key] == [value], key


def test_checked_in_timer_is_persistent() -> None:
    settings = unit_settings((REPO / "systemd/memkeeper-run-once.timer").read_text())
    assert settings["Persistent"] == ["true"]
    assert settings["Unit"] == ["memkeeper-run-once.service"]
    service = unit_settings((REPO / "systemd/memkeeper-run-once.service").read_text())
    assert service["Type"] == ["oneshot"]
    assert service["ExecStart"][0].endswith(" run-once --due")


def test_checked_in_plist_parses() -> None:
    with (REPO / "launchd/io.memkeeper.run.plist").open("rb") as handle:
        job = plistlib.load(handle)
    assert job["Label"] == "io.memkeeper.run"
    assert job["RunAtLoad"] is True
    assert job["KeepAlive"] == {"SuccessfulExit": False}
    assert job["ProgramArguments"][-1] == "run"
    assert all(Path(arg).is_absolute() for arg in job["ProgramArguments"][:1])
    assert job["StandardErrorPath"].startswith("/")


# -- service install --print -----------------------------------------------------------------


def test_install_print_user_unit_uses_this_installation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "data" / "memory.db"
    out, err = install_print(
        capsys,
        "--db",
        str(db),
        "service",
        "install",
        "--user",
        "--print",
        "--init-system",
        "systemd",
    )
    settings = unit_settings(out)
    exec_start = settings["ExecStart"][0]
    assert exec_start.startswith(" ".join(memkeeper_command()) + " ")
    assert Path(memkeeper_command()[0]).is_absolute()
    assert f"--db {db} " in exec_start
    assert exec_start.endswith(" run")
    assert "--config" not in exec_start  # there is no config file: the default location is read
    assert settings["Type"] == ["notify"]
    assert settings["RestartPreventExitStatus"] == ["78"]
    assert settings["WantedBy"] == ["default.target"]
    assert "ProtectSystem" not in settings  # no mount namespaces in a user unit
    assert settings["SystemCallFilter"] == ["@system-service"]
    assert out.endswith("\n")
    assert (
        "systemctl --user daemon-reload && systemctl --user enable --now memkeeper.service" in err
    )


def test_install_print_passes_an_existing_config_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "my config.toml"
    config.write_text('[service]\ntimezone = "Europe/Berlin"\n')
    out, _ = install_print(
        capsys,
        "--db",
        str(tmp_path / "memory.db"),
        "--config",
        str(config),
        "service",
        "install",
        "--user",
        "--print",
        "--init-system",
        "systemd",
    )
    exec_start = unit_settings(out)["ExecStart"][0]
    assert f'--config "{config}" run' in exec_start
    assert unit_settings(out)["EnvironmentFile"] == [f"-{tmp_path / 'memkeeper.env'}"]


def test_install_print_system_unit_is_sandboxed_around_the_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "state" / "memory.db"
    out, err = install_print(
        capsys,
        "--db",
        str(db),
        "service",
        "install",
        "--system",
        "--print",
        "--init-system",
        "systemd",
    )
    settings = unit_settings(out)
    assert settings["ProtectSystem"] == ["strict"]
    assert settings["ReadWritePaths"] == [str(db.parent)]
    assert settings["WantedBy"] == ["multi-user.target"]
    assert "enable --now memkeeper.service" in err


def test_install_print_system_defaults_to_the_state_directory(
    capsys: pytest.CaptureFixture[str], isolated_user_dirs: Path
) -> None:
    # This account's agents use the per-user database: the state directory needs the flag.
    out, err = install_print(
        capsys,
        "service",
        "install",
        "--system",
        "--print",
        "--allow-db-mismatch",
        "--init-system",
        "systemd",
    )
    settings = unit_settings(out)
    assert "--db /var/lib/memkeeper/memory.db" in settings["ExecStart"][0]
    assert settings["StateDirectory"] == ["memkeeper"]
    assert "ReadWritePaths" not in settings
    assert "the service maintains /var/lib/memkeeper/memory.db" in err
    mine = isolated_user_dirs / "data" / "memkeeper" / "memory.db"
    assert f"agents and `memkeeper status` use {mine}" in err
    assert "MEMKEEPER_DB=/var/lib/memkeeper/memory.db" in err


def test_install_print_timer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out, err = install_print(
        capsys,
        "--db",
        str(tmp_path / "memory.db"),
        "service",
        "install",
        "--user",
        "--timer",
        "--print",
        "--init-system",
        "systemd",
    )
    assert "memkeeper-run-once.service ----" in out
    assert "memkeeper-run-once.timer ----" in out
    assert "run-once --due" in out
    assert "Persistent=true" in out
    assert "enable --now memkeeper-run-once.timer" in err


def test_install_print_launchd_plist(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    out, err = install_print(
        capsys,
        "--db",
        str(db),
        "service",
        "install",
        "--user",
        "--print",
        "--init-system",
        "launchd",
    )
    job = plistlib.loads(out.encode())
    assert job["ProgramArguments"] == [*memkeeper_command(), "--db", str(db), "run"]
    assert job["RunAtLoad"] is True
    assert "KeepAlive" in job
    assert job["StandardErrorPath"].endswith("Library/Logs/memkeeper/memkeeper.log")
    assert f"launchctl bootstrap gui/{os.getuid()} " in err


def test_install_writes_the_user_unit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, isolated_user_dirs: Path
) -> None:
    out, _ = install_print(
        capsys,
        "--db",
        str(tmp_path / "memory.db"),
        "service",
        "install",
        "--user",
        "--init-system",
        "systemd",
    )
    unit = isolated_user_dirs / "config" / "systemd" / "user" / "memkeeper.service"
    assert unit.is_file()
    assert unit_settings(unit.read_text())["Type"] == ["notify"]
    assert f"wrote {unit}" in out
    assert "enable it with: systemctl --user daemon-reload" in out


def test_install_refuses_an_invalid_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[jobs.expire]\nschedule = "0 3 * * 8"\n')
    code = main(["--config", str(config), "service", "install", "--print"])
    assert code == 78
    assert "jobs.expire.schedule" in capsys.readouterr().err


def test_systemd_quoting() -> None:
    assert systemd_quote("/usr/bin/memkeeper") == "/usr/bin/memkeeper"
    assert systemd_quote("/a b/memory.db") == '"/a b/memory.db"'
    assert systemd_quote("/100%/x") == "/100%%/x"
    assert systemd_quote("/$HOME") == "/$$HOME"
    assert systemd_quote('/say "hi"') == '"/say \\"hi\\""'


# -- systemd-analyze verify ---------------------------------------------------------------------


def verify(*units: Path, user: bool = False, runtime: Path | None = None) -> None:
    assert SYSTEMD_ANALYZE is not None
    env = dict(os.environ)
    command = [SYSTEMD_ANALYZE]
    if user:
        assert runtime is not None
        runtime.mkdir(mode=0o700, exist_ok=True)
        env["XDG_RUNTIME_DIR"] = str(runtime)
        command.append("--user")
    result = subprocess.run(
        [*command, "verify", *map(str, units)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.strip() == "", result.stderr


@needs_systemd_analyze
def test_systemd_analyze_accepts_the_checked_in_units(tmp_path: Path) -> None:
    # verify checks that ExecStart's program exists: point it at this installation's.
    program = memkeeper_command()[0]
    names = [name for name in packaged_files() if name.startswith("systemd/")]
    units = []
    for name in names:
        text = (REPO / name).read_text().replace(PACKAGED.command[0], program)
        units.append(tmp_path / Path(name).name)
        units[-1].write_text(text)
    verify(*units)


@needs_systemd_analyze
@pytest.mark.parametrize("scope", ["user", "system"])
def test_systemd_analyze_accepts_the_installed_units(
    scope: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    units = tmp_path / "units"
    units.mkdir()
    for timer in (False, True):
        args = ["--db", str(tmp_path / "db dir" / "memory.db"), "service", "install"]
        args += [f"--{scope}", "--print", "--init-system", "systemd"]
        out, _ = install_print(capsys, *args, *(["--timer"] if timer else []))
        if timer:
            service_text, timer_text = out.split("# ---- ")[1:]
            (units / "memkeeper-run-once.service").write_text(service_text.split("\n", 1)[1])
            (units / "memkeeper-run-once.timer").write_text(timer_text.split("\n", 1)[1])
        else:
            (units / "memkeeper.service").write_text(out)
    verify(*sorted(units.iterdir()), user=scope == "user", runtime=tmp_path / "run")


def test_render_uses_python_m_when_there_is_no_script() -> None:
    inst = Installation(
        command=(sys.executable, "-m", "memkeeper"),
        db_path=Path("/srv/mk/memory.db"),
        config_path=None,
        scope="system",
    )
    exec_start = unit_settings(render_service(inst))["ExecStart"][0]
    assert exec_start == f"{sys.executable} -m memkeeper --db /srv/mk/memory.db run"
    assert unit_settings(render_service(inst))["ReadWritePaths"] == ["/srv/mk"]


# -- issue 20 item 11: the quick start as root, and the user unit's edit command --------------


@pytest.mark.parametrize(("euid", "edit"), [(1000, "systemctl --user edit"), (0, "systemctl edit")])
def test_the_unit_names_the_edit_command_of_its_scope(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, euid: int, edit: str
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    out, _err = install_print(capsys, "service", "install", "--print", "--init-system", "systemd")
    assert f"edit with `{edit} memkeeper`" in out


def test_root_plain_install_maintains_roots_own_database(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    isolated_user_dirs: Path,
) -> None:
    """The README's quick start as root: no --system, no --db. Before: exit 2 on a database
    mismatch (the state directory against root's per-user database)."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.delenv("SUDO_USER", raising=False)
    out, err = install_print(capsys, "service", "install", "--print", "--init-system", "systemd")
    mine = isolated_user_dirs / "data" / "memkeeper" / "memory.db"
    settings = unit_settings(out)
    assert f"--db {mine}" in settings["ExecStart"][0]
    assert settings["WantedBy"] == ["multi-user.target"]  # a system unit, as before
    assert f"the service maintains {mine}" in err
    assert "systemctl daemon-reload && systemctl enable --now memkeeper.service" in err


def _service_imports() -> dict[str, set[str]]:
    """Each module of memkeeper/service/ and the service modules it imports (any import,
    ``TYPE_CHECKING`` ones and those inside functions included)."""
    import ast

    folder = REPO / "memkeeper" / "service"
    names = {path.stem for path in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[:2] == ["memkeeper", "service"]:
                    targets = parts[2:3] or [alias.name for alias in node.names]
                    found.update(t for t in targets if t in names)
        graph[path.stem] = found - {path.stem}
    return graph


def test_no_circle_between_service_modules() -> None:
    """unit_files and launchd_plist both import the Installation, neither the other (issue 22)."""
    graph = _service_imports()
    circles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            module, path = stack.pop()
            for target in graph[module]:
                if target == start:
                    circles.append(" -> ".join([*path, start]))
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, [*path, target]))
    assert not circles, circles
    assert "installation" in graph["launchd_plist"]


def test_install_print_for_a_postgresql_database_names_the_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql://memkeeper@db.example.com:5432/memory"
    out, err = install_print(
        capsys, "--db", url, "service", "install", "--system", "--print", "--init-system", "systemd"
    )
    settings = unit_settings(out)
    assert f"--db {url} " in settings["ExecStart"][0]
    assert "ReadWritePaths" not in settings  # no file of its own: the server writes
    assert f"# Database: {url} (PostgreSQL)." in out
    assert f"the service maintains {url} (PostgreSQL)" in err


def test_install_refuses_a_postgresql_url_that_holds_a_password(
    capsys: pytest.CaptureFixture[str], isolated_user_dirs: Path
) -> None:
    code = main(
        ["--db", "postgresql://mk:s3cret@db.example.com/memory", "service", "install", "--user"]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert "~/.pgpass" in err and "s3cret" not in out + err
    assert not list(isolated_user_dirs.rglob("memkeeper*"))  # no unit was written
