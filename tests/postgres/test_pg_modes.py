"""The session check on directory modes (tests/helpers/postgres.py) can see a change."""

from __future__ import annotations

from pathlib import Path

from helpers.postgres import ancestors, changed_modes, snapshot


def test_a_widened_parent_directory_is_reported(tmp_path: Path) -> None:
    data = tmp_path / "closed" / "data"
    data.mkdir(parents=True)
    (tmp_path / "closed").chmod(0o700)
    before = snapshot(ancestors(data))
    assert tmp_path / "closed" in before
    assert changed_modes(before) == {}
    (tmp_path / "closed").chmod(0o755)  # what pgserver does to every parent, as root
    assert changed_modes(before) == {tmp_path / "closed": (0o700, 0o755)}
