"""Bad input that reached an internal error (issue 18 items 13-15, 17): each is now the
documented exit code naming what is at fault, and writes nothing."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from memkeeper import MemoryStore

DEEP = 100_000


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


# -- item 14: every number in the config schema has a documented range ----------------------


def number_fields():
    from pydantic import BaseModel

    from memkeeper.config import Config
    from memkeeper.config.doc import is_number

    def walk(model: type[BaseModel], prefix: str):
        for name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                yield from walk(annotation, f"{prefix}{name}.")
            elif is_number(field):
                yield f"{prefix}{name}", field

    return list(walk(Config, ""))


def test_every_number_in_the_schema_has_both_bounds_and_config_toml_says_them() -> None:
    from memkeeper.config.doc import bounds, value_range

    fields = number_fields()
    assert len(fields) > 60
    unbounded = [key for key, field in fields if bounds(field) is None]
    assert unbounded == []
    text = (Path(__file__).resolve().parent.parent / "config.toml").read_text(encoding="utf-8")
    flat = " ".join(line.lstrip("# ") for line in text.splitlines())
    for key, field in fields:
        assert value_range(field).split(" to ")[-1] in flat, key


@pytest.mark.parametrize(
    ("table", "key", "value"),
    [
        ("database", "busy_timeout_ms", str(10**15)),
        ("limits", "max_value_bytes", str(10**12)),
        ("scoring", "weight_confidence", "inf"),
        ("search", "weight_confidence", "inf"),
        ("search", "weight_keyword", "nan"),
        ("search", "min_similarity", "-inf"),
        ("llm", "timeout_seconds", "1e308"),
        ("service", "lock_wait_seconds", "nan"),
    ],
)
def test_a_number_out_of_range_is_exit_78_naming_the_file_and_key(
    cli, tmp_path: Path, table: str, key: str, value: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[{table}]\n{key} = {value}\n")
    code, out, err = cli("--config", str(config), "search", "bob", "Paris", "--json")
    assert code == 78, err
    assert out == ""
    assert f"{config}: {table}.{key}" in err
    assert cli("config", "check", str(config))[0] == 78


def test_every_bound_is_accepted_and_search_json_stays_json(
    cli, db_path: Path, tmp_path: Path
) -> None:
    """At the largest weights the schema allows the scores are finite: --json never has
    Infinity or NaN. The bounds are read from the schema, so the test follows it."""
    from memkeeper.config.doc import bounds
    from memkeeper.config.search import SearchSection

    with MemoryStore(db_path) as store:
        store.remember("bob", "city", "Paris")
    weights = ["weight_similarity", "weight_keyword", "weight_confidence", "weight_recency"]
    weights += [name for name in ("prior_weight",) if name in SearchSection.model_fields]
    lines = ["[search]"]
    for name in weights:
        upper = bounds(SearchSection.model_fields[name])
        assert upper is not None
        lines.append(f"{name} = {upper[3]}")
    config = tmp_path / "config.toml"
    config.write_text("\n".join(lines) + "\n")
    code, out, err = cli("--config", str(config), "search", "bob", "Paris", "--json")
    assert code == 0, err
    assert "Infinity" not in out and "NaN" not in out
    [hit] = json.loads(out)
    assert math.isfinite(hit["score"]) and hit["score"] > 0


def test_print_json_never_prints_a_non_finite_number(capsys) -> None:
    from memkeeper.cli import print_json

    print_json({"score": float("inf"), "parts": [float("nan"), 1.5, -float("inf")]})
    data = json.loads(capsys.readouterr().out)  # strict JSON: parse_constant would refuse
    assert data == {"score": None, "parts": [None, 1.5, None]}


# -- item 15: one rule and one exit code for every --limit ----------------------------------


def limit_commands() -> list[list[str]]:
    import click

    from memkeeper.cli import cli as group

    def walk(command: click.Command, path: tuple[str, ...]):
        if isinstance(command, click.Group):
            for name, sub in sorted(command.commands.items()):
                yield from walk(sub, (*path, name))
        elif any("--limit" in getattr(p, "opts", ()) for p in command.params):
            yield list(path)

    found = list(walk(group, ()))
    assert {"list", "log", "history", "search", "context"} <= {" ".join(p) for p in found}
    return found


ARGUMENTS = {"history": ["bob", "s1"], "search": ["bob", "Paris"], "context": ["bob"]}


@pytest.mark.parametrize("value", ["0", "-1", "1000001", "99999999999999999999", "ten", ""])
def test_every_limit_refuses_the_same_values_with_exit_2(cli, db_path: Path, value: str) -> None:
    """Before: list took 1000001 and 10**20 (exit 0), log and search refused them with 65,
    and 0 was 2 everywhere."""
    with MemoryStore(db_path) as store:
        store.remember("bob", "city", "Paris")
    for path in limit_commands():
        argv = [*path, *ARGUMENTS.get(path[-1], []), "--limit", value]
        code, out, err = cli(*argv)
        assert code == 2, (argv, err)
        assert out == "" and "Invalid value for '--limit'" in err, argv


def test_every_limit_takes_the_whole_range(cli, db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        store.remember("bob", "city", "Paris")
    for path in limit_commands():
        for value in ("1", "1000000"):
            argv = [*path, *ARGUMENTS.get(path[-1], []), "--limit", value]
            code, _out, err = cli(*argv)
            assert code in (0, 3), (argv, err)  # 3: no session s1, after the limit was taken


# -- item 17: an unreadable per-user config directory ---------------------------------------


def test_an_unreadable_config_directory_is_exit_78_naming_the_path(
    cli, isolated_user_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a non-root user meets with a config directory mode 000 (root is never refused:
    the next test makes the real one): the stat's PermissionError. Before: exit 1."""
    import errno
    import pathlib

    directory = isolated_user_dirs / "config" / "memkeeper"
    directory.mkdir(parents=True)
    real_stat = pathlib.Path.stat

    def stat(self: pathlib.Path, *args, **kwargs):
        if self.parent == directory:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_stat(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "stat", stat)
    code, out, err = cli("status")
    assert code == 78, err
    assert out == ""
    assert f"cannot read config file {directory / 'config.toml'}: Permission denied" in err
    assert f"check the permissions of {directory}" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory of mode 000")
def test_a_real_config_directory_of_mode_000(cli, isolated_user_dirs: Path) -> None:
    directory = isolated_user_dirs / "config" / "memkeeper"
    directory.mkdir(parents=True)
    directory.chmod(0)
    try:
        code, _out, err = cli("status")
    finally:
        directory.chmod(0o700)
    assert code == 78 and str(directory) in err, err
