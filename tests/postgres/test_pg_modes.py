"""The session check on directory modes (tests/helpers/postgres.py) can see a change."""

from __future__ import annotations

from pathlib import Path

from helpers.postgres import ancestors, changed_modes, closed_parents, snapshot


def test_a_widened_parent_directory_is_reported(tmp_path: Path) -> None:
    data = tmp_path / "closed" / "data"
    data.mkdir(parents=True)
    (tmp_path / "closed").chmod(0o700)
    before = snapshot(ancestors(data))
    assert tmp_path / "closed" in before
    assert changed_modes(before) == {}
    (tmp_path / "closed").chmod(0o755)  # what pgserver does to every parent, as root
    assert changed_modes(before) == {tmp_path / "closed": (0o700, 0o755)}


def test_closed_parents_outside_the_temp_directory_are_told_apart(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    home = tmp_path / "root"  # stands for /root: closed, outside the system temp directory
    venv_bin = home / "venv" / "pginstall" / "bin"
    venv_bin.mkdir(parents=True)
    home.chmod(0o700)
    temp = tmp_path / "tmp"
    ci_bin = temp / "work" / "venv" / "bin"  # a venv in `mktemp -d`, as .ci/run makes
    ci_bin.mkdir(parents=True)
    (temp / "work").chmod(0o700)

    def ours(found: tuple[list[Path], list[Path]]) -> tuple[list[Path], list[Path]]:
        # pytest's own temp directories above tmp_path are closed (0700) too: leave them out.
        return tuple([p for p in part if p.is_relative_to(tmp_path)] for part in found)

    assert ours(closed_parents(venv_bin, temp)) == ([home], [])
    assert ours(closed_parents(ci_bin, temp)) == ([], [temp / "work"])
