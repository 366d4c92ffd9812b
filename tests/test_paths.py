"""The per-user directories memkeeper computes itself on Linux are platformdirs' answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from memkeeper import paths

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the plain XDG rule is Linux's")

CASES = [
    pytest.param({}, id="no-xdg"),
    pytest.param({"XDG_DATA_HOME": "/srv/data", "XDG_CONFIG_HOME": "/srv/conf"}, id="xdg-set"),
    pytest.param({"XDG_DATA_HOME": "", "XDG_CONFIG_HOME": ""}, id="xdg-empty"),
    pytest.param({"XDG_DATA_HOME": "rel/data", "XDG_CONFIG_HOME": "rel"}, id="xdg-relative"),
    pytest.param({"XDG_DATA_HOME": "/srv/data/", "XDG_CONFIG_HOME": "/srv//c"}, id="xdg-slashes"),
    pytest.param({"HOME": "/home/ann/"}, id="home-trailing-slash"),
    pytest.param({"HOME": "/"}, id="home-root"),
    pytest.param({"HOME": "relative/home"}, id="home-relative"),
    pytest.param({"HOME": None}, id="home-unset"),
    pytest.param({"ANDROID_DATA": "/data", "ANDROID_ROOT": "/system"}, id="android"),
]


@pytest.mark.parametrize("env", CASES)
def test_same_directories_as_platformdirs(env: dict[str, str | None], monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "ANDROID_DATA", "ANDROID_ROOT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    expected_data = platformdirs.user_data_dir(paths.APP_NAME, appauthor=False)
    expected_config = platformdirs.user_config_dir(paths.APP_NAME, appauthor=False)
    assert paths.user_data_dir() == Path(expected_data)
    assert paths.user_config_dir() == Path(expected_config)


def test_the_plain_case_does_not_import_platformdirs(tmp_path):
    code = (
        "import sys; from memkeeper import paths; "
        "print(paths.user_data_dir(), paths.user_config_dir(), 'platformdirs' in sys.modules)"
    )
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    data, config, imported = done.stdout.split()
    assert (data, config) == (f"{tmp_path}/.local/share/memkeeper", f"{tmp_path}/.config/memkeeper")
    assert imported == "False"
