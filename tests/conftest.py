"""Shared fixtures: every test gets its own temporary user directories and database.

An autouse fixture points the per-user data and config directories (and every MEMKEEPER_*
variable) at a temporary directory, so no test can touch a real user's memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import freezegun
import pytest
from fake_llm import FakeLLM, summarize_config

# The user-filter audit of memkeeper's PostgreSQL statements (docs/guides/scaling.md): its hooks.
from helpers.statement_audit import (  # noqa: F401
    pytest_configure,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
)
from llm_fixtures import KEY, StoreFactory

from memkeeper import MemoryStore
from memkeeper.cli import main
from memkeeper.config import Config
from memkeeper.logs import configure

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

# freezegun swaps the clock functions of every loaded module, pytest's own timer included:
# `pytest --durations` then reports the frozen date as a duration. Leave pytest's timer alone,
# and the driver's and its pool's (a frozen monotonic clock stalls psycopg_pool's scheduler
# thread: closing a store's pool then waits its 5 s for it).
freezegun.configure(extend_ignore_list=["_pytest.timing", "psycopg", "psycopg_pool"])


# -- pytest-xdist (`-n auto --dist loadgroup` in pyproject's addopts) ------------------------


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """How many workers `-n auto` starts: none (this process) for a run of named files or
    tests, where starting workers costs more than it saves; for the whole suite or a
    directory, xdist's own count (``PYTEST_XDIST_AUTO_NUM_WORKERS``, else the cores)."""
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        return None  # plain `pytest`: the testpaths, the whole suite
    here = config.invocation_params.dir
    named = [here / arg.split("::", 1)[0] for arg in config.args]
    return None if any(path.is_dir() for path in named) else 0


POSTGRES_TESTS = Path(__file__).resolve().parent / "postgres"


def uses_postgres(item: pytest.Item) -> bool:
    """Whether a test needs the PostgreSQL server: it takes ``pg_server`` (directly or through
    another fixture), carries the ``postgres`` mark (the PostgreSQL case of a backend
    parameter) or lives in tests/postgres/ (whose conftest marks it, after this hook)."""
    return (
        "pg_server" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("postgres") is not None
        or POSTGRES_TESTS in item.path.resolve().parents
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the PostgreSQL server runs on one worker (one xdist_group), so a
    run starts one server, not one per worker: two servers race on the modes of the parent
    directories that pgserver opens and the suite puts back (tests/helpers/postgres.py), and
    the one stopped last then cannot run its pg_ctl. First of the hooks: xdist's worker reads
    the marks in its own (tests/postgres/test_pg_one_server.py)."""
    for item in items:
        if uses_postgres(item):
            others = {m.args[0] for m in item.iter_markers("xdist_group")} - {"postgres"}
            if others:  # xdist would join the names into a group of its own: a second server
                raise pytest.UsageError(
                    f"{item.nodeid} uses the PostgreSQL server but is in xdist_group "
                    f"{sorted(others)} too: drop that group (the server's tests share one)"
                )
            item.add_marker(pytest.mark.xdist_group("postgres"))


@pytest.fixture(autouse=True)
def isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    for name in list(os.environ):
        if name.startswith("MEMKEEPER_") or name in (
            "ZHIPUAI_API_KEY",
            "ZHIPUAI_BASE_URL",
            "ZAI_API_KEY",
            "ZAI_BASE_URL",
            "HF_HOME",  # the model cache: under the test's HOME, empty (keyword-only)
            "HF_HUB_CACHE",
            "XDG_CACHE_HOME",
            "NOTIFY_SOCKET",
            "JOURNAL_STREAM",
        ):
            monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(autouse=True)
def quiet_logs() -> None:
    configure(level="warning", fmt="console")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests of ``both_backends`` modules that take ``db_path`` run on each backend."""
    if "db_path" not in metafunc.fixturenames:
        return
    both = metafunc.definition.get_closest_marker("both_backends") is not None
    if not both or metafunc.definition.get_closest_marker("sqlite_only") is not None:
        return
    metafunc.parametrize(
        "backend",
        ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
        indirect=True,
    )


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend this test runs on (``sqlite`` unless its module runs on both)."""
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """The session's real PostgreSQL (tests/helpers/postgres.py), started at first use."""
    from helpers.postgres import TestServer, check_stopped

    server = TestServer.start()
    yield server
    check_stopped(server)


@pytest.fixture(scope="session")
def pg_suite_url(pg_server: Any) -> str:
    """The database the backend-parametrized tests share (emptied before each)."""
    from helpers.postgres import create_database

    return create_database(pg_server, "mk_suite")


@pytest.fixture
def db_path(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Path | str:
    """The test's memory database: a file, or on PostgreSQL the emptied test database."""
    if backend == "postgres":
        from helpers.backends import empty_memory

        url = request.getfixturevalue("pg_suite_url")
        empty_memory(url)
        return url
    return tmp_path / "memory.db"


@pytest.fixture
def cli(db_path: Path, capsys: pytest.CaptureFixture[str]):
    """Run the CLI in process on the test database; returns (exit code, stdout, stderr)."""

    def invoke(*args: str) -> tuple[int, str, str]:
        code = main(["--db", str(db_path), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


@pytest.fixture
def config() -> Config:
    return Config()


@pytest.fixture
def store(db_path: Path, config: Config) -> Iterator[MemoryStore]:
    memory = MemoryStore(db_path, config=config)
    yield memory
    memory.close()


# -- the fake LLM server (summarize, extraction, parking; api_key is opt-in per module) ----


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ZHIPUAI_API_KEY", KEY)
    return KEY


@pytest.fixture
def make_store(db_path: Path, fake: FakeLLM) -> Iterator[StoreFactory]:
    """``make_store(job={...}, **llm)``: a store whose config points at the fake."""
    opened: list[MemoryStore] = []

    def make(*, job: dict[str, Any] | None = None, **llm: Any) -> MemoryStore:
        store = MemoryStore(db_path, config=summarize_config(fake.url, job=job, **llm))
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
