"""memkeeper imports ``logging`` only when a record could be seen (memkeeper.logs._stdlib),
and the quick start's configuration waits for the first record that reaches its level."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def test_a_deferred_configuration_waits_for_a_record_at_its_level() -> None:
    done = _child(
        """
        import sys
        from memkeeper import logs
        logs.configure_at_first_record("warning")
        log = logs.get_logger("memkeeper.probe")
        log.info("below the level")
        print("before", log.is_enabled_for(logs.INFO), "logging" in sys.modules)
        log.warning("first warning", user="bob")
        print("after", "logging" in sys.modules)
        """
    )
    assert done.stdout.splitlines() == ["before False False", "after True"]
    (line,) = [json.loads(text) for text in done.stderr.splitlines()]
    assert (line["event"], line["level"], line["user"]) == ("first warning", "warning", "bob")


def test_settle_routes_a_library_record_through_the_handler() -> None:
    done = _child(
        """
        from memkeeper import logs
        logs.configure_at_first_record("warning")
        logs.settle()
        import logging
        logging.getLogger("httpx").warning("from a library")
        """
    )
    (line,) = [json.loads(text) for text in done.stderr.splitlines()]
    assert (line["event"], line["logger"]) == ("from a library", "httpx")


def test_a_library_user_pays_no_logging_until_the_host_imports_it(tmp_path) -> None:
    done = _child(
        f"""
        import sys
        from memkeeper.store import MemoryStore
        with MemoryStore({str(tmp_path / "m.db")!r}) as store:
            store.remember("bob", "city", "Paris")
            store.search("bob", "Paris")
            print("quiet", "logging" in sys.modules)
            import logging
            logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(name)s")
            store.search("bob", "Paris")
        """
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "quiet False"
    assert "memkeeper.search" in lines[1:]
    assert done.stderr == ""
