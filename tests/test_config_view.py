"""The defaults read without pydantic (start-up, issue 20 item 13): the same values as the
schema's, generated from it; a config file is still validated by the schema on every
command, the fast memory commands included (exit 78, the same message)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memkeeper.cli import main
from memkeeper.config import Config, load_config
from memkeeper.config.doc import render_defaults
from memkeeper.config.view import DefaultConfig, defaults
from memkeeper.errors import EXIT_CONFIG, EXIT_DATA

REPO = Path(__file__).resolve().parent.parent


def _paths(data: dict[str, Any], where: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, value in data.items():
        found += _paths(value, (*where, name)) if isinstance(value, dict) else [(*where, name)]
    return found


def _read(config: object, path: tuple[str, ...]) -> object:
    for name in path:
        config = getattr(config, name)
    return config


def test_the_generated_defaults_match_the_schema() -> None:
    text = (REPO / "memkeeper" / "config" / "defaults.py").read_text(encoding="utf-8")
    assert text == render_defaults(), (
        "memkeeper/config/defaults.py is stale: regenerate it (its docstring says how)"
    )


def test_every_setting_reads_the_same_from_the_view_as_from_the_schema() -> None:
    view, real = defaults(), Config()
    paths = _paths(real.model_dump())
    assert len(paths) > 80  # every key, nested ones (jobs.expire.ttl_days.fact) included
    for path in paths:
        got, want = _read(view, path), _read(real, path)
        assert (got, type(got)) == (want, type(want)), path


def test_the_view_answers_what_only_the_model_has() -> None:
    view = defaults()
    assert isinstance(view, DefaultConfig)
    assert view == Config() and Config() == view and view == defaults()
    assert view != Config(context={"limit": 3})
    assert view.model_dump() == Config().model_dump()
    assert view.llm.model_copy(update={"base_url": "http://x"}).base_url == "http://x"
    assert dict(view.context) == {"limit": 10, "min_confidence": 0.7}
    assert hash(view) == hash(Config())
    with pytest.raises(TypeError, match="read-only"):
        view.context.limit = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _ = view.no_such_section


def test_the_view_pickles_copies_and_shows_like_the_model(cli) -> None:
    import copy
    import pickle

    from memkeeper.config.doc import render_config

    view = defaults()
    assert pickle.loads(pickle.dumps(view)) == view
    assert pickle.loads(pickle.dumps(view.jobs.expire)).ttl_days.fact == 180
    assert copy.deepcopy(view) is view and copy.copy(view) is view
    assert copy.deepcopy(view.limits) == Config().limits
    code, out, _err = cli("config", "show")  # no config file: the view, rendered
    assert (code, out) == (0, render_config())


def test_no_file_gives_the_view_and_a_file_the_schema(tmp_path: Path) -> None:
    assert isinstance(load_config(None), DefaultConfig)
    assert isinstance(load_config(tmp_path / "absent.toml"), DefaultConfig)
    path = tmp_path / "config.toml"
    path.write_text("[context]\nlimit = 4\n")
    loaded = load_config(path)
    assert isinstance(loaded, Config) and loaded.context.limit == 4


def test_defaults_load_without_pydantic() -> None:
    script = (
        "import sys\n"
        "from memkeeper.config.file import load_config\n"
        "config = load_config(None)\n"
        "print(config.limits.max_key_chars, config.jobs.expire.ttl_days.fact)\n"
        "print('pydantic' in sys.modules)\n"
        "config.model_dump()\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["256", "180", "False", "True"]


def test_the_package_imports_the_schema_on_the_first_use_of_a_schema_name() -> None:
    """``import memkeeper.config`` (which ``memkeeper.config.view`` implies) stays light;
    ``load_config`` comes from the file reader, still without pydantic; ``Config`` brings
    the schema; a name the package has not fails as any missing attribute does."""
    script = (
        "import sys\n"
        "import memkeeper.config, memkeeper.config.view\n"
        "print('pydantic' in sys.modules, 'memkeeper.config.schema' in sys.modules)\n"
        "from memkeeper.config import load_config\n"
        "print('pydantic' in sys.modules)\n"
        "from memkeeper.config import Config\n"
        "print('pydantic' in sys.modules, Config.__module__)\n"
        "print(hasattr(memkeeper.config, 'NoSuchName'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == [
        *("False", "False"),
        "False",
        *("True", "memkeeper.config.schema"),
        "False",
    ]


def test_every_public_name_of_the_package_is_the_schema_modules_own() -> None:
    import memkeeper.config
    from memkeeper.config import file, schema

    assert memkeeper.config.__all__ == schema.__all__
    for name in schema.__all__:
        assert getattr(memkeeper.config, name) is getattr(schema, name), name
    assert memkeeper.config.load_config is file.load_config
    assert set(schema.__all__) <= set(dir(memkeeper.config))


# -- a config file on the memory commands' fast path ------------------------------------------


def _user_config(text: str) -> Path:
    """Write the per-user config file (the one read without --config or MEMKEEPER_CONFIG)."""
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "memkeeper" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "argv",
    [["recall", "bob", "city"], ["remember", "bob", "city", "Paris"], ["search", "bob", "Paris"]],
)
def test_a_bad_value_in_the_user_config_file_fails_a_memory_command_with_78(
    cli, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    path = _user_config("[limits]\nmax_key_chars = 0\n")
    code, out, err = cli(*argv)
    assert (code, out) == (EXIT_CONFIG, "")
    assert err.startswith(f"memkeeper: error: {path}: limits.max_key_chars: ")
    assert len(err.strip().splitlines()) == 1
    assert main(["config", "check"]) == EXIT_CONFIG
    assert capsys.readouterr().err == err  # the very message config check gives


def test_a_value_in_the_user_config_file_applies_to_recall(cli) -> None:
    assert cli("remember", "bob", "cit", "Paris")[0] == 0
    _user_config("[limits]\nmax_key_chars = 3\n")
    assert cli("recall", "bob", "cit")[:2] == (0, "Paris\n")
    code, _out, err = cli("recall", "bob", "city")
    assert code == EXIT_DATA
    assert "key is 4 characters long; the limit is 3" in err


def test_the_program_reports_a_bad_config_file_on_recall(tmp_path: Path) -> None:
    """The real process (no pydantic until there is a file to validate): exit 78."""
    path = tmp_path / "config.toml"
    path.write_text('[database]\nsynchronous = "sometimes"\n')
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env["MEMKEEPER_CONFIG"] = str(path)
    done = subprocess.run(
        [sys.executable, "-m", "memkeeper", "--db", str(tmp_path / "m.db"), "recall", "u", "k"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == EXIT_CONFIG
    assert done.stderr.startswith(f"memkeeper: error: {path}: database.synchronous: ")
    assert not (tmp_path / "m.db").exists()
