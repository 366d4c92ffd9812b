"""Bad input: oversized values, keys made of SQL metacharacters, text that is not UTF-8, and
malformed import files — each rejected with a clear message (or, for odd but valid keys,
stored and read back exactly), and a rejected operation writes nothing at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import dump_databases, raw_rows

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config, DatabaseSection, LimitsSection
from memkeeper.errors import (
    EXIT_DATA,
    EXIT_NO_INPUT,
    EXIT_USAGE,
    ImportFileError,
    InputFileMissing,
    InvalidInput,
)
from memkeeper.store.transfer import export_lines, import_file

MEMKEEPER = Path(sys.executable).with_name("memkeeper")


# -- oversized values -----------------------------------------------------------------------


@pytest.fixture
def small_store(db_path: Path) -> MemoryStore:
    config = Config(limits=LimitsSection(max_value_bytes=100, max_key_chars=10))
    with MemoryStore(db_path, config=config) as store:
        yield store


def test_values_are_limited_in_utf8_bytes(small_store: MemoryStore) -> None:
    assert small_store.remember("alice", "k", "x" * 100).value == "x" * 100
    with pytest.raises(InvalidInput, match="101 bytes of UTF-8; the limit is 100"):
        small_store.remember("alice", "k", "x" * 101)
    # 34 characters, but 102 bytes.
    with pytest.raises(InvalidInput, match="102 bytes"):
        small_store.remember("alice", "k2", "你" * 34)
    assert small_store.remember("alice", "k2", "你" * 33).value == "你" * 33


def test_every_kind_of_text_is_limited(small_store: MemoryStore) -> None:
    big = "y" * 101
    calls = [
        lambda: small_store.add_note("alice", big),
        lambda: small_store.append_message("alice", "s", "user", big),
        lambda: small_store.record_episode("alice", "t", input_summary=big),
        lambda: small_store.record_episode("alice", "t", output_summary=big),
        lambda: small_store.record_episode("alice", "t", user_feedback=big),
        lambda: small_store.remember("alice", "k" * 11, "v"),
        lambda: small_store.remember("a" * 11, "k", "v"),
        lambda: small_store.remember("alice", "k", "v", namespace="n" * 11),
        lambda: small_store.append_message("alice", "s" * 11, "user", "hi"),
        lambda: small_store.remember("alice", "k", "v", source="s" * 1025),
    ]
    before = dump_databases(small_store.path)
    for call in calls:
        with pytest.raises(InvalidInput):
            call()
    assert dump_databases(small_store.path) == before


def test_an_oversized_value_on_the_command_line(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[limits]\nmax_value_bytes = 64\n")
    code = main(["--db", str(db_path), "--config", str(config), "remember", "a", "k", "Q" * 65])
    err = capsys.readouterr().err
    assert code == EXIT_DATA
    assert err == "memkeeper: error: value is 65 bytes of UTF-8; the limit is 64\n"
    assert raw_rows(db_path, "memories") == []


# -- keys and names made of metacharacters --------------------------------------------------

ODD_NAMES = [
    "\"'; DROP TABLE memories; --",
    "Robert'); DROP TABLE changes;--",
    "%",
    "_",
    "a%b_c",
    "*",
    "?",
    "\\",
    "'",
    '"',
    "[x]",
    "城市",
    "🏙️ city",
    "e\u0301",  # e + combining acute: not normalized away
    "\u00e9",  # precomposed é: a different key
    "עִיר",
    "x" * 256,
]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_odd_keys_users_and_namespaces_round_trip_exactly(store: MemoryStore, name: str) -> None:
    store.remember("alice", "plain", "control value")
    memory = store.remember(name, name, f"value of {name}", namespace=name)

    assert store.recall(name, name, namespace=name).value == f"value of {name}"
    got = store.get(memory.id)
    assert (got.user_id, got.key, got.namespace) == (name, name, name)
    assert [m.id for m in store.list(name)] == [memory.id]
    assert [m.id for m in store.list(namespace=name)] == [memory.id]
    assert len(store.list()) == 2  # no wildcard matched the control entry
    assert next(c.memory_id for c in store.changes(user_id=name)) == memory.id
    assert store.history(name, name, namespace=name) == []
    message = store.append_message(name, name, "user", name, namespace=name)
    assert store.history(name, name, namespace=name)[0].content == name
    assert message.session_id == name
    # Every table still exists and the control entry survives a forget of the odd key.
    assert store.forget(name, name, namespace=name) == 1
    assert store.recall("alice", "plain").value == "control value"
    assert {m.key for m in store.list()} == {"plain"}


def test_odd_names_round_trip_through_export_and_import(store: MemoryStore, tmp_path: Path) -> None:
    for index, name in enumerate(ODD_NAMES):
        store.remember(name, name, name, namespace=name, source=name)
        store.add_note(name, f"note {index}: {name}")
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(line + "\n" for line in export_lines(store)), encoding="utf-8")
    with MemoryStore(tmp_path / "copy.db") as copy:
        import_file(copy, path)
        assert copy.list() == store.list()
        for name in ODD_NAMES:
            assert copy.recall(name, name, namespace=name).value == name


def test_odd_names_round_trip_through_the_command_line(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--db", str(db_path)]
    for name in ODD_NAMES[:12]:
        assert main([*db, "remember", name, name, f"v {name}", "-n", name]) == 0
        capsys.readouterr()
        assert main([*db, "recall", name, name, "-n", name]) == 0
        assert capsys.readouterr().out == f"v {name}\n"
        assert main([*db, "list", "--user", name, "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [(m["user_id"], m["key"], m["value"]) for m in listed] == [(name, name, f"v {name}")]


# -- text that is not UTF-8 -----------------------------------------------------------------

LONE = "\ud800"
ESCAPED = "\udcff"  # what os.fsdecode makes of the byte 0xff


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.remember(LONE, "k", "v"),
        lambda s: s.remember("alice", f"k{LONE}", "v"),
        lambda s: s.remember("alice", "k", f"v{ESCAPED}"),
        lambda s: s.remember("alice", "k", "v", namespace=ESCAPED),
        lambda s: s.remember("alice", "k", "v", source=LONE),
        lambda s: s.add_note("alice", f"note {LONE}"),
        lambda s: s.append_message("alice", "s", "user", f"hi {LONE}"),
        lambda s: s.append_message("alice", ESCAPED, "user", "hi"),
        lambda s: s.record_episode("alice", f"task {LONE}"),
        lambda s: s.record_episode("alice", "task", user_feedback=LONE),
        lambda s: s.recall("alice", ESCAPED),
        lambda s: s.forget("alice", ESCAPED),
        lambda s: s.forget_user(ESCAPED),
        lambda s: s.context(ESCAPED),
        lambda s: s.episodes(ESCAPED),
        lambda s: s.history("alice", ESCAPED),
        lambda s: s.get(ESCAPED),
        lambda s: s.forget_memory(ESCAPED),
        lambda s: s.explain(ESCAPED),
        lambda s: s.list(ESCAPED),
        lambda s: s.list(namespace=LONE),
        lambda s: s.changes(user_id=ESCAPED),
        lambda s: s.changes(memory_id=LONE),
        lambda s: s.changes(run_id=LONE),
    ],
)
def test_lone_surrogates_from_the_api_are_invalid_input(store: MemoryStore, call) -> None:
    store.remember("alice", "k", "v")
    before = dump_databases(store.path)
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        call(store)
    assert dump_databases(store.path) == before


@pytest.mark.parametrize(
    "args",
    [
        [b"remember", b"alice", b"k\xff", b"v"],
        [b"remember", b"alice", b"k", b"caf\xe9"],
        [b"remember", b"\xc3\x28", b"k", b"v"],
        [b"note", b"alice", b"\xff\xfe"],
        [b"recall", b"alice", b"\xff"],
        [b"forget", b"alice", b"\xff"],
        [b"forget-user", b"--yes", b"\xff"],
        [b"history", b"alice", b"\xff"],
        [b"get", b"\xff"],
        [b"explain", b"\xff"],
        [b"forget-id", b"\xff"],
        [b"list", b"--user", b"\xff"],
        [b"log", b"--user", b"\xff"],
        [b"log", b"--memory", b"\xff"],
        [b"export", b"--user", b"\xff"],
    ],
    ids=lambda args: b" ".join(args).decode("ascii", "backslashreplace"),
)
@pytest.mark.slow
def test_non_utf8_arguments_on_the_command_line(tmp_path: Path, args: list[bytes]) -> None:
    db = tmp_path / "memory.db"
    with MemoryStore(db) as store:
        store.remember("alice", "k", "v")
    before = dump_databases(db)
    result = subprocess.run(
        [os.fsencode(MEMKEEPER), b"--db", os.fsencode(db), *args],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == EXIT_DATA, result.stderr
    err = result.stderr.decode("utf-8", "replace")
    assert err.startswith("memkeeper: error: ")
    assert "not valid UTF-8" in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert dump_databases(db) == before


# -- malformed import files -----------------------------------------------------------------

VALID_LINE = {
    "id": "0123456789abcdef",
    "user_id": "alice",
    "namespace": "",
    "kind": "fact",
    "key": "city",
    "value": "Beijing",
    "source": "chat",
    "confidence": 0.9,
    "state": "active",
    "pinned": False,
    "ttl_days": None,
    "created_at": "2026-01-01T09:00:00.000000+00:00",
    "updated_at": "2026-01-01T09:00:00.000000+00:00",
    "last_accessed_at": None,
    "access_count": 0,
    "state_since": "2026-01-01T09:00:00.000000+00:00",
}


def jsonl(*records: dict | str | bytes) -> bytes:
    parts = []
    for record in records:
        if isinstance(record, dict):
            parts.append(json.dumps(record, ensure_ascii=False).encode())
        elif isinstance(record, str):
            parts.append(record.encode())
        else:
            parts.append(record)
    return b"\n".join(parts) + b"\n"


def line(n: int, **changes: object) -> dict:
    record = {**VALID_LINE, "id": f"{n:016x}", "key": f"key{n}", **changes}
    return {k: v for k, v in record.items() if v != "<drop>"}


def agent(data: object) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode()


MALFORMED = {
    # agent_memory.json
    "agent: invalid JSON": ("agent_memory.json", b'{"facts": {"a": "b",}}', "line 1"),
    "agent: list at the top": ("agent_memory.json", agent(["city", "Beijing"]), "JSON object"),
    "agent: string at the top": ("agent_memory.json", agent("Beijing"), "JSON object"),
    "agent: unknown key": ("agent_memory.json", agent({"facts": {}, "memories": []}),
                           "key 'memories'"),
    "agent: facts is a list": ("agent_memory.json", agent({"facts": ["a"]}), "key 'facts'"),
    "agent: notes is an object": ("agent_memory.json", agent({"notes": {"a": 1}}), "key 'notes'"),
    "agent: list value": ("agent_memory.json", agent({"facts": {"city": ["Beijing"]}}),
                          "facts.city"),
    "agent: null value": ("agent_memory.json", agent({"facts": {"ok": "1", "city": None}}),
                          "facts.city"),
    "agent: bool value": ("agent_memory.json", agent({"facts": {"vip": True}}), "facts.vip"),
    "agent: empty value": ("agent_memory.json", agent({"facts": {"city": ""}}), "facts.city"),
    "agent: bad key": ("agent_memory.json", agent({"facts": {" city": "x"}}), "facts. city"),
    "agent: bad note time": (
        "agent_memory.json",
        agent({"facts": {"city": "Beijing"},
               "notes": [{"time": "2026-07-01 10:00", "note": "ok"},
                         {"time": "yesterday", "note": "x"}]}),
        "notes[1].time",
    ),
    "agent: numeric note time": ("agent_memory.json",
                                 agent({"notes": [{"time": 1751364000, "note": "x"}]}),
                                 "notes[0].time"),
    "agent: note without text": ("agent_memory.json", agent({"notes": [{"time": "2026-07-01"}]}),
                                 "notes[0]"),
    "agent: note with an unknown key": (
        "agent_memory.json",
        agent({"notes": [{"note": "x", "tags": ["a"]}]}),
        "notes[0].tags",
    ),
    "agent: note not text": ("agent_memory.json", agent({"notes": [{"note": 5}]}),
                             "notes[0].note"),
    "agent: not UTF-8": ("agent_memory.json", b'{"facts": {"city": "caf\xe9"}}', "not UTF-8"),
    # JSON Lines
    "jsonl: invalid JSON": ("in.jsonl", jsonl(line(1), "{not json"), "line 2: invalid JSON"),
    "jsonl: not an object": ("in.jsonl", jsonl(line(1), "[1, 2]"), "line 2: must be a JSON"),
    "jsonl: missing field": ("in.jsonl", jsonl(line(1), line(2, confidence="<drop>")),
                             "line 2: field 'confidence' is missing"),
    "jsonl: missing cold field": ("in.jsonl", jsonl(line(1, state="cold")),
                                  "line 1: field 'cold_reason' is missing"),
    "jsonl: unknown field": ("in.jsonl", jsonl(line(1), line(2, colour="red")),
                             "line 2: field 'colour': unknown"),
    "jsonl: confidence above 1": ("in.jsonl", jsonl(line(1), line(2), line(3, confidence=1.5)),
                                  "line 3: confidence"),
    "jsonl: confidence as text": ("in.jsonl", jsonl(line(1, confidence="high")),
                                  "line 1: confidence"),
    "jsonl: duplicate id": ("in.jsonl", jsonl(line(1), line(2), line(1, key="other")),
                            "line 3: id '0000000000000001' already used on line 1"),
    "jsonl: not UTF-8": ("in.jsonl", jsonl(line(1), line(2), b'{"value": "caf\xe9"}'),
                         "line 3: not UTF-8"),
    "jsonl: unknown state": ("in.jsonl", jsonl(line(1, state="deleted")), "line 1: field 'state'"),
    "jsonl: unknown kind": ("in.jsonl", jsonl(line(1, kind="opinion")), "line 1: kind"),
    "jsonl: fact without key": ("in.jsonl", jsonl(line(1, key=None)), "line 1: key"),
    "jsonl: time without zone": ("in.jsonl", jsonl(line(1, updated_at="2026-01-01T09:00:00")),
                                 "line 1: updated_at has no timezone"),
    "jsonl: not a time": ("in.jsonl", jsonl(line(1, created_at="last week")),
                          "line 1: created_at"),
    "jsonl: pinned as text": ("in.jsonl", jsonl(line(1, pinned="yes")), "line 1: pinned"),
    "jsonl: negative count": ("in.jsonl", jsonl(line(1, access_count=-1)),
                              "line 1: access_count"),
    "jsonl: zero ttl": ("in.jsonl", jsonl(line(1, ttl_days=0)), "line 1: ttl_days"),
    "jsonl: NUL in a value": ("in.jsonl", jsonl(line(1, value="a\x00b")), "line 1: value"),
    "jsonl: empty value": ("in.jsonl", jsonl(line(1, value=" ")), "line 1: value"),
    "jsonl: oversized value": ("in.jsonl", jsonl(line(1), line(2, value="v" * 70_000)),
                               "line 2: value is 70000 bytes"),
    "jsonl: bad user id": ("in.jsonl", jsonl(line(1, user_id="")), "line 1: user_id"),
}  # fmt: skip


@pytest.fixture
def populated(db_path: Path) -> Path:
    """A database with hot and cold content, so 'nothing written' covers both files."""
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Shanghai")
        store.add_note("alice", "existing note")
        store.storage.cold(create=True)
    return db_path


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_import_file_is_rejected_and_nothing_is_written(
    populated: Path, tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name, content, fragment = MALFORMED[case]
    path = tmp_path / name
    path.write_bytes(content)
    before = dump_databases(populated)

    with MemoryStore(populated) as store, pytest.raises(ImportFileError) as caught:
        import_file(store, path, user_id="alice" if name.endswith(".json") else None)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert fragment in message
    assert "\n" not in message
    assert dump_databases(populated) == before

    argv = ["--db", str(populated), "import", str(path)]
    code = main([*argv, "--user", "alice"] if name.endswith(".json") else argv)
    captured = capsys.readouterr()
    assert code == EXIT_DATA
    assert captured.err.startswith("memkeeper: error: ")
    assert fragment in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""
    assert dump_databases(populated) == before


def test_a_bad_line_after_many_batches_still_writes_nothing(
    populated: Path, tmp_path: Path
) -> None:
    config = Config(database=DatabaseSection(batch_size=10))
    path = tmp_path / "big.jsonl"
    path.write_bytes(jsonl(*[line(n) for n in range(1, 46)], line(46, confidence=7)))
    before = dump_databases(populated)
    with (
        MemoryStore(populated, config=config) as store,
        pytest.raises(ImportFileError, match="line 46"),
    ):
        import_file(store, path)
    assert dump_databases(populated) == before


def test_a_missing_import_file(populated: Path, tmp_path: Path, capsys) -> None:
    with MemoryStore(populated) as store, pytest.raises(InputFileMissing, match="does not exist"):
        import_file(store, tmp_path / "absent.json", user_id="alice")
    assert main(["--db", str(populated), "import", str(tmp_path / "absent.json")]) == (
        EXIT_NO_INPUT
    )
    assert "does not exist" in capsys.readouterr().err


def test_bad_choices_on_the_command_line_are_usage_errors(
    populated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl(line(1)))
    before = dump_databases(populated)
    for argv in (
        ["import", str(path), "--format", "csv"],
        ["remember", "alice", "k", "v", "--confidence", "1.5"],
        ["remember", "alice", "k", "v", "--kind", "note"],
        ["remember", "alice", "k", "v", "--ttl-days", "0"],
        ["list", "--state", "deleted"],
        ["log", "--action", "explode"],
        ["--now", "next tuesday", "status"],
    ):
        code = main(["--db", str(populated), *argv])
        err = capsys.readouterr().err
        assert code == EXIT_USAGE, argv
        assert "Error:" in err
        assert "Traceback" not in err
    assert dump_databases(populated) == before
