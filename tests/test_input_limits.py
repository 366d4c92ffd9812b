"""Bad input that reached an internal error (issue 18 items 13-15, 17): each is now the
documented exit code naming what is at fault, and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.cli import main

DEEP = 100_000


@pytest.fixture
def cli(db_path: Path, capsys: pytest.CaptureFixture[str]):
    def invoke(*args: str) -> tuple[int, str, str]:
        code = main(["--db", str(db_path), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


def exported_line(db_path: Path, tmp_path: Path) -> dict:
    """One real export line (from another database), to put beside the bad one."""
    with MemoryStore(tmp_path / "other.db") as other:
        other.remember("u", "k", "v")
        from memkeeper.store.transfer import export_lines

        return json.loads(next(export_lines(other)))


def stored(db_path: Path) -> list:
    with MemoryStore(db_path) as store:
        return store.list_memories()


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_deeply_nested_line_is_exit_65_naming_the_line(
    cli, db_path: Path, tmp_path: Path, suffix: str
) -> None:
    good = exported_line(db_path, tmp_path)
    path = tmp_path / f"deep{suffix}"
    if suffix == ".jsonl":
        path.write_text(json.dumps(good) + "\n" + "[" * DEEP + "]" * DEEP + "\n")
    else:  # agent_memory.json
        path.write_text('{"facts": {"a": "b"},\n "notes": ' + "[" * DEEP + "]" * DEEP + "}\n")
    code, _out, err = cli("import", str(path), "--user", "u")
    assert code == 65, err
    assert f"{path}: line 2: invalid JSON: nested too deeply" in err
    assert "internal error" not in err
    assert stored(db_path) == []


@pytest.mark.parametrize("count", [10**30, 2**63, -1])
def test_an_access_count_out_of_range_is_exit_65_naming_the_line(
    cli, db_path: Path, tmp_path: Path, count: int
) -> None:
    good = exported_line(db_path, tmp_path)
    bad = dict(good, id="b" * 16, key="k2", access_count=count)
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    code, _out, err = cli("import", str(path))
    assert code == 65, err
    assert f"{path}: line 2: access_count must be a whole number from 0 to" in err
    assert stored(db_path) == []


def test_a_number_too_long_to_convert_is_exit_65(cli, db_path: Path, tmp_path: Path) -> None:
    good = exported_line(db_path, tmp_path)
    path = tmp_path / "long.jsonl"
    line = json.dumps(dict(good, id="c" * 16)).replace(
        '"access_count": 0', '"access_count": ' + "9" * 5000
    )
    path.write_text(json.dumps(good) + "\n" + line + "\n")
    code, _out, err = cli("import", str(path))
    assert code == 65 and f"{path}: line 2: invalid JSON" in err, err
    assert stored(db_path) == []
