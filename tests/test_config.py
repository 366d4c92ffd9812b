"""Configuration: defaults without a file, strict validation naming the file and key, the
documented config.toml that must never drift from the schema, and the config commands."""

from __future__ import annotations

import json
import stat
import tomllib
from pathlib import Path

import pytest

from memkeeper.cli import main
from memkeeper.config import Config, load_config, parse_config
from memkeeper.config.doc import render_config
from memkeeper.errors import EXIT_CANT_CREATE, EXIT_CONFIG, ConfigError

REPO = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- loading --------------------------------------------------------------------------------


def test_defaults_load_when_there_is_no_file(tmp_path: Path) -> None:
    assert load_config(None) == Config()
    assert load_config(tmp_path / "absent.toml") == Config()
    config = Config()
    assert config.jobs.expire.ttl_days.fact == 180
    assert config.jobs.expire.ttl_days.preference == 30
    assert config.jobs.expire.ttl_days.note == 90
    assert config.jobs.settle.grey_days == 14
    assert config.jobs.prune.max_facts == 50
    assert config.context.limit == 10
    assert config.service.timezone == "UTC"


def test_an_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match=f"{missing} does not exist"):
        load_config(missing, explicit=True)
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


def test_an_explicit_missing_file_on_the_command_line_exits_78(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "absent.toml"
    code, out, err = run(capsys, "--config", str(missing), "config", "check")
    assert code == EXIT_CONFIG
    assert err == f"memkeeper: error: config file {missing} does not exist\n"
    assert out == ""
    monkeypatch.setenv("MEMKEEPER_CONFIG", str(missing))
    code, _out, err = run(capsys, "--db", str(tmp_path / "m.db"), "status")
    assert code == EXIT_CONFIG
    assert str(missing) in err
    assert not (tmp_path / "m.db").exists()  # nothing happens before the config is valid


def test_a_partial_file_overrides_only_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[jobs.expire.ttl_days]\nfact = 365\n\n[context]\nlimit = 5\n")
    config = load_config(path, explicit=True)
    assert config.jobs.expire.ttl_days.fact == 365
    assert config.jobs.expire.ttl_days.note == 90
    assert config.context.limit == 5
    assert config.context.min_confidence == Config().context.min_confidence


# -- every kind of invalid file -------------------------------------------------------------

INVALID = {
    "unknown top-level key": ("colour = 'blue'\n", "colour", "unknown key"),
    "unknown section": ("[colours]\nsky = 'blue'\n", "colours", "unknown key"),
    "unknown nested key": ("[jobs.expire]\nttl = 3\n", "jobs.expire.ttl", "unknown key"),
    "string for a number": (
        "[database]\nbusy_timeout_ms = '5000'\n",
        "database.busy_timeout_ms",
        "got str",
    ),
    "string for a bool": ("[jobs.prune]\nenabled = 'yes'\n", "jobs.prune.enabled", "got str"),
    "float for an integer": (
        "[limits]\nmax_value_bytes = 1.5\n",
        "limits.max_value_bytes",
        "integer",
    ),
    "table for a number": ("[context]\nlimit = {a = 1}\n", "context.limit", "got dict"),
    "number for a section": ("jobs = 3\n", "jobs", ""),
    "negative TTL": ("[jobs.expire.ttl_days]\nfact = -1\n", "jobs.expire.ttl_days.fact", "0"),
    "zero TTL": ("[jobs.expire.ttl_days]\nnote = 0\n", "jobs.expire.ttl_days.note", "0"),
    "negative grey period": ("[jobs.settle]\ngrey_days = -14\n", "jobs.settle.grey_days", "0"),
    "confidence above 1": (
        "[context]\nmin_confidence = 1.5\n",
        "context.min_confidence",
        "1",
    ),
    "cron: not a cron at all": (
        "[jobs.expire]\nschedule = 'every day'\n",
        "jobs.expire.schedule",
        "5",
    ),
    "cron: six fields": (
        "[jobs.settle]\nschedule = '0 15 3 * * *'\n",
        "jobs.settle.schedule",
        "6 fields",
    ),
    "cron: day of month and weekday": (
        "[jobs.demote]\nschedule = '0 4 1 * mon'\n",
        "jobs.demote.schedule",
        "day of month and day of week",
    ),
    "cron: weekday 8": ("[jobs.prune]\nschedule = '0 3 * * 8'\n", "jobs.prune.schedule", "0-7"),
    "cron: minute 61": ("[jobs.expire]\nschedule = '61 3 * * *'\n", "jobs.expire.schedule", "61"),
    "cron: hour 25": ("[jobs.settle]\nschedule = '0 25 * * *'\n", "jobs.settle.schedule", "25"),
    "cron: month 13": ("[jobs.demote]\nschedule = '0 4 1 13 *'\n", "jobs.demote.schedule", "13"),
    "cron: words": (
        "[jobs.summarize]\nschedule = 'a b c d e'\n",
        "jobs.summarize.schedule",
        "",
    ),
    "unknown timezone": (
        "[service]\ntimezone = 'Mars/Olympus_Mons'\n",
        "service.timezone",
        "unknown timezone",
    ),
    "unknown log level": ("[logging]\nlevel = 'loud'\n", "logging.level", ""),
}


@pytest.fixture(params=sorted(INVALID))
def invalid_file(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str, str]:
    text, key, fragment = INVALID[request.param]
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path, key, fragment


def test_each_invalid_value_is_an_error_naming_the_file_and_key(
    invalid_file: tuple[Path, str, str],
) -> None:
    path, key, fragment = invalid_file
    with pytest.raises(ConfigError) as caught:
        load_config(path, explicit=True)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert f"{key}: " in message
    assert fragment in message
    assert "\n" not in message


def test_each_invalid_file_makes_the_cli_exit_78(
    invalid_file: tuple[Path, str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, key, _fragment = invalid_file
    for argv in (["config", "check"], ["config", "show"], ["status"]):
        code, out, err = run(capsys, "--config", str(path), "--db", str(tmp_path / "m.db"), *argv)
        assert code == EXIT_CONFIG, argv
        assert out == ""
        assert err.startswith(f"memkeeper: error: {path}: ")
        assert key in err
        assert len(err.strip().splitlines()) == 1
        assert "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"[database\npath = 'x'\n", "invalid TOML"),
        (b"[context]\nlimit = \n", "invalid TOML"),
        (b"[context]\nlimit = 5\nlimit = 6\n", "invalid TOML"),
        (b"# caf\xe9 = latin-1\n[context]\nlimit = 5\n", "not UTF-8"),
        (b"\xff\xfe[\x00c\x00", "not UTF-8"),
    ],
)
def test_unreadable_files_name_the_file(
    tmp_path: Path, content: bytes, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_config(path, explicit=True)
    assert str(caught.value).startswith(f"{path}: {fragment}")
    code, _out, err = run(capsys, "--config", str(path), "config", "check")
    assert code == EXIT_CONFIG
    assert fragment in err
    assert str(path) in err


@pytest.mark.parametrize(
    "schedule",
    ["0 3 * * *", "0 3 * * 0", "0 3 * * 7", "0 3 * * mon-fri", "0 3 * * 5-7", "@daily",
     "*/15 * * * *", "0 4 1 * *", "30 3 1,15 * *", "0 9 * * sat,sun"],
)  # fmt: skip
def test_valid_cron_expressions_are_accepted(schedule: str) -> None:
    config = parse_config({"jobs": {"expire": {"schedule": schedule}}}, Path("c.toml"))
    assert config.jobs.expire.schedule == schedule


# -- config.toml: the documented defaults ---------------------------------------------------


def test_config_toml_at_the_repo_root_is_exactly_the_rendered_schema() -> None:
    """Drift test: edit memkeeper/config/schema.py, then regenerate config.toml with
    ``python -c 'from memkeeper.config.doc import render_config as r; print(r(), end="")'
    > config.toml``."""
    assert (REPO / "config.toml").read_text(encoding="utf-8") == render_config()


def test_the_rendered_config_parses_back_to_the_defaults() -> None:
    data = tomllib.loads(render_config())
    assert parse_config(data, Path("config.toml")) == Config()
    assert parse_config(tomllib.loads((REPO / "config.toml").read_text()), Path("x")) == Config()


def test_every_key_in_the_rendered_config_is_documented() -> None:
    lines = render_config().splitlines()
    for index, line in enumerate(lines):
        if " = " in line and not line.startswith("#"):
            assert lines[index - 1].startswith("# "), f"undocumented key: {line}"


def test_a_rendered_custom_config_round_trips(tmp_path: Path) -> None:
    custom = parse_config(
        {"jobs": {"expire": {"ttl_days": {"fact": 365}}}, "service": {"timezone": "Asia/Shanghai"}},
        Path("x"),
    )
    path = tmp_path / "config.toml"
    path.write_text(render_config(custom))
    assert load_config(path, explicit=True) == custom


# -- the config commands --------------------------------------------------------------------


def test_config_init_writes_the_defaults_privately_and_never_overwrites(
    isolated_user_dirs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = isolated_user_dirs / "config" / "memkeeper" / "config.toml"
    code, out, _err = run(capsys, "config", "init")
    assert code == 0
    assert out == f"wrote {target}\n"
    assert target.read_text(encoding="utf-8") == render_config()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    # The written file is what memkeeper then reads.
    assert run(capsys, "config", "check")[1] == f"{target}: valid\n"

    target.write_text("[context]\nlimit = 3\n")
    code, out, err = run(capsys, "config", "init")
    assert code == EXIT_CANT_CREATE
    assert out == ""
    assert err == f"memkeeper: error: {target} already exists; config init never overwrites\n"
    assert target.read_text() == "[context]\nlimit = 3\n"


def test_config_init_with_an_explicit_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "etc" / "memkeeper.toml"
    assert run(capsys, "--config", str(target), "config", "init")[0] == 0
    assert target.read_text() == render_config()
    assert run(capsys, "--config", str(target), "config", "init")[0] == EXIT_CANT_CREATE
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _out, err = run(capsys, "--config", str(blocker / "c.toml"), "config", "init")
    assert code == EXIT_CANT_CREATE
    assert "cannot create" in err


def test_config_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "config", "check") == (
        0,
        "no config file: using the defaults (valid)\n",
        "",
    )
    path = tmp_path / "c.toml"
    path.write_text("[jobs.prune]\nmax_facts = 20\n")
    assert run(capsys, "--config", str(path), "config", "check") == (0, f"{path}: valid\n", "")


def test_config_show_prints_the_effective_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[jobs.prune]\nmax_facts = 20\n[service]\ntimezone = 'Europe/Berlin'\n")

    code, out, _err = run(capsys, "--config", str(path), "config", "show", "--json")
    assert code == 0
    data = json.loads(out)
    assert data == load_config(path, explicit=True).model_dump()
    assert data["jobs"]["prune"]["max_facts"] == 20
    assert data["service"]["timezone"] == "Europe/Berlin"
    assert data["jobs"]["expire"]["ttl_days"] == {"fact": 180, "preference": 30, "note": 90}

    code, out, _err = run(capsys, "--config", str(path), "config", "show")
    assert code == 0
    assert parse_config(tomllib.loads(out), path).jobs.prune.max_facts == 20
    assert "max_facts = 20" in out

    code, out, _err = run(capsys, "config", "show", "--json")
    assert json.loads(out) == Config().model_dump()


def test_config_path(
    tmp_path: Path,
    isolated_user_dirs: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    default = isolated_user_dirs / "config" / "memkeeper" / "config.toml"
    assert run(capsys, "config", "path") == (0, f"{default}\n", "")
    assert run(capsys, "--config", str(tmp_path / "x.toml"), "config", "path")[1] == (
        f"{tmp_path / 'x.toml'}\n"
    )
    monkeypatch.setenv("MEMKEEPER_CONFIG", str(tmp_path / "env.toml"))
    assert run(capsys, "config", "path")[1] == f"{tmp_path / 'env.toml'}\n"


def test_the_user_config_file_is_read_by_default(
    isolated_user_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = isolated_user_dirs / "config" / "memkeeper" / "config.toml"
    target.parent.mkdir(parents=True)
    target.write_text(f"[database]\npath = '{tmp_path / 'configured.db'}'\n")
    assert run(capsys, "remember", "alice", "city", "Beijing")[0] == 0  # a write creates it
    assert (tmp_path / "configured.db").exists()
    code, out, _err = run(capsys, "status", "--json")
    assert code == 0
    assert json.loads(out)["files"]["hot"]["path"] == str(tmp_path / "configured.db")
