"""The CLI edges a new user trips on (issue 20): the context command, prompts without a
terminal, import after a forget, usage errors that are exit 2, wording and progress."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.errors import EXIT_USAGE


def test_the_context_command_prints_the_prefill_with_the_profile(cli, db_path: Path) -> None:
    with MemoryStore(db_path) as store:
        store.remember("bob", "city", "Paris")
        pdf = store.remember("bob", "report_format", "PDF", kind="preference", namespace="acme")
        store.remember("bob", "stack", "Rust", namespace="globex")
        expected = store.context("bob", namespace="acme").text

    code, out, _ = cli("context", "bob", "--namespace", "acme")
    assert code == 0
    assert out == expected + "\n"
    assert "- city: Paris" in out and "- report_format: PDF" in out and "Rust" not in out

    code, out, _ = cli("context", "bob", "-n", "acme", "--query", "PDF", "--json")
    data = json.loads(out)
    assert code == 0
    assert {m["key"] for m in data["memories"]} == {"city", "report_format"}
    assert data["text"] == expected
    with MemoryStore(db_path) as store:  # the slots are not marked used
        assert store.get(pdf.id).access_count == 0

    code, out, err = cli("context", "nobody")
    assert (code, out) == (0, "") and "nothing to prefill" in err
    assert cli("context", "bob", "--limit", "0")[0] == EXIT_USAGE


MEMKEEPER = Path(sys.executable).with_name("memkeeper")


@pytest.mark.parametrize("argv", [("forget-user", "alice"), ("forget-namespace", "alice", "acme")])
def test_an_erase_without_a_terminal_says_yes_confirms(db_path: Path, argv: tuple) -> None:
    """Before: the prompt read EOF and exited 130 'aborted' with no hint (issue 20 item 5)."""
    with MemoryStore(db_path) as store:
        store.remember("alice", "city", "Paris", namespace="acme")
    done = subprocess.run(
        [str(MEMKEEPER), "--db", str(db_path), *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "add --yes to confirm non-interactively" in done.stderr
    assert done.stdout == ""
    with MemoryStore(db_path) as store:
        assert store.list_memories("alice", namespace="acme")
    yes = subprocess.run(
        [str(MEMKEEPER), "--db", str(db_path), *argv, "--yes"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert yes.returncode == 0, yes.stderr
    assert yes.stdout.startswith("erased 1 memory, ")


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent_memory.json"


def test_an_import_that_brings_nothing_because_of_a_forget_exits_65(cli, db_path: Path) -> None:
    """Before: exit 0 with '0 created ... 6 erased earlier' for a file never imported
    (issue 20 item 6). Erased stays erased by default; --as-new restates the entries."""
    with MemoryStore(db_path) as store:
        store.remember("alice", "mood", "fine")
        store.forget_user("alice")

    code, out, err = cli("import", str(EXAMPLE), "--user", "alice")
    assert code == 65
    assert "0 created" in out and "6 erased earlier (left forgotten)" in out
    assert "nothing imported" in err and "--as-new imports them" in err
    with MemoryStore(db_path) as store:
        assert store.list_memories("alice") == []

    code, out, _ = cli("import", str(EXAMPLE), "--user", "alice", "--as-new", "--json")
    report = json.loads(out)
    assert code == 0 and (report["created"], report["restated"]) == (6, 6)
    with MemoryStore(db_path) as store:
        memories = store.list_memories("alice")
        assert len(memories) == 6
        assert all(m.created_at >= store.now() - timedelta(minutes=5) for m in memories)
    # Importing again: all present, nothing forgotten, exit 0.
    code, out, _ = cli("import", str(EXAMPLE), "--user", "alice")
    assert code == 0 and "6 already present" in out and "erased" not in out
    # JSON Lines carry their own ids and times: --as-new is refused there.
    export = db_path.parent / "alice.jsonl"
    assert cli("export", "--user", "alice", "-o", str(export))[0] == 0
    assert cli("import", str(export), "--as-new")[0] == EXIT_USAGE


@pytest.mark.parametrize(
    "argv",
    [
        ("remember", "", "city", "Paris"),
        ("remember", " ", "city", "Paris"),
        ("remember", "bob", "", "Paris"),
        ("recall", "", "city"),
        ("search", "bob", ""),
        ("search", "bob", "   "),
        ("context", ""),
        ("forget-namespace", "bob", "", "--yes"),
        ("explain", ""),
        ("mcp", "--http", "notaport"),
        ("mcp", "--http", "127.0.0.1:70000"),
    ],
)
def test_an_empty_identifier_or_a_bad_address_is_a_usage_error(cli, argv: tuple) -> None:
    """Before: 65 for an empty user, 0 with no hits for an empty query, 65 for a bad
    --http address (issue 20 item 7). A usage error is 2, and writes nothing."""
    code, out, err = cli(*argv)
    assert code == EXIT_USAGE, err
    assert out == ""
    assert "Error: Invalid value for" in err


def test_an_empty_value_is_still_bad_data(cli) -> None:
    code, _out, err = cli("remember", "bob", "city", "")
    assert code == 65 and "value must not be empty" in err


def test_config_check_takes_the_file_and_json(cli, tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text("[context]\nlimit = 5\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('[jobs.expire]\nschedule = "bad"\n')

    code, out, _ = cli("config", "check", str(good))
    assert (code, out) == (0, f"{good}: valid\n")
    code, out, _ = cli("config", "check", str(good), "--json")
    assert code == 0 and json.loads(out) == {"path": str(good), "valid": True}
    code, out, err = cli("config", "check", str(bad))
    assert code == 78 and out == "" and f"{bad}: jobs.expire.schedule" in err
    code, out, _ = cli("config", "check", str(bad), "--json")
    report = json.loads(out)
    assert code == 78 and report["valid"] is False and "jobs.expire.schedule" in report["error"]
    code, out, _ = cli("config", "check", "--json")
    assert code == 0 and json.loads(out) == {"path": None, "valid": True}
    assert cli("config", "check", str(tmp_path / "missing.toml"))[0] == 78


def test_explain_says_never_recalled_and_counts_in_agreement(cli, db_path: Path) -> None:
    """Before: 'used 0 times' beside a 'last used' time, and 'used 1 times' (item 10)."""
    with MemoryStore(db_path) as store:
        memory = store.remember("bob", "city", "Paris")
    _code, out, _ = cli("explain", memory.id)
    assert "never recalled; last confirmed " in out and "used 0 times" not in out
    with MemoryStore(db_path) as store:
        store.recall("bob", "city")
    _code, out, _ = cli("explain", memory.id)
    assert "; used once" in out and "1 times" not in out


def test_the_expire_reason_states_the_real_comparison(db_path: Path) -> None:
    """The rule is 'unused at least the TTL' in whole days shown: not '30 days > 30 days'."""
    from datetime import timedelta

    from memkeeper import run_once
    from memkeeper.clock import fixed, system_now

    start = system_now() - timedelta(days=30, hours=1)
    with MemoryStore(db_path, clock=fixed(start)) as store:
        store.remember("bob", "tone", "brief", kind="preference")
    with MemoryStore(db_path) as store:
        [result] = run_once(store, ["expire"], dry_run=True).results
    [change] = result.changes
    assert change.reason == "unused 30 days ≥ TTL 30 days (preference); pending review"


def test_status_aligns_every_table_and_uses_one_time_format(cli, db_path: Path) -> None:
    import re

    with MemoryStore(db_path) as store:
        store.remember("bob", "city", "Paris")
    assert cli("run-once", "--job", "expire")[0] == 0
    _code, out, _ = cli("status")
    tables = [line for line in out.splitlines() if re.search(r" rows? ", line)]
    assert any("memories_fts_docsize" in line for line in tables)
    ends = {re.search(r"\d+(?= rows? )", line).end() for line in tables}  # type: ignore[union-attr]
    assert len(ends) == 1, tables  # the counts end in one column, whatever the name's length
    assert any(" 1 row  " in line for line in tables)
    expire = next(line for line in out.splitlines() if line.strip().startswith("expire "))
    assert re.search(
        r"last ok \d{4}-\d\d-\d\d \d\d:\d\d UTC; next \d{4}-\d\d-\d\d \d\d:\d\d UTC$", expire
    )


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_big_import_shows_progress_on_a_terminal_only(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Before: 22,000 entries imported in silence (issue 20 item 12)."""
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"facts": {f"k{i}": f"v{i}" for i in range(1500)}}))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["--db", str(db_path), "import", str(big), "--user", "u"]) == 0
    out = capsys.readouterr().out
    shown = terminal.getvalue()
    assert "\rimport: 0/1500 (0%)" in shown and shown.endswith("\rimport: 1500/1500 (100%)   \n")
    assert "import:" not in out and "1500 created" in out
    monkeypatch.undo()
    # Not a terminal (capsys's stderr): no progress at all.
    big.write_text(json.dumps({"facts": {f"k{i}": f"w{i}" for i in range(1500)}}))
    assert main(["--db", str(db_path), "import", str(big), "--user", "u"]) == 0
    assert "import:" not in capsys.readouterr().err


def test_review_sessions_is_there_after_another_command_of_its_module_ran(tmp_path: Path) -> None:
    """run-once loads jobs_cmd, which defines review; review's subcommand from summarize_cmd
    must still load when review runs next in the same process (a fresh one: the lazy loading
    is per process)."""
    db = tmp_path / "memory.db"
    script = (
        "import sys\n"
        "from memkeeper.cli import main\n"
        f"assert main(['--db', {str(db)!r}, 'run-once', '--dry-run']) == 0\n"
        f"sys.exit(main(['--db', {str(db)!r}, 'review', 'sessions']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
