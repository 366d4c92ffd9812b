"""The MCP server on PostgreSQL: several HTTP clients at once through the server's stores
(memkeeper/mcp/store_ref.py): on PostgreSQL one store, whose one connection pool leases each
call's thread a connection of its own.

tests/test_mcp_tools.py runs every tool on both backends through one store; what only this
module shows is the pool: the stores it opens itself (by the URL, its password included, not
the masked form a store prints), the uses it buffers and writes, and that a read on a
database without memkeeper's schema creates nothing.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from helpers.postgres import ROLE_PASSWORD, as_role
from mcp_clients import MODES, over_http

from memkeeper import MemoryStore, logs
from memkeeper.config import Config
from memkeeper.config.mcp import McpSection
from memkeeper.mcp.http import HttpServer, plan
from memkeeper.mcp.store_ref import StoreRef
from memkeeper.storage import use_buffer

TOKENS = {"alice": "alice-Pq7Wz2Nv5Tr8Ky3Lm9Xb", "bob": "bob-Rt4Yc8Hm2Qw6Jv1Nz5Ks"}
CLIENTS = 6
ROUNDS = 8


def token_config(tmp_path: Path) -> Config:
    path = tmp_path / "tokens.toml"
    path.write_text(
        "".join(f'[[tokens]]\ntoken = "{t}"\nuser = "{u}"\n\n' for u, t in TOKENS.items()),
        encoding="utf-8",
    )
    path.chmod(0o600)
    return Config(mcp=McpSection(token_file=str(path)))


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Any]:
    """``serving(store_or_ref, config)``: start an HTTP server on it; stopped at the end."""
    servers: list[HttpServer] = []
    log = io.StringIO()
    logs.configure(level="info", fmt="json", stream=log)

    def start(store: Any, config: Config) -> HttpServer:
        server = HttpServer(store, plan("127.0.0.1:0", config))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
    logs.configure(level="warning", fmt="console")
    assert ROLE_PASSWORD not in log.getvalue()


def clients_at_once(url: str) -> dict[str, list[tuple[bool, bool]]]:
    """CLIENTS clients (alice's and bob's, both protocol modes), each remembering a fact,
    recalling and searching it ROUNDS times, all at once. Returns (recalled, found) per round."""
    seen: dict[str, list[tuple[bool, bool]]] = {f"c{n}": [] for n in range(CLIENTS)}

    async def client(n: int) -> None:
        name = f"c{n}"
        token = TOKENS["alice"] if n % 2 else TOKENS["bob"]
        async with over_http(url, token, name, MODES[n % 2]) as session:
            for r in range(ROUNDS):
                key = f"{name}-{r}"
                wrote = await session.call_tool("remember", {"key": key, "value": f"v {key}"})
                got = await session.call_tool("recall", {"key": key})
                hits = await session.call_tool("search", {"query": key, "limit": 1})
                assert not (wrote.is_error or got.is_error or hits.is_error), (
                    wrote.content,
                    got.content,
                    hits.content,
                )
                seen[name].append(
                    (got.structured_content["found"], bool(hits.structured_content["hits"]))
                )

    async def everyone() -> None:
        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                for n in range(CLIENTS):
                    group.start_soon(client, n)

    anyio.run(everyone)
    return seen


def test_several_clients_at_once_through_a_pool_of_stores_on_a_url_with_a_password(
    tmp_path: Path, pg_database: str, role: str, serving: Any
) -> None:
    url = as_role(pg_database, role, ROLE_PASSWORD)
    config = token_config(tmp_path)
    # The server is given an open store (as `memkeeper run --mcp` does): every call shares
    # it (a ref that opened stores of its own would need the real URL, not the masked one).
    with MemoryStore(url, config=config, actor="mcp") as store:
        assert "***" in str(store.path) and ROLE_PASSWORD not in str(store.path)
        server = serving(store, config)
        seen = clients_at_once(server.url)
        server.stop()
        assert all(all(r and f for r, f in rounds) for rounds in seen.values()), seen
        alice = store.list_memories("alice")
        bob = store.list_memories("bob")
    assert len(alice) == len(bob) == CLIENTS // 2 * ROUNDS
    # Each fact was recalled once and found by search once: two uses, written by the pool.
    for memory in alice + bob:
        assert memory.access_count == 2, memory
    with psycopg.connect(pg_database) as conn:
        actors = conn.execute(
            "SELECT actor, count(*) FROM memkeeper.changes GROUP BY actor"
        ).fetchall()
        assert dict(actors) == {"mcp:remember": CLIENTS * ROUNDS}
        # A backend leaves pg_stat_activity a moment after its client closed the connection
        # (it exits on its own time): wait for that, bounded; one left open would stay.
        deadline = time.monotonic() + 10
        while True:
            sessions = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE usename = %s AND datname = current_database()",
                (role,),
            ).fetchone()
            conn.commit()  # the next read takes a new snapshot of the server's sessions
            if sessions == (0,) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert sessions == (0,), "the pool's connections outlived the server"


def test_a_pool_on_a_database_without_the_schema_creates_it_only_to_write(
    tmp_path: Path, pg_database: str, serving: Any
) -> None:
    config = token_config(tmp_path)

    def has_schema() -> bool:
        with psycopg.connect(pg_database) as conn:
            return bool(
                conn.execute(
                    "SELECT count(*) FROM pg_namespace WHERE nspname = 'memkeeper'"
                ).fetchone()[0]
            )

    with StoreRef(pg_database, config=config) as stores:
        server = serving(stores, config)

        async def go(steps: list[tuple[str, dict[str, Any]]]) -> list[Any]:
            async with over_http(server.url, TOKENS["alice"], "c") as session:
                return [await session.call_tool(name, args) for name, args in steps]

        [recalled, listed] = anyio.run(go, [("recall", {"key": "city"}), ("list_memories", {})])
        assert recalled.structured_content == {"found": False, "memory": None}
        assert listed.structured_content["memories"] == []
        assert not has_schema()
        [wrote] = anyio.run(go, [("remember", {"key": "city", "value": "Oslo"})])
        assert not wrote.is_error
        assert has_schema()
        server.stop()
    with MemoryStore(pg_database) as store:
        assert store.recall("alice", "city").value == "Oslo"  # type: ignore[union-attr]


def test_stores_of_one_database_share_one_use_buffer_from_any_working_directory(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A job of this process writes the buffered uses of its database before it re-reads
    # entries (the agent wins); a buffer keyed by a path made of the URL would be another
    # buffer after a chdir, and the job would not see the uses.
    with MemoryStore(pg_database) as first:
        buffer = use_buffer.enable(first.storage)
        monkeypatch.chdir(tmp_path)
        with MemoryStore(pg_database) as second:
            assert use_buffer.enable(second.storage) is buffer


def _memkeeper_sessions(url: str) -> int:
    """memkeeper's connections to the test's database, as the server counts them."""
    with psycopg.connect(url, autocommit=True) as admin:
        (count,) = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'memkeeper'"
        ).fetchone()
    return int(count)


def test_the_calls_of_a_server_share_one_store_and_its_one_pool(pg_database: str) -> None:
    """Issue 22: one connection pool per store. Four calls at once (the ref's WORKERS) each
    with a store of its own would be four pools, each keeping its connections open."""
    config = Config.model_validate({"database": {"pool_size": 2}})
    with MemoryStore(pg_database, config=config) as seeded:
        seeded.remember("ann", "city", "Oslo")
    with StoreRef(pg_database, config=config, workers=4) as stores:
        with (
            stores.borrow(create=False) as a,
            stores.borrow(create=False) as b,
            stores.borrow(create=True) as c,
            stores.borrow(create=True) as d,
        ):
            lent = [a, b, c, d]
            assert all(s is not None for s in lent)
            for store in lent:
                assert store.recall("ann", "city").value == "Oslo"  # type: ignore[union-attr]
            assert _memkeeper_sessions(pg_database) <= 2  # the pool's most (four pools: 4+)
            assert len({id(s) for s in lent}) == 1
            # The event loop's borrow still gets it while the pool has a connection to spare.
            with stores.borrow_free() as free:
                assert free is None  # four calls hold it and the pool has two connections
        with stores.borrow_free() as free:
            assert free is a
        assert 1 <= _memkeeper_sessions(pg_database) <= 2
    assert _memkeeper_sessions(pg_database) == 0


def test_a_server_given_a_store_on_postgresql_opens_no_other(pg_database: str) -> None:
    with MemoryStore(pg_database, actor="mcp") as given, StoreRef(store=given) as stores:
        with stores.borrow(create=True) as first, stores.borrow(create=True) as second:
            assert first is given and second is given
        assert _memkeeper_sessions(pg_database) <= given.config.database.pool_size
